//! Which requests a policy's `matchConstraints` and a binding's
//! `matchResources` select, as upstream's policy `matching.Matcher`: the
//! namespace selector (a Namespace's own labels; other cluster-scoped
//! objects always pass), the object selector (the new or the old
//! object's labels), `excludeResourceRules` first, then `resourceRules`
//! with their `resourceNames` (none: every request), and the match
//! policy (Equivalent also matches the resource's storage version).

use std::collections::BTreeMap;

use bosun::resources::ResourceInfo;
use k8s_openapi::api::admissionregistration::v1 as ar;

use super::configs::Matcher;
use crate::api::admission::webhook::matching::{labels_of, rule_matches, Attributes};

fn as_rule(n: &ar::NamedRuleWithOperations) -> ar::RuleWithOperations {
    ar::RuleWithOperations {
        api_groups: n.api_groups.clone(),
        api_versions: n.api_versions.clone(),
        operations: n.operations.clone(),
        resources: n.resources.clone(),
        scope: n.scope.clone(),
    }
}

fn named_matches(
    n: &ar::NamedRuleWithOperations,
    res: &ResourceInfo,
    attrs: &Attributes<'_>,
    name: &str,
) -> bool {
    if !rule_matches(
        &as_rule(n),
        attrs.operation,
        res,
        attrs.subresource,
        attrs.namespace,
    ) {
        return false;
    }
    match n.resource_names.as_deref() {
        None | Some([]) => true,
        Some(names) => names.iter().any(|n| n == name),
    }
}

/// The version of the resource `rules` match the request in (the
/// request's own, or with Equivalent its storage version); None when no
/// rule does.
fn matching_version(
    rules: &[ar::NamedRuleWithOperations],
    exact: bool,
    attrs: &Attributes<'_>,
    name: &str,
) -> Option<&'static ResourceInfo> {
    if rules
        .iter()
        .any(|r| named_matches(r, attrs.res, attrs, name))
    {
        return Some(attrs.res);
    }
    if exact {
        return None;
    }
    let storage = crate::api::storage_resource(attrs.res);
    (!std::ptr::eq(storage, attrs.res)
        && rules.iter().any(|r| named_matches(r, storage, attrs, name)))
    .then_some(storage)
}

/// Whether `m` selects the request, and in which version. `ns_labels`:
/// the labels namespace selectors are matched against (the Namespace's
/// own for a Namespace), None for other cluster-scoped objects.
/// `all_when_no_rules`: a binding's match resources without resource
/// rules select everything its policy matched.
pub fn matches(
    m: &Matcher,
    attrs: &Attributes<'_>,
    name: &str,
    ns_labels: Option<&BTreeMap<String, String>>,
    all_when_no_rules: bool,
) -> Option<&'static ResourceInfo> {
    if let Some(labels) = ns_labels {
        if !m.namespace_selector.matches(labels) {
            return None;
        }
    }
    if !m.object_selector.is_empty()
        && ![attrs.object, attrs.old_object]
            .into_iter()
            .flatten()
            .any(|o| m.object_selector.matches(&labels_of(Some(o))))
    {
        return None;
    }
    if matching_version(&m.exclude_rules, m.exact, attrs, name).is_some() {
        return None;
    }
    if m.resource_rules.is_empty() && all_when_no_rules {
        return Some(attrs.res);
    }
    matching_version(&m.resource_rules, m.exact, attrs, name)
}
