//! The ClusterRole aggregation controller (kube-controller-manager's
//! `clusterrole-aggregation`): a ClusterRole with an `aggregationRule`
//! holds the rules of every other ClusterRole its selectors match, kept
//! in step as those change. This is how `admin`, `edit` and `view` grow
//! when a CRD's chart ships a role labelled `aggregate-to-view`.

use std::collections::BTreeMap;
use std::sync::Arc;

use bosun::selector::LabelSelector;
use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::Controller;
use kube::{Client, ResourceExt};

use crate::toolkit::{run_controller, synced, Shared};

pub type Error = crate::toolkit::api_errors::ApiError;

pub struct Context {
    pub client: Client,
    pub roles: Store<ClusterRole>,
}

pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    let informers = &shared.informers;
    let roles = informers.store::<ClusterRole>();
    let ctx = Arc::new(Context {
        client: shared.client_for("clusterrole-aggregation"),
        roles: roles.clone(),
    });
    // Any change to any ClusterRole may change what an aggregated one
    // gathers: every aggregated role is looked at again.
    let aggregated = roles.clone();
    let controller = Controller::for_shared_stream(informers.subscribe::<ClusterRole>(), roles)
        .watches_shared_stream(informers.subscribe::<ClusterRole>(), move |_| {
            aggregating(&aggregated)
        })
        .watches_stream(informers.deleted::<ClusterRole>(), {
            let roles = ctx.roles.clone();
            move |_| aggregating(&roles)
        });
    run_controller("clusterrole-aggregation", controller, ctx, reconcile).boxed()
}

fn aggregating(roles: &Store<ClusterRole>) -> Vec<ObjectRef<ClusterRole>> {
    roles
        .state()
        .iter()
        .filter(|r| r.aggregation_rule.is_some())
        .map(|r| ObjectRef::from_obj(r.as_ref()))
        .collect()
}

/// The rules `role` gathers from `all`: those of every other role one of
/// its selectors matches, in name order, each rule once.
pub fn gathered(role: &ClusterRole, all: &[Arc<ClusterRole>]) -> Vec<PolicyRule> {
    let selectors: Vec<LabelSelector> = role
        .aggregation_rule
        .iter()
        .flat_map(|a| a.cluster_role_selectors.iter().flatten())
        .filter_map(|s| LabelSelector::from_label_selector(s).ok())
        .collect();
    let mut sources: Vec<&Arc<ClusterRole>> = all
        .iter()
        .filter(|r| r.name_any() != role.name_any())
        .filter(|r| {
            let empty = BTreeMap::new();
            let labels = r.metadata.labels.as_ref().unwrap_or(&empty);
            selectors.iter().any(|s| s.matches(labels))
        })
        .collect();
    sources.sort_by_key(|r| r.name_any());
    let mut rules: Vec<PolicyRule> = Vec::new();
    for r in sources.iter().flat_map(|r| r.rules.iter().flatten()) {
        if !rules.contains(r) {
            rules.push(r.clone());
        }
    }
    rules
}

async fn reconcile(role: Arc<ClusterRole>, ctx: Arc<Context>) -> Result<Action, Error> {
    if role.aggregation_rule.is_none() {
        return Ok(Action::await_change());
    }
    synced(&ctx.roles).await;
    let rules = gathered(&role, &ctx.roles.state());
    if role.rules.as_deref().unwrap_or(&[]) == rules.as_slice() {
        return Ok(Action::await_change());
    }
    let mut next = role.as_ref().clone();
    next.rules = Some(rules);
    let api: Api<ClusterRole> = Api::all(ctx.client.clone());
    // An update carrying the resourceVersion read: a stale cache is a
    // conflict, and the next event brings the role back here.
    api.replace(&role.name_any(), &PostParams::default(), &next)
        .await?;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests;
