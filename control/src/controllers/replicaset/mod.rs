//! The ReplicaSet controller: keeps `spec.replicas` pods of each set
//! running, as kube-controller-manager's replicaset controller does.
//!
//! One sync of a set ([`sync`]):
//!
//! 1. claims its pods: the active pods of its namespace that name it as
//!    controller and still match its selector (read from the pod cache's
//!    controller index with the orphans of its namespace, not by a scan of
//!    every pod); matching orphans are adopted
//!    (an ownerReference patched in) and owned pods that no longer match
//!    are released (the reference patched out). Pods of other controllers
//!    are never touched.
//! 2. if the cache has seen everything the last sync created and deleted
//!    ([`Expectations`]), creates the missing pods from the template in
//!    slow-start batches (1, 2, 4, ...; at most [`BURST_REPLICAS`] per sync,
//!    stopping at the first batch with a failure), or deletes the surplus
//!    in [`victims`] order;
//! 3. writes `status` (replicas, fullyLabeledReplicas, readyReplicas,
//!    availableReplicas, observedGeneration, the ReplicaFailure condition)
//!    when it changed, and comes back when a ready pod is due to become
//!    available (`minReadySeconds`).

mod kind;
mod status;
pub mod victims;

pub use kind::ReplicatedSet;

#[cfg(test)]
mod tests;

use crate::toolkit::synced;
use crate::toolkit::{forget_deleted, pod_owner_controller, PodIndex};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};

use crate::toolkit::api_errors::message_of;
use crate::toolkit::claim::ClaimError;
use crate::toolkit::pods::{is_active, PodControl};
use crate::toolkit::{
    controller_of, expectations_key, pod_from_template, run_controller, ClaimManager, Clock,
    Expectations, Shared,
};
use bosun::events::{reference_to, EventRecorder};
use victims::pods_to_delete;

/// The most pods one sync creates or deletes (Kubernetes' burstReplicas).
pub const BURST_REPLICAS: usize = 500;

/// How often every set is synced even without a change (a safety net for
/// missed events, e.g. a pod's controller reference moved elsewhere).
const RESYNC: Duration = Duration::from_secs(60);

const REPLICA_FAILURE: &str = "ReplicaFailure";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Create(String),
    #[error("{0}")]
    Delete(String),
    #[error(transparent)]
    Claim(#[from] ClaimError),
    #[error("updating the status of {kind} {set}: {message}")]
    Status {
        kind: String,
        set: String,
        message: String,
    },
}

/// What every sync needs.
pub struct Context<K: ReplicatedSet> {
    client: Client,
    pods: PodIndex,
    sets: Store<K>,
    clock: Arc<dyn Clock>,
    recorder: EventRecorder,
    expectations: Expectations,
}

impl<K: ReplicatedSet> Context<K> {
    /// Takes the caches it reads from `shared` (before the informers start).
    pub fn new(shared: &Shared) -> Context<K> {
        Context {
            client: shared.client_for(K::CONTROLLER),
            pods: shared.informers.pods(),
            sets: shared.informers.store::<K>(),
            clock: shared.clock.clone(),
            recorder: shared.recorder(K::COMPONENT),
            expectations: Expectations::default(),
        }
    }
}

/// Sets up the ReplicaSet controller on the shared caches; the returned
/// future runs it.
pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    start_for::<k8s_openapi::api::apps::v1::ReplicaSet>(shared)
}

/// Sets up the controller of the kind `K` (ReplicaSet, or
/// ReplicationController for the replication controller).
pub fn start_for<K: ReplicatedSet>(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    let ctx = Arc::new(Context::<K>::new(shared));
    // An orphan pod may join a set in its namespace whose selector matches it.
    let controller = pod_owner_controller(
        &shared.informers,
        ctx.sets.clone(),
        |rs: &K, pod| rs.selector().is_some_and(|s| s.matches(pod.labels())),
        RESYNC,
    );
    let deleted_sets = shared.informers.deleted::<K>();
    async move {
        let forget = forget_deleted(deleted_sets, &ctx.expectations);
        let run = run_controller(K::CONTROLLER, controller, ctx.clone(), reconcile);
        futures::future::join(forget, run).await;
    }
    .boxed()
}

/// The controller's reconcile: waits for the pod cache's first list (a
/// sync on an empty cache would create every pod again), then syncs.
pub async fn reconcile<K: ReplicatedSet>(
    rs: Arc<K>,
    ctx: Arc<Context<K>>,
) -> Result<Action, Error> {
    synced(ctx.pods.store()).await;
    sync(rs, ctx).await
}

/// One level-triggered sync of a set (`syncReplicaSet`).
pub async fn sync<K: ReplicatedSet>(rs: Arc<K>, ctx: Arc<Context<K>>) -> Result<Action, Error> {
    let ns = rs.namespace().unwrap_or_default();
    let key = expectations_key(rs.as_ref());
    let needs_sync = ctx.expectations.satisfied_in(&key, &ns, &ctx.pods);
    let claimable = ctx
        .pods
        .claimable_by(&ns, rs.meta().uid.as_deref().unwrap_or_default());

    let claimed = claim_pods(rs.as_ref(), ctx.as_ref(), &claimable).await?;
    let owned: Vec<&Pod> = claimed.iter().map(Arc::as_ref).collect();
    let manage_result = if needs_sync && rs.meta().deletion_timestamp.is_none() {
        manage_replicas(rs.as_ref(), ctx.as_ref(), &owned).await
    } else {
        Ok(())
    };

    let now = ctx.clock.now();
    let (status, next_available) =
        status::calculate_status(rs.as_ref(), &owned, manage_result.as_ref().err(), now);
    status::update_status(rs.as_ref(), ctx.as_ref(), status).await?;
    manage_result?;
    Ok(match next_available {
        Some(wait) => Action::requeue(wait.min(RESYNC)),
        None => Action::requeue(RESYNC),
    })
}

/// The set's active pods, after adopting matching orphans and releasing
/// owned pods that no longer match (`claimPods`); `claimable` are its own
/// pods and the orphans of its namespace.
async fn claim_pods<K: ReplicatedSet>(
    rs: &K,
    ctx: &Context<K>,
    claimable: &[Arc<Pod>],
) -> Result<Vec<Arc<Pod>>, Error> {
    let selector = rs.selector();
    let claims = ClaimManager::new(ctx.client.clone(), rs, selector.as_ref());
    let active: Vec<Arc<Pod>> = claimable.iter().filter(|p| is_active(p)).cloned().collect();
    Ok(claims.claim(active).await?)
}

/// Creates or deletes pods so `owned` becomes `spec.replicas`
/// (`manageReplicas`).
async fn manage_replicas<K: ReplicatedSet>(
    rs: &K,
    ctx: &Context<K>,
    owned: &[&Pod],
) -> Result<(), Error> {
    let want = rs.replicas();
    let ns = rs.namespace().unwrap_or_default();
    let pods = PodControl {
        api: Api::namespaced(ctx.client.clone(), &ns),
        recorder: &ctx.recorder,
        owner: reference_to(rs),
        expectations: &ctx.expectations,
        key: expectations_key(rs),
    };
    if owned.len() < want {
        let missing = (want - owned.len()).min(BURST_REPLICAS);
        let pod = pod_from_template(rs, rs.template());
        return pods.create(vec![pod; missing]).await.map_err(Error::Create);
    }
    if owned.len() > want {
        let surplus = (owned.len() - want).min(BURST_REPLICAS);
        let related = related_pods(rs, ctx);
        let related: Vec<&Pod> = match &related {
            Some(pods) => pods.iter().map(Arc::as_ref).collect(),
            None => owned.to_vec(),
        };
        let victims = pods_to_delete(owned, &related, surplus);
        return pods.delete(&victims).await.map_err(Error::Delete);
    }
    Ok(())
}

/// The pods whose placement ranks victims: the set's own, and those of
/// the other sets under the same controller (a Deployment's old and new
/// sets), so scale-down also evens out a rollout's spread. `None` when the
/// set has no controller: then its own pods alone.
fn related_pods<K: ReplicatedSet>(rs: &K, ctx: &Context<K>) -> Option<Vec<Arc<Pod>>> {
    let owner = controller_of(rs.meta())?;
    let siblings = ctx
        .sets
        .state()
        .iter()
        .filter(|s| s.namespace() == rs.namespace())
        .filter(|s| controller_of(s.meta()).is_some_and(|r| r.uid == owner.uid))
        .filter_map(|s| s.uid())
        .chain(rs.uid())
        .collect::<std::collections::BTreeSet<String>>();
    Some(
        siblings
            .iter()
            .flat_map(|uid| ctx.pods.controlled_by(uid))
            .filter(|p| p.namespace() == rs.namespace())
            .collect(),
    )
}
