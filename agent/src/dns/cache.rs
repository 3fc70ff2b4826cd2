//! The caches behind the zone: the agent's shared Services and
//! EndpointSlices ([`ServiceCache`]) and a watch of the Pods of every
//! namespace, kept as only what DNS needs of them. A change wakes the
//! rebuilder, which gathers the changes of the next [`COALESCE`] and then
//! swaps one new [`Zone`] in: objects applied one by one (a thousand
//! services from one `kubectl apply`) cost a build per window, not one
//! each, and every answer follows the cluster within the window plus a
//! build. When the control plane is away the watchers retry with
//! back-off and the last zone goes on answering.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::Client;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::pods::{PodInfo, Pods};
use super::{SharedZone, Zone};
use crate::services::watch::{feed, rebuild_on_change};
use crate::services::ServiceCache;

/// How long the rebuilder gathers changes before it builds.
pub const COALESCE: Duration = Duration::from_millis(100);

/// Starts the Pod watcher and the rebuilder, and subscribes the rebuilder
/// to `services`.
pub fn spawn(
    client: Client,
    services: &ServiceCache,
    zone: SharedZone,
    domain: String,
    ttl: u32,
) -> Vec<JoinHandle<()>> {
    let pods: Arc<RwLock<Pods>> = Arc::new(RwLock::new(BTreeMap::new()));
    let changed = Arc::new(Notify::new());
    services.subscribe(&changed);
    let wake = changed.clone();
    let services = services.clone();
    vec![
        tokio::spawn(feed(
            "cluster DNS",
            Api::<Pod>::all(client),
            pods.clone(),
            move || wake.notify_one(),
            |p| Some(PodInfo::from_pod(p)),
            |st: &mut Pods| st,
        )),
        tokio::spawn(rebuild_on_change(changed, COALESCE, move || {
            // Built under the locks rather than from a copy of the state.
            let built = Zone::build(
                &services.read(),
                &pods.read().expect("dns pods"),
                &domain,
                ttl,
            );
            tracing::debug!(names = built.len(), "cluster DNS zone rebuilt");
            let old = std::mem::replace(&mut *zone.write().expect("zone lock"), Arc::new(built));
            // The old zone goes outside the lock (or with its last reader).
            drop(old);
            // What the old zone and the watch events of the window held
            // is free now but still in the RSS until malloc gives it back.
            crate::memory::trim();
        })),
    ]
}
