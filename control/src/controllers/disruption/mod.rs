//! The disruption controller, as kube-controller-manager's
//! (`pkg/controller/disruption`): keeps each PodDisruptionBudget's status
//! (how many selected pods are healthy, how many must be, how many may be
//! disrupted now), which the eviction subresource spends.
//!
//! One sync of a budget (`trySync`):
//! 1. its pods: those of its namespace its selector matches (a missing
//!    selector matches none, an empty one all);
//! 2. the expected count and the healthy count it needs ([`budget`]): a
//!    number in `minAvailable` counts the pods; a percentage, or
//!    `maxUnavailable`, counts the scale of the pods' controllers
//!    (a Deployment's through its ReplicaSets, a ReplicaSet's, a
//!    StatefulSet's, or any kind's scale subresource); pods without a
//!    controller are then left out, with an `UnmanagedPods` event;
//! 3. the evictions not yet confirmed (`disruptedPods`), dropped once
//!    their pod is being deleted or after two minutes;
//! 4. the Ready pods neither being deleted nor just evicted;
//! 5. the status, written over the version read (an eviction may have
//!    spent a disruption meanwhile), with the `DisruptionAllowed`
//!    condition; when the numbers cannot be worked out, no disruption is
//!    allowed (`SyncFailed`).
//!
//! The arithmetic is [`bosun::disruption::budget`]; the other half,
//! what the eviction subresource decides from a pod and the budgets of
//! its namespace, is [`bosun::disruption::eviction`].

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::Controller;
use kube::{Client, ResourceExt};
use serde_json::Value;

use bosun::events::{reference_to, EventRecorder, EventType};
use bosun::selector::LabelSelector;

use crate::toolkit::api_errors::{is_status, message_of};
use crate::toolkit::{controller_of, run_controller, synced, Clock, Shared};
use bosun::disruption::budget::{self, ControllerScale};
use bosun::disruption::eviction;

/// Every budget is synced this often even without a change (upstream's
/// informer resync).
const RESYNC: Duration = Duration::from_secs(30);

const COMPONENT: &str = "controllermanager";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API: {0}")]
    Api(#[from] kube::Error),
}

/// What every sync needs.
pub struct Context {
    pub client: Client,
    pub pdbs: Store<PodDisruptionBudget>,
    pub pods: crate::toolkit::PodIndex,
    pub replica_sets: Store<ReplicaSet>,
    pub deployments: Store<Deployment>,
    pub stateful_sets: Store<StatefulSet>,
    pub clock: Arc<dyn Clock>,
    pub recorder: EventRecorder,
}

impl Context {
    /// Takes the caches it reads from `shared` (before the informers start).
    pub fn new(shared: &Shared) -> Context {
        let informers = &shared.informers;
        Context {
            client: shared.client_for("disruption"),
            pdbs: informers.store::<PodDisruptionBudget>(),
            pods: informers.pods(),
            replica_sets: informers.store::<ReplicaSet>(),
            deployments: informers.store::<Deployment>(),
            stateful_sets: informers.store::<StatefulSet>(),
            clock: shared.clock.clone(),
            recorder: shared.recorder(COMPONENT),
        }
    }
}

/// The budgets of `pod`'s namespace that select it.
fn budgets_of(pdbs: &Store<PodDisruptionBudget>, pod: &Pod) -> Vec<ObjectRef<PodDisruptionBudget>> {
    let all = pdbs.state();
    eviction::matching_budgets(pod, all.iter().map(|p| p.as_ref()))
        .into_iter()
        .map(ObjectRef::from_obj)
        .collect()
}

/// Sets up the controller on the shared caches; the returned future runs it.
pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    let ctx = Arc::new(Context::new(shared));
    let informers = &shared.informers;
    let (on_change, on_delete) = (ctx.pdbs.clone(), ctx.pdbs.clone());
    let controller = Controller::for_shared_stream(
        informers.subscribe::<PodDisruptionBudget>(),
        ctx.pdbs.clone(),
    )
    .watches_shared_stream(informers.subscribe::<Pod>(), move |pod: Arc<Pod>| {
        budgets_of(&on_change, &pod)
    })
    .watches_stream(informers.deleted::<Pod>(), move |pod: Pod| {
        budgets_of(&on_delete, &pod)
    })
    .reconcile_all_on(
        tokio_stream::wrappers::IntervalStream::new(tokio::time::interval(RESYNC)).map(|_| ()),
    );
    run_controller("disruption", controller, ctx, reconcile).boxed()
}

/// The controller's reconcile: waits for the caches' first lists, then
/// syncs the budget.
pub async fn reconcile(pdb: Arc<PodDisruptionBudget>, ctx: Arc<Context>) -> Result<Action, Error> {
    synced(ctx.pods.store()).await;
    synced(&ctx.replica_sets).await;
    synced(&ctx.deployments).await;
    synced(&ctx.stateful_sets).await;
    let recheck = sync(&pdb, &ctx).await?;
    Ok(Action::requeue(recheck.map_or(RESYNC, |r| r.min(RESYNC))))
}

/// The pods `pdb` selects.
pub fn pods_of(pods: &crate::toolkit::PodIndex, pdb: &PodDisruptionBudget) -> Vec<Arc<Pod>> {
    let Ok(selector) =
        LabelSelector::from_optional(pdb.spec.as_ref().and_then(|s| s.selector.as_ref()))
    else {
        return Vec::new();
    };
    let ns = pdb.namespace().unwrap_or_default();
    pods.in_namespace(&ns)
        .into_iter()
        .filter(|p| selector.matches(p.labels()))
        .collect()
}

/// One sync; returns when the budget must be looked at again (a recorded
/// eviction timing out).
async fn sync(pdb: &PodDisruptionBudget, ctx: &Context) -> Result<Option<Duration>, Error> {
    match try_sync(pdb, ctx).await {
        Ok(recheck) => Ok(recheck),
        Err(SyncError::Api(e)) if is_status(&e, 409) => Err(e.into()),
        Err(e) => {
            let message = match &e {
                SyncError::Api(e) => message_of(e),
                SyncError::Failed(m) => m.clone(),
            };
            let status = budget::fail_safe(pdb, &message, ctx.clock.now());
            write_status(ctx, pdb, status).await?;
            Ok(None)
        }
    }
}

enum SyncError {
    Api(kube::Error),
    Failed(String),
}

async fn try_sync(pdb: &PodDisruptionBudget, ctx: &Context) -> Result<Option<Duration>, SyncError> {
    let pods = pods_of(&ctx.pods, pdb);
    if pods.is_empty() {
        event(
            ctx,
            pdb,
            EventType::Normal,
            "NoPods",
            "No matching pods found",
        );
    }
    let scales = if budget::needs_scales(pdb) {
        scales_of(ctx, &pods).await
    } else {
        HashMap::new()
    };
    let expected = match budget::expected_pod_count(pdb, &pods, &scales) {
        Ok(e) => e,
        Err(e) => {
            let note = format!("Failed to calculate the number of expected pods: {e}");
            event(
                ctx,
                pdb,
                EventType::Warning,
                "CalculateExpectedPodCountFailed",
                &note,
            );
            return Err(SyncError::Failed(e));
        }
    };
    if !expected.unmanaged.is_empty() {
        let selector = bosun::selector::format_label_selector_json(
            serde_json::to_value(pdb.spec.as_ref().and_then(|s| s.selector.as_ref()))
                .ok()
                .as_ref(),
        );
        let note = format!(
            "Pods selected by this PodDisruptionBudget (selector: {selector}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value."
        );
        event(ctx, pdb, EventType::Warning, "UnmanagedPods", &note);
    }
    let now = ctx.clock.now();
    let (disrupted, overdue, recheck) = budget::disrupted_pods(pdb, &pods, now);
    for name in overdue {
        tracing::info!(pdb = %pdb.name_any(), pod = %name, "pod was expected to be deleted but it wasn't, updating PDB");
    }
    let healthy = budget::count_healthy(&pods, &disrupted, now);
    let status = budget::status_of(pdb, healthy, &expected, disrupted, now);
    write_status(ctx, pdb, status)
        .await
        .map_err(SyncError::Api)?;
    Ok(recheck.map(|at| (at - now).to_std().unwrap_or_default() + Duration::from_secs(1)))
}

/// Writes `status` onto `pdb` when it changed, over the version read
/// (`UpdateStatus` with its resourceVersion, as upstream).
async fn write_status(
    ctx: &Context,
    pdb: &PodDisruptionBudget,
    status: PodDisruptionBudgetStatus,
) -> Result<(), kube::Error> {
    if pdb.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let mut next = pdb.clone();
    next.status = Some(status);
    let api: Api<PodDisruptionBudget> =
        Api::namespaced(ctx.client.clone(), &pdb.namespace().unwrap_or_default());
    match api
        .replace_status(&pdb.name_any(), &PostParams::default(), &next)
        .await
    {
        Err(e) if is_status(&e, 404) => Ok(()),
        other => other.map(drop),
    }
}

fn event(ctx: &Context, pdb: &PodDisruptionBudget, type_: EventType, reason: &str, note: &str) {
    ctx.recorder.record(&reference_to(pdb), type_, reason, note);
}

/// The scale of each pod's controller, by the uid of the pod's
/// controllerRef (upstream's finders: a ReplicaSet's Deployment, a
/// ReplicaSet, a StatefulSet, then any kind's scale subresource).
async fn scales_of(ctx: &Context, pods: &[Arc<Pod>]) -> HashMap<String, ControllerScale> {
    let mut out = HashMap::new();
    for pod in pods {
        let Some(owner) = controller_of(&pod.metadata) else {
            continue;
        };
        if out.contains_key(&owner.uid) {
            continue;
        }
        let ns = pod.namespace().unwrap_or_default();
        if let Some(scale) = scale_of(ctx, &ns, owner).await {
            out.insert(owner.uid.clone(), scale);
        }
    }
    out
}

fn cached<K: kube::Resource<DynamicType = ()> + Clone>(
    store: &Store<K>,
    ns: &str,
    owner: &OwnerReference,
) -> Option<Arc<K>> {
    store
        .get(&ObjectRef::new(&owner.name).within(ns))
        .filter(|o| o.meta().uid.as_deref() == Some(owner.uid.as_str()))
}

async fn scale_of(ctx: &Context, ns: &str, owner: &OwnerReference) -> Option<ControllerScale> {
    let group = owner.api_version.split_once('/').map_or("", |(g, _)| g);
    match (group, owner.kind.as_str()) {
        ("apps", "ReplicaSet") => {
            let rs = cached(&ctx.replica_sets, ns, owner)?;
            if let Some(parent) = controller_of(&rs.metadata).filter(|p| p.kind == "Deployment") {
                let d = cached(&ctx.deployments, ns, parent)?;
                return Some(ControllerScale {
                    uid: parent.uid.clone(),
                    replicas: d.spec.replicas.unwrap_or(1),
                });
            }
            Some(ControllerScale {
                uid: owner.uid.clone(),
                replicas: rs.spec.replicas.unwrap_or(1),
            })
        }
        ("apps", "StatefulSet") => {
            let set = cached(&ctx.stateful_sets, ns, owner)?;
            Some(ControllerScale {
                uid: owner.uid.clone(),
                replicas: set.spec.replicas.unwrap_or(1),
            })
        }
        _ => generic_scale(ctx, ns, owner).await,
    }
}

/// `getScaleController`: the owner's scale subresource, if its kind has
/// one and the Scale is of the same object (uid).
async fn generic_scale(ctx: &Context, ns: &str, owner: &OwnerReference) -> Option<ControllerScale> {
    let res = bosun::resources::by_kind(&owner.api_version, &owner.kind)
        .filter(|r| r.has_subresource("scale"))?;
    let path = format!(
        "{}/{}/scale",
        res.collection_path(Some(ns)),
        url::form_urlencoded::byte_serialize(owner.name.as_bytes()).collect::<String>()
    );
    let req = http::Request::get(&path).body(Vec::new()).ok()?;
    let text = ctx.client.request_text(req).await.ok()?;
    let scale: Value = serde_json::from_str(&text).ok()?;
    if scale.pointer("/metadata/uid").and_then(Value::as_str) != Some(owner.uid.as_str()) {
        return None;
    }
    Some(ControllerScale {
        uid: owner.uid.clone(),
        replicas: scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0) as i32,
    })
}
