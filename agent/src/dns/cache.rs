//! The watch-fed caches behind the zone: one kube-runtime watcher each
//! for Services, EndpointSlices and Pods of every namespace, each keeping
//! only what DNS needs of its objects in a shared [`ClusterState`] (a
//! re-list replaces its kind's whole map at once, as a reflector's store
//! does). A change wakes the rebuilder, which gathers the changes of the
//! next [`COALESCE`] and then swaps one new [`Zone`] in: objects applied
//! one by one (a thousand services from one `kubectl apply`) cost a build
//! per window, not one each, and every answer follows the cluster within
//! the window plus a build. When the control plane is away the watchers
//! retry with back-off and the last zone goes on answering.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
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

/// How long the rebuilder gathers changes before it builds.
pub const COALESCE: Duration = Duration::from_millis(100);

fn key_of<K: Resource>(obj: &K) -> Key {
    (obj.namespace().unwrap_or_default(), obj.name_any())
}

/// Starts the three watchers and the rebuilder.
pub fn spawn(client: Client, zone: SharedZone, domain: String, ttl: u32) -> Vec<JoinHandle<()>> {
    let state = Arc::new(Mutex::new(ClusterState::default()));
    let changed = Arc::new(Notify::new());
    let tasks = vec![
        tokio::spawn(feed(
            "cluster DNS",
            Api::<Service>::all(client.clone()),
            state.clone(),
            changed.clone(),
            |s| Some(SvcInfo::from_service(s)),
            |st| &mut st.services,
        )),
        tokio::spawn(feed(
            "cluster DNS",
            Api::<EndpointSlice>::all(client.clone()),
            state.clone(),
            changed.clone(),
            SliceInfo::from_slice,
            |st| &mut st.slices,
        )),
        tokio::spawn(feed(
            "cluster DNS",
            Api::<Pod>::all(client),
            state.clone(),
            changed.clone(),
            |p| Some(PodInfo::from_pod(p)),
            |st| &mut st.pods,
        )),
        tokio::spawn(rebuild_on_change(changed, COALESCE, move || {
            // Built under the lock rather than from a copy of the state.
            let built = Zone::build(&state.lock().expect("dns state"), &domain, ttl);
            tracing::debug!(names = built.len(), "cluster DNS zone rebuilt");
            let old = std::mem::replace(&mut *zone.write().expect("zone lock"), Arc::new(built));
            // The old zone goes outside the lock (or with its last reader).
            drop(old);
            // What the old zone and the watch events of the window held
            // is free now but still in the RSS until malloc gives it back.
            super::memory::trim();
        })),
    ];
    tasks
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
/// of each object what `slim` makes of it (None: nothing), and wakes
/// `changed` when the map changed. Any watch-fed cache of the agent (the
/// cluster DNS's, the service proxy's) runs on it; `who` names the cache
/// in its warnings.
pub async fn feed<S, K, V>(
    who: &'static str,
    api: Api<K>,
    state: Arc<Mutex<S>>,
    changed: Arc<Notify>,
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
        let mut st = state.lock().expect("watch cache state");
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use tokio::time::{sleep, Instant};

    use super::*;

    /// When each build ran and the last change it saw.
    type Builds = Arc<Mutex<Vec<(Instant, u64)>>>;

    /// Starts the rebuilder with a build that records when it ran and the
    /// last change it saw (`version`).
    fn rebuilder(window: Duration) -> (Arc<Notify>, Arc<AtomicU64>, Builds) {
        let changed = Arc::new(Notify::new());
        let version = Arc::new(AtomicU64::new(0));
        let builds = Arc::new(Mutex::new(Vec::new()));
        let (v, b) = (version.clone(), builds.clone());
        tokio::spawn(rebuild_on_change(changed.clone(), window, move || {
            b.lock()
                .unwrap()
                .push((Instant::now(), v.load(Ordering::SeqCst)));
        }));
        (changed, version, builds)
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_changes_is_one_build_a_window_after_the_first() {
        let (changed, version, builds) = rebuilder(COALESCE);
        sleep(Duration::from_secs(1)).await;
        assert!(builds.lock().unwrap().is_empty(), "no change, no build");

        let start = Instant::now();
        for i in 1..=20 {
            version.store(i, Ordering::SeqCst);
            changed.notify_one();
            sleep(Duration::from_millis(4)).await;
        }
        sleep(COALESCE - Duration::from_millis(81)).await;
        assert!(builds.lock().unwrap().is_empty(), "built before the window");
        sleep(Duration::from_secs(5)).await;
        let builds = builds.lock().unwrap().clone();
        assert_eq!(
            builds.len(),
            1,
            "20 changes within the window, one build: {builds:?}"
        );
        assert_eq!(builds[0].0 - start, COALESCE);
        assert_eq!(builds[0].1, 20, "the build saw every change");
    }

    #[tokio::test(start_paused = true)]
    async fn steady_changes_are_all_served_within_the_window_with_fewer_builds() {
        let (changed, version, builds) = rebuilder(COALESCE);
        let mut made = Vec::new();
        for i in 1..=40 {
            version.store(i, Ordering::SeqCst);
            changed.notify_one();
            made.push((i, Instant::now()));
            sleep(Duration::from_millis(30)).await;
        }
        sleep(Duration::from_secs(1)).await;
        let builds = builds.lock().unwrap().clone();
        for (i, at) in made {
            let (built, _) = builds
                .iter()
                .find(|(_, seen)| *seen >= i)
                .unwrap_or_else(|| panic!("change {i} never built: {builds:?}"));
            assert!(
                *built - at <= COALESCE,
                "change {i} waited {:?}",
                *built - at
            );
        }
        // 40 changes over 1.2 s: a build per window, not per change.
        assert!(
            (10..=13).contains(&builds.len()),
            "{} builds: {builds:?}",
            builds.len()
        );
    }
}
