//! The watch-fed caches behind the zone: one kube-runtime watcher each
//! for Services, EndpointSlices and Pods of every namespace, each keeping
//! only what DNS needs of its objects in a shared [`ClusterState`] (a
//! re-list replaces its kind's whole map at once, as a reflector's store
//! does). Any change wakes the rebuilder, which swaps a new [`Zone`] in;
//! wake-ups that come while it builds fold into one more build. When the
//! control plane is away the watchers retry with back-off and the last
//! zone goes on answering.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::zone::{ClusterState, Key, PodInfo, SliceInfo, SvcInfo};
use super::{SharedZone, Zone};

fn key_of<K: Resource>(obj: &K) -> Key {
    (obj.namespace().unwrap_or_default(), obj.name_any())
}

/// Starts the three watchers and the rebuilder.
pub fn spawn(client: Client, zone: SharedZone, domain: String, ttl: u32) -> Vec<JoinHandle<()>> {
    let state = Arc::new(Mutex::new(ClusterState::default()));
    let changed = Arc::new(Notify::new());
    let tasks = vec![
        tokio::spawn(feed(
            Api::<Service>::all(client.clone()),
            state.clone(),
            changed.clone(),
            |s| Some(SvcInfo::from_service(s)),
            |st| &mut st.services,
        )),
        tokio::spawn(feed(
            Api::<EndpointSlice>::all(client.clone()),
            state.clone(),
            changed.clone(),
            SliceInfo::from_slice,
            |st| &mut st.slices,
        )),
        tokio::spawn(feed(
            Api::<Pod>::all(client),
            state.clone(),
            changed.clone(),
            |p| Some(PodInfo::from_pod(p)),
            |st| &mut st.pods,
        )),
        tokio::spawn(async move {
            loop {
                changed.notified().await;
                // Built under the lock rather than from a copy of the state.
                let built = Zone::build(&state.lock().expect("dns state"), &domain, ttl);
                tracing::debug!(names = built.len(), "cluster DNS zone rebuilt");
                *zone.write().expect("zone lock") = Arc::new(built);
            }
        }),
    ];
    tasks
}

/// Keeps `map_of(state)` equal to what the API holds of kind `K`.
async fn feed<K, V>(
    api: Api<K>,
    state: Arc<Mutex<ClusterState>>,
    changed: Arc<Notify>,
    slim: fn(&K) -> Option<V>,
    map_of: fn(&mut ClusterState) -> &mut BTreeMap<Key, V>,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
    V: PartialEq + Send,
{
    let kind = K::kind(&Default::default()).to_string();
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut relist: Option<BTreeMap<Key, V>> = None;
    let mut warned = false;
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(e) => {
                warned = false;
                e
            }
            Err(e) => {
                if !warned {
                    tracing::warn!(kind, error = %e, "cluster DNS: watching; retrying");
                    warned = true;
                }
                continue;
            }
        };
        let mut st = state.lock().expect("dns state");
        let dirty = apply(map_of(&mut st), &mut relist, event, slim);
        drop(st);
        if dirty {
            changed.notify_one();
        }
    }
}

/// Applies one watch event to `map` (and to `relist` while a re-list is
/// under way: its objects replace the map's at once when it is done, so
/// objects deleted while the watch was down go). True if the map changed.
pub fn apply<K: Resource, V: PartialEq>(
    map: &mut BTreeMap<Key, V>,
    relist: &mut Option<BTreeMap<Key, V>>,
    event: Event<K>,
    slim: fn(&K) -> Option<V>,
) -> bool {
    match event {
        Event::Init => {
            *relist = Some(BTreeMap::new());
            false
        }
        Event::InitApply(obj) => {
            if let (Some(r), Some(v)) = (relist.as_mut(), slim(&obj)) {
                r.insert(key_of(&obj), v);
            }
            false
        }
        Event::InitDone => match relist.take() {
            Some(r) if r != *map => {
                *map = r;
                true
            }
            _ => false,
        },
        Event::Apply(obj) => {
            let key = key_of(&obj);
            match slim(&obj) {
                Some(v) if map.get(&key) == Some(&v) => false,
                Some(v) => {
                    map.insert(key, v);
                    true
                }
                None => map.remove(&key).is_some(),
            }
        }
        Event::Delete(obj) => map.remove(&key_of(&obj)).is_some(),
    }
}
