//! What every controller shares, on top of kube-runtime.
//!
//! kube-runtime gives us the watcher, the reflector (a watch-fed cache with
//! one writer and many readers) and `Controller`, whose scheduler already
//! de-duplicates queued keys, runs one reconcile per object at a time,
//! honours `Action::requeue` and opens one tracing span per reconcile
//! naming the object and the reason. This module adds what it lacks:
//!
//! - [`Informers`]: one shared reflector per resource type, so the pod
//!   cache is filled by one watch however many controllers read it
//!   (kube-controller-manager's shared informer factory);
//! - [`KeyBackoff`] and [`run_controller`]: per-key exponential back-off on
//!   errors, reset by a success (client-go's rate-limited work queue);
//! - [`Expectations`]: a controller does not act on an owner again until
//!   its cache has seen the objects it just created or deleted;
//! - [`Clock`]: time as a dependency, so unit tests move it by hand.

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ReflectHandle, Store};
use kube::runtime::{watcher, Controller, WatchStreamExt};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use bosun::events::{EventRecorder, EventSource};

/// The current time, as controllers see it.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
}

/// The wall clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that moves only when told to, for unit tests.
pub struct FakeClock(Mutex<DateTime<Utc>>);

impl FakeClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        FakeClock(Mutex::new(start))
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self.0.lock().unwrap();
        *now += chrono::Duration::from_std(by).expect("a sane duration");
    }

    pub fn set(&self, to: DateTime<Utc>) {
        *self.0.lock().unwrap() = to;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}

/// An API timestamp as chrono time (k8s-openapi uses jiff).
pub fn to_chrono(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> DateTime<Utc> {
    DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
        .unwrap_or_default()
}

/// A chrono time as an API timestamp.
pub fn from_chrono(t: DateTime<Utc>) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32)
            .unwrap_or_default(),
    )
}

/// How many changes a shared cache buffers for its slowest subscriber
/// before the watch waits.
const SUBSCRIBER_BUFFER: usize = 4096;

/// The bounds a resource type needs to be cached.
pub trait Cached:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> Cached for K where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

type Starter = Box<dyn FnOnce(Client) -> BoxFuture<'static, ()> + Send>;

/// One cache: its typed halves (an `Informer<K>` behind `Any`) and the
/// type-erased hooks to start it and to wait for it.
struct Entry {
    typed: Box<dyn Any + Send>,
    start: Option<Starter>,
    ready: Box<dyn Fn() -> BoxFuture<'static, ()> + Send>,
}

struct Informer<K: Cached> {
    reader: Store<K>,
    /// Taken by the watch when it starts; subscriptions need it before.
    writer: Arc<Mutex<Option<reflector::store::Writer<K>>>>,
    /// Who hears of deletions (shared reflector streams carry only
    /// applied objects).
    deletions: Deletions<K>,
}

type Deletions<K> = Arc<Mutex<Vec<futures::channel::mpsc::UnboundedSender<K>>>>;

/// One watch-fed cache per resource type, shared by every controller.
///
/// Controllers ask for the caches and subscriptions they need while they
/// are being set up; [`Informers::start`] then starts one watch per type.
pub struct Informers {
    client: Client,
    caches: Mutex<HashMap<String, Entry>>,
}

fn type_key<K: Cached>() -> String {
    format!("{}/{}", K::api_version(&()), K::plural(&()))
}

fn new_entry<K: Cached>() -> Entry {
    let (reader, writer) = reflector::store_shared::<K>(SUBSCRIBER_BUFFER);
    let writer = Arc::new(Mutex::new(Some(writer)));
    let deletions: Deletions<K> = Arc::default();
    let start_writer = writer.clone();
    let start_deletions = deletions.clone();
    let start: Starter = Box::new(move |client: Client| {
        let writer = start_writer.lock().unwrap().take();
        async move {
            let Some(writer) = writer else { return };
            let api: Api<K> = Api::all(client);
            let stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .reflect_shared(writer);
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Delete(obj)) => {
                        let mut listeners = start_deletions.lock().unwrap();
                        listeners.retain(|tx| tx.unbounded_send(obj.clone()).is_ok());
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::debug!(resource = %type_key::<K>(), error = %e, "watch error");
                    }
                }
            }
        }
        .boxed()
    });
    let ready_reader = reader.clone();
    let ready = Box::new(move || {
        let reader = ready_reader.clone();
        async move {
            let _ = reader.wait_until_ready().await;
        }
        .boxed()
    });
    Entry {
        typed: Box::new(Informer {
            reader,
            writer,
            deletions,
        }),
        start: Some(start),
        ready,
    }
}

impl Informers {
    pub fn new(client: Client) -> Self {
        Informers {
            client,
            caches: Mutex::new(HashMap::new()),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    fn with_informer<K: Cached, T>(&self, f: impl FnOnce(&Informer<K>) -> T) -> T {
        let mut caches = self.caches.lock().unwrap();
        let entry = caches.entry(type_key::<K>()).or_insert_with(new_entry::<K>);
        f(entry
            .typed
            .downcast_ref::<Informer<K>>()
            .expect("one type per key"))
    }

    /// The cache of every `K` in the cluster (all namespaces).
    pub fn store<K: Cached>(&self) -> Store<K> {
        self.with_informer::<K, _>(|i| i.reader.clone())
    }

    /// A stream of every object the cache of `K` applies, for
    /// `Controller::for_shared_stream` / `owns_shared_stream` /
    /// `watches_shared_stream`. Must be taken before [`Informers::start`],
    /// and must be polled: the watch waits for its slowest subscriber.
    pub fn subscribe<K: Cached>(&self) -> ReflectHandle<K> {
        self.with_informer::<K, _>(|i| {
            i.writer
                .lock()
                .unwrap()
                .as_ref()
                .expect("subscribe to a cache before Informers::start")
                .subscribe()
                .expect("shared stores can be subscribed to")
        })
    }

    /// A stream of every `K` the cache sees deleted, shaped for
    /// `Controller::owns_stream` / `watches_stream` (shared streams carry
    /// only applied objects, so an owner would not hear that one of its
    /// dependents went). Deletions missed while a watch was down are not
    /// replayed; controllers' periodic resyncs cover them.
    pub fn deleted<K: Cached>(
        &self,
    ) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        self.with_informer::<K, _>(|i| i.deletions.lock().unwrap().push(tx));
        rx.map(Ok)
    }

    /// Starts one watch per cache asked for so far (and not yet started).
    pub fn start(&self) {
        let mut caches = self.caches.lock().unwrap();
        for entry in caches.values_mut() {
            if let Some(start) = entry.start.take() {
                tokio::spawn(start(self.client.clone()));
            }
        }
    }

    /// Waits until every cache has its first full list.
    pub async fn wait_ready(&self) {
        let waits: Vec<_> = {
            let caches = self.caches.lock().unwrap();
            caches.values().map(|e| (e.ready)()).collect()
        };
        futures::future::join_all(waits).await;
    }
}

/// Per-key exponential back-off for failed reconciles, as client-go's
/// rate-limited work queue: 5 ms doubling to at most 1000 s, forgotten
/// on the first success.
#[derive(Default)]
pub struct KeyBackoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl KeyBackoff {
    const BASE: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(1000);

    /// The delay before retrying `key` after one more failure.
    pub fn next(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap();
        let n = failures.entry(key.to_string()).or_insert(0);
        let delay = Self::BASE
            .checked_mul(1u32.checked_shl(*n).unwrap_or(u32::MAX))
            .unwrap_or(Self::MAX)
            .min(Self::MAX);
        *n = n.saturating_add(1);
        delay
    }

    pub fn forget(&self, key: &str) {
        self.failures.lock().unwrap().remove(key);
    }

    pub fn failures(&self, key: &str) -> u32 {
        self.failures.lock().unwrap().get(key).copied().unwrap_or(0)
    }
}

/// The owner reference with `controller: true`, if the object has one.
pub fn controller_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// `namespace/name` (or `name`) of an object: the work-queue key.
pub fn key_of<K: Resource>(obj: &K) -> String {
    match obj.meta().namespace.as_deref() {
        Some(ns) => format!("{ns}/{}", obj.meta().name.as_deref().unwrap_or_default()),
        None => obj.meta().name.clone().unwrap_or_default(),
    }
}

/// Runs `controller` with `reconcile` until it ends, with per-key
/// exponential back-off on errors. kube-runtime's loop opens the span per
/// reconcile (object and reason); failures are logged here once each.
pub async fn run_controller<K, C, E, R, Fut>(
    name: &'static str,
    controller: Controller<K>,
    ctx: Arc<C>,
    mut reconcile: R,
) where
    K: Cached + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Debug + Unpin,
    C: Send + Sync + 'static,
    E: std::error::Error + Send + Sync + 'static,
    R: FnMut(Arc<K>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
{
    let backoff = Arc::new(KeyBackoff::default());
    let on_success = backoff.clone();
    let wrapped = move |obj: Arc<K>, ctx: Arc<C>| {
        let key = key_of(obj.as_ref());
        let backoff = on_success.clone();
        let fut = reconcile(obj, ctx);
        async move {
            let result = fut.await;
            if result.is_ok() {
                backoff.forget(&key);
            }
            result
        }
    };
    let error_policy = move |obj: Arc<K>, error: &E, _: Arc<C>| {
        let key = key_of(obj.as_ref());
        let delay = backoff.next(&key);
        tracing::warn!(controller = name, %key, %error, retry_in = ?delay, "reconcile failed");
        Action::requeue(delay)
    };
    controller
        .run(wrapped, error_policy, ctx)
        .for_each(|result| {
            if let Err(e) = result {
                tracing::debug!(controller = name, error = %e, "controller loop");
            }
            futures::future::ready(())
        })
        .await;
}

/// How long an expectation may stay unmet before the controller acts
/// anyway (a lost watch event must not wedge an owner forever).
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Default)]
struct Pending {
    creates: HashSet<String>,
    deletes: HashSet<String>,
    since: Option<Instant>,
}

/// What a controller is waiting for its cache to see, per owner key.
///
/// Kubernetes' controllers count expected adds and deletes and lower the
/// counts from watch events. Here they are tracked by identity instead, so
/// they are checked against the cache's current state (level-triggered):
/// a created object is seen once the cache holds it, a deleted one once
/// the cache no longer holds it as live.
#[derive(Default)]
pub struct Expectations {
    pending: Mutex<HashMap<String, Pending>>,
}

impl Expectations {
    /// The controller just created `name` for `owner`.
    pub fn expect_create(&self, owner: &str, name: &str) {
        let mut pending = self.pending.lock().unwrap();
        let p = pending.entry(owner.to_string()).or_default();
        p.creates.insert(name.to_string());
        p.since.get_or_insert_with(Instant::now);
    }

    /// The controller just deleted the object with `uid` for `owner`.
    pub fn expect_delete(&self, owner: &str, uid: &str) {
        let mut pending = self.pending.lock().unwrap();
        let p = pending.entry(owner.to_string()).or_default();
        p.deletes.insert(uid.to_string());
        p.since.get_or_insert_with(Instant::now);
    }

    /// True when the cache has caught up with everything `owner` expects:
    /// `created(name)` tells whether the cache holds a created object,
    /// `gone(uid)` whether a deleted one has left it. Met expectations are
    /// dropped; unmet ones expire after [`EXPECTATIONS_TIMEOUT`].
    pub fn satisfied(
        &self,
        owner: &str,
        created: impl Fn(&str) -> bool,
        gone: impl Fn(&str) -> bool,
    ) -> bool {
        let mut pending = self.pending.lock().unwrap();
        let Some(p) = pending.get_mut(owner) else {
            return true;
        };
        p.creates.retain(|n| !created(n));
        p.deletes.retain(|u| !gone(u));
        let expired = p.since.is_some_and(|s| s.elapsed() > EXPECTATIONS_TIMEOUT);
        if p.creates.is_empty() && p.deletes.is_empty() || expired {
            if expired {
                tracing::warn!(%owner, "expectations expired; acting on the cache as it is");
            }
            pending.remove(owner);
            true
        } else {
            false
        }
    }

    /// Forgets everything about `owner` (it was deleted).
    pub fn forget(&self, owner: &str) {
        self.pending.lock().unwrap().remove(owner);
    }
}

/// What the controllers of one control plane share.
pub struct Shared {
    pub client: Client,
    pub informers: Informers,
    pub clock: Arc<dyn Clock>,
}

impl Shared {
    pub fn new(client: Client, clock: Arc<dyn Clock>) -> Arc<Self> {
        Arc::new(Shared {
            informers: Informers::new(client.clone()),
            client,
            clock,
        })
    }

    /// An event recorder reporting as `component` (e.g.
    /// `deployment-controller`, `default-scheduler`).
    pub fn recorder(&self, component: &str) -> EventRecorder {
        EventRecorder::new(
            self.client.clone(),
            EventSource {
                component: component.to_string(),
                host: None,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_per_key_and_resets() {
        let b = KeyBackoff::default();
        assert_eq!(b.next("a"), Duration::from_millis(5));
        assert_eq!(b.next("a"), Duration::from_millis(10));
        assert_eq!(b.next("a"), Duration::from_millis(20));
        assert_eq!(b.next("b"), Duration::from_millis(5));
        b.forget("a");
        assert_eq!(b.next("a"), Duration::from_millis(5));
        for _ in 0..40 {
            b.next("c");
        }
        assert_eq!(b.next("c"), KeyBackoff::MAX);
    }

    #[test]
    fn expectations_wait_for_the_cache() {
        let e = Expectations::default();
        assert!(e.satisfied("ns/rs", |_| false, |_| false));
        e.expect_create("ns/rs", "rs-a");
        e.expect_create("ns/rs", "rs-b");
        e.expect_delete("ns/rs", "uid-1");
        assert!(!e.satisfied("ns/rs", |n| n == "rs-a", |_| true));
        // rs-a stays seen; rs-b arrives now.
        assert!(e.satisfied("ns/rs", |n| n == "rs-b", |_| true));
        assert!(e.satisfied("ns/rs", |_| false, |_| false));
    }

    use crate::controllers::testing::{eventually, TestApi};
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug, thiserror::Error)]
    #[error("never")]
    struct Never;

    /// Runs `controller` with a reconciler that only counts its calls.
    fn count_reconciles(controller: Controller<ReplicaSet>) -> Arc<AtomicUsize> {
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        tokio::spawn(run_controller(
            "test",
            controller,
            Arc::new(()),
            move |_rs: Arc<ReplicaSet>, _| {
                counter.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, Never>(Action::await_change()) }
            },
        ));
        seen
    }

    /// A ReplicaSet `web`; returns its uid.
    async fn web_set(api: &TestApi) -> String {
        let rs: ReplicaSet = api
            .create(serde_json::json!({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                         "template": {"metadata": {"labels": {"app": "web"}},
                                      "spec": {"containers": [{"name": "c", "image": "i"}]}}}
            }))
            .await;
        rs.metadata.uid.unwrap()
    }

    /// A pod `web-1` controlled by the set with `uid`.
    async fn web_pod(api: &TestApi, uid: &str) {
        let _: Pod = api
            .create(serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "name": "web", "uid": uid, "controller": true}]},
                "spec": {"containers": [{"name": "c", "image": "i"}]}
            }))
            .await;
    }

    async fn reconciles_reach(seen: &AtomicUsize, what: &str, n: usize) {
        eventually(what, Duration::from_secs(5), || async {
            (seen.load(Ordering::SeqCst) >= n).then_some(())
        })
        .await;
    }

    #[tokio::test]
    async fn shared_caches_feed_controllers() {
        let api = TestApi::start().await;
        let shared = api.shared();
        let pods = shared.informers.store::<Pod>();
        let controller = Controller::for_shared_stream(
            shared.informers.subscribe::<ReplicaSet>(),
            shared.informers.store::<ReplicaSet>(),
        )
        .owns_shared_stream(shared.informers.subscribe::<Pod>());
        shared.informers.start();
        shared.informers.wait_ready().await;
        let seen = count_reconciles(controller);

        let uid = web_set(&api).await;
        reconciles_reach(&seen, "a reconcile of the new set", 1).await;
        let before = seen.load(Ordering::SeqCst);
        web_pod(&api, &uid).await;
        eventually(
            "the pod in the shared cache",
            Duration::from_secs(5),
            || async { (pods.state().len() == 1).then_some(()) },
        )
        .await;
        reconciles_reach(&seen, "a reconcile of the new pod's owner", before + 1).await;
    }

    #[tokio::test]
    async fn deletions_of_dependents_wake_their_owner() {
        let api = TestApi::start().await;
        let shared = api.shared();
        let pods = shared.informers.store::<Pod>();
        // Only deletions of pods trigger the owner here.
        let controller = Controller::for_shared_stream(
            shared.informers.subscribe::<ReplicaSet>(),
            shared.informers.store::<ReplicaSet>(),
        )
        .owns_stream(shared.informers.deleted::<Pod>());
        shared.informers.start();
        shared.informers.wait_ready().await;
        let seen = count_reconciles(controller);

        let uid = web_set(&api).await;
        web_pod(&api, &uid).await;
        eventually("the pod in the cache", Duration::from_secs(5), || async {
            (pods.state().len() == 1).then_some(())
        })
        .await;
        reconciles_reach(&seen, "the first reconcile", 1).await;
        assert_eq!(
            seen.load(Ordering::SeqCst),
            1,
            "a new pod alone wakes nobody"
        );
        api.api::<Pod>(Some("default"))
            .delete("web-1", &Default::default())
            .await
            .unwrap();
        reconciles_reach(&seen, "a reconcile after the pod was deleted", 2).await;
    }

    #[test]
    fn fake_clock_moves_only_when_told() {
        let start = Utc::now();
        let c = FakeClock::new(start);
        assert_eq!(c.now(), start);
        c.advance(Duration::from_secs(90));
        assert_eq!((c.now() - start).num_seconds(), 90);
    }
}
