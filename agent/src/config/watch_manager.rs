//! The ConfigMap and Secret managers, as the kubelet's
//! `watch_based_manager`: the objects the node's pods reference come from
//! watches shared by all pods, not from a GET on every sync.
//!
//! - A pod registers the names it references ([`WatchBasedManager::register_pod`]);
//!   the first reference to an object starts one watch of it alone
//!   (`fieldSelector=metadata.name=NAME` in its namespace, which the node
//!   authorizer allows for an object a pod of the node references), and
//!   the last pod to let go of it ([`WatchBasedManager::release_pod`])
//!   stops that watch.
//! - [`WatchBasedManager::get`] reads the watched copy (waiting for the
//!   watch's first list), so a sync makes no request.
//! - Every change of an object wakes the pods that reference it: a
//!   configMap or secret volume follows its object within moments, and a
//!   container waiting with CreateContainerConfigError starts as soon as
//!   the object it needs appears.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::NamespaceResourceScope;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

/// A kind the manager watches, and how the kubelet names it in errors.
pub trait Watched:
    Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
    /// `configMap` / `secret`, as in `couldn't get configMap ns/name`.
    const KIND: &'static str;
}

impl Watched for ConfigMap {
    const KIND: &'static str = "configMap";
}

impl Watched for Secret {
    const KIND: &'static str = "secret";
}

/// The ConfigMaps the node's pods reference.
pub type ConfigMapManager = WatchBasedManager<ConfigMap>;
/// The Secrets the node's pods reference.
pub type SecretManager = WatchBasedManager<Secret>;

/// How long a read waits for a new watch's first list before it fails.
const FIRST_LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// What a watch knows of its object: nothing yet (before its first list),
/// or the object, `None` when it does not exist.
#[derive(Debug)]
enum Known<K> {
    Pending,
    Synced(Option<Arc<K>>),
}

/// (namespace, name)
type Key = (String, String);

/// One watched object: its latest copy, the watch feeding it, and the
/// pods (by UID) that reference it, with what wakes each.
struct Entry<K> {
    known: watch::Receiver<Known<K>>,
    task: JoinHandle<()>,
    pods: HashMap<String, Arc<Notify>>,
}

struct Inner<K> {
    objects: HashMap<Key, Entry<K>>,
    /// What each pod references.
    pods: HashMap<String, BTreeSet<Key>>,
}

/// One node's watched objects of kind `K`, shared by all its pod workers.
pub struct WatchBasedManager<K> {
    client: Client,
    inner: Arc<Mutex<Inner<K>>>,
}

impl<K> Clone for WatchBasedManager<K> {
    fn clone(&self) -> Self {
        WatchBasedManager {
            client: self.client.clone(),
            inner: self.inner.clone(),
        }
    }
}

impl<K: Watched> WatchBasedManager<K> {
    pub fn new(client: Client) -> Self {
        WatchBasedManager {
            client,
            inner: Arc::new(Mutex::new(Inner {
                objects: HashMap::new(),
                pods: HashMap::new(),
            })),
        }
    }

    /// Pod `uid` (in `ns`) references the objects `names` now, and wants
    /// `wake` notified when one of them changes: watches start for the
    /// names new to the node and stop for those no pod references any more.
    pub fn register_pod(&self, uid: &str, ns: &str, names: BTreeSet<String>, wake: &Arc<Notify>) {
        let keys: BTreeSet<Key> = names.into_iter().map(|n| (ns.to_string(), n)).collect();
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let before = inner.pods.remove(uid).unwrap_or_default();
        for key in before.difference(&keys) {
            inner.drop_ref(key, uid);
        }
        for key in &keys {
            if let Some(entry) = inner.objects.get_mut(key) {
                entry.pods.insert(uid.to_string(), wake.clone());
                continue;
            }
            let entry = self.start(key, uid, wake);
            inner.objects.insert(key.clone(), entry);
        }
        if !keys.is_empty() {
            inner.pods.insert(uid.to_string(), keys);
        }
    }

    /// Pod `uid` is gone: it references nothing any more.
    pub fn release_pod(&self, uid: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        for key in inner.pods.remove(uid).unwrap_or_default() {
            inner.drop_ref(&key, uid);
        }
    }

    /// How many objects are watched (for tests and metrics).
    pub fn watched(&self) -> usize {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.objects.len()
    }

    /// The object `ns/name` as watched (`None`: it does not exist), or the
    /// kubelet's error when it is not known (not registered, or its watch
    /// has not listed it in time).
    pub async fn get(&self, ns: &str, name: &str) -> Result<Option<Arc<K>>, String> {
        let key = (ns.to_string(), name.to_string());
        let known = {
            let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            inner.objects.get(&key).map(|e| e.known.clone())
        };
        let fail = |why: &str| format!("couldn't get {} {ns}/{name}: {why}", K::KIND);
        let Some(mut known) = known else {
            return Err(fail("object not registered"));
        };
        let synced = tokio::time::timeout(
            FIRST_LIST_TIMEOUT,
            known.wait_for(|k| matches!(k, Known::Synced(_))),
        )
        .await;
        match synced {
            Ok(Ok(k)) => match &*k {
                Known::Synced(obj) => Ok(obj.clone()),
                Known::Pending => Err(fail("not listed yet")),
            },
            Ok(Err(_)) => Err(fail("its watch stopped")),
            Err(_) => Err(fail("timed out waiting for the condition")),
        }
    }

    /// Starts the watch of `key`, referenced first by pod `uid`.
    fn start(&self, key: &Key, uid: &str, wake: &Arc<Notify>) -> Entry<K> {
        let (tx, rx) = watch::channel(Known::Pending);
        let api: Api<K> = Api::namespaced(self.client.clone(), &key.0);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", key.1));
        let inner = Arc::downgrade(&self.inner);
        let key2 = key.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher::watcher(api, config).default_backoff().boxed();
            let mut listing: Option<Arc<K>> = None;
            while let Some(event) = stream.next().await {
                let now = match event {
                    Ok(Event::Init) => {
                        listing = None;
                        continue;
                    }
                    Ok(Event::InitApply(obj)) => {
                        listing = Some(Arc::new(obj));
                        continue;
                    }
                    Ok(Event::InitDone) => listing.take(),
                    Ok(Event::Apply(obj)) => Some(Arc::new(obj)),
                    Ok(Event::Delete(_)) => None,
                    Err(e) => {
                        tracing::debug!(kind = K::KIND, ns = %key2.0, name = %key2.1, error = %e, "watching");
                        continue;
                    }
                };
                tx.send_replace(Known::Synced(now));
                let Some(inner) = inner.upgrade() else { return };
                let inner = inner.lock().unwrap_or_else(|e| e.into_inner());
                for wake in inner
                    .objects
                    .get(&key2)
                    .into_iter()
                    .flat_map(|e| e.pods.values())
                {
                    wake.notify_one();
                }
            }
        });
        Entry {
            known: rx,
            task,
            pods: HashMap::from([(uid.to_string(), wake.clone())]),
        }
    }
}

impl<K> Inner<K> {
    /// Pod `uid` no longer references `key`; the last one stops its watch.
    fn drop_ref(&mut self, key: &Key, uid: &str) {
        let Some(entry) = self.objects.get_mut(key) else {
            return;
        };
        entry.pods.remove(uid);
        if entry.pods.is_empty() {
            if let Some(entry) = self.objects.remove(key) {
                entry.task.abort();
            }
        }
    }
}

impl<K> Drop for Inner<K> {
    fn drop(&mut self) {
        for entry in self.objects.values() {
            entry.task.abort();
        }
    }
}
