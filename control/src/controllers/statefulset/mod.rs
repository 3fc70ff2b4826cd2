//! The StatefulSet controller, as kube-controller-manager's
//! (`pkg/controller/statefulset`): pods with stable names `<set>-<ordinal>`,
//! stable DNS identities (hostname and subdomain) and stable storage (one
//! claim per template per ordinal), created, updated and removed in order.
//!
//! - [`identity`]: names, hostnames, claims, and a new pod for an ordinal;
//! - [`revision`]: the template history as ControllerRevisions (current
//!   and update revision, rollbacks, history limit);
//! - [`sync`]: one pass over the set's pods (`StatefulSetControl`):
//!   create missing ordinals, replace failed pods, remove ordinals past
//!   `replicas` from the highest, and roll pods to the update revision from
//!   the highest ordinal down to `partition`; with `OrderedReady` each step
//!   waits for the previous pod to be Running and Ready, with `Parallel`
//!   it does not;
//! - [`status`]: replicas, ready, available, current and updated counts,
//!   revisions and the collision count.

pub mod identity;
pub mod revision;
mod status;
mod sync;
#[cfg(test)]
mod tests;

use crate::toolkit::pod_owner_controller;
use crate::toolkit::synced;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};

use bosun::events::EventRecorder;
use bosun::selector::LabelSelector;

use crate::toolkit::claim::ClaimError;
use crate::toolkit::{run_controller, Clock, Shared};

/// How often every set is synced even without a change.
const RESYNC: Duration = Duration::from_secs(60);

const COMPONENT: &str = "statefulset-controller";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API: {0}")]
    Api(#[from] kube::Error),
    #[error(transparent)]
    Claim(#[from] ClaimError),
    #[error("{0}")]
    Failed(String),
}

/// What every sync needs.
pub struct Context {
    pub client: Client,
    pub sets: Store<StatefulSet>,
    pub pods: crate::toolkit::PodIndex,
    pub revisions: Store<ControllerRevision>,
    pub claims: Store<PersistentVolumeClaim>,
    pub clock: Arc<dyn Clock>,
    pub recorder: EventRecorder,
}

impl Context {
    /// Takes the caches it reads from `shared` (before the informers start).
    pub fn new(shared: &Shared) -> Context {
        let informers = &shared.informers;
        Context {
            client: shared.client_for("statefulset"),
            sets: informers.store::<StatefulSet>(),
            pods: informers.pods(),
            revisions: informers.store::<ControllerRevision>(),
            claims: informers.store::<PersistentVolumeClaim>(),
            clock: shared.clock.clone(),
            recorder: shared.recorder(COMPONENT),
        }
    }
}

/// Sets up the controller on the shared caches; the returned future runs it.
pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    let ctx = Arc::new(Context::new(shared));
    let informers = &shared.informers;
    // An orphan pod may join a set whose name is in the pod's and whose
    // selector matches it.
    let controller = pod_owner_controller(
        informers,
        ctx.sets.clone(),
        |s, pod| {
            identity::is_member_of(s, pod)
                && selector_of(s).is_some_and(|sel| sel.matches(pod.labels()))
        },
        RESYNC,
    )
    .owns_shared_stream(informers.subscribe::<ControllerRevision>());
    run_controller("statefulset", controller, ctx, reconcile).boxed()
}

/// The set's selector; None when missing, empty or invalid (then it
/// selects nothing).
pub fn selector_of(set: &StatefulSet) -> Option<LabelSelector> {
    let spec = Some(&set.spec)?;
    LabelSelector::from_label_selector(&spec.selector)
        .ok()
        .filter(|s| !s.is_empty())
}

/// The controller's reconcile: waits for the caches' first lists (a sync
/// on an empty pod cache would create every pod again), then syncs.
pub async fn reconcile(set: Arc<StatefulSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    synced(ctx.pods.store()).await;
    synced(&ctx.revisions).await;
    synced(&ctx.claims).await;
    let requeue = sync::sync(&set, &ctx).await?;
    Ok(Action::requeue(requeue.map_or(RESYNC, |r| r.min(RESYNC))))
}
