//! The bricks the bootstrap policy is written with: rules on resources
//! and on URLs, as upstream's `rbacv1helpers.NewRule`.

use k8s_openapi::api::rbac::v1::PolicyRule;

pub(super) const READ: &[&str] = &["get", "list", "watch"];
pub(super) const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
pub(super) const READ_WRITE: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A rule on resources: `verbs` on `resources` of `groups`.
pub fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs),
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        ..Default::default()
    }
}

pub(super) fn named(mut r: PolicyRule, names: &[&str]) -> PolicyRule {
    r.resource_names = Some(strings(names));
    r
}

pub(super) fn urls(verbs: &[&str], paths: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs),
        non_resource_urls: Some(strings(paths)),
        ..Default::default()
    }
}

pub(super) fn events() -> PolicyRule {
    rule(
        &["create", "update", "patch"],
        &["", "events.k8s.io"],
        &["events"],
    )
}
