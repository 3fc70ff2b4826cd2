//! Escalation prevention, as the apiserver's RBAC registry: a user may
//! create or change a Role or ClusterRole only with rules they hold
//! themselves (or the `escalate` verb on it), and bind a role only if they
//! hold its rules (or the `bind` verb on it). Members of system:masters
//! may do both.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role, RoleRef};
use serde_json::Value;

use super::rule::{self, Request};
use super::{Rbac, GROUP};
use crate::auth::user::UserInfo;

/// `Ok` if `user` may write `obj` (a Role, ClusterRole, RoleBinding or
/// ClusterRoleBinding) as it is; otherwise upstream's message.
pub async fn check(rbac: &Rbac, user: &UserInfo, kind: &str, obj: &Value) -> Result<(), String> {
    if user.is_master() {
        return Ok(());
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    let namespace = obj["metadata"]["namespace"]
        .as_str()
        .filter(|n| !n.is_empty());
    let plural = match kind {
        "Role" => "roles",
        "ClusterRole" => "clusterroles",
        "RoleBinding" => "rolebindings",
        "ClusterRoleBinding" => "clusterrolebindings",
        _ => return Ok(()),
    };
    let forbidden = |why: String| format!("{plural}.{GROUP} {name:?} is forbidden: {why}");
    match kind {
        "Role" | "ClusterRole" => {
            let may_escalate = Request::Resource {
                verb: "escalate",
                group: GROUP,
                resource: plural,
                subresource: None,
                name,
            };
            if rbac.allows(user, &may_escalate, namespace).await {
                return Ok(());
            }
            if kind == "ClusterRole" {
                let role: ClusterRole = parse(obj)?;
                if role.aggregation_rule.is_some() {
                    let all = [super::policy::rule(&["*"], &["*"], &["*"])];
                    if !rule::uncovered(&held(rbac, user, None), &all).is_empty() {
                        return Err(forbidden(
                            "must have cluster-admin privileges to use the aggregationRule".into(),
                        ));
                    }
                }
                return no_escalation(rbac, user, None, role.rules.as_deref()).map_err(forbidden);
            }
            let role: Role = parse(obj)?;
            no_escalation(rbac, user, namespace, role.rules.as_deref()).map_err(forbidden)
        }
        _ => {
            let role_ref: RoleRef = serde_json::from_value(obj["roleRef"].clone())
                .map_err(|e| format!("roleRef: {e}"))?;
            let role_plural = if role_ref.kind == "Role" {
                "roles"
            } else {
                "clusterroles"
            };
            let may_bind = Request::Resource {
                verb: "bind",
                group: GROUP,
                resource: role_plural,
                subresource: None,
                name: &role_ref.name,
            };
            if rbac.allows(user, &may_bind, namespace).await {
                return Ok(());
            }
            let index = rbac.index();
            let rules = match (role_ref.kind.as_str(), namespace) {
                ("Role", Some(ns)) => index.role(ns, &role_ref.name).and_then(|r| r.rules.clone()),
                _ => index
                    .cluster_role(&role_ref.name)
                    .and_then(|r| r.rules.clone()),
            };
            let Some(rules) = rules else {
                return Err(forbidden(format!(
                    "{} {:?} not found",
                    role_plural.trim_end_matches('s'),
                    role_ref.name
                )));
            };
            no_escalation(rbac, user, namespace, Some(&rules)).map_err(forbidden)
        }
    }
}

fn parse<T: serde::de::DeserializeOwned>(obj: &Value) -> Result<T, String> {
    serde_json::from_value(obj.clone()).map_err(|e| e.to_string())
}

fn held(rbac: &Rbac, user: &UserInfo, namespace: Option<&str>) -> Vec<PolicyRule> {
    rbac.index().rules_for(user, namespace)
}

fn no_escalation(
    rbac: &Rbac,
    user: &UserInfo,
    namespace: Option<&str>,
    wanted: Option<&[PolicyRule]>,
) -> Result<(), String> {
    let missing = rule::uncovered(&held(rbac, user, namespace), wanted.unwrap_or(&[]));
    if missing.is_empty() {
        return Ok(());
    }
    let mut lines: Vec<String> = missing.iter().map(rule::compact).collect();
    lines.sort();
    lines.dedup();
    let groups = user
        .groups
        .iter()
        .map(|g| format!("{g:?}"))
        .collect::<Vec<_>>()
        .join(" ");
    Err(format!(
        "user {:?} (groups=[{groups}]) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        lines.join("\n")
    ))
}
