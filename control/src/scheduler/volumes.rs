//! VolumeBinding, as kube-scheduler's plugin: a pod's claims must exist
//! and not be leaving; a claim not bound yet must be of a
//! WaitForFirstConsumer class (its volume is made for the node the pod
//! goes to: the scheduler writes `volume.kubernetes.io/selected-node` on
//! it before binding the pod), else the pod waits (`pod has unbound
//! immediate PersistentVolumeClaims`); and a node must satisfy the node
//! affinity of every volume the pod's claims are bound to (`node(s) had
//! volume node affinity conflict`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;

use super::filters::Reason;
use crate::toolkit::volumes::{claim_class, node_affinity_admits};

/// What the pod's claims ask of its node.
#[derive(Debug, Default)]
pub struct PodVolumes {
    /// The volumes the pod's bound claims are bound to.
    pub bound: Vec<Arc<PersistentVolume>>,
    /// Unbound claims of WaitForFirstConsumer classes (namespace, name)
    /// still to learn their node.
    pub to_select: Vec<(String, String)>,
}

/// What the scheduler reads of the cluster's storage.
pub struct Storage {
    pub claims: Vec<Arc<PersistentVolumeClaim>>,
    pub volumes: Vec<Arc<PersistentVolume>>,
    pub classes: Vec<Arc<StorageClass>>,
}

/// The PreFilter step: the pod's claims as the scheduler must honour
/// them, or why no node can take the pod now.
pub fn prefilter(pod: &Pod, storage: &Storage) -> Result<PodVolumes, String> {
    let ns = pod.namespace().unwrap_or_default();
    let mut out = PodVolumes::default();
    let mut unbound_immediate = false;
    let names = pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone());
    for name in names {
        let claim = storage
            .claims
            .iter()
            .find(|c| c.namespace().as_deref() == Some(ns.as_str()) && c.name_any() == name)
            .ok_or_else(|| format!("persistentvolumeclaim \"{name}\" not found"))?;
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(format!("persistentvolumeclaim \"{name}\" is being deleted"));
        }
        let volume_name = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .unwrap_or_default();
        if !volume_name.is_empty() {
            let pv = storage
                .volumes
                .iter()
                .find(|v| v.name_any() == volume_name)
                .ok_or_else(|| format!("persistentvolume \"{volume_name}\" not found"))?;
            out.bound.push(pv.clone());
            continue;
        }
        let class = claim_class(claim);
        let delayed = storage.classes.iter().any(|c| {
            c.name_any() == class
                && c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
        });
        if delayed {
            out.to_select.push((ns.clone(), name));
        } else {
            unbound_immediate = true;
        }
    }
    if unbound_immediate {
        return Err("pod has unbound immediate PersistentVolumeClaims".into());
    }
    Ok(out)
}

/// The Filter step: whether `node` satisfies every bound volume's node
/// affinity.
pub fn filter(volumes: &PodVolumes, node: &Node) -> Option<Reason> {
    volumes
        .bound
        .iter()
        .any(|pv| !node_affinity_admits(pv, node))
        .then_some(Reason::VolumeNodeAffinityConflict)
}
