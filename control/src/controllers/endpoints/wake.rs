//! What wakes both endpoint controllers: one sync per Service, when a pod
//! it selects (or listed at its last sync) changes or goes, and on a
//! resync period; and, when a Service goes, a clean-up of what was made
//! for it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::runtime::reflector::Store;
use kube::runtime::{watcher, Controller};
use kube::{Client, ResourceExt};

use super::pods::Membership;
use crate::toolkit::Informers;

/// A controller of Services woken by their pods and every `resync`; the
/// caller adds what else it watches.
pub fn service_controller(
    informers: &Informers,
    services: Store<Service>,
    membership: &Arc<Membership>,
    resync: Duration,
) -> Controller<Service> {
    let (on_pod, on_pod_services) = (membership.clone(), services.clone());
    let (on_gone, on_gone_services) = (membership.clone(), services.clone());
    Controller::for_shared_stream(informers.subscribe::<Service>(), services)
        .watches_shared_stream(informers.subscribe::<Pod>(), move |pod: Arc<Pod>| {
            on_pod.services_for(&on_pod_services, &pod)
        })
        .watches_stream(informers.deleted::<Pod>(), move |pod: Pod| {
            on_gone.services_for(&on_gone_services, &pod)
        })
        .reconcile_all_on(
            tokio_stream::wrappers::IntervalStream::new(tokio::time::interval(resync)).map(|_| ()),
        )
}

/// For every deleted Service: forgets its pods, then runs
/// `cleanup(client, namespace, name)` (a failure is logged; the resync
/// sweeps).
pub async fn on_deleted_services<F, Fut>(
    deleted: impl Stream<Item = Result<Service, watcher::Error>>,
    membership: Arc<Membership>,
    client: Client,
    cleanup: F,
) where
    F: Fn(Client, String, String) -> Fut,
    Fut: Future<Output = Result<(), kube::Error>>,
{
    deleted
        .for_each(|svc| async {
            let Ok(svc) = svc else { return };
            let (ns, name) = (svc.namespace().unwrap_or_default(), svc.name_any());
            membership.forget(&ns, &name);
            if let Err(e) = cleanup(client.clone(), ns, name.clone()).await {
                tracing::warn!(service = %name, error = %e, "cleaning up after a deleted service");
            }
        })
        .await
}
