//! The DaemonSet controller, as kube-controller-manager's
//! (`pkg/controller/daemon`): one pod of each set on every node that
//! should run it, none elsewhere.
//!
//! - [`placement`]: which nodes should run a set's pod (the scheduler's
//!   own nodeSelector / node affinity / taint filters on the pod the set
//!   would make), the tolerations every daemon pod gets, and the node
//!   affinity on `metadata.name` that pins a pod to its node (the
//!   scheduler binds it; the controller never sets `nodeName`);
//! - [`revision`]: the template history as ControllerRevisions, and the
//!   `controller-revision-hash` pods carry;
//! - [`sync`]: one sync of a set (`syncDaemonSet` / `manage`): claim pods
//!   and revisions, create the missing pods in slow-start batches, delete
//!   pods on nodes that should not run them, failed ones, and all but the
//!   oldest where a node has several;
//! - [`update`]: the RollingUpdate strategy (`maxUnavailable` or
//!   `maxSurge`); OnDelete leaves old pods until the user deletes them;
//! - [`failed`]: the back-off before a node's failed pod is replaced
//!   again;
//! - [`status`]: desired, current, ready, up-to-date, available,
//!   unavailable and misscheduled counts, written only when they change;
//! - `tests.rs`: the controller against the real API handlers.
//!
//! Expectations (per set instance) keep a sync from acting again before
//! the pod cache has seen its last creates and deletes, so a node never
//! gets two pods from two quick syncs.

mod failed;
mod node_pods;
pub mod placement;
pub mod revision;
mod status;
mod sync;
#[cfg(test)]
mod tests;
mod update;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

use bosun::events::EventRecorder;
use bosun::selector::LabelSelector;

use crate::toolkit::claim::ClaimError;
use crate::toolkit::{forget_deleted, pod_owner_controller};
use crate::toolkit::{run_controller, synced, Clock, Expectations, Shared};

/// How often every set is synced even without a change.
const RESYNC: Duration = Duration::from_secs(60);

const COMPONENT: &str = "daemonset-controller";

/// The label naming the revision a pod was made from, and a revision's
/// hash (`apps.ControllerRevisionHashLabelKey`).
pub const HASH_LABEL: &str = "controller-revision-hash";

/// The label carrying the template generation a pod was made from
/// (`extensions.DaemonSetTemplateGenerationKey`).
pub const GENERATION_LABEL: &str = "pod-template-generation";

/// The set's template generation, kept by the API server.
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// The most pods one sync creates or deletes (`BurstReplicas`).
pub const BURST_REPLICAS: usize = 250;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API: {0}")]
    Api(#[from] kube::Error),
    #[error(transparent)]
    Claim(#[from] ClaimError),
    #[error("{0}")]
    Create(String),
    #[error("{0}")]
    Delete(String),
    #[error("{0}")]
    Failed(String),
}

/// What every sync needs.
pub struct Context {
    pub client: Client,
    pub sets: Store<DaemonSet>,
    pub pods: crate::toolkit::PodIndex,
    pub nodes: Store<Node>,
    pub revisions: Store<ControllerRevision>,
    pub clock: Arc<dyn Clock>,
    pub recorder: EventRecorder,
    pub expectations: Expectations,
    pub failed_pods: failed::FailedPodBackoff,
}

impl Context {
    /// Takes the caches it reads from `shared` (before the informers start).
    pub fn new(shared: &Shared) -> Context {
        let informers = &shared.informers;
        Context {
            client: shared.client_for("daemonset"),
            sets: informers.store::<DaemonSet>(),
            pods: informers.pods(),
            nodes: informers.store::<Node>(),
            revisions: informers.store::<ControllerRevision>(),
            clock: shared.clock.clone(),
            recorder: shared.recorder(COMPONENT),
            expectations: Expectations::default(),
            failed_pods: Default::default(),
        }
    }
}

/// Sets up the controller on the shared caches; the returned future runs it.
pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    let ctx = Arc::new(Context::new(shared));
    let informers = &shared.informers;
    let sets = ctx.sets.clone();
    let (for_nodes, for_gone_nodes) = (sets.clone(), sets.clone());
    // A node's change matters only when what placement reads changed, not
    // on every heartbeat.
    let seen: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let forget_node = seen.clone();
    // An orphan pod may join a set in its namespace whose selector matches it.
    let controller = pod_owner_controller(
        informers,
        sets,
        |s, pod| selector_of(s).is_some_and(|sel| sel.matches(pod.labels())),
        RESYNC,
    )
    .owns_shared_stream(informers.subscribe::<ControllerRevision>())
    .watches_shared_stream(informers.subscribe::<Node>(), move |node: Arc<Node>| {
        let print = crate::toolkit::scheduling::node_fingerprint(&node);
        let changed = seen.lock().unwrap().insert(node.name_any(), print.clone());
        if changed.as_ref() == Some(&print) {
            return Vec::new();
        }
        all_sets(&for_nodes)
    })
    .watches_stream(informers.deleted::<Node>(), move |node: Node| {
        forget_node.lock().unwrap().remove(&node.name_any());
        all_sets(&for_gone_nodes)
    });
    let deleted_sets = informers.deleted::<DaemonSet>();
    async move {
        let forget = forget_deleted(deleted_sets, &ctx.expectations);
        let run = run_controller("daemonset", controller, ctx.clone(), reconcile);
        futures::future::join(forget, run).await;
    }
    .boxed()
}

fn all_sets(sets: &Store<DaemonSet>) -> Vec<ObjectRef<DaemonSet>> {
    sets.state()
        .iter()
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect()
}

/// The set's selector; None when missing, empty or invalid (then it
/// selects nothing).
pub fn selector_of(ds: &DaemonSet) -> Option<LabelSelector> {
    LabelSelector::from_label_selector(&ds.spec.selector)
        .ok()
        .filter(|s| !s.is_empty())
}

/// The set's template generation (None if the annotation is missing or
/// not a number, as `GetTemplateGeneration`).
pub fn template_generation(ds: &DaemonSet) -> Option<i64> {
    ds.annotations()
        .get(TEMPLATE_GENERATION_ANNOTATION)
        .and_then(|g| g.parse().ok())
}

/// Whether a pod runs the set's current template: its hash label or its
/// generation label says so (`IsPodUpdated`).
pub fn is_updated(pod: &Pod, hash: &str, generation: Option<i64>) -> bool {
    let labels = pod.labels();
    let by_generation =
        generation.is_some_and(|g| labels.get(GENERATION_LABEL) == Some(&g.to_string()));
    let by_hash = !hash.is_empty() && labels.get(HASH_LABEL).map(String::as_str) == Some(hash);
    by_hash || by_generation
}

/// The controller's reconcile: waits for the caches' first lists (a sync
/// on an empty pod cache would create every pod again), then syncs.
pub async fn reconcile(ds: Arc<DaemonSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    synced(ctx.pods.store()).await;
    synced(&ctx.nodes).await;
    synced(&ctx.revisions).await;
    let requeue = sync::sync(&ds, &ctx).await?;
    Ok(Action::requeue(requeue.map_or(RESYNC, |r| r.min(RESYNC))))
}
