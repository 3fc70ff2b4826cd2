//! The endpoints controller, as kube-controller-manager's
//! (`pkg/controller/endpoint`): one Endpoints object per service with a
//! selector, same name and namespace, listing the IPs of the pods it
//! selects, and deleted with the service.
//!
//! - [`pods`]: what both endpoint controllers read off a service and its
//!   pods (which pods belong, ready or not, hostname, `FindPort` for
//!   named target ports), and the [`pods::Membership`] that wakes a
//!   service when a pod it listed is relabelled or deleted. The
//!   EndpointSlice controller (`../endpointslice/`) uses it too: the two
//!   are separate controllers upstream and here (`--controllers`
//!   `endpoints` and `endpointslice`), writing the same facts in two
//!   shapes;
//! - [`subsets`]: the Endpoints subsets (ready pods in `addresses`, the
//!   others in `notReadyAddresses`, pods grouped by their resolved ports);
//! - this file: the controller's triggers and one sync per service.
//!
//! Services without a selector are left alone: their Endpoints are
//! written by hand (or by another controller) and never touched. The
//! Endpoints this controller writes carry the label
//! `endpoints.kubernetes.io/managed-by: endpoint-controller`, as
//! Kubernetes' do; only those are deleted when their service goes (at
//! once from the deletions stream, and by a periodic sweep for deletions
//! missed while a watch was down, as upstream's `checkLeftoverEndpoints`).
//! The Endpoints of a service are read from the API, not the cache, so a
//! sync never acts on a stale copy of what it wrote last.

pub mod pods;
pub mod subsets;
#[cfg(test)]
pub(crate) mod tests;
pub mod wake;

use crate::toolkit::synced;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

use crate::toolkit::api_errors::is_status;
use crate::toolkit::{run_controller, Shared};
use pods::{is_headless, selected_pods, selector_of, Membership};
use wake::{on_deleted_services, service_controller};

/// How often every service is synced, and leftovers swept, without a change.
const RESYNC: Duration = Duration::from_secs(60);

/// The label Kubernetes' endpoints controller puts on what it manages.
pub const MANAGED_BY_LABEL: &str = "endpoints.kubernetes.io/managed-by";
pub const CONTROLLER_NAME: &str = "endpoint-controller";
/// Set on the endpoints of headless services (`clusterIP: None`).
pub const HEADLESS_LABEL: &str = "service.kubernetes.io/headless";
/// Kubernetes' maxCapacity: more addresses than this are truncated, and
/// the Endpoints annotated [`OVER_CAPACITY`]` = truncated` (the slices
/// carry them all).
pub const MAX_CAPACITY: usize = 1000;
pub const OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";

pub type Error = crate::toolkit::api_errors::ApiError;

/// What every sync needs.
pub struct Context {
    pub client: Client,
    pub services: Store<Service>,
    pub pods: crate::toolkit::PodIndex,
    pub endpoints: Store<Endpoints>,
    pub membership: Arc<Membership>,
    /// At most this many addresses per Endpoints (Kubernetes' maxCapacity).
    pub max_capacity: usize,
}

impl Context {
    /// Takes the caches it reads from `shared` (before the informers start).
    pub fn new(shared: &Shared) -> Context {
        Context {
            client: shared.client_for("endpoints"),
            services: shared.informers.store::<Service>(),
            pods: shared.informers.pods(),
            endpoints: shared.informers.store::<Endpoints>(),
            membership: Arc::default(),
            max_capacity: MAX_CAPACITY,
        }
    }
}

/// The service an Endpoints object belongs to (same name and namespace).
fn service_of(ep: &Endpoints) -> ObjectRef<Service> {
    ObjectRef::new(&ep.name_any()).within(&ep.namespace().unwrap_or_default())
}

/// Sets up the controller on the shared caches; the returned future runs it.
pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    run(shared, Context::new(shared))
}

/// Runs the controller with `ctx` (tests shrink `max_capacity`).
fn run(shared: &Arc<Shared>, ctx: Context) -> BoxFuture<'static, ()> {
    let ctx = Arc::new(ctx);
    let informers = &shared.informers;
    let controller = service_controller(informers, ctx.services.clone(), &ctx.membership, RESYNC)
        // An edited or deleted Endpoints is put back by its service.
        .watches_shared_stream(informers.subscribe::<Endpoints>(), |ep: Arc<Endpoints>| {
            Some(service_of(&ep))
        })
        .watches_stream(informers.deleted::<Endpoints>(), |ep: Endpoints| {
            Some(service_of(&ep))
        });
    let cleanup = on_deleted_services(
        informers.deleted::<Service>(),
        ctx.membership.clone(),
        ctx.client.clone(),
        |client, ns, name| async move { delete_managed(&client, &ns, &name).await },
    );
    async move {
        let sweep_ctx = ctx.clone();
        let sweep = async move {
            let mut every = tokio::time::interval(RESYNC);
            loop {
                every.tick().await;
                sweep_leftovers(&sweep_ctx).await;
            }
        };
        let run = run_controller("endpoints", controller, ctx, reconcile);
        tokio::join!(cleanup, sweep, run);
    }
    .boxed()
}

/// Deletes the Endpoints `namespace/name` if this controller manages it.
async fn delete_managed(client: &Client, namespace: &str, name: &str) -> Result<(), kube::Error> {
    let api: Api<Endpoints> = Api::namespaced(client.clone(), namespace);
    let Some(ep) = api.get_opt(name).await? else {
        return Ok(());
    };
    if ep.labels().get(MANAGED_BY_LABEL).map(String::as_str) != Some(CONTROLLER_NAME) {
        return Ok(());
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: ep.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes managed Endpoints whose service is gone (deletions missed while
/// a watch was down, or while the control plane was stopped).
async fn sweep_leftovers(ctx: &Context) {
    synced(&ctx.services).await;
    synced(&ctx.endpoints).await;
    for ep in ctx.endpoints.state() {
        let managed =
            ep.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(CONTROLLER_NAME);
        if managed && ctx.services.get(&service_of(&ep)).is_none() {
            let ns = ep.namespace().unwrap_or_default();
            if let Err(e) = delete_managed(&ctx.client, &ns, &ep.name_any()).await {
                tracing::warn!(endpoints = %ep.name_any(), error = %e, "deleting leftover endpoints");
            }
        }
    }
}

/// The labels of a service's Endpoints: the service's own, the managed-by
/// label, and the headless label for headless services.
fn labels_for(svc: &Service) -> BTreeMap<String, String> {
    let mut labels = svc.labels().clone();
    labels.remove(HEADLESS_LABEL);
    labels.insert(MANAGED_BY_LABEL.into(), CONTROLLER_NAME.into());
    if is_headless(svc) {
        labels.insert(HEADLESS_LABEL.into(), String::new());
    }
    labels
}

/// The controller's reconcile: waits for the pod cache's first list (a sync
/// on an empty cache would empty every Endpoints), then syncs.
pub async fn reconcile(svc: Arc<Service>, ctx: Arc<Context>) -> Result<Action, Error> {
    synced(ctx.pods.store()).await;
    sync(&svc, &ctx).await?;
    Ok(Action::requeue(RESYNC))
}

/// One sync of a service's Endpoints.
async fn sync(svc: &Service, ctx: &Context) -> Result<(), Error> {
    if selector_of(svc).is_none() || svc.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let ns = svc.namespace().unwrap_or_default();
    let name = svc.name_any();
    let pods = selected_pods(svc, &ctx.pods);
    let subsets = subsets::subsets_for(svc, &pods);
    ctx.membership.record(
        svc,
        subsets
            .iter()
            .flat_map(|s| {
                let ready = s.addresses.iter().flatten();
                ready.chain(s.not_ready_addresses.iter().flatten())
            })
            .filter_map(|a| a.target_ref.as_ref()?.name.clone())
            .collect(),
    );
    let labels = labels_for(svc);
    let (subsets, truncated) = subsets::truncate(subsets, ctx.max_capacity);
    let api: Api<Endpoints> = Api::namespaced(ctx.client.clone(), &ns);
    let subsets = (!subsets.is_empty()).then_some(subsets);
    match api.get_opt(&name).await? {
        None => {
            let ep = Endpoints {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(ns.clone()),
                    labels: Some(labels),
                    annotations: truncated
                        .then(|| BTreeMap::from([(OVER_CAPACITY.into(), "truncated".into())])),
                    ..Default::default()
                },
                subsets,
            };
            api.create(&PostParams::default(), &ep).await?;
        }
        Some(mut current) => {
            let same_subsets = current.subsets.as_deref().unwrap_or_default()
                == subsets.as_deref().unwrap_or_default();
            let marked =
                current.annotations().get(OVER_CAPACITY).map(String::as_str) == Some("truncated");
            if same_subsets && current.labels() == &labels && marked == truncated {
                return Ok(());
            }
            if truncated {
                current
                    .annotations_mut()
                    .insert(OVER_CAPACITY.into(), "truncated".into());
            } else {
                current.annotations_mut().remove(OVER_CAPACITY);
            }
            current.metadata.labels = Some(labels);
            current.subsets = subsets;
            api.replace(&name, &PostParams::default(), &current).await?;
        }
    }
    Ok(())
}
