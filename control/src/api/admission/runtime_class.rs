//! RuntimeClass admission, as kube-apiserver's `RuntimeClass` plugin, on
//! pod creates only: a pod's `runtimeClassName` must name a RuntimeClass;
//! the class's `overhead.podFixed` becomes the pod's `spec.overhead` (a
//! pod that sets a different overhead is refused); the class's
//! `scheduling.nodeSelector` is merged into the pod's (a conflicting key
//! is refused) and its tolerations merged with the pod's. The validating
//! half refuses an overhead no class defined (a webhook may have set it).

use bosun::quantity::parse_quantity;
use bosun::resources::ResourceInfo;
use serde_json::{Map, Value};

use crate::api::error::{ApiError, ApiResult};
use crate::api::object;
use crate::api::request::name_of;
use crate::api::{ApiRequest, ApiState};

fn classes_res() -> &'static ResourceInfo {
    bosun::resources::by_name("runtimeclasses").expect("served")
}

fn is_pod_create(req: &ApiRequest, old: Option<&Value>) -> bool {
    let res = req.target.res;
    old.is_none() && res.group.is_empty() && res.kind == "Pod" && req.target.subresource.is_none()
}

fn forbidden(req: &ApiRequest, obj: &Value, why: &str) -> ApiError {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_else(|| name_of(req));
    ApiError::forbidden(format!(
        "{} \"{name}\" is forbidden: {why}",
        req.target.res.plural_group()
    ))
}

/// The pod's RuntimeClass (`prepareObjects`): None when it names none; a
/// refusal when the class does not exist.
async fn runtime_class(
    state: &ApiState,
    req: &ApiRequest,
    pod: &Value,
) -> ApiResult<Option<Value>> {
    let name = pod
        .pointer("/spec/runtimeClassName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() {
        return Ok(None);
    }
    let res = classes_res();
    match state.store.get(&res.storage_key(None, name)).await {
        Ok(Some(kv)) => Ok(Some(object::from_store(&kv)?)),
        Ok(None) => Err(forbidden(
            req,
            pod,
            &format!("pod rejected: RuntimeClass \"{name}\" not found"),
        )),
        Err(e) => Err(ApiError::from_store(e, res, name)),
    }
}

/// `apiequality.Semantic.DeepEqual` of two resource lists: the same names,
/// quantities equal by value (`1` and `1000m` are equal).
fn same_resources(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a.is_null() && b.is_null();
    };
    a.len() == b.len()
        && a.iter().all(|(k, q)| {
            let parse = |v: &Value| v.as_str().and_then(|s| parse_quantity(s).ok());
            match (parse(q), b.get(k).and_then(parse)) {
                (Some(x), Some(y)) => x == y,
                _ => false,
            }
        })
}

const OVERHEAD_MISMATCH: &str =
    "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead";

/// Fills the pod's overhead, node selector and tolerations from its
/// RuntimeClass (`setOverhead`, `setScheduling`). Runs before validation.
pub(super) async fn admit(
    state: &ApiState,
    req: &ApiRequest,
    obj: &mut Value,
    old: Option<&Value>,
) -> ApiResult<()> {
    if !is_pod_create(req, old) {
        return Ok(());
    }
    let Some(class) = runtime_class(state, req, obj).await? else {
        return Ok(());
    };
    let mut spec = obj
        .get("spec")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if let Some(fixed) = class.pointer("/overhead/podFixed").filter(|v| !v.is_null()) {
        let given = spec
            .get("overhead")
            .filter(|o| o.as_object().is_some_and(|m| !m.is_empty()));
        if given.is_some_and(|g| !same_resources(g, fixed)) {
            return Err(forbidden(req, obj, OVERHEAD_MISMATCH));
        }
        spec.insert("overhead".into(), fixed.clone());
    }
    if let Some(scheduling) = class.get("scheduling").filter(|v| !v.is_null()) {
        if let Err(why) = set_scheduling(&mut spec, scheduling) {
            return Err(forbidden(req, obj, &why));
        }
    }
    obj["spec"] = Value::Object(spec);
    Ok(())
}

/// Merges the class's node selector (a key the pod sets differently is a
/// conflict) and tolerations into the pod's spec.
fn set_scheduling(spec: &mut Map<String, Value>, scheduling: &Value) -> Result<(), String> {
    if let Some(wanted) = scheduling
        .get("nodeSelector")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
    {
        let selector = spec
            .entry("nodeSelector")
            .or_insert_with(|| Value::Object(Map::new()));
        if !selector.is_object() {
            *selector = Value::Object(Map::new());
        }
        let selector = selector.as_object_mut().expect("an object");
        for (key, class_value) in wanted {
            if let Some(pod_value) = selector.get(key).filter(|v| *v != class_value) {
                return Err(format!(
                    "conflict: runtimeClass.scheduling.nodeSelector[{key:?}] = {}; pod.spec.nodeSelector[{key:?}] = {}",
                    class_value.as_str().unwrap_or_default(),
                    pod_value.as_str().unwrap_or_default()
                ));
            }
            selector.insert(key.clone(), class_value.clone());
        }
    }
    let extra = scheduling
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let own = spec
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let merged = merge_tolerations(&own, &extra);
    if !merged.is_empty() {
        spec.insert("tolerations".into(), Value::Array(merged));
    }
    Ok(())
}

/// `tolerations.MergeTolerations`: both lists, without a toleration that
/// another one kept (or a later different one) covers.
fn merge_tolerations(first: &[Value], second: &[Value]) -> Vec<Value> {
    let all: Vec<&Value> = first.iter().chain(second).collect();
    let mut merged: Vec<Value> = Vec::new();
    'next: for (i, t) in all.iter().enumerate() {
        if merged.iter().any(|kept| is_superset(kept, t)) {
            continue;
        }
        for later in &all[i + 1..] {
            if later != t && is_superset(later, t) {
                continue 'next;
            }
        }
        merged.push((*t).clone());
    }
    merged
}

/// `isSuperset`: whether toleration `ss` tolerates everything `t` does.
fn is_superset(ss: &Value, t: &Value) -> bool {
    if ss == t {
        return true;
    }
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (ss_key, ss_op, ss_effect) = (s(ss, "key"), s(ss, "operator"), s(ss, "effect"));
    if s(t, "key") != ss_key && (!ss_key.is_empty() || ss_op != "Exists") {
        return false;
    }
    if s(t, "effect") != ss_effect && !ss_effect.is_empty() {
        return false;
    }
    if ss_effect == "NoExecute" {
        if let Some(limit) = ss.get("tolerationSeconds").and_then(Value::as_i64) {
            match t.get("tolerationSeconds").and_then(Value::as_i64) {
                Some(secs) if secs <= limit => {}
                _ => return false,
            }
        }
    }
    match ss_op.as_str() {
        "" | "Equal" => {
            matches!(s(t, "operator").as_str(), "" | "Equal") && s(t, "value") == s(ss, "value")
        }
        "Exists" => true,
        _ => false,
    }
}

/// Refuses a new pod whose overhead is not its class's (`validateOverhead`).
pub(super) async fn validate(
    state: &ApiState,
    req: &ApiRequest,
    obj: &Value,
    old: Option<&Value>,
) -> ApiResult<()> {
    if !is_pod_create(req, old) {
        return Ok(());
    }
    let class = runtime_class(state, req, obj).await?;
    let fixed = class
        .as_ref()
        .and_then(|c| c.pointer("/overhead/podFixed"))
        .filter(|v| !v.is_null());
    let given = obj.pointer("/spec/overhead").filter(|v| !v.is_null());
    match (fixed, given) {
        (Some(fixed), given) if !same_resources(fixed, given.unwrap_or(&Value::Null)) => {
            Err(forbidden(req, obj, OVERHEAD_MISMATCH))
        }
        (None, Some(_)) => Err(forbidden(
            req,
            obj,
            "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[path = "runtime_class_tests.rs"]
mod tests;
