//! The set's pods laid out by node, and what one pass decides to change:
//! what the sync, the rolling update and the status all work from.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::placement::target_node;
use crate::toolkit::clock::to_chrono;

/// The set's pods by the node they are for (bound, or pinned by affinity).
pub type NodePods = BTreeMap<String, Vec<Arc<Pod>>>;

pub fn by_node(pods: &[Arc<Pod>]) -> NodePods {
    let mut out = NodePods::new();
    for pod in pods {
        if let Some(node) = target_node(pod) {
            out.entry(node).or_default().push(pod.clone());
        }
    }
    out
}

/// Oldest first, bound pods before unbound ones
/// (`podByCreationTimestampAndPhase`).
pub fn sort_oldest_first(pods: &mut [Arc<Pod>]) {
    pods.sort_by_key(|p| {
        let unbound = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_none();
        let created = p.metadata.creation_timestamp.as_ref().map(to_chrono);
        (unbound, created, p.name_any())
    });
}

/// What one pass decided: pods to make (by node) and pods to delete.
#[derive(Default)]
pub struct Changes {
    pub create_on: Vec<String>,
    pub delete: Vec<Arc<Pod>>,
    /// A failed pod left for now by its back-off: look again then.
    pub retry_in: Option<Duration>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.create_on.is_empty() && self.delete.is_empty()
    }
}
