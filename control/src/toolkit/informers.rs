//! [`Informers`]: one shared watch-fed cache (a kube-runtime reflector)
//! per resource type, so the pod cache is filled by one watch however many
//! controllers read it (kube-controller-manager's shared informer
//! factory), plus a stream of deletions, which shared reflector streams do
//! not carry.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, RwLock};

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{self, ReflectHandle, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::pod_index::{Indexer, PodIndex};

/// How many changes the pod cache buffers for its slowest subscriber
/// before its watch waits: pods are the one type whose changes come by
/// the thousand at once (a rollout, a relist of every pod) to a dozen
/// subscribers.
const POD_SUBSCRIBER_BUFFER: usize = 4096;

/// The same for every other cache. The buffer is allocated whole when the
/// cache is made (~100 bytes a slot), so 4096 slots cost each of the ~30
/// cached types 0.4 MiB whether or not anyone subscribes; a full buffer
/// only makes the watch wait for its subscribers, it loses nothing.
const SUBSCRIBER_BUFFER: usize = 256;

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
/// are being set up; [`Informers::start`] then starts one watch per type,
/// and [`Informers::stop`] ends them.
pub struct Informers {
    client: Client,
    caches: Mutex<HashMap<String, Entry>>,
    /// The watches [`Informers::start`] started, so that shutdown can end
    /// them rather than leave them re-watching an API that has stopped.
    /// (Handles, not a `JoinSet`: dropping the informers does not end the
    /// watches, which the caches handed out may still be fed by.)
    watches: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The pod cache's indexes, fed by its watch ([`Informers::pods`]).
    pod_keys: Arc<RwLock<Indexer>>,
}

fn type_key<K: Cached>() -> String {
    format!("{}/{}", K::api_version(&()), K::plural(&()))
}

fn new_entry<K: Cached>(pod_keys: &Arc<RwLock<Indexer>>) -> Entry {
    let is_pod = TypeId::of::<K>() == TypeId::of::<Pod>();
    let buffer = if is_pod {
        POD_SUBSCRIBER_BUFFER
    } else {
        SUBSCRIBER_BUFFER
    };
    // Only the pod cache is indexed.
    let index = is_pod.then(|| pod_keys.clone());
    let (reader, writer) = reflector::store_shared::<K>(buffer);
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
                .modify(trim::<K>)
                .default_backoff()
                // The index sees each event before the cache applies it
                // and its subscribers hear of it (see `pod_index`).
                .inspect(move |event| {
                    let (Some(index), Ok(event)) = (&index, event) else {
                        return;
                    };
                    if let Some(event) = (event as &dyn Any).downcast_ref::<watcher::Event<Pod>>() {
                        index.write().unwrap().apply(event);
                    }
                })
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
        async move { synced(&reader).await }.boxed()
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

/// What a cache keeps of an object: all of it but `managedFields`, which
/// no controller reads and which is the largest part of a small object
/// (kube-controller-manager's shared informers trim it the same way).
/// Controllers that write a cached object back send no managedFields, and
/// the API server then keeps the stored ones.
fn trim<K: Cached>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
    if let Some(pod) = (obj as &mut dyn Any).downcast_mut::<Pod>() {
        trim_pod(pod);
    }
}

/// What the pod cache keeps of a pod's volumes: those that name a claim
/// (a `persistentVolumeClaim` or an `ephemeral` one), the only volumes a
/// controller or the scheduler reads, and the containers' mounts of them.
/// The others, the service-account token's projected volume above all,
/// are the largest part of a typed pod in memory (a `Volume` holds every
/// kind of volume source inline) and no controller writes a cached pod
/// back whole (they patch), so nothing stored loses them.
fn trim_pod(pod: &mut Pod) {
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    let Some(volumes) = spec.volumes.as_mut() else {
        return;
    };
    volumes.retain(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some());
    let kept: Vec<String> = volumes.iter().map(|v| v.name.clone()).collect();
    if volumes.is_empty() {
        spec.volumes = None;
    } else {
        volumes.shrink_to_fit();
    }
    let containers = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten());
    for c in containers {
        let Some(mounts) = c.volume_mounts.as_mut() else {
            continue;
        };
        mounts.retain(|m| kept.contains(&m.name));
        if mounts.is_empty() {
            c.volume_mounts = None;
        } else {
            mounts.shrink_to_fit();
        }
    }
}

/// Waits until `store` has its first full list.
///
/// kube-runtime's `Store::wait_until_ready` keeps a single waker (a
/// oneshot channel), so of several tasks waiting on one shared cache at
/// once only the last to poll is woken; the others would wait for ever
/// (a controller that never starts). This checks without waiting on that
/// waker, backing off from 5 ms to 50 ms; once the cache is ready it
/// returns at once.
pub async fn synced<K: Cached>(store: &Store<K>) {
    let mut delay = std::time::Duration::from_millis(5);
    while store.wait_until_ready().now_or_never().is_none() {
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(std::time::Duration::from_millis(50));
    }
}

impl Informers {
    pub fn new(client: Client) -> Self {
        Informers {
            client,
            caches: Mutex::new(HashMap::new()),
            watches: Mutex::new(Vec::new()),
            pod_keys: Arc::default(),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    fn with_informer<K: Cached, T>(&self, f: impl FnOnce(&Informer<K>) -> T) -> T {
        let mut caches = self.caches.lock().unwrap();
        let entry = caches
            .entry(type_key::<K>())
            .or_insert_with(|| new_entry::<K>(&self.pod_keys));
        f(entry
            .typed
            .downcast_ref::<Informer<K>>()
            .expect("one type per key"))
    }

    /// The cache of every `K` in the cluster (all namespaces).
    pub fn store<K: Cached>(&self) -> Store<K> {
        self.with_informer::<K, _>(|i| i.reader.clone())
    }

    /// The pod cache with its indexes (by namespace, by controller).
    pub fn pods(&self) -> PodIndex {
        PodIndex::new(self.store::<Pod>(), self.pod_keys.clone())
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
        let mut watches = self.watches.lock().unwrap();
        for entry in caches.values_mut() {
            if let Some(start) = entry.start.take() {
                watches.push(tokio::spawn(start(self.client.clone())));
            }
        }
    }

    /// Ends every watch [`Informers::start`] started and waits until they
    /// are gone (the caches keep what they hold).
    pub async fn stop(&self) {
        let watches = std::mem::take(&mut *self.watches.lock().unwrap());
        for w in &watches {
            w.abort();
        }
        futures::future::join_all(watches).await;
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

#[cfg(test)]
mod tests {
    use super::super::run_controller;
    use super::super::testing::{eventually, TestApi};
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;
    use kube::runtime::controller::Action;
    use kube::runtime::Controller;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

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
    async fn every_task_waiting_for_a_cache_is_released() {
        let api = TestApi::start().await;
        let shared = api.shared();
        let pods = shared.informers.store::<Pod>();
        // Several controllers wait for the one pod cache at once, each in
        // its own task, before the watch starts.
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let pods = pods.clone();
                tokio::spawn(async move { synced(&pods).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        shared.informers.start();
        for w in waiters {
            tokio::time::timeout(Duration::from_secs(5), w)
                .await
                .expect("a waiter was never released")
                .unwrap();
        }
    }

    /// After SIGTERM the API refuses new watches; the informers must back
    /// off rather than re-watch in a loop (which kept a core busy and the
    /// process from exiting), and stop when told.
    #[tokio::test]
    async fn watches_back_off_once_the_api_shuts_down_and_stop_when_told() {
        let api = TestApi::start().await;
        let shared = api.shared();
        let _pods = shared.informers.store::<Pod>();
        let _sets = shared.informers.store::<ReplicaSet>();
        shared.informers.start();
        shared.informers.wait_ready().await;
        let before = api.watch_requests();
        api.shut_down();
        // A rate, measured over a second: kube-runtime's back-off waits
        // 800 ms (with jitter) before the first retry, so two watches make
        // a handful of requests at most; a load can only make fewer. The
        // loop this replaces made thousands.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let during = api.watch_requests() - before;
        assert!(
            during <= 2 * 3,
            "{during} watch requests in the second after shutdown"
        );
        tokio::time::timeout(Duration::from_secs(5), shared.informers.stop())
            .await
            .expect("the informers' watches did not stop");
    }

    /// The caches keep every field but managedFields, which no controller
    /// reads and which are the largest part of a small object.
    #[tokio::test]
    async fn caches_keep_objects_without_their_managed_fields() {
        let api = TestApi::start().await;
        let shared = api.shared();
        let pods = shared.informers.store::<Pod>();
        shared.informers.start();
        shared.informers.wait_ready().await;
        let uid = web_set(&api).await;
        web_pod(&api, &uid).await;
        let stored = api.api::<Pod>(Some("default")).get("web-1").await.unwrap();
        assert!(
            stored
                .metadata
                .managed_fields
                .as_ref()
                .is_some_and(|m| !m.is_empty()),
            "the API records who wrote the pod"
        );
        let cached = eventually("the pod in the cache", Duration::from_secs(5), || async {
            pods.state().into_iter().next()
        })
        .await;
        assert_eq!(cached.metadata.managed_fields, None);
        // Volumes that name no claim are not kept either (the next test);
        // everything else is.
        let mut expected = stored.clone();
        expected.metadata.managed_fields = None;
        let mut cached = (*cached).clone();
        for pod in [&mut expected, &mut cached] {
            let spec = pod.spec.as_mut().unwrap();
            spec.volumes = None;
            spec.containers[0].volume_mounts = None;
        }
        assert_eq!(cached, expected);
    }

    /// The pod cache keeps the volumes that name a claim, which the
    /// scheduler and the volume controllers read, and drops the others
    /// (the service account's projected token above all) with their
    /// mounts; the stored pod keeps them all.
    #[tokio::test]
    async fn the_pod_cache_keeps_only_volumes_that_name_a_claim() {
        let api = TestApi::start().await;
        let shared = api.shared();
        let pods = shared.informers.store::<Pod>();
        shared.informers.start();
        shared.informers.wait_ready().await;
        let mount = |name: &str| serde_json::json!({"name": name, "mountPath": format!("/{name}")});
        let _: Pod = api
            .create(serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "db", "namespace": "default"},
                "spec": {
                    "containers": [{"name": "c", "image": "i",
                        "volumeMounts": [mount("data"), mount("settings"), mount("scratch")]}],
                    "initContainers": [{"name": "init", "image": "i",
                        "volumeMounts": [mount("scratch"), mount("data")]}],
                    "volumes": [
                        {"name": "settings", "configMap": {"name": "settings"}},
                        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                        {"name": "scratch", "emptyDir": {}},
                    ]}
            }))
            .await;
        let names = |pod: &Pod| -> Vec<String> {
            let spec = pod.spec.as_ref().unwrap();
            spec.volumes
                .iter()
                .flatten()
                .map(|v| v.name.clone())
                .collect()
        };
        let mounts = |c: &k8s_openapi::api::core::v1::Container| -> Vec<String> {
            c.volume_mounts
                .iter()
                .flatten()
                .map(|m| m.name.clone())
                .collect()
        };
        let stored = api.api::<Pod>(Some("default")).get("db").await.unwrap();
        assert!(
            ["settings", "data", "scratch"]
                .iter()
                .all(|v| names(&stored).contains(&v.to_string())),
            "the stored pod has all its volumes: {:?}",
            names(&stored)
        );
        let cached = eventually("the pod in the cache", Duration::from_secs(5), || async {
            pods.state().into_iter().next()
        })
        .await;
        assert_eq!(names(&cached), ["data"]);
        let spec = cached.spec.as_ref().unwrap();
        assert_eq!(mounts(&spec.containers[0]), ["data"]);
        assert_eq!(mounts(&spec.init_containers.as_ref().unwrap()[0]), ["data"]);
        assert_eq!(
            spec.volumes.as_ref().unwrap()[0]
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "data"
        );
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
}
