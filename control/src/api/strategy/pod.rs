//! Pods: they start Pending with their QoS class, and only a pod a node
//! runs needs time to stop when deleted.

use serde_json::{json, Value};

use super::Strategy;
use crate::api::object;

pub struct PodStrategy;

impl Strategy for PodStrategy {
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
