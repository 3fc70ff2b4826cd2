//! Reconciling the bootstrap policy at start, as kube-apiserver's
//! `rbac/bootstrap-roles` post-start hook: missing roles and bindings are
//! created; existing ones annotated `rbac.authorization.kubernetes.io/
//! autoupdate: "true"` (or not annotated) get the rules, labels and
//! subjects they lack, keeping what users added; ones annotated `"false"`
//! are left as they are.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use kube::Client;

use super::policy::{self, AUTOUPDATE};
use super::rule;

fn autoupdate(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(AUTOUPDATE))
        .is_none_or(|v| v != "false")
}

fn merge_maps(
    have: &mut Option<std::collections::BTreeMap<String, String>>,
    want: &Option<std::collections::BTreeMap<String, String>>,
) -> bool {
    let mut changed = false;
    let have = have.get_or_insert_with(Default::default);
    for (k, v) in want.iter().flatten() {
        if !have.contains_key(k) {
            have.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    changed
}

async fn cluster_role(api: &Api<ClusterRole>, want: ClusterRole) -> kube::Result<()> {
    let name = want.metadata.name.clone().unwrap_or_default();
    let Some(mut have) = api.get_opt(&name).await? else {
        api.create(&PostParams::default(), &want).await?;
        tracing::info!(%name, "rbac: created the bootstrap cluster role");
        return Ok(());
    };
    if !autoupdate(&have.metadata) {
        return Ok(());
    }
    let mut changed = merge_maps(&mut have.metadata.labels, &want.metadata.labels);
    changed |= merge_maps(&mut have.metadata.annotations, &want.metadata.annotations);
    if want.aggregation_rule.is_some() && have.aggregation_rule != want.aggregation_rule {
        // The aggregation controller fills the rules of aggregated roles.
        have.aggregation_rule = want.aggregation_rule.clone();
        changed = true;
    }
    if want.aggregation_rule.is_none() {
        let rules = have.rules.get_or_insert_with(Vec::new);
        let missing = rule::uncovered(rules, want.rules.as_deref().unwrap_or(&[]));
        if !missing.is_empty() {
            for r in want.rules.iter().flatten() {
                if !rule::uncovered(rules, std::slice::from_ref(r)).is_empty() {
                    rules.push(r.clone());
                }
            }
            changed = true;
        }
    }
    if changed {
        api.replace(&name, &PostParams::default(), &have).await?;
        tracing::info!(%name, "rbac: reconciled the bootstrap cluster role");
    }
    Ok(())
}

async fn cluster_role_binding(
    api: &Api<ClusterRoleBinding>,
    want: ClusterRoleBinding,
) -> kube::Result<()> {
    let name = want.metadata.name.clone().unwrap_or_default();
    let Some(mut have) = api.get_opt(&name).await? else {
        api.create(&PostParams::default(), &want).await?;
        return Ok(());
    };
    if !autoupdate(&have.metadata) {
        return Ok(());
    }
    if have.role_ref != want.role_ref {
        // roleRef cannot change: upstream deletes and recreates.
        api.delete(&name, &DeleteParams::default()).await?;
        api.create(&PostParams::default(), &want).await?;
        return Ok(());
    }
    let mut changed = merge_maps(&mut have.metadata.labels, &want.metadata.labels);
    changed |= merge_maps(&mut have.metadata.annotations, &want.metadata.annotations);
    let subjects = have.subjects.get_or_insert_with(Vec::new);
    for s in want.subjects.iter().flatten() {
        if !subjects.contains(s) {
            subjects.push(s.clone());
            changed = true;
        }
    }
    if changed {
        api.replace(&name, &PostParams::default(), &have).await?;
    }
    Ok(())
}

/// Creates or completes every bootstrap role and binding.
pub async fn bootstrap(client: &Client) -> kube::Result<()> {
    let roles: Api<ClusterRole> = Api::all(client.clone());
    for want in policy::cluster_roles() {
        cluster_role(&roles, want).await?;
    }
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    for want in policy::cluster_role_bindings() {
        cluster_role_binding(&bindings, want).await?;
    }
    Ok(())
}
