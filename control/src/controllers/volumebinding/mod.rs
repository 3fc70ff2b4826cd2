//! The volume binder, as kube-controller-manager's PersistentVolume
//! controller (`pkg/controller/volume/persistentvolume`), with a local-path
//! provisioner (as rancher's, which k3s ships) and the
//! `kubernetes.io/pvc-protection` / `kubernetes.io/pv-protection`
//! finalizers' controllers.
//!
//! - [`matching`]: which volume a claim gets (pre-bound, else the smallest
//!   Available one that fits: capacity, access modes, class, volume mode,
//!   selector, and the selected node);
//! - [`claims`]: one sync of a claim (`syncClaim`): bind an unbound claim
//!   both ways, provision for it, or say why it waits (a
//!   WaitForFirstConsumer claim waits for the scheduler's node, or for a
//!   pod placed by hand with `nodeName`); finish a half-done binding; mark
//!   a claim whose volume went `Lost`;
//! - [`volumes`]: one sync of a volume (`syncVolume`): Available, Bound,
//!   or `Released` once its claim is gone, then deleted when its reclaim
//!   policy is Delete;
//! - [`provisioner`]: a hostPath volume under the data dir of the node the
//!   scheduler picked (`volume.kubernetes.io/selected-node`) for claims of
//!   a `bosun.io/local-path` class, pinned to that node by node affinity;
//! - [`protection`]: a claim being deleted keeps its finalizer while a pod
//!   uses it, a volume while it is Bound.
//!
//! Removing a provisioned volume's directory is the node's business (only
//! its agent touches its filesystem): provisioned volumes carry the
//! [`CLEANUP_FINALIZER`], and the agent of the node they are pinned to
//! removes the directory and then the finalizer once the volume is being
//! deleted.

pub mod claims;
pub mod protection;
pub mod provisioner;
#[cfg(test)]
mod tests;
pub mod volumes;

use crate::toolkit::synced;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{
    Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::Controller;
use kube::{Client, Resource, ResourceExt};

use bosun::events::EventRecorder;

use crate::toolkit::{run_controller, Shared};

/// The provisioner name of bosun's local-path volumes.
pub const LOCAL_PATH_PROVISIONER: &str = "bosun.io/local-path";
pub use bosun::well_known::{ANN_SELECTED_NODE, PVC_PROTECTION, PV_PROTECTION};
/// The finalizer the node's agent removes once a provisioned volume's
/// directory is gone.
pub const CLEANUP_FINALIZER: &str = "bosun.io/local-path-cleanup";
/// The Node annotation naming the agent's data dir (where local-path
/// volumes live).
pub const DATA_DIR_ANNOTATION: &str = "bosun.io/data-dir";

/// Annotations Kubernetes' binder and provisioners set.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";

/// How often every claim and volume is synced even without a change (the
/// PV controller's resync).
const RESYNC: Duration = Duration::from_secs(15);

const COMPONENT: &str = "persistentvolume-controller";

pub type Error = crate::toolkit::api_errors::ApiError;

/// What every sync reads and writes with.
pub struct Context {
    pub client: Client,
    pub claims: Store<PersistentVolumeClaim>,
    pub volumes: Store<PersistentVolume>,
    pub classes: Store<StorageClass>,
    pub pods: Store<Pod>,
    pub nodes: Store<Node>,
    pub recorder: EventRecorder,
}

impl Context {
    pub fn new(shared: &Shared) -> Context {
        let i = &shared.informers;
        Context {
            client: shared.client_for("volumebinding"),
            claims: i.store(),
            volumes: i.store(),
            classes: i.store(),
            pods: i.store(),
            nodes: i.store(),
            recorder: shared.recorder(COMPONENT),
        }
    }

    async fn caches_ready(&self) {
        synced(&self.claims).await;
        synced(&self.volumes).await;
        synced(&self.classes).await;
        synced(&self.pods).await;
        synced(&self.nodes).await;
    }

    pub fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.classes.get(&ObjectRef::new(name))
    }

    pub fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes.get(&ObjectRef::new(name))
    }
}

/// An object reference for events.
pub fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    let mut r = obj.object_ref(&());
    r.resource_version = None;
    r
}

/// The claims a pod's volumes name.
pub fn claims_of(pod: &Pod) -> Vec<ObjectRef<PersistentVolumeClaim>> {
    let ns = pod.namespace().unwrap_or_default();
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| ObjectRef::new(&c.claim_name).within(&ns))
        .collect()
}

/// The claim a volume's claimRef names.
fn claim_of(pv: &PersistentVolume) -> Option<ObjectRef<PersistentVolumeClaim>> {
    let r = pv.spec.as_ref()?.claim_ref.as_ref()?;
    Some(ObjectRef::new(r.name.as_deref()?).within(r.namespace.as_deref().unwrap_or("default")))
}

/// The volumes that name `claim` (by its volumeName or their claimRef).
fn volumes_of(
    volumes: &Store<PersistentVolume>,
    claim: &PersistentVolumeClaim,
) -> Vec<ObjectRef<PersistentVolume>> {
    let mut out: Vec<ObjectRef<PersistentVolume>> = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .filter(|n| !n.is_empty())
        .map(ObjectRef::new)
        .into_iter()
        .collect();
    for pv in volumes.state() {
        let names = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .is_some_and(|r| {
                r.name == claim.metadata.name && r.namespace == claim.metadata.namespace
            });
        if names {
            out.push(ObjectRef::from_obj(pv.as_ref()));
        }
    }
    out
}

/// Sets up the claim and volume loops on the shared caches; the returned
/// future runs both.
pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    let ctx = Arc::new(Context::new(shared));
    let i = &shared.informers;
    let resync =
        || tokio_stream::wrappers::IntervalStream::new(tokio::time::interval(RESYNC)).map(|_| ());

    let claims_store = ctx.claims.clone();
    let claim_loop =
        Controller::for_shared_stream(i.subscribe::<PersistentVolumeClaim>(), ctx.claims.clone())
            .watches_shared_stream(i.subscribe::<PersistentVolume>(), move |pv| {
                // A volume names its claim; a free volume may suit any
                // claim still waiting.
                match claim_of(&pv) {
                    Some(c) => vec![c],
                    None => claims_store
                        .state()
                        .iter()
                        .filter(|c| {
                            c.spec
                                .as_ref()
                                .and_then(|s| s.volume_name.as_deref())
                                .is_none_or(str::is_empty)
                        })
                        .map(|c| ObjectRef::from_obj(c.as_ref()))
                        .collect(),
                }
            })
            .watches_stream(i.deleted::<PersistentVolume>(), |pv| claim_of(&pv))
            .watches_shared_stream(i.subscribe::<Pod>(), |pod| claims_of(&pod))
            .watches_stream(i.deleted::<Pod>(), |pod| claims_of(&pod))
            .reconcile_all_on(resync());

    let volumes_store = ctx.volumes.clone();
    let deleted_volumes_store = ctx.volumes.clone();
    let volume_loop =
        Controller::for_shared_stream(i.subscribe::<PersistentVolume>(), ctx.volumes.clone())
            .watches_shared_stream(i.subscribe::<PersistentVolumeClaim>(), move |claim| {
                volumes_of(&volumes_store, &claim)
            })
            .watches_stream(i.deleted::<PersistentVolumeClaim>(), move |claim| {
                volumes_of(&deleted_volumes_store, &claim)
            })
            .reconcile_all_on(resync());

    let claim_ctx = ctx.clone();
    async move {
        futures::join!(
            run_controller(
                "volumebinding-claims",
                claim_loop,
                claim_ctx,
                reconcile_claim
            ),
            run_controller("volumebinding-volumes", volume_loop, ctx, reconcile_volume),
        );
    }
    .boxed()
}

pub async fn reconcile_claim(
    claim: Arc<PersistentVolumeClaim>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    ctx.caches_ready().await;
    claims::sync(&claim, &ctx).await?;
    Ok(Action::requeue(RESYNC))
}

pub async fn reconcile_volume(
    pv: Arc<PersistentVolume>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    ctx.caches_ready().await;
    volumes::sync(&pv, &ctx).await?;
    Ok(Action::requeue(RESYNC))
}
