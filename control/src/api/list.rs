//! `list`: the objects a request's selectors match, with paging
//! (`limit`/`continue`), as a List, a Table or a
//! `PartialObjectMetadataList` (metadata only, as client-go's metadata
//! informers and kube-rs's `list_metadata` ask for).
//!
//! A list is served from the store's objects as they are kept ([`items`]):
//! selectors test attributes read once per write, and the response is
//! streamed object by object (kube-apiserver's streaming list encoder), so
//! that a list of thousands of objects holds no more than one chunk of
//! them encoded at a time, however many lists run at once. Tables are
//! streamed row by row the same way, and metadata-only lists item by item,
//! each cut from the stored bytes; protobuf lists are built whole. A
//! list over 128 KiB is gzipped for a client that accepts it, the stream
//! compressed chunk by chunk ([`super::compression`]).
//!
//! Paging is by key, as kube-apiserver's: `continue` is an opaque token
//! naming the key after which the next page starts and the first page's
//! revision. On etcd a later page is read at that revision (etcd keeps
//! past values until it compacts them), so the pages make one consistent
//! list; once the revision is compacted, the page is a 410 Expired as
//! upstream's, whose Status carries a token that reads the rest at the
//! latest revision. The embedded store keeps no past values: its later
//! pages read the objects as they are now. Every page says the first
//! page's revision, so that a watch from it is sent every change made
//! while the client paged (see [`select`]).

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bosun::resources::ResourceInfo;
use futures::stream;
use http::StatusCode;
use serde_json::{json, Value};

use super::custom::conversion;
use super::error::{ApiError, ApiResult};
use super::filter::Filter;
use super::items;
use super::negotiate::{Convert, Encoding};
use super::object;
use super::request::{list_as_requested, namespace_of};
use super::table::{self, IncludeObject};
use super::{encoded_response, object_response, ApiRequest, ApiState};
use crate::store::{KeyValue, StoreError};

/// How many bytes of encoded objects a streamed response holds before it
/// hands them on.
const CHUNK: usize = 64 << 10;

pub(super) fn list_prefix(req: &ApiRequest) -> String {
    let res = req.target.res;
    match namespace_of(req) {
        Some(ns) if res.namespaced => format!("{}{ns}/", res.storage_prefix()),
        _ => res.storage_prefix(),
    }
}

/// The page a request asks for: the matching objects, their revision,
/// and the token and count of what is left when a limit cut it short.
pub(super) struct Page {
    pub items: Vec<KeyValue>,
    pub revision: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
}

/// kube-apiserver's continue token: base64 of
/// `{"v":"meta.k8s.io/v1","rv":REV,"start":"KEY\u0000"}`, KEY relative to
/// the list's prefix. `rv` -1 (in the token a 410 answer carries) says to
/// read the rest at the latest revision.
fn encode_continue(revision: Option<u64>, start: &str) -> String {
    let rv = revision.map_or(-1, |r| r as i64);
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

/// The key (relative to the prefix) a continue token says to start at,
/// and the revision of the list's first page (None: the latest).
fn decode_continue(token: &str) -> ApiResult<(String, Option<u64>)> {
    let invalid = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| invalid("not base64"))?;
    let token: Value = serde_json::from_slice(&raw).map_err(|_| invalid("not JSON"))?;
    if token["v"] != "meta.k8s.io/v1" {
        return Err(invalid(
            "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    let start = token["start"]
        .as_str()
        .ok_or_else(|| invalid("no start key"))?;
    if start.is_empty() || start.contains("..") || start.starts_with('/') {
        return Err(invalid("key is not a key"));
    }
    let rv = match token["rv"].as_i64() {
        Some(-1) => None,
        Some(rv) if rv > 0 => Some(rv as u64),
        _ => return Err(invalid("incorrect encoded start resourceVersion")),
    };
    Ok((start.to_string(), rv))
}

/// upstream's answer to a continue token whose revision has been
/// compacted (apiserver/pkg/storage/etcd3's `inconsistentContinue`).
const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a \
consistent list result. You can start a new list without the continue parameter, or use the \
continue token in this response to retrieve the remainder of the results. Continuing with the \
provided token results in an inconsistent list - objects that were created, modified, or \
deleted between the time the first chunk was returned and now may show up in the list.";

/// Why a page could not be read.
pub(super) enum PageError {
    Api(ApiError),
    /// The continue token's revision has been compacted: 410, with a
    /// token that reads the rest at the latest revision.
    Expired {
        retry: String,
    },
}

impl From<ApiError> for PageError {
    fn from(e: ApiError) -> Self {
        PageError::Api(e)
    }
}

impl From<PageError> for ApiError {
    fn from(e: PageError) -> Self {
        match e {
            PageError::Api(e) => e,
            PageError::Expired { .. } => ApiError::gone(INCONSISTENT_CONTINUE),
        }
    }
}

/// The stored objects under the request's prefix that its selectors
/// match, from its `continue` token on and up to its `limit`.
pub(super) async fn select(state: &ApiState, req: &ApiRequest) -> ApiResult<Page> {
    Ok(select_page(state, req).await?)
}

/// As [`select`], telling a compacted continue token apart.
async fn select_page(state: &ApiState, req: &ApiRequest) -> Result<Page, PageError> {
    let res = req.target.res;
    let filter = Filter::parse(res, req.param("labelSelector"), req.param("fieldSelector"))?;
    let prefix = list_prefix(req);
    let start = match req.param("continue").filter(|t| !t.is_empty()) {
        Some(token) => Some(decode_continue(token)?),
        None => None,
    };
    let limit = req
        .param("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let store_error = |e| ApiError::from_store(e, res, "");
    let (kvs, revision) = match &start {
        // A continued page: read at the first page's revision where the
        // store keeps history (etcd), from the token's key on.
        Some((key, rv)) => match state
            .store
            .list_from(&prefix, &format!("{prefix}{key}"), *rv)
            .await
        {
            Ok(listed) => listed,
            Err(StoreError::Compacted { .. }) => {
                return Err(PageError::Expired {
                    retry: encode_continue(None, key),
                })
            }
            Err(e) => return Err(store_error(e).into()),
        },
        None if req.param("resourceVersion") == Some("0") => {
            state.store.list_stale(&prefix).await.map_err(store_error)?
        }
        None => state.store.list(&prefix).await.map_err(store_error)?,
    };
    let first = match &start {
        // The start key ends with a NUL: everything after the key itself.
        Some((start, _)) => kvs.partition_point(|kv| kv.key[prefix.len()..] < **start),
        None => 0,
    };
    // Every page of a list says the first page's revision, and later
    // tokens carry it on: on etcd, later pages are read at it; on the
    // embedded store (which keeps no past values) they are read as the
    // objects are now, and a client that watches from the list's
    // revision (a reflector after a paged list) is then still sent every
    // change made while it paged, including changes to objects of pages
    // it had already read. Objects of later pages may be newer than that
    // revision; the watch then replays changes the client already has,
    // which it applies in order and ends up current. Watching from the
    // last page's own revision instead would lose those changes. A token
    // whose revision was compacted continues at the latest revision.
    let revision = start.as_ref().and_then(|(_, rv)| *rv).unwrap_or(revision);
    let mut items = Vec::new();
    let mut rest = kvs.into_iter().skip(first);
    let mut more = false;
    for kv in rest.by_ref() {
        if !filter.is_empty() && !filter.matches_attrs(&items::derived(res, &kv.value).attrs) {
            continue;
        }
        if limit.is_some_and(|l| items.len() == l) {
            more = true;
            break;
        }
        items.push(kv);
    }
    let mut page = Page {
        items,
        revision,
        continue_token: None,
        remaining: None,
    };
    if more {
        let last = page.items.last().expect("limit > 0");
        let after = format!("{}\u{0}", &last.key[prefix.len()..]);
        page.continue_token = Some(encode_continue(Some(revision), &after));
        // As kube-apiserver: counted only when every object would be returned.
        if filter.is_empty() {
            page.remaining = Some(rest.count() + 1);
        }
    }
    Ok(page)
}

/// The objects under the request's prefix that its selectors match, in
/// the version the request speaks, and the revision of the snapshot.
pub(super) async fn list_matching(
    state: &ApiState,
    req: &ApiRequest,
) -> ApiResult<(Vec<Value>, u64)> {
    let res = req.target.res;
    let page = select(state, req).await?;
    let items = page
        .items
        .iter()
        .map(|kv| items::decode(res, &kv.value, kv.mod_revision))
        .collect::<ApiResult<_>>()?;
    Ok((items, page.revision))
}

fn list_metadata(page: &Page) -> Value {
    let mut meta = json!({"resourceVersion": page.revision.to_string()});
    if let Some(token) = &page.continue_token {
        meta["continue"] = json!(token);
    }
    if let Some(n) = page.remaining {
        meta["remainingItemCount"] = json!(n);
    }
    meta
}

pub(super) async fn list(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let res = req.target.res;
    let page = match select_page(state, req).await {
        Ok(page) => page,
        Err(PageError::Expired { retry }) => {
            let err = ApiError::gone(INCONSISTENT_CONTINUE);
            let mut status = err.status();
            status["metadata"] = json!({"continue": retry});
            let code = StatusCode::GONE;
            return Ok(object_response(&req.headers, code, &status));
        }
        Err(PageError::Api(e)) => return Err(e),
    };
    let meta = list_metadata(&page);
    if conversion::for_reads(req.target.custom.as_ref()).is_some() {
        return converted(state, req, page, meta).await;
    }
    if let Some(version) = req.output.metadata_version() {
        return Ok(metadata_list(req, page, meta, version));
    }
    if req.output.convert == Convert::Table {
        let include = IncludeObject::parse(req.param("includeObject"));
        let custom = req.target.custom.clone();
        let mut head = table::empty_table(res, custom.as_deref(), &page.revision.to_string());
        head["metadata"] = meta;
        return Ok(streamed(
            head,
            "rows",
            res,
            page.items,
            move |out, res, kv| {
                let obj = items::decode(res, &kv.value, kv.mod_revision)?;
                let row = table::row(res, custom.as_deref(), &obj, include);
                serde_json::to_writer(out, &row).map_err(|e| ApiError::internal(e.to_string()))
            },
        ));
    }
    let list_kind = match &req.target.custom {
        Some(v) => v.list_kind.clone(),
        None => format!("{}List", res.kind),
    };
    let head = json!({
        "kind": list_kind,
        "apiVersion": res.api_version(),
        "metadata": meta,
        "items": [],
    });
    if req.output.encoding == Encoding::Protobuf {
        let mut list = head;
        list["items"] = page
            .items
            .iter()
            .map(|kv| items::decode(res, &kv.value, kv.mod_revision))
            .collect::<ApiResult<_>>()?;
        return Ok(encoded_response(Encoding::Protobuf, StatusCode::OK, &list));
    }
    Ok(streamed(head, "items", res, page.items, |out, res, kv| {
        items::write_object(out, res, &kv.value, kv.mod_revision)
    }))
}

/// A page as `PartialObjectMetadataList` of `meta.k8s.io/<version>`
/// (kube-apiserver's `asPartialObjectMetadataList`). In JSON it is streamed
/// as every list is, each item cut from its stored bytes
/// ([`items::write_metadata`]); in protobuf only each item's metadata is
/// decoded.
fn metadata_list(req: &ApiRequest, page: Page, meta: Value, version: &'static str) -> Response {
    let res = req.target.res;
    let mut head = json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": meta,
        "items": [],
    });
    if req.output.encoding == Encoding::Protobuf {
        let items: ApiResult<Vec<Value>> = page
            .items
            .iter()
            .map(|kv| items::metadata_value(res, &kv.value, kv.mod_revision, version))
            .collect();
        return match items {
            Ok(items) => {
                head["items"] = Value::Array(items);
                encoded_response(Encoding::Protobuf, StatusCode::OK, &head)
            }
            Err(e) => e.into_response(),
        };
    }
    streamed(head, "items", res, page.items, move |out, res, kv| {
        items::write_metadata(out, res, &kv.value, kv.mod_revision, version)
    })
}

/// A page of a custom resource whose CRD converts by webhook: its objects
/// converted in one ConversionReview, answered whole (as a List or a
/// Table).
async fn converted(
    state: &ApiState,
    req: &ApiRequest,
    page: Page,
    meta: Value,
) -> ApiResult<Response> {
    let res = req.target.res;
    let custom = req.target.custom.as_ref();
    let stored = page
        .items
        .iter()
        .map(object::from_store)
        .collect::<ApiResult<Vec<_>>>()?;
    let items: Vec<Value> = conversion::to_served(state, custom, stored)
        .await?
        .into_iter()
        .map(|obj| object::from_storage_version(res, obj))
        .collect();
    let body = if req.output.convert == Convert::Table {
        let include = IncludeObject::parse(req.param("includeObject"));
        let rv = page.revision.to_string();
        let mut t = table::table(res, custom.map(|v| v.as_ref()), &items, &rv, include);
        t["metadata"] = meta;
        t
    } else {
        let list = json!({
            "kind": custom.map_or_else(|| format!("{}List", res.kind), |v| v.list_kind.clone()),
            "apiVersion": res.api_version(),
            "metadata": meta,
            "items": items,
        });
        list_as_requested(req, list)
    };
    Ok(encoded_response(req.output.encoding, StatusCode::OK, &body))
}

/// A JSON response streamed in chunks: `head` with its (empty) array
/// field `field` filled by `write` for each of `items`, in order.
fn streamed(
    head: Value,
    field: &str,
    res: &'static ResourceInfo,
    items: Vec<KeyValue>,
    write: impl Fn(&mut Vec<u8>, &ResourceInfo, &KeyValue) -> ApiResult<()> + Send + 'static,
) -> Response {
    let (open, close) = split_around_array(&head, field);
    let mut items = items.into_iter().peekable();
    let mut first = true;
    let mut done = false;
    let chunks = stream::iter(std::iter::from_fn(move || {
        if done {
            return None;
        }
        let mut out = Vec::with_capacity(CHUNK + 4096);
        if first {
            out.extend_from_slice(&open);
        }
        while out.len() < CHUNK {
            let Some(kv) = items.next() else { break };
            if !first {
                out.push(b',');
            }
            first = false;
            if let Err(e) = write(&mut out, res, &kv) {
                // Ends the response short of its closing bracket: the client
                // sees a broken list, never a list missing an object.
                tracing::error!(key = %kv.key, error = %e.message, "encoding a listed object");
                done = true;
                return Some(Err(std::io::Error::other(e.message)));
            }
        }
        first = false;
        if items.peek().is_none() {
            out.extend_from_slice(&close);
            done = true;
        }
        Some(Ok::<_, std::io::Error>(Bytes::from(out)))
    }));
    let response = Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(chunks))
        .expect("a valid response");
    // Gzipped chunk by chunk when it passes the threshold.
    super::compression::compressible(response)
}

/// The JSON of `head` up to and after the inside of its empty array
/// field `field`, found as the last `"field":[]` in it (the other fields of
/// a list's head are its kind, apiVersion, metadata and column
/// definitions, none of which ends with such an array).
fn split_around_array(head: &Value, field: &str) -> (Vec<u8>, Vec<u8>) {
    let text = serde_json::to_string(head).expect("a JSON value serializes");
    let marker = format!("\"{field}\":[]");
    let at = text.rfind(&marker).expect("the head has the empty array") + marker.len() - 1;
    (
        text.as_bytes()[..at].to_vec(),
        text.as_bytes()[at..].to_vec(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_are_kube_apiservers() {
        let token = encode_continue(Some(42), "default/web-7\u{0}");
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&token)
            .unwrap();
        let json: Value = serde_json::from_slice(&raw).unwrap();
        assert_eq!(
            json,
            json!({"v": "meta.k8s.io/v1", "rv": 42, "start": "default/web-7\u{0}"})
        );
        assert_eq!(
            decode_continue(&token).unwrap(),
            ("default/web-7\u{0}".to_string(), Some(42))
        );
        // The token a 410 carries: the rest at the latest revision.
        let retry = encode_continue(None, "default/web-7\u{0}");
        assert_eq!(
            decode_continue(&retry).unwrap(),
            ("default/web-7\u{0}".to_string(), None)
        );
        let zero = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#);
        for bad in [
            "",
            "!!",
            "bm90IGpzb24",
            &encode_continue(Some(1), "/x"),
            &zero,
        ] {
            let err = decode_continue(bad).unwrap_err();
            assert_eq!(err.code, 400, "{bad}");
            assert!(
                err.message.starts_with("continue key is not valid"),
                "{}",
                err.message
            );
        }
    }

    #[test]
    fn the_head_splits_around_its_array() {
        let head = json!({"kind": "PodList", "metadata": {"continue": "x"}, "items": []});
        let (open, close) = split_around_array(&head, "items");
        let whole = [open.as_slice(), b"1,2", close.as_slice()].concat();
        let v: Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(v["items"], json!([1, 2]));
        assert_eq!(v["metadata"], json!({"continue": "x"}));
        let table = bosun::printers::empty_table(bosun::resources::by_name("pods").unwrap(), "5");
        let (open, close) = split_around_array(&table, "rows");
        let whole = [open.as_slice(), b"{}", close.as_slice()].concat();
        let v: Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(v["rows"], json!([{}]));
        assert_eq!(v["columnDefinitions"], table["columnDefinitions"]);
    }
}
