//! The EndpointSlice controller, as kube-controller-manager's
//! (`pkg/controller/endpointslice`): the same facts as the Endpoints
//! controller (`../endpoints/`, whose [`pods`] module both share), in
//! `discovery.k8s.io/v1` EndpointSlices, which kubectl, client-go, the
//! node-local DNS server and current tooling read.
//!
//! Each service with a selector (and not of type ExternalName) gets slices
//! named `<svc>-<random>` (generateName `<svc>-`), labelled
//! `kubernetes.io/service-name: <svc>` and
//! `endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io`
//! (plus the service's labels, and `service.kubernetes.io/headless` for
//! headless services), controlled by the service through an owner
//! reference, `addressType: IPv4`, at most 100 endpoints each:
//!
//! - [`desired`]: one endpoint per pod with an IP (`addresses`,
//!   `conditions` ready/serving/terminating, `hostname`, `nodeName`,
//!   `targetRef`), grouped by the ports resolved on it;
//! - [`plan`]: fitting them into the existing slices with few writes;
//! - this file: triggers, one sync per service, and deleting a deleted
//!   service's slices (the garbage collector would too, through the owner
//!   reference; doing it here does not wait for it, and works with it off).
//!
//! A service's slices are listed from the API at each sync, not from the
//! cache, so a slice created by the previous sync is never created twice.
//! Services without a selector get no slices from here (upstream mirrors
//! their hand-written Endpoints into slices in a separate controller,
//! which bosun does not have).

pub mod desired;
pub mod plan;
#[cfg(test)]
mod tests;

use crate::toolkit::synced;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};

use super::endpoints::pods::{is_headless, selected_pods, selector_of, Membership};
use super::endpoints::wake::{on_deleted_services, service_controller};
use super::endpoints::HEADLESS_LABEL;
use crate::toolkit::api_errors::is_status;
use crate::toolkit::{controller_ref, run_controller, Shared};
use desired::{ports_of, PortsKey};
use plan::MAX_ENDPOINTS_PER_SLICE;

const RESYNC: Duration = Duration::from_secs(60);

/// The label naming a slice's service.
pub use bosun::well_known::SERVICE_NAME_LABEL;
/// The label naming who manages a slice, and this controller's value.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";

pub type Error = crate::toolkit::api_errors::ApiError;

/// What every sync needs.
pub struct Context {
    pub client: Client,
    pub services: Store<Service>,
    pub pods: crate::toolkit::PodIndex,
    pub membership: Arc<Membership>,
    /// At most this many endpoints per slice.
    pub max_per_slice: usize,
}

impl Context {
    /// Takes the caches it reads from `shared` (before the informers start).
    pub fn new(shared: &Shared) -> Context {
        Context {
            client: shared.client_for("endpointslice"),
            services: shared.informers.store::<Service>(),
            pods: shared.informers.pods(),
            membership: Arc::default(),
            max_per_slice: MAX_ENDPOINTS_PER_SLICE,
        }
    }
}

/// Sets up the controller on the shared caches; the returned future runs it.
pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    run(shared, Context::new(shared))
}

/// Runs the controller with `ctx` (tests shrink `max_per_slice`).
fn run(shared: &Arc<Shared>, ctx: Context) -> BoxFuture<'static, ()> {
    let ctx = Arc::new(ctx);
    let informers = &shared.informers;
    let controller = service_controller(informers, ctx.services.clone(), &ctx.membership, RESYNC)
        .owns_shared_stream(informers.subscribe::<EndpointSlice>())
        .owns_stream(informers.deleted::<EndpointSlice>());
    let cleanup = on_deleted_services(
        informers.deleted::<Service>(),
        ctx.membership.clone(),
        ctx.client.clone(),
        |client, ns, name| async move { delete_slices_of(&client, &ns, &name).await },
    );
    async move {
        let run = run_controller("endpointslice", controller, ctx, reconcile);
        tokio::join!(cleanup, run);
    }
    .boxed()
}

/// The label selector of the slices this controller keeps for a service.
fn slices_selector(service: &str) -> String {
    format!("{SERVICE_NAME_LABEL}={service},{MANAGED_BY_LABEL}={CONTROLLER_NAME}")
}

async fn delete_slices_of(client: &Client, namespace: &str, service: &str) -> kube::Result<()> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
    let list = ListParams::default().labels(&slices_selector(service));
    api.delete_collection(&DeleteParams::default(), &list)
        .await
        .map(|_| ())
}

/// The labels of a service's slices.
fn labels_for(svc: &Service) -> BTreeMap<String, String> {
    let mut labels = svc.labels().clone();
    for reserved in [SERVICE_NAME_LABEL, MANAGED_BY_LABEL, HEADLESS_LABEL] {
        labels.remove(reserved);
    }
    labels.insert(SERVICE_NAME_LABEL.into(), svc.name_any());
    labels.insert(MANAGED_BY_LABEL.into(), CONTROLLER_NAME.into());
    if is_headless(svc) {
        labels.insert(HEADLESS_LABEL.into(), String::new());
    }
    labels
}

/// The controller's reconcile: waits for the pod cache's first list, then
/// syncs.
pub async fn reconcile(svc: Arc<Service>, ctx: Arc<Context>) -> Result<Action, Error> {
    synced(ctx.pods.store()).await;
    sync(&svc, &ctx).await?;
    Ok(Action::requeue(RESYNC))
}

async fn sync(svc: &Service, ctx: &Context) -> Result<(), Error> {
    let external = svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("ExternalName");
    if selector_of(svc).is_none() || external || svc.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let ns = svc.namespace().unwrap_or_default();
    let name = svc.name_any();
    let pods = selected_pods(svc, &ctx.pods);
    let desired = desired::desired_endpoints(svc, &pods);
    ctx.membership.record(
        svc,
        desired
            .values()
            .flat_map(|eps| eps.values())
            .filter_map(|ep| ep.target_ref.as_ref()?.name.clone())
            .collect(),
    );
    let api: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), &ns);
    let existing = api
        .list(&ListParams::default().labels(&slices_selector(&name)))
        .await?
        .items;
    let plan = plan::plan(existing, desired, ctx.max_per_slice);
    let labels = labels_for(svc);
    let owner = controller_ref(svc);

    for slice_name in &plan.delete {
        match api.delete(slice_name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let ours = |slice: &EndpointSlice| {
        slice.labels() == &labels
            && slice
                .metadata
                .owner_references
                .as_ref()
                .is_some_and(|refs| refs.contains(&owner))
    };
    let mut writes: Vec<(EndpointSlice, Vec<Endpoint>)> = plan.update;
    writes.extend(plan.keep.into_iter().filter(|s| !ours(s)).map(|s| {
        let eps = s.endpoints.clone().unwrap_or_default();
        (s, eps)
    }));
    for (mut slice, endpoints) in writes {
        slice.metadata.labels = Some(labels.clone());
        slice.metadata.owner_references = Some(vec![owner.clone()]);
        slice.endpoints = Some(endpoints);
        let slice_name = slice.name_any();
        api.replace(&slice_name, &PostParams::default(), &slice)
            .await?;
    }
    for (key, endpoints) in plan.create {
        api.create(
            &PostParams::default(),
            &new_slice(svc, &labels, &owner, &key, endpoints),
        )
        .await?;
    }
    Ok(())
}

fn new_slice(
    svc: &Service,
    labels: &BTreeMap<String, String>,
    owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    key: &PortsKey,
    endpoints: Vec<Endpoint>,
) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", svc.name_any())),
            namespace: svc.namespace(),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner.clone()]),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints: Some(endpoints),
        ports: Some(ports_of(key)),
    }
}
