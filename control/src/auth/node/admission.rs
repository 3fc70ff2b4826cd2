//! NodeRestriction admission: what a node's credential may change in the
//! objects the Node authorizer ([`super::decide`]) lets it write, judged
//! on the object as it would be stored (after the patch is applied), as
//! upstream's `plugin/pkg/admission/noderestriction` does.
//!
//! - Its own Node: no `configSource`, no taint changes, no labels outside
//!   the kubelet's set (upstream's rules), and (bosun's addition) never
//!   `spec.podCIDR`/`spec.podCIDRs`, which only the control plane's node
//!   IPAM writes: a node that picked its own range could take another
//!   node's traffic or route the world to itself.
//! - A TokenRequest: bound to a pod (kind Pod, name and uid) that is
//!   scheduled on the node.
//! - A PersistentVolume pinned to it: only the removal of the local-path
//!   cleanup finalizer once the volume is being deleted (the agent removes
//!   the directory, then lets the volume go). Upstream nodes may not write
//!   volumes at all; nothing else of a volume is a node's to change.
//!
//! - An Ingress's status (bosun's addition: every node's built-in ingress
//!   controller publishes its address there): only entries whose `ip` is
//!   one of the node's own addresses may come or go; nothing else of the
//!   Ingress may change. Without this any node could point every
//!   Ingress's users at an address of its choosing.
//!
//! Each function returns the reason of the 403 in upstream's words; the
//! caller prefixes `<resource> "<name>" is forbidden: `.

use bosun::well_known::{ARCH_LABEL, HOSTNAME_LABEL, OS_LABEL};
use serde_json::Value;

use crate::auth::Identity;

/// The finalizer local-path volumes carry until their node's agent has
/// removed their directory (`controllers::volumebinding::CLEANUP_FINALIZER`,
/// named again here so that auth does not depend on the controllers).
pub const CLEANUP_FINALIZER: &str = "bosun.io/local-path-cleanup";

/// Labels the kubelet may set on its Node (upstream's `kubeletLabels`).
const KUBELET_LABELS: &[&str] = &[
    HOSTNAME_LABEL,
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    OS_LABEL,
    ARCH_LABEL,
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

/// Label namespaces (and their subdomains) the kubelet may set.
const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

/// Labels no node may set or change (`node-restriction.kubernetes.io/`).
const NODE_RESTRICTION_NAMESPACE: &str = "node-restriction.kubernetes.io";

/// `Ok` unless `who` is a node and the write of `kind` from `old` (None:
/// a create) to `new` is not its to make. `addresses`: the node's own
/// (its Node's `status.addresses`), read by the caller for the kinds that
/// need them ([`needs_addresses`]).
pub fn admit(
    who: &Identity,
    kind: &str,
    addresses: &[String],
    old: Option<&Value>,
    new: &Value,
) -> Result<(), String> {
    let Identity::Node(node) = who else {
        return Ok(());
    };
    match kind {
        "Node" => admit_node(node, old, new),
        "PersistentVolume" => admit_volume(node, old, new),
        "Ingress" => admit_ingress(node, addresses, old, new),
        _ => Ok(()),
    }
}

/// Whether [`admit`] needs the node's addresses for a write of `kind`.
pub fn needs_addresses(who: &Identity, kind: &str) -> bool {
    matches!(who, Identity::Node(_)) && kind == "Ingress"
}

/// A node writing an Ingress (its status, as RBAC grants): only its own
/// addresses may be added to or removed from `status.loadBalancer.ingress`.
pub fn admit_ingress(
    node: &str,
    addresses: &[String],
    old: Option<&Value>,
    new: &Value,
) -> Result<(), String> {
    let Some(old) = old else {
        return Err(format!(
            "node \"{node}\" is not allowed to create ingresses"
        ));
    };
    let entries = |v: &Value| list(&v["status"]["loadBalancer"]["ingress"]);
    let rest = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v["metadata"].as_object_mut() {
            for k in ["resourceVersion", "managedFields"] {
                m.remove(k);
            }
        }
        // Missing, null and empty are the same (as Go compares them).
        if let Some(status) = v.get_mut("status").and_then(Value::as_object_mut) {
            if let Some(lb) = status
                .get_mut("loadBalancer")
                .and_then(Value::as_object_mut)
            {
                lb.remove("ingress");
            }
            status.retain(|_, f| !(f.is_null() || f.as_object().is_some_and(|m| m.is_empty())));
        }
        if let Some(m) = v.as_object_mut() {
            m.retain(|k, f| k != "status" || f.as_object().is_some_and(|s| !s.is_empty()));
        }
        v
    };
    if rest(new) != rest(old) {
        return Err(format!(
            "node \"{node}\" may only change its own addresses in an ingress's status.loadBalancer.ingress"
        ));
    }
    let (now, was) = (entries(new), entries(old));
    let changed = now
        .iter()
        .filter(|e| !was.contains(e))
        .chain(was.iter().filter(|e| !now.contains(e)));
    for entry in changed {
        let own = entry.as_object().is_some_and(|m| {
            m.keys().all(|k| k == "ip") && addresses.iter().any(|a| entry["ip"].as_str() == Some(a))
        });
        if !own {
            return Err(format!(
                "node \"{node}\" may only add or remove its own addresses in status.loadBalancer.ingress, not {entry}"
            ));
        }
    }
    Ok(())
}

fn in_namespace(namespace: &str, wanted: &str) -> bool {
    namespace == wanted || namespace.ends_with(&format!(".{wanted}"))
}

fn is_kubelet_label(key: &str) -> bool {
    let namespace = key.split_once('/').map_or("", |(ns, _)| ns);
    KUBELET_LABELS.contains(&key)
        || KUBELET_LABEL_NAMESPACES
            .iter()
            .any(|ns| in_namespace(namespace, ns))
}

fn is_kubernetes_label(key: &str) -> bool {
    let namespace = key.split_once('/').map_or("", |(ns, _)| ns);
    in_namespace(namespace, "kubernetes.io") || in_namespace(namespace, "k8s.io")
}

/// The label keys a node may not add, remove or change among those that
/// differ between `new` and `old`, sorted.
fn forbidden_labels(new: &Value, old: &Value) -> Vec<String> {
    let labels = |v: &Value| {
        v["metadata"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_default()
    };
    let (a, b) = (labels(new), labels(old));
    let mut keys: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .filter(|k| {
            let namespace = k.split_once('/').map_or("", |(ns, _)| ns);
            in_namespace(namespace, NODE_RESTRICTION_NAMESPACE)
                || (is_kubernetes_label(k) && !is_kubelet_label(k))
        })
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// A list field where missing, null and empty are the same (Go's
/// semantic equality).
fn list(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// A node writing its own Node object (the authorizer checked the name).
pub fn admit_node(node: &str, old: Option<&Value>, new: &Value) -> Result<(), String> {
    let spec = &new["spec"];
    let Some(old) = old else {
        if !spec["configSource"].is_null() {
            return Err(format!(
                "node \"{node}\" is not allowed to create pods with a non-nil configSource"
            ));
        }
        let forbidden = forbidden_labels(new, &Value::Null);
        if !forbidden.is_empty() {
            return Err(format!(
                "node \"{node}\" is not allowed to set the following labels: {}",
                forbidden.join(", ")
            ));
        }
        if !text(&spec["podCIDR"]).is_empty() || !list(&spec["podCIDRs"]).is_empty() {
            return Err(format!(
                "node \"{node}\" is not allowed to set spec.podCIDR: the control plane's node IPAM assigns it"
            ));
        }
        return Ok(());
    };
    let was = &old["spec"];
    if !spec["configSource"].is_null() && spec["configSource"] != was["configSource"] {
        return Err(format!(
            "node \"{node}\" is not allowed to update configSource to a new non-nil configSource"
        ));
    }
    if list(&spec["taints"]) != list(&was["taints"]) {
        return Err(format!("node \"{node}\" is not allowed to modify taints"));
    }
    let forbidden = forbidden_labels(new, old);
    if !forbidden.is_empty() {
        return Err(format!(
            "is not allowed to modify labels: {}",
            forbidden.join(", ")
        ));
    }
    if text(&spec["podCIDR"]) != text(&was["podCIDR"])
        || list(&spec["podCIDRs"]) != list(&was["podCIDRs"])
    {
        return Err(format!(
            "node \"{node}\" is not allowed to modify spec.podCIDR: the control plane's node IPAM assigns it"
        ));
    }
    Ok(())
}

/// A node writing a volume pinned to it (the authorizer checked that).
pub fn admit_volume(node: &str, old: Option<&Value>, new: &Value) -> Result<(), String> {
    let refused = || {
        Err(format!(
            "node \"{node}\" may only remove the {CLEANUP_FINALIZER} finalizer of a persistentvolume pinned to it that is being deleted"
        ))
    };
    let Some(old) = old else {
        return refused();
    };
    if old["metadata"]["deletionTimestamp"].is_null() {
        return refused();
    }
    let finalizers = |v: &Value| -> Vec<String> {
        list(&v["metadata"]["finalizers"])
            .iter()
            .filter_map(|f| f.as_str().map(String::from))
            .collect()
    };
    let kept: Vec<String> = finalizers(old)
        .into_iter()
        .filter(|f| f != CLEANUP_FINALIZER)
        .collect();
    let rest = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v["metadata"].as_object_mut() {
            for k in ["finalizers", "resourceVersion", "managedFields"] {
                m.remove(k);
            }
        }
        v
    };
    if finalizers(new) != kept || rest(new) != rest(old) {
        return refused();
    }
    Ok(())
}

/// A node's TokenRequest must be bound to a pod, by name and uid
/// (`spec.boundObjectRef`); checked before the pod is read.
pub fn token_binding(bound: &Value) -> Result<(), String> {
    if bound["apiVersion"] != "v1" || bound["kind"] != "Pod" || text(&bound["name"]).is_empty() {
        return Err("node requested token not bound to a pod".into());
    }
    if text(&bound["uid"]).is_empty() {
        return Err("node requested token with a pod binding without a uid".into());
    }
    Ok(())
}

/// A node asking for a token: bound as [`token_binding`] says to `pod`
/// (the stored pod of that name, which the caller read: a missing one is
/// a 404 there), which must be that very pod and scheduled on `node`.
pub fn admit_token(node: &str, bound: &Value, pod: &Value) -> Result<(), String> {
    token_binding(bound)?;
    let uid = text(&bound["uid"]);
    if text(&pod["metadata"]["uid"]) != uid {
        return Err(format!(
            "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
        ));
    }
    if text(&pod["spec"]["nodeName"]) != node {
        return Err("node requested token bound to a pod scheduled on a different node".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
