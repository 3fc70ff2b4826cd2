//! Watch-fed caches, as kube-runtime's reflector but keeping only a slim
//! value of each object: [`feed`] keeps a map equal to what the API holds
//! of one kind (a re-list replaces the whole map at once, as a
//! reflector's store does) and says when it changed; [`rebuild_on_change`]
//! turns a burst of such changes into one rebuild. The shared Services
//! and EndpointSlices ([`super::ServiceCache`]) and the cluster DNS's Pods
//! run on them.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

use super::model::Key;

fn object_key<K: Resource>(obj: &K) -> Key {
    (obj.namespace().unwrap_or_default(), obj.name_any())
}

/// Calls `build` once per burst of changes: after the first change, waits
/// `window` for more, then builds from everything seen so far. Changes
/// that come during the build get a build of their own, a window later.
pub async fn rebuild_on_change(changed: Arc<Notify>, window: Duration, mut build: impl FnMut()) {
    loop {
        changed.notified().await;
        tokio::time::sleep(window).await;
        // What changed during the window is in this build: take the
        // wake-up it left, so it does not cause another one.
        let _ = changed.notified().now_or_never();
        build();
    }
}

/// Keeps `map_of(state)` equal to what the API holds of kind `K`, keeping
/// of each object what `slim` makes of it (None: nothing), and calls
/// `changed` when the map changed. `who` names the cache in its warnings.
pub async fn feed<S, K, V>(
    who: &'static str,
    api: Api<K>,
    state: Arc<RwLock<S>>,
    changed: impl Fn() + Send,
    slim: fn(&K) -> Option<V>,
    map_of: fn(&mut S) -> &mut BTreeMap<Key, V>,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
    V: PartialEq + Send,
{
    let kind = K::kind(&Default::default()).to_string();
    // The initial list as a watch (sendInitialEvents): objects come one
    // by one, each slimmed as it arrives, instead of pages of 500 whole
    // objects (and their JSON) held at once.
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
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
                    tracing::warn!(kind, error = %e, "{who}: watching; retrying");
                    warned = true;
                }
                continue;
            }
        };
        let mut st = state.write().expect("watch cache state");
        let dirty = apply(map_of(&mut st), &mut relist, event, slim);
        drop(st);
        if dirty {
            changed();
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
                r.insert(object_key(&obj), v);
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
            let key = object_key(&obj);
            match slim(&obj) {
                Some(v) if map.get(&key) == Some(&v) => false,
                Some(v) => {
                    map.insert(key, v);
                    true
                }
                None => map.remove(&key).is_some(),
            }
        }
        Event::Delete(obj) => map.remove(&object_key(&obj)).is_some(),
    }
}
