//! `POST .../pods/{name}/binding` and `POST .../namespaces/{ns}/bindings`
//! (the Binding naming its pod): assigns a pod to a node, as
//! kube-apiserver's `BindingREST` does. The scheduler's only write to a
//! pod's spec: `spec.nodeName` is set once (a bound pod answers 409), the
//! binding's annotations are copied onto the pod, and the pod's
//! PodScheduled condition turns True.

use axum::response::Response;
use bosun::time::now_rfc3339;
use http::StatusCode;
use serde_json::{json, Value};

use super::decode::decode_body;
use super::error::{ApiError, ApiResult};
use super::object::{self, meta_str, metadata_mut};
use super::request::MAX_ATTEMPTS;
use super::{json_response, ApiRequest, ApiState};
use crate::store::StoreError;

fn conflict(name: &str, why: String) -> ApiError {
    ApiError {
        code: 409,
        reason: "Conflict",
        message: format!("Operation cannot be fulfilled on pods/binding \"{name}\": {why}"),
        details: Some(json!({"name": name, "kind": "pods/binding"})),
    }
}

/// The node a Binding names, after checking it is one.
fn target_node(binding: &Value, name: &str) -> ApiResult<String> {
    match meta_str(binding, "name") {
        Some(n) if n == name => {}
        Some(n) if !n.is_empty() => {
            return Err(ApiError::bad_request(format!(
                "the name of the binding ({n}) does not match the name on the URL ({name})"
            )))
        }
        _ => {}
    }
    let kind = binding
        .pointer("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !kind.is_empty() && kind != "Node" {
        return Err(invalid_binding(
            name,
            format!("target.kind: Unsupported value: \"{kind}\": supported values: \"Node\""),
        ));
    }
    match binding.pointer("/target/name").and_then(Value::as_str) {
        Some(node) if !node.is_empty() => Ok(node.to_string()),
        _ => Err(invalid_binding(
            name,
            "target.name: Required value".to_string(),
        )),
    }
}

fn invalid_binding(name: &str, detail: String) -> ApiError {
    ApiError {
        code: 422,
        reason: "Invalid",
        message: format!("Binding \"{name}\" is invalid: {detail}"),
        details: Some(json!({"name": name, "kind": "Binding"})),
    }
}

/// The pod bound to `node`: nodeName, the binding's annotations and
/// PodScheduled=True.
fn bound(mut pod: Value, node: &str, annotations: Option<&Value>) -> Value {
    pod["spec"]["nodeName"] = json!(node);
    if let Some(Value::Object(extra)) = annotations {
        let md = metadata_mut(&mut pod);
        let target = md
            .entry("annotations")
            .or_insert_with(|| json!({}))
            .as_object_mut();
        if let Some(target) = target {
            for (k, v) in extra {
                target.insert(k.clone(), v.clone());
            }
        }
    }
    let now = now_rfc3339();
    let status = pod
        .as_object_mut()
        .expect("a pod is an object")
        .entry("status")
        .or_insert_with(|| json!({}));
    let conditions = status
        .as_object_mut()
        .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
    if let Some(Value::Array(conditions)) = conditions {
        match conditions.iter_mut().find(|c| c["type"] == "PodScheduled") {
            Some(c) => {
                if c["status"] != "True" {
                    c["lastTransitionTime"] = json!(now);
                }
                c["status"] = json!("True");
                if let Some(c) = c.as_object_mut() {
                    c.remove("reason");
                    c.remove("message");
                }
            }
            None => conditions.push(json!({
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": null,
                "lastTransitionTime": now,
            })),
        }
    }
    pod
}

pub async fn bind(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let name = req.target.name.as_deref().unwrap_or("");
    bind_pod(state, req, name, decode_body(req)?).await
}

/// `POST /api/v1/namespaces/{ns}/bindings`: the core `bindings` resource,
/// create-only; the Binding's own name is the pod's.
pub async fn create_binding(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let binding = decode_body(req)?;
    let name = meta_str(&binding, "name").unwrap_or("").to_string();
    if name.is_empty() {
        return Err(invalid_binding(
            "",
            "metadata.name: Required value: name or generateName is required".into(),
        ));
    }
    bind_pod(state, req, &name, binding).await
}

async fn bind_pod(
    state: &ApiState,
    req: &ApiRequest,
    name: &str,
    binding: Value,
) -> ApiResult<Response> {
    let res = bosun::resources::by_name("pods").expect("pods are served");
    let node = target_node(&binding, name)?;
    let uid = meta_str(&binding, "uid").filter(|u| !u.is_empty());
    let key = res.storage_key(req.target.namespace.as_deref(), name);
    for _ in 0..MAX_ATTEMPTS {
        let kv = state
            .store
            .get(&key)
            .await
            .map_err(|e| ApiError::from_store(e, res, name))?
            .ok_or_else(|| ApiError::not_found(res, name))?;
        let pod = object::from_store(&kv)?;
        if let Some(uid) = uid {
            if meta_str(&pod, "uid") != Some(uid) {
                return Err(conflict(
                    name,
                    format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        meta_str(&pod, "uid").unwrap_or("")
                    ),
                ));
            }
        }
        if meta_str(&pod, "deletionTimestamp").is_some() {
            return Err(conflict(
                name,
                format!("pod {name} is being deleted, cannot be assigned to a host"),
            ));
        }
        let assigned = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !assigned.is_empty() {
            return Err(conflict(
                name,
                format!("pod {name} is already assigned to node \"{assigned}\""),
            ));
        }
        if req.param("dryRun") == Some("All") {
            return Ok(success());
        }
        let next = bound(pod, &node, binding.pointer("/metadata/annotations"));
        match state
            .store
            .update(&kv.key, kv.mod_revision, object::to_store(&next))
            .await
        {
            Ok(_) => return Ok(success()),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(ApiError::from_store(e, res, name)),
        }
    }
    Err(ApiError::modified(res, name))
}

/// What kube-apiserver answers a binding with: a `Status` of success.
fn success() -> Response {
    json_response(StatusCode::CREATED, &bosun::serving::success_status(201))
}
