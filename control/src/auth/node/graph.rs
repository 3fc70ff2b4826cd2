//! The node authorizer's graph: which objects each node may read because
//! a pod bound to it references them, kept from the store's watch so that
//! a node's request is judged by a map lookup instead of a list of every
//! pod.
//!
//! As upstream's (kubernetes `plugin/pkg/auth/authorizer/node/graph.go`),
//! its vertices are pods, nodes, Secrets, ConfigMaps, ServiceAccounts,
//! PersistentVolumeClaims and PersistentVolumes; its edges are pod → node
//! (once the pod is bound), Secret/ConfigMap/ServiceAccount/claim → pod
//! (what the pod references, as [`super::PodRefs`] reads it, the same
//! reading [`super::decide`] gives a pod), and PV → claim (the PV's `claimRef`). A
//! question is "is there a path from object X to node N". Every
//! object → pod edge carries the pod's node, and the graph keeps, for each
//! object, how many of its edges lead to each node (upstream's destination
//! index, here kept for every vertex), so the answer is one lookup.
//!
//! [`NodeGraph`] follows the store from server start: it lists pods and
//! PVs, then watches every key from that revision (so it knows which
//! revision it has caught up with even when the writes are not pods). A
//! watch that fails (a compacted revision, the store's error) is followed
//! by a relist, and requests wait for the relist (bounded) before they
//! are answered. A denial asked of a graph that has not yet applied the
//! store's revision of the moment the request came waits (up to
//! [`NodeGraph::CATCH_UP`]) for it; if it cannot catch up, the graph
//! answers as it stands, as upstream's node authorizer always does: the
//! store's pods are never read on a request's behalf (reading and parsing
//! every pod, the cost the graph exists to avoid, exactly when the
//! server is too busy for its graph to keep up).
//!
//! The graph keeps up by reading of each pod write only the fields that
//! name other objects ([`super::PodRefs`], not the whole pod as a JSON
//! tree: most pod writes are status writes that change nothing here),
//! and by applying what its watch holds ready in batches, announced once
//! per batch.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use serde_json::Value;

use super::PodRefs;
use crate::store::{Event, EventType, Revision, Store, StoreError};

const POD_PREFIX: &str = "/registry/pods/";
const PV_PREFIX: &str = "/registry/persistentvolumes/";

/// The id of an object vertex: `resource/namespace/name`.
fn vertex(resource: &str, namespace: &str, name: &str) -> String {
    format!("{resource}/{namespace}/{name}")
}

/// A pod bound to a node, as the graph holds it: its edge to the node and
/// the edges from the objects it references.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BoundPod {
    node: String,
    /// The vertices with an edge to this pod, each once.
    referenced: Vec<String>,
}

/// The graph itself: pure data, changed by [`Graph::apply`].
#[derive(Debug, Default)]
pub struct Graph {
    /// Bound pods by store key (`/registry/pods/<ns>/<name>`).
    pods: HashMap<String, BoundPod>,
    /// For each object vertex, how many of its edges (to pods) lead to
    /// each node.
    destinations: HashMap<String, HashMap<String, u32>>,
    /// PV name → the claim vertex its `claimRef` names (the PV → claim
    /// edge).
    pv_claims: HashMap<String, String>,
}

impl Graph {
    /// Applies one stored change (any key; only pods and PVs matter).
    pub fn apply(&mut self, kind: EventType, key: &str, value: &[u8]) {
        if key.starts_with(POD_PREFIX) {
            match kind {
                EventType::Deleted => self.set_pod(key, None),
                _ => self.set_pod(key, PodRefs::from_slice(value).as_ref()),
            }
        } else if let Some(name) = key.strip_prefix(PV_PREFIX) {
            let parsed = || serde_json::from_slice::<Value>(value).ok();
            match kind {
                EventType::Deleted => self.set_pv(name, None),
                _ => self.set_pv(name, parsed().as_ref()),
            }
        }
    }

    /// The pod at store key `key` is now `pod` (None: gone). A pod not
    /// bound to a node has no vertex.
    pub fn set_pod(&mut self, key: &str, pod: Option<&PodRefs>) {
        let bound = pod.and_then(|pod| {
            let node = pod.node()?;
            let namespace = pod.namespace();
            let mut referenced = Vec::new();
            pod.visit(|resource, name| {
                referenced.push(vertex(resource, namespace, name));
            });
            referenced.sort_unstable();
            referenced.dedup();
            Some(BoundPod {
                node: node.to_string(),
                referenced,
            })
        });
        if self.pods.get(key) == bound.as_ref() {
            // A status write: nothing the graph holds changed.
            return;
        }
        if let Some(old) = self.pods.remove(key) {
            for v in &old.referenced {
                if let Some(nodes) = self.destinations.get_mut(v) {
                    if let Some(count) = nodes.get_mut(&old.node) {
                        *count -= 1;
                        if *count == 0 {
                            nodes.remove(&old.node);
                        }
                    }
                    if nodes.is_empty() {
                        self.destinations.remove(v);
                    }
                }
            }
        }
        if let Some(new) = bound {
            for v in &new.referenced {
                *self
                    .destinations
                    .entry(v.clone())
                    .or_default()
                    .entry(new.node.clone())
                    .or_default() += 1;
            }
            self.pods.insert(key.to_string(), new);
        }
    }

    /// The PV `name` is now `pv` (None: gone): its edge to the claim its
    /// `claimRef` names, if any.
    pub fn set_pv(&mut self, name: &str, pv: Option<&Value>) {
        let claim = pv.and_then(|pv| {
            let r = &pv["spec"]["claimRef"];
            let claim = r["name"].as_str().filter(|n| !n.is_empty())?;
            let ns = r["namespace"].as_str().unwrap_or("");
            Some(vertex("persistentvolumeclaims", ns, claim))
        });
        match claim {
            Some(c) => {
                self.pv_claims.insert(name.to_string(), c);
            }
            None => {
                self.pv_claims.remove(name);
            }
        }
    }

    /// Whether there is a path from `resource` `namespace/name` to node
    /// `node`: a pod (`pods`) bound to it; an object a pod bound to it
    /// references; a PV whose claim is such an object.
    pub fn has_path(&self, resource: &str, namespace: &str, name: &str, node: &str) -> bool {
        let reaches = |v: &str| {
            self.destinations
                .get(v)
                .is_some_and(|nodes| nodes.contains_key(node))
        };
        match resource {
            "pods" => self
                .pods
                .get(&format!("{POD_PREFIX}{namespace}/{name}"))
                .is_some_and(|p| p.node == node),
            "persistentvolumes" => self.pv_claims.get(name).is_some_and(|c| reaches(c)),
            _ => reaches(&vertex(resource, namespace, name)),
        }
    }

    /// How many pods the graph holds (bound ones only).
    pub fn bound_pods(&self) -> usize {
        self.pods.len()
    }
}

/// The graph shared by the API's requests, kept from the store.
pub struct NodeGraph {
    store: Arc<dyn Store>,
    graph: RwLock<Graph>,
    /// The store revision the graph has applied every change up to; 0
    /// while it has not listed yet or is relisting after a failed watch,
    /// when nothing may be answered from it.
    applied: tokio::sync::watch::Sender<Revision>,
    catch_up: Duration,
}

impl NodeGraph {
    /// The longest a denial waits for the graph to reach the revision of
    /// the request's arrival.
    pub const CATCH_UP: Duration = Duration::from_secs(2);

    /// An empty graph of `store`'s objects; [`NodeGraph::follow`] fills it
    /// and keeps it.
    pub fn new(store: Arc<dyn Store>) -> Arc<NodeGraph> {
        Self::with_catch_up(store, Self::CATCH_UP)
    }

    /// As [`NodeGraph::new`], waiting at most `catch_up` on a denial.
    pub fn with_catch_up(store: Arc<dyn Store>, catch_up: Duration) -> Arc<NodeGraph> {
        Arc::new(NodeGraph {
            store,
            graph: RwLock::new(Graph::default()),
            applied: tokio::sync::watch::channel(0).0,
            catch_up,
        })
    }

    /// The revision the graph has applied every change up to (0: none
    /// yet, or relisting).
    pub fn applied(&self) -> Revision {
        *self.applied.borrow()
    }

    /// Whether there is a path from `resource` `namespace/name` to `node`
    /// as of store revision `at` or later (the revision current when the
    /// request came). An allow is answered at once; a denial by a graph
    /// behind `at` waits (at most the graph's catch-up time) for it to
    /// catch up, then answers from the graph, caught up or not, as
    /// upstream's node authorizer answers from its graph alone: a node
    /// refused a moment too early asks again, as the kubelet does.
    pub async fn has_path(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        node: &str,
        at: Revision,
    ) -> bool {
        let ask = || {
            let graph = self.graph.read().expect("node graph lock");
            graph.has_path(resource, namespace, name, node)
        };
        let applied = self.applied();
        if applied > 0 {
            let answer = ask();
            if answer || applied >= at {
                return answer;
            }
        }
        let mut rx = self.applied.subscribe();
        let caught_up = tokio::time::timeout(
            self.catch_up,
            rx.wait_for(|applied| *applied >= at && *applied > 0),
        )
        .await;
        if !matches!(caught_up, Ok(Ok(_))) {
            tracing::info!(
                at,
                applied = self.applied(),
                %node,
                %resource,
                %namespace,
                %name,
                "node graph: behind the store; answering from what it holds"
            );
        }
        ask()
    }

    /// Keeps the graph from the store until the store closes: lists pods
    /// and PVs, then applies every change after that revision; relists
    /// when the watch fails or ends.
    pub async fn follow(self: Arc<Self>) {
        loop {
            // Denials wait while the graph may have missed a change.
            self.applied.send_replace(0);
            let revision = match self.relist().await {
                Ok(r) => r,
                Err(StoreError::Closed) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "node graph: listing pods and volumes");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            // Every key, not only pods: the revision applied then follows
            // the store's, whatever is written.
            let mut events = match self.store.watch("", revision).await {
                Ok(s) => s,
                Err(StoreError::Closed) => return,
                Err(e) => {
                    tracing::info!(error = %e, "node graph: watching the store; relisting");
                    continue;
                }
            };
            self.applied.send_replace(revision);
            let mut batch = Vec::with_capacity(Self::BATCH);
            loop {
                // Whatever the watch holds ready is applied under one
                // lock and announced once: each announcement wakes every
                // request waiting on the graph, and under load events come
                // faster than those requests can be woken one by one.
                let mut end = match events.next().await {
                    Some(Ok(event)) => {
                        batch.push(event);
                        None
                    }
                    other => Some(other),
                };
                while end.is_none() && batch.len() < Self::BATCH {
                    match events.next().now_or_never() {
                        Some(Some(Ok(event))) => batch.push(event),
                        Some(other) => end = Some(other),
                        None => break,
                    }
                }
                self.apply(&mut batch);
                match end {
                    None => {}
                    Some(Some(Err(StoreError::Closed))) => return,
                    Some(Some(Err(e))) => {
                        tracing::info!(error = %e, "node graph: the watch failed; relisting");
                        break;
                    }
                    Some(Some(Ok(_))) => unreachable!("events are batched"),
                    Some(None) => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        break;
                    }
                }
            }
        }
    }

    /// The most events applied under one lock and announced at once.
    const BATCH: usize = 512;

    /// Applies `events` (in revision order) and announces the last one's
    /// revision; empties `events`.
    fn apply(&self, events: &mut Vec<Event>) {
        let Some(last) = events.last().map(|e| e.revision) else {
            return;
        };
        let relevant = |e: &&Event| e.key.starts_with(POD_PREFIX) || e.key.starts_with(PV_PREFIX);
        if events.iter().any(|e| relevant(&e)) {
            let mut graph = self.graph.write().expect("node graph lock");
            for event in events.iter().filter(relevant) {
                graph.apply(event.kind, &event.key, &event.value);
            }
        }
        events.clear();
        self.applied.send_replace(last);
    }

    /// Builds the graph anew from a list of pods and PVs; returns the
    /// revision the pods' list is consistent with (the PVs' is as new or
    /// newer: the watch from there replays changes it already holds,
    /// which leaves the same graph).
    async fn relist(&self) -> Result<Revision, StoreError> {
        let (pods, revision) = self.store.list(POD_PREFIX).await?;
        let (pvs, _) = self.store.list(PV_PREFIX).await?;
        let mut graph = Graph::default();
        for kv in &pods {
            graph.apply(EventType::Added, &kv.key, &kv.value);
        }
        for kv in &pvs {
            graph.apply(EventType::Added, &kv.key, &kv.value);
        }
        tracing::debug!(pods = graph.bound_pods(), revision, "node graph: listed");
        *self.graph.write().expect("node graph lock") = graph;
        Ok(revision)
    }
}

#[cfg(test)]
mod tests;
