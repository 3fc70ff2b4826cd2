//! SetDefaults of admissionregistration.k8s.io/v1's webhooks: failure
//! policy Fail, match policy Equivalent, empty (match-everything)
//! namespace and object selectors, a 10 s timeout, reinvocation Never on
//! mutating webhooks, rules of any scope, service port 443. `sideEffects`
//! and `admissionReviewVersions` have no default in v1.
//!
//! ValidatingAdmissionPolicy (`SetDefaults_ValidatingAdmissionPolicySpec`,
//! `SetDefaults_MatchResources`): failure policy Fail, and its match
//! constraints (a binding's match resources too) match policy Equivalent,
//! empty selectors, rules of any scope. A binding's `paramRef` has no
//! default (`parameterNotFoundAction` is required).

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

/// Defaults a ValidatingAdmissionPolicy.
pub(super) fn default_policy(root: &mut Map<String, Value>) {
    let Some(Value::Object(spec)) = root.get_mut("spec") else {
        return;
    };
    set_str(spec, "failurePolicy", "Fail");
    if let Some(Value::Object(m)) = spec.get_mut("matchConstraints") {
        default_match_resources(m);
    }
}

/// Defaults a ValidatingAdmissionPolicyBinding.
pub(super) fn default_policy_binding(root: &mut Map<String, Value>) {
    let Some(Value::Object(spec)) = root.get_mut("spec") else {
        return;
    };
    if let Some(Value::Object(m)) = spec.get_mut("matchResources") {
        default_match_resources(m);
    }
}

fn default_match_resources(m: &mut Map<String, Value>) {
    set_str(m, "matchPolicy", "Equivalent");
    set(m, "namespaceSelector", json!({}));
    set(m, "objectSelector", json!({}));
    for key in ["resourceRules", "excludeResourceRules"] {
        for rule in array_at(m, key) {
            set_str(rule, "scope", "*");
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

    #[test]
    fn policy_defaults() {
        let mut root = json!({"spec": {"matchConstraints": {"resourceRules": [
            {"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
             "resources": ["deployments"]}]}}});
        default_policy(root.as_object_mut().unwrap());
        let s = &root["spec"];
        assert_eq!(s["failurePolicy"], "Fail");
        assert_eq!(s["matchConstraints"]["matchPolicy"], "Equivalent");
        assert_eq!(s["matchConstraints"]["namespaceSelector"], json!({}));
        assert_eq!(s["matchConstraints"]["resourceRules"][0]["scope"], "*");
        let mut binding = json!({"spec": {"policyName": "p", "validationActions": ["Deny"]}});
        default_policy_binding(binding.as_object_mut().unwrap());
        assert!(binding["spec"].get("matchResources").is_none());
    }
}
