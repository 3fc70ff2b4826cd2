//! SetDefaults of admissionregistration.k8s.io/v1's webhooks: failure
//! policy Fail, match policy Equivalent, empty (match-everything)
//! namespace and object selectors, a 10 s timeout, reinvocation Never on
//! mutating webhooks, rules of any scope, service port 443. `sideEffects`
//! and `admissionReviewVersions` have no default in v1.

use serde_json::{json, Map, Value};

use super::{array_at, object_at, set, set_str};

/// Defaults every webhook of a Validating- or MutatingWebhookConfiguration.
pub(super) fn default_webhooks(root: &mut Map<String, Value>, mutating: bool) {
    for hook in array_at(root, "webhooks") {
        set_str(hook, "failurePolicy", "Fail");
        set_str(hook, "matchPolicy", "Equivalent");
        set(hook, "namespaceSelector", json!({}));
        set(hook, "objectSelector", json!({}));
        set(hook, "timeoutSeconds", json!(10));
        if mutating {
            set_str(hook, "reinvocationPolicy", "Never");
        }
        for rule in array_at(hook, "rules") {
            set_str(rule, "scope", "*");
        }
        let cc = object_at(hook, "clientConfig");
        if let Some(Value::Object(svc)) = cc.get_mut("service") {
            set(svc, "port", json!(443));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_defaults() {
        let mut root = json!({"webhooks": [{
            "name": "a.b.c",
            "clientConfig": {"service": {"namespace": "n", "name": "s"}},
            "rules": [{"operations": ["*"]}],
        }]});
        default_webhooks(root.as_object_mut().unwrap(), true);
        let h = &root["webhooks"][0];
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["matchPolicy"], "Equivalent");
        assert_eq!(h["namespaceSelector"], json!({}));
        assert_eq!(h["objectSelector"], json!({}));
        assert_eq!(h["timeoutSeconds"], 10);
        assert_eq!(h["reinvocationPolicy"], "Never");
        assert_eq!(h["rules"][0]["scope"], "*");
        assert_eq!(h["clientConfig"]["service"]["port"], 443);
        assert!(h.get("sideEffects").is_none());
    }
}
