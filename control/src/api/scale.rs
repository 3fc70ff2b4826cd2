//! The `scale` subresource: a Scale object (`spec.replicas`, status
//! replicas and selector) read from and written into the scalable kinds.

use axum::response::Response;
use bosun::selector::label_selector_string_json;
use http::{Method, StatusCode};
use serde_json::{json, Value};

use super::decode::decode_body;
use super::error::{ApiError, ApiResult};
use super::object::{self, requested_revision};
use super::patch::{apply_patch, parse_patch};
use super::request::{load, name_of, MAX_ATTEMPTS};
use super::update::{commit_write, merge_write, Part, Written};
use super::{object_response, ApiRequest, ApiState};
use crate::store::StoreError;

/// Where a kind keeps what its Scale shows, as JSON pointers: built-in
/// kinds at `spec.replicas`, `status.replicas` and `spec.selector` (a
/// label selector); a custom resource where its CRD's
/// `subresources.scale` says (its selector already a string).
struct Paths {
    spec_replicas: String,
    status_replicas: String,
    selector: Option<String>,
    custom: bool,
    /// The selector is a map of labels (a ReplicationController's).
    equality_selector: bool,
}

fn pointer(json_path: &str) -> String {
    json_path.replace('.', "/")
}

fn paths_of(req: &ApiRequest) -> Paths {
    match req.target.custom.as_ref().and_then(|v| v.scale.as_ref()) {
        Some(s) => Paths {
            spec_replicas: pointer(&s.spec_replicas),
            status_replicas: pointer(&s.status_replicas),
            selector: s.label_selector.as_deref().map(pointer),
            custom: true,
            equality_selector: false,
        },
        None => Paths {
            spec_replicas: "/spec/replicas".into(),
            status_replicas: "/status/replicas".into(),
            selector: Some("/spec/selector".into()),
            custom: false,
            equality_selector: req.target.res.kind == "ReplicationController",
        },
    }
}

/// Sets the value at a JSON pointer, making the objects on the way.
fn set_at(obj: &mut Value, pointer: &str, value: Value) {
    let mut at = obj;
    let mut parts = pointer.trim_start_matches('/').split('/').peekable();
    while let Some(part) = parts.next() {
        if !at.is_object() {
            *at = json!({});
        }
        let map = at.as_object_mut().expect("an object");
        if parts.peek().is_none() {
            map.insert(part.to_string(), value);
            return;
        }
        at = map.entry(part.to_string()).or_insert_with(|| json!({}));
    }
}

fn scale_of(obj: &Value, paths: &Paths) -> Value {
    let md = object::metadata(obj).cloned().unwrap_or_default();
    let selector = match &paths.selector {
        None => json!(""),
        Some(p) if paths.custom => obj.pointer(p).cloned().unwrap_or(json!("")),
        Some(p) if paths.equality_selector => {
            let labels = obj.pointer(p).cloned().unwrap_or(json!({}));
            json!(label_selector_string_json(Some(
                &json!({"matchLabels": labels})
            )))
        }
        // The converted selector, as kubectl prints it (`app=nginx,tier in (fe)`).
        Some(p) => json!(label_selector_string_json(obj.pointer(p))),
    };
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": md.get("name"),
            "namespace": md.get("namespace"),
            "uid": md.get("uid"),
            "resourceVersion": md.get("resourceVersion"),
            "creationTimestamp": md.get("creationTimestamp"),
        },
        "spec": {"replicas": obj.pointer(&paths.spec_replicas).cloned().unwrap_or(json!(0))},
        "status": {
            "replicas": obj.pointer(&paths.status_replicas).cloned().unwrap_or(json!(0)),
            "selector": selector,
        },
    })
}

pub(super) async fn get_scale(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let (_, obj) = load(state, req).await?;
    Ok(object_response(
        &req.headers,
        StatusCode::OK,
        &scale_of(&obj, &paths_of(req)),
    ))
}

pub(super) async fn write_scale(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let res = req.target.res;
    let name = name_of(req).to_string();
    let paths = paths_of(req);
    let patch_doc = if req.method == Method::PATCH {
        Some(parse_patch(req)?)
    } else {
        None
    };
    let body = if patch_doc.is_none() {
        Some(decode_body(req)?)
    } else {
        None
    };
    for _ in 0..MAX_ATTEMPTS {
        let (kv, current) = load(state, req).await?;
        let scale = scale_of(&current, &paths);
        let wanted = match (&patch_doc, &body) {
            (Some((kind, doc)), _) => apply_patch(*kind, &scale, doc)?,
            (None, Some(b)) => b.clone(),
            _ => unreachable!("either a patch or a body"),
        };
        let precondition = requested_revision(&wanted)?;
        if precondition.is_some_and(|rv| rv != kv.mod_revision) {
            return Err(ApiError::modified(res, &name));
        }
        let replicas = wanted
            .pointer("/spec/replicas")
            .cloned()
            .unwrap_or(json!(0));
        if replicas.as_i64().is_none_or(|r| r < 0) {
            return Err(ApiError {
                code: 422,
                reason: "Invalid",
                message: format!(
                    "Scale.autoscaling \"{name}\" is invalid: spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"
                ),
                details: None,
            });
        }
        let mut next = current.clone();
        set_at(&mut next, &paths.spec_replicas, replicas);
        let next = merge_write(res, &current, next, Part::Main);
        match commit_write(state, req, &kv, &current, next, Part::Main, &mut Vec::new()).await? {
            Ok(Written::Stored(o) | Written::Unchanged(o) | Written::Deleted(o)) => {
                return Ok(object_response(
                    &req.headers,
                    StatusCode::OK,
                    &scale_of(&o, &paths),
                ))
            }
            Err(StoreError::Conflict { .. }) if precondition.is_none() => continue,
            Err(e) => return Err(ApiError::from_store(e, res, &name)),
        }
    }
    Err(ApiError::modified(res, &name))
}
