//! The Deployment controller, as kube-controller-manager's
//! (`pkg/controller/deployment`): a Deployment owns ReplicaSets named
//! `<deployment>-<pod-template-hash>`, one per pod template it has had;
//! the one whose template equals the Deployment's is the new set, the
//! others are old. Changing `.spec.template` starts a rollout (RollingUpdate
//! within maxSurge / maxUnavailable, or Recreate); changing only
//! `.spec.replicas` scales the sets, proportionally during a rollout.
//!
//! - [`hash`]: the pod-template-hash and template equality;
//! - [`replicas`]: maxSurge / maxUnavailable, counts, proportional scaling;
//! - [`sync`]: claiming sets, scaling, history cleanup, status;
//! - [`new_set`]: the new set (found, updated or created) and revisions;
//! - [`rolling`], [`recreate`]: the two strategies;
//! - [`progress`]: the Progressing and Available conditions.
//!
//! Rollback is not here: `rollout undo` copies an old set's template
//! into the Deployment on the client side, as kubectl does; the
//! controller then sees a template change like any other.

mod hash;
mod new_set;
mod progress;
mod recreate;
mod replicas;
mod rolling;
mod rollout;
mod sync;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::Controller;

use bosun::events::EventRecorder;

use crate::toolkit::{run_controller, Clock, Shared};

pub use hash::compute_hash;

/// The label that tells a Deployment's sets (and their pods) apart.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// How often a Deployment whose rollout is not complete is looked at
/// again even without news (the progress deadline has its own requeue).
pub const ROLLOUT_RESYNC: Duration = Duration::from_secs(30);
/// How often a settled Deployment is looked at again.
pub const RESYNC: Duration = Duration::from_secs(600);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API: {0}")]
    Api(#[from] kube::Error),
    #[error(transparent)]
    Claim(#[from] crate::toolkit::claim::ClaimError),
    #[error("deployment {0}: invalid selector: {1}")]
    Selector(String, String),
    #[error("deployment {0}: {1}")]
    Invalid(String, String),
    #[error("replica set {0} already exists and is not this deployment's; collisionCount bumped")]
    HashCollision(String),
}

/// What a reconcile needs.
pub struct Context {
    pub client: kube::Client,
    pub replica_sets: Store<ReplicaSet>,
    pub pods: crate::toolkit::PodIndex,
    pub clock: Arc<dyn Clock>,
    pub recorder: EventRecorder,
    /// See [`ROLLOUT_RESYNC`].
    pub rollout_resync: Duration,
}

/// Sets the controller up (its subscriptions must precede
/// `Informers::start`) and returns its loop.
pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    start_with(shared, ROLLOUT_RESYNC)
}

pub fn start_with(shared: &Arc<Shared>, rollout_resync: Duration) -> BoxFuture<'static, ()> {
    let informers = &shared.informers;
    let replica_sets = informers.store::<ReplicaSet>();
    let rs_for_pods = replica_sets.clone();
    let controller = Controller::for_shared_stream(
        informers.subscribe::<Deployment>(),
        informers.store::<Deployment>(),
    )
    .owns_shared_stream(informers.subscribe::<ReplicaSet>())
    .owns_stream(informers.deleted::<ReplicaSet>())
    .watches_shared_stream(informers.subscribe::<Pod>(), move |pod: Arc<Pod>| {
        deployment_of_pod(&rs_for_pods, &pod)
    })
    .watches_stream(informers.deleted::<Pod>(), {
        let rs_store = replica_sets.clone();
        move |pod: Pod| deployment_of_pod(&rs_store, &pod)
    });
    let ctx = Arc::new(Context {
        client: shared.client_for("deployment"),
        replica_sets,
        pods: informers.pods(),
        clock: shared.clock.clone(),
        recorder: shared.recorder("deployment-controller"),
        rollout_resync,
    });
    run_controller("deployment", controller, ctx, reconcile).boxed()
}

/// The Deployment that controls the ReplicaSet that controls `pod`.
fn deployment_of_pod(replica_sets: &Store<ReplicaSet>, pod: &Pod) -> Option<ObjectRef<Deployment>> {
    let ns = pod.metadata.namespace.as_deref()?;
    let owner = controller_of(&pod.metadata)?;
    if owner.kind != "ReplicaSet" {
        return None;
    }
    let rs = replica_sets.get(&ObjectRef::new(&owner.name).within(ns))?;
    let d = controller_of(&rs.metadata)?;
    (d.kind == "Deployment").then(|| ObjectRef::new(&d.name).within(ns))
}

pub(crate) use crate::toolkit::controller_of;

/// One sync of one Deployment (`syncDeployment`).
pub async fn reconcile(d: Arc<Deployment>, ctx: Arc<Context>) -> Result<Action, Error> {
    let mut run = rollout::Rollout::new(&ctx, (*d).clone());
    run.sync_deployment().await?;
    Ok(run.next_action())
}
