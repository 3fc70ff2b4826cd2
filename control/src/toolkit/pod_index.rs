//! [`PodIndex`]: the pod cache's indexes (client-go's indexers on the
//! shared pod informer: `cache.MetaNamespaceIndexFunc`, and the
//! ReplicaSet/Deployment controllers' "controllerUID" index with its
//! per-namespace orphan key), so a sync reads the pods of its owner or
//! namespace instead of scanning every pod in the cluster.
//!
//! The index holds keys only; the pods themselves are the cache's own
//! `Arc<Pod>`s, looked up by key (no second copy of every pod). It is fed
//! by the same watch events as the cache, each one before the cache
//! applies it and so before any subscriber hears of it: a sync woken by
//! an event finds it in both. Between the two a reader may see a key
//! whose pod is not cached yet (skipped) or miss one just deleted, as it
//! would reading a moment earlier or later.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use super::controller_of;

/// A pod's key: namespace and name.
type Key = (String, String);

/// What the index remembers of a cached pod, to unindex it later.
struct Entry {
    uid: Option<String>,
    owner: String,
    node: Option<String>,
}

#[derive(Default)]
struct Keys {
    pods: HashMap<Key, Entry>,
    /// Names of the pods of each namespace.
    by_namespace: HashMap<String, HashSet<String>>,
    /// Pods by their controller's uid; pods without a controller under
    /// [`orphan_key`] of their namespace.
    by_owner: HashMap<String, HashSet<Key>>,
    by_uid: HashMap<String, Key>,
    /// Pods by the node they are bound to (`spec.nodeName`).
    by_node: HashMap<String, HashSet<Key>>,
}

/// The owner key of a namespace's pods that have no controller
/// (upstream's `orphanPodIndexKeyForNamespace`; uids have no `/`).
fn orphan_key(ns: &str) -> String {
    format!("orphans/{ns}")
}

fn owner_key(pod: &Pod) -> String {
    match controller_of(&pod.metadata) {
        Some(owner) => owner.uid.clone(),
        None => orphan_key(pod.metadata.namespace.as_deref().unwrap_or_default()),
    }
}

fn key_of(pod: &Pod) -> Key {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

impl Keys {
    fn remove(&mut self, key: &Key) {
        let Some(old) = self.pods.remove(key) else {
            return;
        };
        if let Some(names) = self.by_namespace.get_mut(&key.0) {
            names.remove(&key.1);
            if names.is_empty() {
                self.by_namespace.remove(&key.0);
            }
        }
        if let Some(keys) = self.by_owner.get_mut(&old.owner) {
            keys.remove(key);
            if keys.is_empty() {
                self.by_owner.remove(&old.owner);
            }
        }
        if let Some(node) = &old.node {
            if let Some(keys) = self.by_node.get_mut(node) {
                keys.remove(key);
                if keys.is_empty() {
                    self.by_node.remove(node);
                }
            }
        }
        if let Some(uid) = old.uid {
            if self.by_uid.get(&uid) == Some(key) {
                self.by_uid.remove(&uid);
            }
        }
    }

    fn insert(&mut self, pod: &Pod) {
        let key = key_of(pod);
        let uid = pod.metadata.uid.clone();
        let owner = owner_key(pod);
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty());
        if let Some(old) = self.pods.get(&key) {
            if old.uid == uid && old.owner == owner && old.node == node {
                return;
            }
            self.remove(&key);
        }
        self.by_namespace
            .entry(key.0.clone())
            .or_default()
            .insert(key.1.clone());
        self.by_owner
            .entry(owner.clone())
            .or_default()
            .insert(key.clone());
        if let Some(uid) = &uid {
            self.by_uid.insert(uid.clone(), key.clone());
        }
        if let Some(node) = &node {
            self.by_node
                .entry(node.clone())
                .or_default()
                .insert(key.clone());
        }
        self.pods.insert(key, Entry { uid, owner, node });
    }
}

/// The keys and the relist under way (built aside and swapped in whole at
/// its end, as the cache does).
#[derive(Default)]
pub(super) struct Indexer {
    current: Keys,
    relist: Option<Keys>,
}

impl Indexer {
    /// Applies one watch event, before the cache applies it.
    pub(super) fn apply(&mut self, event: &watcher::Event<Pod>) {
        match event {
            watcher::Event::Apply(pod) => self.current.insert(pod),
            watcher::Event::Delete(pod) => self.current.remove(&key_of(pod)),
            watcher::Event::Init => self.relist = Some(Keys::default()),
            watcher::Event::InitApply(pod) => self.relist.get_or_insert_default().insert(pod),
            watcher::Event::InitDone => self.current = self.relist.take().unwrap_or_default(),
        }
    }
}

/// The pod cache read through its indexes. Cheap to clone.
#[derive(Clone)]
pub struct PodIndex {
    store: Store<Pod>,
    keys: Arc<RwLock<Indexer>>,
}

impl PodIndex {
    pub(super) fn new(store: Store<Pod>, keys: Arc<RwLock<Indexer>>) -> Self {
        PodIndex { store, keys }
    }

    /// The whole cache.
    pub fn store(&self) -> &Store<Pod> {
        &self.store
    }

    /// The cached pod `ns`/`name`.
    pub fn get(&self, ns: &str, name: &str) -> Option<Arc<Pod>> {
        self.store.get(&ObjectRef::new(name).within(ns))
    }

    /// The cached pod with `uid`.
    pub fn by_uid(&self, uid: &str) -> Option<Arc<Pod>> {
        let (ns, name) = self.keys.read().unwrap().current.by_uid.get(uid).cloned()?;
        self.get(&ns, &name)
            .filter(|p| p.metadata.uid.as_deref() == Some(uid))
    }

    fn lookup(&self, keys: Vec<Key>) -> Vec<Arc<Pod>> {
        keys.iter()
            .filter_map(|(ns, name)| self.get(ns, name))
            .collect()
    }

    /// The cached pods of namespace `ns`.
    pub fn in_namespace(&self, ns: &str) -> Vec<Arc<Pod>> {
        let keys: Vec<Key> = {
            let index = self.keys.read().unwrap();
            index
                .current
                .by_namespace
                .get(ns)
                .into_iter()
                .flatten()
                .map(|name| (ns.to_string(), name.clone()))
                .collect()
        };
        self.lookup(keys)
    }

    fn owned_by(&self, owner: &str) -> Vec<Arc<Pod>> {
        let keys: Vec<Key> = {
            let index = self.keys.read().unwrap();
            index
                .current
                .by_owner
                .get(owner)
                .into_iter()
                .flatten()
                .cloned()
                .collect()
        };
        self.lookup(keys)
    }

    /// The keys of the pods bound to `node` (some perhaps not cached yet).
    pub fn refs_on(&self, node: &str) -> Vec<ObjectRef<Pod>> {
        let index = self.keys.read().unwrap();
        index
            .current
            .by_node
            .get(node)
            .into_iter()
            .flatten()
            .map(|(ns, name)| ObjectRef::new(name).within(ns))
            .collect()
    }

    /// The cached pods bound to `node`.
    pub fn on_node(&self, node: &str) -> Vec<Arc<Pod>> {
        self.refs_on(node)
            .iter()
            .filter_map(|r| self.store.get(r))
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .collect()
    }

    /// The cached pods whose controller has `uid`.
    pub fn controlled_by(&self, uid: &str) -> Vec<Arc<Pod>> {
        self.owned_by(uid)
            .into_iter()
            .filter(|p| controller_of(&p.metadata).is_some_and(|r| r.uid == uid))
            .collect()
    }

    /// The cached pods of `ns` without a controller.
    pub fn orphans(&self, ns: &str) -> Vec<Arc<Pod>> {
        self.owned_by(&orphan_key(ns))
            .into_iter()
            .filter(|p| controller_of(&p.metadata).is_none())
            .collect()
    }

    /// What an owner with `uid` in `ns` may claim: the pods it controls
    /// and the orphans of its namespace (upstream's
    /// `FilterPodsByOwner(..., includeOrphanedPods=true)`). The pods of
    /// other controllers are never claimed, so they are not read.
    pub fn claimable_by(&self, ns: &str, uid: &str) -> Vec<Arc<Pod>> {
        let mut pods = self.controlled_by(uid);
        pods.extend(self.orphans(ns));
        pods
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{eventually, TestApi};
    use super::*;
    use kube::api::{Patch, PatchParams};
    use std::time::Duration;

    fn names(pods: &[Arc<Pod>]) -> Vec<String> {
        let mut names: Vec<String> = pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        names.sort();
        names
    }

    async fn pod(api: &TestApi, ns: &str, name: &str, owner: Option<&str>, node: Option<&str>) {
        let owners = owner.map(|uid| {
            serde_json::json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "web", "uid": uid, "controller": true}])
        });
        let _: Pod = api
            .create(serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": ns, "ownerReferences": owners},
                "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": node}
            }))
            .await;
    }

    /// The index follows the cache: pods by namespace, by controller (and
    /// orphans by namespace), by node and by uid, through creations, a
    /// release (the controller reference patched out) and a deletion.
    #[tokio::test]
    async fn the_index_follows_creations_releases_and_deletions() {
        let api = TestApi::start().await;
        let shared = api.shared();
        let index = shared.informers.pods();
        shared.informers.start();
        shared.informers.wait_ready().await;
        let _: k8s_openapi::api::core::v1::Namespace = api
            .create(serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "other"}}))
            .await;
        pod(&api, "default", "a", Some("uid-1"), Some("n1")).await;
        pod(&api, "default", "b", Some("uid-1"), None).await;
        pod(&api, "default", "c", Some("uid-2"), Some("n1")).await;
        pod(&api, "default", "d", None, None).await;
        pod(&api, "other", "e", None, Some("n1")).await;
        eventually("five pods indexed", Duration::from_secs(5), || async {
            (index.in_namespace("default").len() == 4 && index.in_namespace("other").len() == 1)
                .then_some(())
        })
        .await;
        assert_eq!(names(&index.controlled_by("uid-1")), ["a", "b"]);
        assert_eq!(names(&index.controlled_by("uid-2")), ["c"]);
        assert_eq!(names(&index.orphans("default")), ["d"]);
        assert_eq!(names(&index.orphans("other")), ["e"]);
        assert_eq!(
            names(&index.claimable_by("default", "uid-1")),
            ["a", "b", "d"]
        );
        assert_eq!(names(&index.on_node("n1")), ["a", "c", "e"]);
        let a = index.get("default", "a").unwrap();
        let uid = a.metadata.uid.as_deref().unwrap();
        assert_eq!(
            names(&index.by_uid(uid).into_iter().collect::<Vec<_>>()),
            ["a"]
        );

        // Released: `b` becomes an orphan of its namespace.
        api.api::<Pod>(Some("default"))
            .patch(
                "b",
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"metadata": {"ownerReferences": null}})),
            )
            .await
            .unwrap();
        eventually("b released", Duration::from_secs(5), || async {
            (names(&index.controlled_by("uid-1")) == ["a"]).then_some(())
        })
        .await;
        assert_eq!(names(&index.orphans("default")), ["b", "d"]);

        // At once: a bound pod deleted gracefully stays until its node
        // confirms.
        api.api::<Pod>(Some("default"))
            .delete("a", &kube::api::DeleteParams::default().grace_period(0))
            .await
            .unwrap();
        eventually("a gone", Duration::from_secs(5), || async {
            index.controlled_by("uid-1").is_empty().then_some(())
        })
        .await;
        assert!(index.by_uid(uid).is_none());
        assert_eq!(names(&index.on_node("n1")), ["c", "e"]);
        assert_eq!(names(&index.in_namespace("default")), ["b", "c", "d"]);
    }

    fn bare(ns: &str, name: &str, owner: Option<&str>) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some(ns.into());
        pod.metadata.name = Some(name.into());
        pod.metadata.uid = Some(format!("uid-{name}"));
        pod.metadata.owner_references = owner.map(|uid| {
            vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: "web".into(),
                    uid: uid.into(),
                    controller: Some(true),
                    ..Default::default()
                },
            ]
        });
        pod
    }

    /// A relist replaces the keys whole at its end, as the cache does: a
    /// pod deleted while the watch was down leaves no key behind, and
    /// until the relist ends readers keep the old keys.
    #[test]
    fn a_relist_swaps_the_keys_in_at_its_end() {
        let mut indexer = Indexer::default();
        indexer.apply(&watcher::Event::Apply(bare("ns", "a", Some("rs"))));
        indexer.apply(&watcher::Event::Apply(bare("ns", "b", Some("rs"))));
        indexer.apply(&watcher::Event::Init);
        indexer.apply(&watcher::Event::InitApply(bare("ns", "b", Some("rs"))));
        assert_eq!(
            indexer.current.by_owner["rs"].len(),
            2,
            "old keys until the end"
        );
        indexer.apply(&watcher::Event::InitDone);
        let keys: Vec<&Key> = indexer.current.by_owner["rs"].iter().collect();
        assert_eq!(keys, [&("ns".to_string(), "b".to_string())]);
        assert!(!indexer.current.by_uid.contains_key("uid-a"));
        assert_eq!(indexer.current.by_namespace["ns"].len(), 1);
    }
}
