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

/// Whether a webhook's CEL `matchConditions` all hold for the request, as
/// upstream's matchconditions matcher: any false skips the webhook; all
/// true (or none) calls it; an error (a condition that does not compile or
/// fails to evaluate) is the webhook's failure, left to its failure policy.
/// The variables are `object`, `oldObject` (null when absent) and
/// `request` (operation, namespace, name, resource, subResource).
/// `authorizer` is not offered: a condition naming it does not compile.
pub fn match_conditions_allow(hook: &Hook, attrs: &Attributes<'_>) -> Result<bool, String> {
    if hook.match_conditions.is_empty() {
        return Ok(true);
    }
    let request = serde_json::json!({
        "operation": attrs.operation,
        "namespace": attrs.namespace,
        "name": attrs.object.or(attrs.old_object)
            .and_then(|o| o["metadata"]["name"].as_str())
            .unwrap_or_default(),
        "resource": {"group": attrs.res.group, "version": attrs.res.version,
                     "resource": attrs.res.plural},
        "subResource": attrs.subresource,
    });
    let null = Value::Null;
    let vars = [
        ("object", attrs.object.unwrap_or(&null)),
        ("oldObject", attrs.old_object.unwrap_or(&null)),
        ("request", &request),
    ];
    for (name, program) in &hook.match_conditions {
        let program = program
            .as_ref()
            .map_err(|e| format!("compiling match condition {name:?}: {e}"))?;
        match program.eval_bool(&vars) {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(e) => return Err(format!("evaluating match condition {name:?}: {e}")),
        }
    }
    Ok(true)
}
