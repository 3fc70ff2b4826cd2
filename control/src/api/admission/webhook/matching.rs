//! Which webhooks a request goes to, as upstream's webhook `predicates`:
//! a rule's operations, API groups, versions, resources (with
//! subresources: `pods/status`, `pods/*`, `*/status`, `*`, `*/*`) and
//! scope; the namespace selector (on the namespace's labels, or a
//! Namespace's own); the object selector (on the new or the old object's
//! labels); the match policy (Equivalent also matches the resource's
//! other served version); and `matchConditions` (CEL, see
//! [`match_conditions_allow`]).

use std::collections::BTreeMap;

use bosun::resources::ResourceInfo;
use k8s_openapi::api::admissionregistration::v1 as ar;
use serde_json::Value;

use super::configs::Hook;

/// What a request is, as the webhook predicates see it.
pub struct Attributes<'a> {
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: &'a str,
    pub res: &'static ResourceInfo,
    pub subresource: &'a str,
    /// The request's namespace; a Namespace's own name for a Namespace.
    pub namespace: &'a str,
    pub object: Option<&'a Value>,
    pub old_object: Option<&'a Value>,
}

/// Whether one rule covers `op` on `res`/`sub` in `namespace`.
pub fn rule_matches(
    rule: &ar::RuleWithOperations,
    op: &str,
    res: &ResourceInfo,
    sub: &str,
    namespace: &str,
) -> bool {
    let any =
        |list: &Option<Vec<String>>, v: &str| list.iter().flatten().any(|x| x == "*" || x == v);
    if !any(&rule.operations, op)
        || !any(&rule.api_groups, res.group)
        || !any(&rule.api_versions, res.version)
    {
        return false;
    }
    let resource_ok = rule.resources.iter().flatten().any(|r| {
        let (r_res, r_sub) = r.split_once('/').unwrap_or((r.as_str(), ""));
        (r_res == "*" || r_res == res.plural) && (r_sub == "*" || r_sub == sub)
    });
    if !resource_ok {
        return false;
    }
    // A Namespace is cluster-scoped even though its requests carry its
    // name as their namespace.
    let is_namespace = res.group.is_empty() && res.plural == "namespaces";
    match rule.scope.as_deref() {
        Some("Namespaced") => !is_namespace && !namespace.is_empty(),
        Some("Cluster") => is_namespace || namespace.is_empty(),
        _ => true,
    }
}

/// The version of the resource a hook's rules match the request in:
/// the request's own, or (matchPolicy Equivalent) the storage version of
/// the same resource. `None`: the hook does not apply.
pub fn matching_version(hook: &Hook, attrs: &Attributes<'_>) -> Option<&'static ResourceInfo> {
    let matches = |res: &ResourceInfo| {
        hook.rules
            .iter()
            .any(|r| rule_matches(r, attrs.operation, res, attrs.subresource, attrs.namespace))
    };
    if matches(attrs.res) {
        return Some(attrs.res);
    }
    if hook.exact {
        return None;
    }
    let storage = crate::api::storage_resource(attrs.res);
    (!std::ptr::eq(storage, attrs.res) && matches(storage)).then_some(storage)
}

pub fn labels_of(obj: Option<&Value>) -> BTreeMap<String, String> {
    obj.and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// The object selector on the new object's labels or the old one's.
pub fn object_selected(hook: &Hook, attrs: &Attributes<'_>) -> bool {
    if hook.object_selector.is_empty() {
        return true;
    }
    [attrs.object, attrs.old_object]
        .into_iter()
        .flatten()
        .any(|o| hook.object_selector.matches(&labels_of(Some(o))))
}

/// Whether the namespace selector needs the namespace's labels for this
/// request: a cluster-scoped object other than a Namespace always passes.
pub fn needs_namespace_labels(hook: &Hook, attrs: &Attributes<'_>) -> bool {
    !hook.namespace_selector.is_empty() && !attrs.namespace.is_empty()
}

/// The namespace selector on `labels` (the namespace's, or a Namespace
/// object's own).
pub fn namespace_selected(hook: &Hook, labels: &BTreeMap<String, String>) -> bool {
    hook.namespace_selector.matches(labels)
}

/// Where CEL `matchConditions` are evaluated. bosun has no CEL evaluator
/// for admission yet, so a webhook with conditions is treated as matching
/// (it is called, and may refuse what its conditions would have skipped).
///
/// TODO(issue 26, CEL): evaluate each condition with the CEL module
/// (`request`, `object`, `oldObject`, `authorizer` variables): all true
/// → call; any false → skip; an evaluation error → the failure policy.
pub fn match_conditions_allow(hook: &Hook, _attrs: &Attributes<'_>) -> bool {
    let _ = &hook.match_conditions;
    true
}
