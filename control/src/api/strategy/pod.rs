//! Pods: they start Pending with their QoS class, get the default
//! NoExecute tolerations for not-ready and unreachable nodes, and only a
//! pod a node runs needs time to stop when deleted. New pods run as a
//! service account ([`service_account`]).

use async_trait::async_trait;
use bosun::validation::FieldError;
use serde_json::{json, Value};

use super::{service_account, Strategy};
use crate::api::error::ApiResult;
use crate::api::{object, ApiOptions, ApiState};

use bosun::well_known::{
    TAINT_NOT_READY as NOT_READY_TAINT, TAINT_UNREACHABLE as UNREACHABLE_TAINT,
};

/// kube-apiserver's DefaultTolerationSeconds admission: a pod that does
/// not tolerate `not-ready` / `unreachable` NoExecute taints gets
/// tolerations for them with the server's default seconds, so its pods
/// are moved off a failed node after that long, not at once.
pub fn add_default_tolerations(options: &ApiOptions, pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let list = spec.entry("tolerations").or_insert_with(|| json!([]));
    if list.is_null() {
        *list = json!([]);
    }
    let Some(list) = list.as_array_mut() else {
        return;
    };
    // A toleration that already covers the taint, by key and effect (an
    // empty key with Exists covers every key; an empty effect every one).
    let covers = |t: &Value, key: &str| {
        let k = t["key"].as_str().unwrap_or("");
        let e = t["effect"].as_str().unwrap_or("");
        (k == key || (k.is_empty() && t["operator"] == "Exists"))
            && (e.is_empty() || e == "NoExecute")
    };
    for (key, seconds) in [
        (
            NOT_READY_TAINT,
            options.default_not_ready_toleration_seconds,
        ),
        (
            UNREACHABLE_TAINT,
            options.default_unreachable_toleration_seconds,
        ),
    ] {
        if !list.iter().any(|t| covers(t, key)) {
            list.push(json!({
                "key": key,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": seconds,
            }));
        }
    }
}

pub struct PodStrategy;

#[async_trait]
impl Strategy for PodStrategy {
    fn prepare_for_create(&self, options: &ApiOptions, pod: &mut Value) {
        add_default_tolerations(options, pod);
    }

    /// The service account and its token volume.
    async fn allocate(&self, state: &ApiState, pod: &mut Value) -> ApiResult<Vec<FieldError>> {
        service_account::admit(state, pod).await?;
        Ok(Vec::new())
    }

    fn initial_status(&self, obj: &Value) -> Option<Value> {
        Some(json!({
            "phase": "Pending",
            "qosClass": object::qos_class(obj.get("spec").unwrap_or(&Value::Null)),
        }))
    }

    /// An unbound or finished pod goes at once; a running one gets the
    /// requested grace period, else its own, else 30 s.
    fn deletion_grace(&self, obj: &Value, requested: Option<i64>) -> i64 {
        let bound = obj
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let finished = matches!(
            obj.pointer("/status/phase").and_then(Value::as_str),
            Some("Succeeded") | Some("Failed")
        );
        if !bound || finished {
            return 0;
        }
        requested
            .or_else(|| {
                obj.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(30)
            .max(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_get_default_tolerations_unless_they_have_their_own() {
        let options = ApiOptions {
            default_not_ready_toleration_seconds: 300,
            default_unreachable_toleration_seconds: 20,
            ..Default::default()
        };
        let mut pod = json!({"spec": {"containers": []}});
        add_default_tolerations(&options, &mut pod);
        assert_eq!(
            pod["spec"]["tolerations"],
            json!([
                {"key": NOT_READY_TAINT, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 20},
            ])
        );
        // Applying it twice adds nothing.
        let once = pod.clone();
        add_default_tolerations(&options, &mut pod);
        assert_eq!(pod, once);

        // A pod's own toleration for a key is kept as it is; a
        // tolerate-everything toleration covers both.
        let own = json!({"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5});
        let mut pod = json!({"spec": {"tolerations": [own.clone()]}});
        add_default_tolerations(&options, &mut pod);
        assert_eq!(pod["spec"]["tolerations"].as_array().unwrap().len(), 2);
        assert_eq!(pod["spec"]["tolerations"][0], own);
        let mut pod = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
        add_default_tolerations(&options, &mut pod);
        assert_eq!(pod["spec"]["tolerations"], json!([{"operator": "Exists"}]));
    }

    #[test]
    fn only_running_pods_get_a_grace_period() {
        let pods = PodStrategy;
        let unbound = json!({"spec": {}});
        assert_eq!(pods.deletion_grace(&unbound, Some(30)), 0);
        let bound = json!({"spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 5},
            "status": {"phase": "Running"}});
        assert_eq!(pods.deletion_grace(&bound, None), 5);
        assert_eq!(pods.deletion_grace(&bound, Some(0)), 0);
        let done = json!({"spec": {"nodeName": "n1"}, "status": {"phase": "Succeeded"}});
        assert_eq!(pods.deletion_grace(&done, None), 0);
    }
}
