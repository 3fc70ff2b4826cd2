//! [`ServiceCache`]: one watch of Services and one of EndpointSlices for
//! the whole agent, slimmed to [`ServiceState`], read by the cluster DNS
//! and the service proxy alike. Each consumer subscribes a [`Notify`] and
//! rebuilds from the state when woken (its own coalescing window), so
//! both follow a change as soon as either would with watches of its own.

use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, Weak};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::Client;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::model::{ServiceState, SliceInfo, SvcInfo};
use super::watch::feed;

/// Who to wake when the state changed.
#[derive(Default)]
struct Subscribers(Mutex<Vec<Weak<Notify>>>);

impl Subscribers {
    fn add(&self, n: &Arc<Notify>) {
        let mut subs = self.0.lock().expect("subscribers");
        subs.retain(|s| s.strong_count() > 0);
        subs.push(Arc::downgrade(n));
    }

    fn notify(&self) {
        for s in self.0.lock().expect("subscribers").iter() {
            if let Some(n) = s.upgrade() {
                n.notify_one();
            }
        }
    }
}

struct Watches(OnceLock<Vec<JoinHandle<()>>>);

impl Drop for Watches {
    fn drop(&mut self) {
        for t in self.0.get().into_iter().flatten() {
            t.abort();
        }
    }
}

/// The agent's one cache of Services and EndpointSlices: clones share
/// it; the watches start with the first subscriber and stop when the
/// last clone goes.
#[derive(Clone)]
pub struct ServiceCache {
    client: Client,
    state: Arc<RwLock<ServiceState>>,
    subscribers: Arc<Subscribers>,
    watches: Arc<Watches>,
}

impl std::fmt::Debug for ServiceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceCache")
            .field("started", &self.watches.0.get().is_some())
            .finish_non_exhaustive()
    }
}

impl ServiceCache {
    /// A cache that watches through `client` once someone subscribes.
    pub fn new(client: Client) -> ServiceCache {
        ServiceCache {
            client,
            state: Arc::default(),
            subscribers: Arc::default(),
            watches: Arc::new(Watches(OnceLock::new())),
        }
    }

    /// Wakes `changed` on every change from now on, and once now (for
    /// what the cache already holds); the first call starts the watches.
    pub fn subscribe(&self, changed: &Arc<Notify>) {
        self.subscribers.add(changed);
        changed.notify_one();
        self.watches.0.get_or_init(|| {
            let subs = self.subscribers.clone();
            let wake = move || subs.notify();
            let subs = self.subscribers.clone();
            let wake_too = move || subs.notify();
            vec![
                tokio::spawn(feed(
                    "services watch",
                    Api::<Service>::all(self.client.clone()),
                    self.state.clone(),
                    wake,
                    |s| Some(SvcInfo::from_service(s)),
                    |st: &mut ServiceState| &mut st.services,
                )),
                tokio::spawn(feed(
                    "services watch",
                    Api::<EndpointSlice>::all(self.client.clone()),
                    self.state.clone(),
                    wake_too,
                    SliceInfo::from_slice,
                    |st: &mut ServiceState| &mut st.slices,
                )),
            ]
        });
    }

    /// The Services and EndpointSlices as the watches last left them.
    pub fn read(&self) -> RwLockReadGuard<'_, ServiceState> {
        self.state.read().expect("service state")
    }
}
