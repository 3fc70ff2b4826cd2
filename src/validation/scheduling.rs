//! scheduling.k8s.io/v1: PriorityClass (`ValidatePriorityClass`,
//! `ValidatePriorityClassUpdate`), and the two system classes every
//! cluster has (`SystemPriorityClasses`).

use serde_json::{json, Value};

use super::{get, int_of, str_of, FieldError};

/// Names with this prefix are reserved for the system classes.
pub const SYSTEM_PRIORITY_CLASS_PREFIX: &str = "system-";
/// The highest value a user's class may have.
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;
/// `system-cluster-critical`'s value.
pub const SYSTEM_CRITICAL_PRIORITY: i64 = 2 * HIGHEST_USER_DEFINABLE_PRIORITY;
pub const SYSTEM_CLUSTER_CRITICAL: &str = "system-cluster-critical";
pub const SYSTEM_NODE_CRITICAL: &str = "system-node-critical";
/// The preemption policies a class or a pod may have.
pub const PREEMPTION_POLICIES: [&str; 2] = ["PreemptLowerPriority", "Never"];

/// The system classes: (name, value, description), none the global default.
pub const SYSTEM_PRIORITY_CLASSES: [(&str, i64, &str); 2] = [
    (
        SYSTEM_NODE_CRITICAL,
        SYSTEM_CRITICAL_PRIORITY + 1000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        SYSTEM_CLUSTER_CRITICAL,
        SYSTEM_CRITICAL_PRIORITY,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

/// A system class as the API server creates it at start (without uid and
/// creation time).
pub fn system_priority_class(name: &str, value: i64, description: &str) -> Value {
    json!({
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "description": description,
        "preemptionPolicy": "PreemptLowerPriority",
    })
}

/// `IsKnownSystemPriorityClass`: why a `system-` name is refused, if it is.
fn known_system_class(name: &str, value: i64, global_default: bool) -> Result<(), String> {
    let Some((n, v, _)) = SYSTEM_PRIORITY_CLASSES.iter().find(|(n, ..)| *n == name) else {
        return Err(format!("{name} is not a known system priority class"));
    };
    if *v != value {
        return Err(format!("value of {n} PriorityClass must be {v}"));
    }
    if global_default {
        return Err(format!("globalDefault of {n} PriorityClass must be false"));
    }
    Ok(())
}

pub(crate) fn validate_priority_class(
    obj: &Value,
    old: Option<&Value>,
    errs: &mut Vec<FieldError>,
) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let value = int_of(obj, "value").unwrap_or(0);
    let global_default = get(obj, "globalDefault")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if name.starts_with(SYSTEM_PRIORITY_CLASS_PREFIX) {
        if let Err(why) = known_system_class(name, value, global_default) {
            errs.push(FieldError::forbidden(
                "metadata.name",
                format!(
                    "priority class names with '{SYSTEM_PRIORITY_CLASS_PREFIX}' prefix are reserved for system use only. error: {why}"
                ),
            ));
        }
    } else if value > HIGHEST_USER_DEFINABLE_PRIORITY {
        errs.push(FieldError::forbidden(
            "value",
            format!("maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"),
        ));
    }
    if let Some(policy) = get(obj, "preemptionPolicy").and_then(Value::as_str) {
        validate_preemption_policy(policy, "preemptionPolicy", errs);
    }
    let Some(old) = old else { return };
    if int_of(old, "value").unwrap_or(0) != value {
        errs.push(FieldError::forbidden(
            "value",
            "may not be changed in an update.",
        ));
    }
    let policy = get(obj, "preemptionPolicy");
    if policy != get(old, "preemptionPolicy") {
        errs.push(FieldError::immutable(
            "preemptionPolicy",
            policy.cloned().unwrap_or(Value::Null),
        ));
    }
}

/// `ValidatePreemptionPolicy`.
pub(crate) fn validate_preemption_policy(policy: &str, field: &str, errs: &mut Vec<FieldError>) {
    if !PREEMPTION_POLICIES.contains(&policy) {
        errs.push(FieldError::not_supported(
            field,
            policy,
            &PREEMPTION_POLICIES,
        ));
    }
}

/// The class's value and preemption policy (defaulted).
pub fn class_priority(class: &Value) -> (i64, String) {
    let value = int_of(class, "value").unwrap_or(0);
    let policy = str_of(class, "preemptionPolicy");
    let policy = if policy.is_empty() {
        "PreemptLowerPriority"
    } else {
        policy
    };
    (value, policy.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, value: i64, extra: Value) -> Value {
        let mut v = json!({"metadata": {"name": name}, "value": value});
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        v
    }

    fn messages(obj: &Value, old: Option<&Value>) -> Vec<String> {
        let mut errs = Vec::new();
        validate_priority_class(obj, old, &mut errs);
        errs.iter().map(FieldError::message).collect()
    }

    // Upstream's TestValidatePriorityClass and TestValidatePriorityClassUpdate.
    #[test]
    fn priority_class_cases() {
        let ok = [
            class(
                "tier1",
                100,
                json!({"description": "Used for the highest priority pods."}),
            ),
            class(SYSTEM_NODE_CRITICAL, 2_000_001_000, json!({})),
            class(SYSTEM_CLUSTER_CRITICAL, 2_000_000_000, json!({})),
            class("tier1", 1_000_000_000, json!({"preemptionPolicy": "Never"})),
            class(
                "tier1",
                -5,
                json!({"preemptionPolicy": "PreemptLowerPriority"}),
            ),
        ];
        for c in &ok {
            assert_eq!(messages(c, None), Vec::<String>::new(), "{c}");
        }
        let bad = [
            (
                class("system-something", 100, json!({})),
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-something is not a known system priority class",
            ),
            (
                class(SYSTEM_NODE_CRITICAL, 100, json!({})),
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: value of system-node-critical PriorityClass must be 2000001000",
            ),
            (
                class(SYSTEM_CLUSTER_CRITICAL, 2_000_000_000, json!({"globalDefault": true})),
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: globalDefault of system-cluster-critical PriorityClass must be false",
            ),
            (
                class("tier1", 1_000_000_001, json!({})),
                "value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
            ),
            (
                class("tier1", 1, json!({"preemptionPolicy": "Sometimes"})),
                "preemptionPolicy: Unsupported value: \"Sometimes\": supported values: \"PreemptLowerPriority\", \"Never\"",
            ),
        ];
        for (c, want) in &bad {
            assert_eq!(messages(c, None), vec![want.to_string()], "{c}");
        }
    }

    #[test]
    fn value_and_policy_are_immutable() {
        let old = class(
            "tier1",
            100,
            json!({"preemptionPolicy": "PreemptLowerPriority"}),
        );
        let described = class(
            "tier1",
            100,
            json!({"preemptionPolicy": "PreemptLowerPriority", "description": "new", "globalDefault": true}),
        );
        assert!(messages(&described, Some(&old)).is_empty());
        let revalued = class(
            "tier1",
            101,
            json!({"preemptionPolicy": "PreemptLowerPriority"}),
        );
        assert_eq!(
            messages(&revalued, Some(&old)),
            vec!["value: Forbidden: may not be changed in an update.".to_string()]
        );
        let never = class("tier1", 100, json!({"preemptionPolicy": "Never"}));
        assert_eq!(
            messages(&never, Some(&old)),
            vec!["preemptionPolicy: Invalid value: \"Never\": field is immutable".to_string()]
        );
    }
}
