//! The scheduler's cache (upstream's `pkg/scheduler/internal/cache`):
//! what the pods on each node take, kept up to date pod event by pod
//! event and by the pods this scheduler assumed, instead of summed again
//! from every pod in the cluster for each batch; and [`Snapshot`], the
//! node infos a scheduling cycle reads, refreshed from the nodes whose
//! pods changed since (upstream's `UpdateSnapshot`, by generation).
//!
//! The pod events come from the shared pod cache, whose subscribers are
//! handed the cache's current `Arc<Pod>`: a pod unchanged since it was
//! counted is the same `Arc`. Deletions come on a stream of their own and
//! a relist drops pods without one, so [`Cache::resync`] (each tick)
//! counts the pod cache's pods again, cheaply where nothing changed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::nodeinfo::{is_terminal, NodeInfo};
use crate::toolkit::key_of;

/// One pod counted on a node.
struct Counted {
    node: String,
    pod: Arc<Pod>,
    /// Bound by this scheduler; the pod cache may not show it bound yet.
    assumed: bool,
}

/// The pods counted on one node.
struct OnNode {
    /// What they take (the node itself is the snapshot's to fill in).
    info: NodeInfo,
    /// The cache's generation at their last change.
    generation: u64,
}

/// What the pods bound or assumed to each node take.
#[derive(Default)]
pub struct Cache {
    pods: HashMap<String, Counted>,
    nodes: HashMap<String, OnNode>,
    /// Bumped by every change; a node's generation is the last one's.
    generation: u64,
}

/// The node a pod counts on: the one it is bound to, unless it finished.
fn bound_node(pod: &Pod) -> Option<&str> {
    if is_terminal(pod) {
        return None;
    }
    pod.spec
        .as_ref()?
        .node_name
        .as_deref()
        .filter(|n| !n.is_empty())
}

fn uid(pod: &Pod) -> Option<&str> {
    pod.metadata.uid.as_deref()
}

impl Cache {
    fn add(&mut self, key: String, node: &str, pod: Arc<Pod>, assumed: bool) {
        self.remove(&key);
        self.generation += 1;
        let on = self
            .nodes
            .entry(node.to_string())
            .or_insert_with(|| OnNode {
                info: NodeInfo::new(Arc::default()),
                generation: 0,
            });
        on.info.add_shared(pod.clone());
        on.generation = self.generation;
        let node = node.to_string();
        self.pods.insert(key, Counted { node, pod, assumed });
    }

    fn remove(&mut self, key: &str) {
        let Some(counted) = self.pods.remove(key) else {
            return;
        };
        let Some(on) = self.nodes.get_mut(&counted.node) else {
            return;
        };
        on.info.remove_pod(&counted.pod);
        self.generation += 1;
        on.generation = self.generation;
        if on.info.pod_list.is_empty() {
            self.nodes.remove(&counted.node);
        }
    }

    /// A pod as the pod cache holds it now.
    pub fn on_pod(&mut self, pod: Arc<Pod>) {
        self.apply(key_of(pod.as_ref()), pod);
    }

    fn apply(&mut self, key: String, pod: Arc<Pod>) {
        let counted = self.pods.get(&key);
        match bound_node(&pod) {
            Some(_) if counted.is_some_and(|c| Arc::ptr_eq(&c.pod, &pod)) => {}
            Some(node) => {
                let node = node.to_string();
                self.add(key, &node, pod, false);
            }
            // Not bound (yet): an assumed pod stays counted until the pod
            // cache shows it bound, or shows another pod of that name.
            None => {
                let keep = !is_terminal(&pod)
                    && counted.is_some_and(|c| c.assumed && uid(&c.pod) == uid(&pod));
                if !keep {
                    self.remove(&key);
                }
            }
        }
    }

    /// A pod the pod cache deleted (an older pod of the name only).
    pub fn on_pod_deleted(&mut self, pod: &Pod) {
        let key = key_of(pod);
        if self.pods.get(&key).is_some_and(|c| uid(&c.pod) == uid(pod)) {
            self.remove(&key);
        }
    }

    /// This scheduler bound `pod` to `node`: it counts there until the pod
    /// cache shows it bound (or gone).
    pub fn assume(&mut self, pod: &Pod, node: &str) {
        let mut placed = pod.clone();
        if let Some(spec) = placed.spec.as_mut() {
            spec.node_name = Some(node.to_string());
        }
        self.add(key_of(pod), node, Arc::new(placed), true);
    }

    /// The binding of an assumed `pod` failed: it counts on its node no
    /// more (upstream's `ForgetPod`). Nothing changes if the pod cache
    /// has shown it bound meanwhile, or the name is another pod's now.
    pub fn forget(&mut self, pod: &Pod) {
        let key = key_of(pod);
        if self
            .pods
            .get(&key)
            .is_some_and(|c| c.assumed && uid(&c.pod) == uid(pod))
        {
            self.remove(&key);
        }
    }

    /// Whether this scheduler assumed `pod` on a node and the pod cache
    /// has not shown it bound yet.
    pub fn is_assumed(&self, pod: &Pod) -> bool {
        self.pods
            .get(&key_of(pod))
            .is_some_and(|c| c.assumed && uid(&c.pod) == uid(pod))
    }

    /// Counts the pod cache's `pods` again: each changed one as its event
    /// would, and every pod counted that it no longer holds (an assumed
    /// one included) is dropped.
    pub fn resync(&mut self, pods: &[Arc<Pod>]) {
        let mut held = HashSet::with_capacity(pods.len());
        for pod in pods {
            let key = key_of(pod.as_ref());
            held.insert(key.clone());
            self.apply(key, pod.clone());
        }
        let gone: Vec<String> = self
            .pods
            .keys()
            .filter(|k| !held.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            self.remove(&key);
        }
    }

    /// Brings `snapshot` up to date with `nodes` (the node cache's) and the
    /// pods counted: only the node infos whose node or pods changed since
    /// are made again.
    pub fn update_snapshot(&self, nodes: Vec<Arc<Node>>, snapshot: &mut Snapshot) {
        let mut nodes = nodes;
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        if snapshot.infos.len() != nodes.len() {
            snapshot.infos.clear();
            snapshot.generations.clear();
        }
        for (i, node) in nodes.into_iter().enumerate() {
            let name = node.metadata.name.as_deref().unwrap_or("");
            let on = self.nodes.get(name);
            let generation = on.map_or(0, |o| o.generation);
            let current = snapshot.infos.get(i).is_some_and(|info| {
                Arc::ptr_eq(&info.node, &node) && snapshot.generations[i] == generation
            });
            if current {
                continue;
            }
            let info = match on {
                Some(on) => {
                    let mut info = on.info.clone();
                    info.set_node(node);
                    info
                }
                None => NodeInfo::new(node),
            };
            if i < snapshot.infos.len() {
                snapshot.infos[i] = info;
                snapshot.generations[i] = generation;
            } else {
                snapshot.infos.push(info);
                snapshot.generations.push(generation);
            }
        }
    }
}

/// The node infos one scheduling cycle reads, by node name; kept between
/// cycles and brought up to date by [`Cache::update_snapshot`].
#[derive(Default)]
pub struct Snapshot {
    infos: Vec<NodeInfo>,
    /// The generation of the pods counted in each info.
    generations: Vec<u64>,
}

impl Snapshot {
    pub fn infos(&self) -> &[NodeInfo] {
        &self.infos
    }
}

#[cfg(test)]
mod tests;
