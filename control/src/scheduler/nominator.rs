//! [`Nominator`]: the pending pods nominated to a node by a preemption,
//! kept from pod events (upstream's nominator in the scheduling queue),
//! so that scheduling a pod does not scan every pod in the cache for them.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;

use super::{needs_scheduling, nominated_node, pod_ref, preemption};
use crate::toolkit::key_of;

/// The keys of the pods that may be nominated: every pending pod the
/// cache showed with `status.nominatedNodeName`, and every pod this
/// scheduler nominated since. A superset: readers check each pod as the
/// cache holds it now.
#[derive(Default)]
pub struct Nominator {
    keys: HashSet<String>,
}

impl Nominator {
    /// A pod the cache applied.
    pub fn on_pod(&mut self, pod: &Pod) {
        if needs_scheduling(pod) && nominated_node(pod).is_some() {
            self.keys.insert(key_of(pod));
        } else {
            self.keys.remove(&key_of(pod));
        }
    }

    /// A pod that left the cache.
    pub fn forget(&mut self, key: &str) {
        self.keys.remove(key);
    }

    /// This scheduler just nominated `pod` (the cache may not show it yet).
    pub fn nominate(&mut self, pod: &Pod) {
        self.keys.insert(key_of(pod));
    }

    /// Starts again from the whole cache (the periodic resync).
    pub fn refresh(&mut self, pods: &[Arc<Pod>]) {
        self.keys = pods
            .iter()
            .filter(|p| needs_scheduling(p) && nominated_node(p).is_some())
            .map(|p| key_of(p.as_ref()))
            .collect();
    }

    /// The pending pods nominated to a node, with that node, as `pods`
    /// holds them now.
    pub fn nominated(&self, pods: &Store<Pod>) -> Vec<(Arc<Pod>, String)> {
        self.keys
            .iter()
            .filter_map(|key| pods.get(&pod_ref(key)))
            .filter(|p| needs_scheduling(p))
            .filter_map(|p| {
                let node = nominated_node(&p)?.to_string();
                Some((p, node))
            })
            .collect()
    }

    /// The pending pods nominated to a node by a preemption whose room
    /// `pod` may not take: those of at least its priority, but itself.
    pub fn nominated_for(&self, pods: &Store<Pod>, pod: &Pod) -> Vec<(Arc<Pod>, String)> {
        let mine = preemption::priority(pod);
        let mut nominated = self.nominated(pods);
        nominated
            .retain(|(p, _)| p.metadata.uid != pod.metadata.uid && preemption::priority(p) >= mine);
        nominated
    }
}
