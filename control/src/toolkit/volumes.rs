//! Which volume a claim gets (the PV controller's `findBestMatchForClaim`,
//! which the scheduler asks too): a volume pre-bound to the claim, else the smallest Available volume
//! whose capacity covers the request, whose access modes include the
//! claim's, of the claim's class (no class matches no class), volume mode
//! and label selector, and, for a claim whose pod is placed already
//! (`volume.kubernetes.io/selected-node`), reachable from that node.

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};

use bosun::quantity::parse_quantity;
use bosun::selector::LabelSelector;

use super::scheduling::term_matches;

/// The claim's class: `spec.storageClassName`, else the beta annotation.
pub fn claim_class(claim: &PersistentVolumeClaim) -> String {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .or_else(|| {
            claim
                .metadata
                .annotations
                .as_ref()?
                .get("volume.beta.kubernetes.io/storage-class")
                .cloned()
        })
        .unwrap_or_default()
}

/// The volume's class.
pub fn volume_class(pv: &PersistentVolume) -> String {
    pv.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

/// Bytes of a `storage` quantity (0 if missing or unreadable).
pub fn storage_bytes(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> i128 {
    q.and_then(|q| parse_quantity(&q.0).ok())
        .map(|q| q.value())
        .unwrap_or(0)
}

pub fn requested_bytes(claim: &PersistentVolumeClaim) -> i128 {
    storage_bytes(
        claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage")),
    )
}

pub fn capacity_bytes(pv: &PersistentVolume) -> i128 {
    storage_bytes(
        pv.spec
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage")),
    )
}

fn volume_mode(mode: Option<&String>) -> &str {
    mode.map(String::as_str).unwrap_or("Filesystem")
}

/// Whether `pv`'s claimRef names `claim` (with its uid, when the ref has one).
pub fn is_pre_bound_to(pv: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    r.name == claim.metadata.name
        && r.namespace == claim.metadata.namespace
        && r.uid
            .as_deref()
            .filter(|u| !u.is_empty())
            .is_none_or(|u| Some(u) == claim.metadata.uid.as_deref())
}

/// Whether the volume's required node affinity admits `node` (a volume
/// without one is reachable from every node).
pub fn node_affinity_admits(pv: &PersistentVolume, node: &Node) -> bool {
    let Some(required) = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
    else {
        return true;
    };
    required
        .node_selector_terms
        .iter()
        .any(|t| term_matches(t, node))
}

/// Whether `pv` satisfies `claim` apart from being free: capacity, access
/// modes, class, volume mode and selector (`checkVolumeSatisfyClaim`).
pub fn satisfies(pv: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let (Some(vs), Some(cs)) = (pv.spec.as_ref(), claim.spec.as_ref()) else {
        return false;
    };
    if capacity_bytes(pv) < requested_bytes(claim) {
        return false;
    }
    let have = vs.access_modes.as_deref().unwrap_or(&[]);
    if !cs.access_modes.iter().flatten().all(|m| have.contains(m)) {
        return false;
    }
    if volume_class(pv) != claim_class(claim) {
        return false;
    }
    if volume_mode(vs.volume_mode.as_ref()) != volume_mode(cs.volume_mode.as_ref()) {
        return false;
    }
    match &cs.selector {
        None => true,
        Some(sel) => LabelSelector::from_label_selector(sel)
            .is_ok_and(|s| s.matches(&pv.metadata.labels.clone().unwrap_or_default())),
    }
}

/// The volume `claim` should bind to: one pre-bound to it, else the
/// smallest free one that satisfies it (and admits `node`, if the claim's
/// pod has one).
pub fn best_match<'a>(
    claim: &PersistentVolumeClaim,
    volumes: impl IntoIterator<Item = &'a PersistentVolume>,
    node: Option<&Node>,
) -> Option<&'a PersistentVolume> {
    let mut best: Option<&PersistentVolume> = None;
    for pv in volumes {
        if pv.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if is_pre_bound_to(pv, claim) {
            return Some(pv);
        }
        let free = pv.spec.as_ref().is_some_and(|s| s.claim_ref.is_none())
            && pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available");
        if !free || !satisfies(pv, claim) {
            continue;
        }
        if node.is_some_and(|n| !node_affinity_admits(pv, n)) {
            continue;
        }
        if best.is_none_or(|b| capacity_bytes(pv) < capacity_bytes(b)) {
            best = Some(pv);
        }
    }
    best
}
