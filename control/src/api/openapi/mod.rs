//! The OpenAPI documents kubectl and other clients read: `/openapi/v3`
//! (an index of one document per group version, each with its paths and
//! the schemas of its kinds) and `/openapi/v2` (one Swagger 2.0 document
//! of everything). `kubectl explain` reads them for field docs; kubectl
//! checks the `fieldValidation` parameter before it leaves validation to
//! the server.
//!
//! The built-in documents are built on the first request for them, once
//! per process; each established CustomResourceDefinition's served
//! versions are added to them ([`crd`], [`published`]) when its server's
//! custom resources change. Documents are kept as serialized bytes with
//! the hash of their content: clients cache v3 documents by the `hash` in
//! the index's URLs and revalidate with the ETag. `/openapi/v2` is JSON
//! or, for kubectl, gnostic's protobuf.

mod crd;
mod gnostic;
mod metrics;
mod paths;
mod published;
mod schemas;

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::OnceLock;
use std::time::Instant;

use axum::response::{IntoResponse, Response};
use bosun::resources::{served, ResourceInfo};
use http::{header, HeaderMap, StatusCode};
use serde_json::{json, Map, Value};

use crate::api::custom::CustomResources;
use paths::Dialect;
use published::Published;
use schemas::{V2_REF_PREFIX, V3_REF_PREFIX};

/// One generated document: its JSON and the hash of that JSON.
pub struct Document {
    body: Vec<u8>,
    hash: String,
}

impl Document {
    fn new(doc: &Value) -> Document {
        Document::from_bytes(serde_json::to_vec(doc).expect("documents serialize"))
    }

    fn from_bytes(body: Vec<u8>) -> Document {
        let mut h = DefaultHasher::new();
        body.hash(&mut h);
        Document {
            hash: format!("{:016X}", h.finish()),
            body,
        }
    }
}

/// `api/v1` or `apis/apps/v1`: a group version's key in the v3 index.
fn gv_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// Every served group version with its kinds, in discovery's order.
fn group_versions() -> Vec<((&'static str, &'static str), Vec<&'static ResourceInfo>)> {
    let mut out: Vec<((&str, &str), Vec<&ResourceInfo>)> = Vec::new();
    for r in served() {
        match out.iter_mut().find(|(gv, _)| *gv == (r.group, r.version)) {
            Some((_, kinds)) => kinds.push(r),
            None => out.push(((r.group, r.version), vec![r])),
        }
    }
    out
}

fn info() -> Value {
    json!({"title": "Kubernetes", "version": super::discovery::version()["gitVersion"]})
}

/// The schema name of a kind among `schemas`, found by its GVK extension.
fn schema_name_of(schemas: &Map<String, Value>, r: &ResourceInfo) -> Option<String> {
    let gvk = json!([{"group": r.group, "kind": r.kind, "version": r.version}]);
    schemas
        .iter()
        .find(|(_, s)| s["x-kubernetes-group-version-kind"] == gvk)
        .map(|(name, _)| name.clone())
}

/// The schemas of a group version's kinds: k8s-openapi's, or the
/// hand-written ones of metrics.k8s.io.
fn kind_schemas(group: &str, version: &str, kinds: &[&ResourceInfo]) -> Map<String, Value> {
    if group == "metrics.k8s.io" {
        metrics::schemas(kinds)
    } else {
        schemas::schemas(group, version, kinds)
    }
}

fn v3_document(group: &str, version: &str, kinds: &[&ResourceInfo]) -> Value {
    let schemas = kind_schemas(group, version, kinds);
    let paths = paths::paths(Dialect::V3, kinds, |r| {
        schema_name_of(&schemas, r).map(|n| format!("{V3_REF_PREFIX}{n}"))
    });
    let mut doc = json!({
        "openapi": "3.0.0",
        "info": info(),
        "paths": paths,
        "components": {"schemas": schemas},
    });
    schemas::wrap_refs_in_all_of(&mut doc["components"]);
    doc
}

/// The built-in kinds' v2 definitions and paths, built on first use.
fn v2_builtin() -> &'static (Map<String, Value>, Map<String, Value>) {
    static PARTS: OnceLock<(Map<String, Value>, Map<String, Value>)> = OnceLock::new();
    PARTS.get_or_init(|| {
        let mut definitions = Map::new();
        let mut all_paths = Map::new();
        for ((group, version), kinds) in group_versions() {
            let schemas = kind_schemas(group, version, &kinds);
            all_paths.extend(paths::paths(Dialect::V2, &kinds, |r| {
                schema_name_of(&schemas, r).map(|n| format!("{V2_REF_PREFIX}{n}"))
            }));
            // A kind's schema also comes with the group versions that refer
            // to it (a StatefulSet's PersistentVolumeClaim), without the GVK
            // mark only its own group version adds: the marked one is kept.
            for (name, schema) in schemas {
                let marked = schema.get("x-kubernetes-group-version-kind").is_some();
                if marked || !definitions.contains_key(&name) {
                    definitions.insert(name, schema);
                }
            }
        }
        let text = serde_json::to_string(&definitions).expect("schemas serialize");
        let definitions: Map<String, Value> = serde_json::from_str(
            &text.replace(&format!("\"{V3_REF_PREFIX}"), &format!("\"{V2_REF_PREFIX}")),
        )
        .expect("schemas parse");
        (definitions, all_paths)
    })
}

/// The built-in kinds' v2 definitions in gnostic's protobuf (the entries
/// of its `Definitions`), encoded on first use.
fn v2_builtin_protobuf() -> &'static Vec<u8> {
    static ENTRIES: OnceLock<Vec<u8>> = OnceLock::new();
    ENTRIES.get_or_init(|| gnostic::encode_definitions(&v2_builtin().0))
}

/// The v3 documents by group-version key, built on first use.
fn v3_documents() -> &'static BTreeMap<String, Document> {
    static DOCS: OnceLock<BTreeMap<String, Document>> = OnceLock::new();
    DOCS.get_or_init(|| {
        let started = Instant::now();
        let docs: BTreeMap<String, Document> = group_versions()
            .into_iter()
            .map(|((g, v), kinds)| (gv_key(g, v), Document::new(&v3_document(g, v, &kinds))))
            .collect();
        tracing::info!(
            documents = docs.len(),
            bytes = docs.values().map(|d| d.body.len()).sum::<usize>(),
            millis = started.elapsed().as_millis() as u64,
            "generated the OpenAPI v3 documents"
        );
        docs
    })
}

/// `/openapi/v3`: each group version's document URL, with its hash.
fn v3_index(published: &Published) -> Value {
    let paths: Map<String, Value> = v3_documents()
        .iter()
        .chain(published.v3_documents())
        .map(|(key, doc)| {
            let url = format!("/openapi/v3/{key}?hash={}", doc.hash);
            (key.clone(), json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

/// A document with its ETag; 304 when the client has it already. A URL
/// whose `hash` is the current one never changes, so it may be cached
/// for good, as the apiserver lets it.
fn serve_document(
    doc: &Document,
    content_type: &'static str,
    headers: &HeaderMap,
    query_hash: Option<&str>,
) -> Response {
    let etag = format!("\"{}\"", doc.hash);
    let cache = if query_hash == Some(doc.hash.as_str()) {
        "public, immutable, max-age=31536000"
    } else {
        "no-cache, private"
    };
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    if fresh {
        return (
            StatusCode::NOT_MODIFIED,
            [(header::ETAG, etag), (header::CACHE_CONTROL, cache.into())],
        )
            .into_response();
    }
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (header::ETAG, etag),
            (header::CACHE_CONTROL, cache.into()),
        ],
        doc.body.clone(),
    )
        .into_response()
}

/// The v2 encoding the client takes first: JSON, or gnostic's protobuf
/// (kubectl's discovery client asks for that only); None for neither.
fn v2_encoding(headers: &HeaderMap) -> Option<&'static str> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Some(JSON);
    };
    accept
        .split(',')
        .find_map(|range| match range.split(';').next().unwrap_or("").trim() {
            "application/json" | "application/*" | "*/*" | "" => Some(JSON),
            gnostic::ACCEPTED_MEDIA_TYPE | gnostic::MEDIA_TYPE => Some(gnostic::MEDIA_TYPE),
            _ => None,
        })
}

const JSON: &str = "application/json";

fn not_acceptable() -> Response {
    let status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("/openapi/v2 is served as {JSON} or {}", gnostic::MEDIA_TYPE),
        "reason": "NotAcceptable",
        "code": 406,
    });
    super::json_response(StatusCode::NOT_ACCEPTABLE, &status)
}

/// Serves `/openapi/...` (`segments` without the leading `openapi`) with
/// `custom`'s resources, or None for a path that is not a document.
pub fn serve(
    custom: &CustomResources,
    segments: &[&str],
    headers: &HeaderMap,
    query: Option<&str>,
) -> Option<Response> {
    let hash = query.and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("hash=")));
    let published = published::current(custom);
    let v3 = |key: String| {
        v3_documents()
            .get(&key)
            .or_else(|| published.v3_document(&key))
            .map(|d| serve_document(d, JSON, headers, hash))
    };
    match segments {
        ["v2"] => Some(match v2_encoding(headers) {
            Some(JSON) => serve_document(published.v2_json(), JSON, headers, hash),
            Some(pb) => serve_document(published.v2_protobuf(), pb, headers, hash),
            None => not_acceptable(),
        }),
        ["v3"] => Some(super::json_response(StatusCode::OK, &v3_index(&published))),
        ["v3", "api", version] | ["v3", "apis", "", version] => v3(gv_key("", version)),
        ["v3", "apis", group, version] => v3(gv_key(group, version)),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
