//! `?watch=true`: a stream of JSON lines `{"type": ..., "object": ...}`
//! (or length-prefixed protobuf `WatchEvent`s), each object as it is, as a
//! Table, or as its `PartialObjectMetadata` (client-go's metadata
//! informers, kube-rs's `metadata_watcher`), as the Accept header asks.
//!
//! Without a resourceVersion (or with "0") the stream starts with an ADDED
//! event for every existing object; with one, it replays every change
//! after it from the store's history, or ends with an ERROR event carrying
//! a 410 Expired Status when that history has been compacted, so the
//! client relists.
//!
//! Bookmarks (`allowWatchBookmarks`) carry the watch's progress, as
//! kube-apiserver's cacher bookmarks at its current revision: the latest
//! revision up to which the store has handed this watch every change of
//! its resource ([`ProgressWatch`]), so that on a quiet resource they move
//! on with the writes to others and a client resuming from the last one
//! stays inside the history kept.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use bosun::resources::ResourceInfo;
use futures::{FutureExt, StreamExt};
use http::StatusCode;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::custom::conversion;
use super::error::{ApiError, ApiResult};
use super::filter::Filter;
use super::items;
use super::list::select;
use super::negotiate::{Convert, Encoding};
use super::object;
use super::table::{self, IncludeObject};
use super::{protobuf, ApiRequest, ApiState};
use crate::store::{Event, EventType, ProgressWatch, StoreError, Stored};

/// How a watch renders objects.
#[derive(Clone)]
struct Render {
    res: &'static ResourceInfo,
    table: Option<IncludeObject>,
    /// Length-prefixed protobuf WatchEvents instead of JSON lines.
    protobuf: bool,
    /// A custom resource's CRD version (its Table columns).
    custom: Option<std::sync::Arc<super::custom::CustomVersion>>,
    /// `PartialObjectMetadata` of this `meta.k8s.io` version instead of
    /// each object.
    metadata: Option<&'static str>,
}

/// What converts a watch's objects: the server and the CRD version whose
/// conversion webhook is called.
type Converter = (Arc<ApiState>, Arc<super::custom::CustomVersion>);

/// One event as the stream encodes it: a JSON line, or a protobuf frame
/// (an object without a protobuf form becomes an ERROR event).
fn frame(protobuf: bool, kind: &str, obj: Value) -> Bytes {
    if protobuf {
        let framed = protobuf::encode_watch_frame(kind, &obj).or_else(|e| {
            let status = ApiError::internal(format!("encoding the event in protobuf: {e}"));
            protobuf::encode_watch_frame("ERROR", &status.status())
        });
        return Bytes::from(framed.unwrap_or_default());
    }
    let mut line =
        serde_json::to_vec(&json!({"type": kind, "object": obj})).expect("a JSON value serializes");
    line.push(b'\n');
    Bytes::from(line)
}

impl Render {
    /// The event for the object `value` holds at revision `rev`: a JSON
    /// line around the stored bytes (with the resourceVersion spliced in,
    /// no decoding), or, for Tables, protobuf and versions stored
    /// differently, a frame of the decoded object.
    fn event(&self, kind: &str, value: &Stored, rev: u64) -> Bytes {
        if self.table.is_none() && !self.protobuf {
            let write = |line: &mut Vec<u8>| match self.metadata {
                Some(version) => items::write_metadata(line, self.res, value, rev, version),
                None if items::served_as_stored(self.res) => {
                    items::write_object(line, self.res, value, rev)
                }
                None => Err(ApiError::internal("not served as stored")),
            };
            let mut line = Vec::with_capacity(value.len() + 64);
            line.extend_from_slice(b"{\"type\":\"");
            line.extend_from_slice(kind.as_bytes());
            line.extend_from_slice(b"\",\"object\":");
            if write(&mut line).is_ok() {
                line.extend_from_slice(b"}\n");
                return Bytes::from(line);
            }
        }
        if let (Some(version), true) = (self.metadata, self.protobuf) {
            // Only the metadata is decoded.
            return match items::metadata_value(self.res, value, rev, version) {
                Ok(partial) => frame(true, kind, partial),
                Err(e) => self.error(&e),
            };
        }
        match items::decode(self.res, value, rev) {
            Ok(obj) => self.line(kind, obj),
            Err(e) => self.error(&e),
        }
    }

    /// The events for `values` (the objects stored at their revisions) of
    /// a custom resource whose CRD converts by webhook: converted in one
    /// ConversionReview; an ERROR event when that fails.
    async fn converted(
        &self,
        via: &Converter,
        kinds: &[&str],
        values: &[(&Stored, u64)],
    ) -> Result<Vec<Bytes>, Bytes> {
        let mut stored = Vec::with_capacity(values.len());
        for (value, rev) in values {
            match serde_json::from_slice::<Value>(value) {
                Ok(mut obj) => {
                    object::set_resource_version(&mut obj, *rev);
                    stored.push(obj);
                }
                Err(e) => {
                    let err = ApiError::internal(format!("corrupt stored object: {e}"));
                    return Err(self.error(&err));
                }
            }
        }
        let custom = Some(&via.1);
        match conversion::to_served(&via.0, custom, stored).await {
            Ok(objs) => Ok(kinds
                .iter()
                .zip(objs)
                .map(|(kind, obj)| self.line(kind, object::from_storage_version(self.res, obj)))
                .collect()),
            Err(e) => Err(self.error(&e)),
        }
    }

    fn line(&self, kind: &str, obj: Value) -> Bytes {
        let obj = match (self.table, self.metadata) {
            (Some(include), _) => {
                let rv = object::meta_str(&obj, "resourceVersion")
                    .unwrap_or("")
                    .to_string();
                table::table(self.res, self.custom.as_deref(), &[obj], &rv, include)
            }
            (None, Some(version)) => items::partial(&obj, version),
            (None, None) => obj,
        };
        frame(self.protobuf, kind, obj)
    }

    /// A BOOKMARK: an object of the kind with only a resourceVersion (in
    /// the metadata-only form, a `PartialObjectMetadata` of it, as
    /// upstream transforms every event's object).
    fn bookmark(&self, rev: u64, initial_events_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": rev.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({
            "kind": self.res.kind,
            "apiVersion": self.res.api_version(),
            "metadata": metadata,
        });
        let obj = match self.metadata {
            Some(version) => items::partial(&obj, version),
            None => obj,
        };
        frame(self.protobuf, "BOOKMARK", obj)
    }

    fn error(&self, err: &ApiError) -> Bytes {
        frame(self.protobuf, "ERROR", err.status())
    }
}

fn stream_response(rx: mpsc::Receiver<Bytes>, protobuf: bool) -> Response {
    let content_type = if protobuf {
        // kube-apiserver names the stream's framing this way.
        "application/vnd.kubernetes.protobuf;stream=watch"
    } else {
        "application/json"
    };
    let body = Body::from_stream(ReceiverStream::new(rx).map(Ok::<_, Infallible>));
    Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::CACHE_CONTROL, "no-cache, private")
        .body(body)
        .expect("a valid response")
}

/// The watch event an object change is for this watcher, if any: an
/// object that starts or stops matching the selectors is ADDED or DELETED
/// as Kubernetes does. Selectors test the attributes read once per write
/// ([`items::Derived`]), not a decoding per watcher.
fn classify(res: &ResourceInfo, filter: &Filter, event: &Event) -> Option<&'static str> {
    let matches = |value: &Stored| {
        filter.is_empty() || filter.matches_attrs(&items::derived(res, value).attrs)
    };
    let prev_matches = event.prev.as_deref().is_some_and(matches);
    match event.kind {
        EventType::Added => matches(&event.value).then_some("ADDED"),
        EventType::Deleted => prev_matches.then_some("DELETED"),
        EventType::Modified => match (prev_matches, matches(&event.value)) {
            (true, true) => Some("MODIFIED"),
            (false, true) => Some("ADDED"),
            (true, false) => Some("DELETED"),
            (false, false) => None,
        },
    }
}

pub async fn serve(state: &Arc<ApiState>, req: &ApiRequest) -> ApiResult<Response> {
    // Once the server is stopping, a new watch would end at once and its
    // client would come straight back for another: an error instead makes
    // the client back off (kube-runtime's watcher, client-go's reflector).
    if *state.shutdown.borrow() {
        return Err(ApiError::shutting_down());
    }
    let res = req.target.res;
    let filter = Filter::parse(res, req.param("labelSelector"), req.param("fieldSelector"))?;
    let render = Render {
        res,
        table: (req.output.convert == Convert::Table)
            .then(|| IncludeObject::parse(req.param("includeObject"))),
        // Custom resources themselves are served in JSON only, as upstream
        // serves them; their metadata-only form in protobuf too.
        protobuf: req.output.encoding == Encoding::Protobuf,
        custom: req.target.custom.clone(),
        metadata: req.output.metadata_version(),
    };
    let protobuf = render.protobuf;
    let converter: Option<Converter> = conversion::for_reads(req.target.custom.as_ref())
        .and(req.target.custom.clone())
        .map(|v| (Arc::clone(state), v));
    let bookmarks = req.flag("allowWatchBookmarks");
    let send_initial = req.flag("sendInitialEvents");
    let timeout = timeout(
        req.param("timeoutSeconds"),
        state.options.min_request_timeout,
        rand::random::<f64>(),
    );
    let requested = match req.param("resourceVersion") {
        None | Some("") | Some("0") => None,
        Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("resourceVersion: Invalid value: {rv:?}"))
        })?),
    };

    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let mut initial = Vec::new();
    let after = match requested {
        Some(rv) if !send_initial => rv,
        _ => {
            let page = select(state, req).await?;
            initial = page.items;
            page.revision
        }
    };
    let prefix = match req.target.namespace.as_deref() {
        Some(ns) if res.namespaced => format!("{}{ns}/", res.storage_prefix()),
        _ => res.storage_prefix(),
    };
    let stream = match state.store.watch_with_progress(&prefix, after).await {
        Ok(s) => s,
        Err(StoreError::Compacted { requested, oldest }) => {
            let err = ApiError::gone(format!("too old resource version: {requested} ({oldest})"));
            let _ = tx.send(render.error(&err)).await;
            return Ok(stream_response(rx, render.protobuf));
        }
        Err(e) => return Err(ApiError::from_store(e, res, "")),
    };

    let shutdown = state.shutdown.clone();
    let interval = state.options.bookmark_interval;
    tokio::spawn(async move {
        if let Some(via) = &converter {
            let kinds = vec!["ADDED"; initial.len()];
            let values: Vec<(&Stored, u64)> = initial
                .iter()
                .map(|kv| (&*kv.value, kv.mod_revision))
                .collect();
            let lines = match render.converted(via, &kinds, &values).await {
                Ok(lines) => lines,
                Err(error) => {
                    let _ = tx.send(error).await;
                    return;
                }
            };
            for line in lines {
                if tx.send(line).await.is_err() {
                    return;
                }
            }
        }
        let initial = if converter.is_some() {
            Vec::new()
        } else {
            initial
        };
        for kv in initial {
            if tx
                .send(render.event("ADDED", &kv.value, kv.mod_revision))
                .await
                .is_err()
            {
                return;
            }
        }
        if send_initial && tx.send(render.bookmark(after, true)).await.is_err() {
            return;
        }
        follow(
            stream,
            tx,
            FollowState {
                render,
                filter,
                last: after,
                bookmarks,
                interval,
                timeout,
                shutdown,
                converter,
            },
        )
        .await;
    });
    Ok(stream_response(rx, protobuf))
}

/// How long a watch lasts. Without `timeoutSeconds` (or with 0), as
/// kube-apiserver's ListResource: a random time between the minimum
/// request timeout and twice it (`spread` in [0, 1)), so that the watches
/// of many clients started together do not all end together. With it, the
/// time asked for, but never longer than twice the minimum: kube-apiserver
/// takes any `timeoutSeconds` as it is, which lets one client hold a watch
/// (its goroutine, buffers and connection) for years.
pub fn timeout(asked: Option<&str>, min_request_timeout: Duration, spread: f64) -> Duration {
    let longest = min_request_timeout * 2;
    match asked.and_then(|t| t.parse::<u64>().ok()) {
        Some(secs) if secs > 0 => Duration::from_secs(secs).min(longest),
        _ => min_request_timeout
            .mul_f64(1.0 + spread.clamp(0.0, 1.0))
            .min(longest),
    }
}

struct FollowState {
    render: Render,
    filter: Filter,
    last: u64,
    bookmarks: bool,
    interval: Duration,
    timeout: Duration,
    shutdown: tokio::sync::watch::Receiver<bool>,
    converter: Option<Converter>,
}

async fn follow(watch: ProgressWatch, tx: mpsc::Sender<Bytes>, mut st: FollowState) {
    let ProgressWatch {
        events: mut stream,
        progress,
    } = watch;
    let deadline = tokio::time::sleep(st.timeout);
    tokio::pin!(deadline);
    let mut ticker = tokio::time::interval(st.interval);
    ticker.tick().await;
    loop {
        tokio::select! {
            next = stream.next() => match next {
                Some(event) => {
                    if !deliver(event, &tx, &mut st).await {
                        return;
                    }
                }
                None => return,
            },
            _ = ticker.tick(), if st.bookmarks => {
                // The store's progress first, then every event already in
                // the stream: the events up to that progress are among
                // them, so the bookmark never claims one not yet sent.
                let progress = *progress.borrow();
                loop {
                    match stream.next().now_or_never() {
                        Some(Some(event)) => {
                            if !deliver(event, &tx, &mut st).await {
                                return;
                            }
                        }
                        Some(None) => return,
                        None => break,
                    }
                }
                st.last = st.last.max(progress);
                if tx.send(st.render.bookmark(st.last, false)).await.is_err() {
                    return;
                }
            }
            _ = &mut deadline => return,
            _ = st.shutdown.changed() => return,
            _ = tx.closed() => return,
        }
    }
}

/// Sends one item of the store's stream to the client, as the event it is
/// for this watcher (if any) or an ERROR; false once the watch is over.
async fn deliver(
    next: Result<Event, StoreError>,
    tx: &mpsc::Sender<Bytes>,
    st: &mut FollowState,
) -> bool {
    let event = match next {
        Ok(event) => event,
        Err(e) => {
            let err = ApiError::from_store(e, st.render.res, "");
            let _ = tx.send(st.render.error(&err)).await;
            return false;
        }
    };
    st.last = st.last.max(event.revision);
    let Some(kind) = classify(st.render.res, &st.filter, &event) else {
        return true;
    };
    let line = match &st.converter {
        None => st.render.event(kind, &event.value, event.revision),
        Some(via) => {
            let one = [(&*event.value, event.revision)];
            match st.render.converted(via, &[kind], &one).await {
                Ok(mut lines) => lines.pop().unwrap_or_default(),
                Err(error) => {
                    let _ = tx.send(error).await;
                    return false;
                }
            }
        }
    };
    tx.send(line).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_the_clients_up_to_twice_the_minimum() {
        let min = Duration::from_secs(1800);
        assert_eq!(timeout(Some("60"), min, 0.5), Duration::from_secs(60));
        assert_eq!(timeout(Some("3600"), min, 0.5), Duration::from_secs(3600));
        assert_eq!(
            timeout(Some("315360000"), min, 0.5),
            Duration::from_secs(3600)
        );
        // None asked (or 0, or not a number): spread over [min, 2 min).
        assert_eq!(timeout(None, min, 0.0), min);
        assert_eq!(timeout(Some("0"), min, 0.5), Duration::from_secs(2700));
        assert_eq!(timeout(Some("x"), min, 0.999), min.mul_f64(1.999));
        assert_eq!(
            timeout(None, Duration::from_secs(2), 0.0),
            Duration::from_secs(2)
        );
    }
}
