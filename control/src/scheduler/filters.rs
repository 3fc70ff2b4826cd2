//! The filters: whether a pod fits a node, and if not, why, in the words
//! kube-scheduler's plugins use. They run in kube-scheduler's order
//! (NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts,
//! NodeResourcesFit) and a node is rejected by the first that fails.

use std::fmt;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};

use super::nodeinfo::{host_ports, pod_requests, NodeInfo};
use crate::toolkit::scheduling::{
    required_affinity_matches, tolerates, tolerations, untolerated_taint, UNSCHEDULABLE_TAINT,
};

/// Why a node cannot take a pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Cordoned: `spec.unschedulable`.
    Unschedulable,
    /// A NoSchedule or NoExecute taint the pod does not tolerate.
    UntoleratedTaint {
        key: String,
        value: String,
    },
    /// nodeSelector or required node affinity.
    NodeAffinity,
    HostPorts,
    InsufficientCpu,
    InsufficientMemory,
    TooManyPods,
    /// A volume of the pod's claims is pinned to other nodes.
    VolumeNodeAffinityConflict,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Unschedulable => f.write_str("node(s) were unschedulable"),
            Reason::UntoleratedTaint { key, value } => {
                write!(f, "node(s) had untolerated taint {{{key}: {value}}}")
            }
            Reason::NodeAffinity => {
                f.write_str("node(s) didn't match Pod's node affinity/selector")
            }
            Reason::HostPorts => {
                f.write_str("node(s) didn't have free ports for the requested pod ports")
            }
            Reason::InsufficientCpu => f.write_str("Insufficient cpu"),
            Reason::InsufficientMemory => f.write_str("Insufficient memory"),
            Reason::TooManyPods => f.write_str("Too many pods"),
            Reason::VolumeNodeAffinityConflict => {
                f.write_str("node(s) had volume node affinity conflict")
            }
        }
    }
}

/// NodeUnschedulable: a cordoned node takes only pods that tolerate
/// `node.kubernetes.io/unschedulable:NoSchedule`.
fn node_unschedulable(pod: &Pod, node: &Node) -> Option<Reason> {
    let cordoned = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    if !cordoned {
        return None;
    }
    let taint = Taint {
        key: UNSCHEDULABLE_TAINT.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    let tolerated = tolerations(pod).iter().any(|t| tolerates(t, &taint));
    (!tolerated).then_some(Reason::Unschedulable)
}

/// TaintToleration: the first NoSchedule/NoExecute taint not tolerated.
pub fn taint_toleration(pod: &Pod, node: &Node) -> Option<Reason> {
    untolerated_taint(pod, node).map(|t| Reason::UntoleratedTaint {
        key: t.key,
        value: t.value.unwrap_or_default(),
    })
}

/// NodeAffinity: every nodeSelector label, and one of the required terms.
pub fn node_affinity(pod: &Pod, node: &Node) -> Option<Reason> {
    (!required_affinity_matches(pod, node)).then_some(Reason::NodeAffinity)
}

/// NodePorts: the pod's host ports must be free on the node.
fn node_ports(pod: &Pod, info: &NodeInfo) -> Option<Reason> {
    let wanted = host_ports(pod.spec.as_ref()?);
    let clash = wanted
        .iter()
        .any(|w| info.used_ports.iter().any(|u| u.conflicts(w)));
    clash.then_some(Reason::HostPorts)
}

/// NodeResourcesFit: pod count, cpu and memory against allocatable, every
/// shortfall named.
fn resources_fit(pod: &Pod, info: &NodeInfo) -> Vec<Reason> {
    let mut out = Vec::new();
    if info.pods + 1 > info.allowed_pods {
        out.push(Reason::TooManyPods);
    }
    let Some(spec) = &pod.spec else { return out };
    let want = pod_requests(spec, false);
    if want.milli_cpu > 0 && want.milli_cpu > info.allocatable.milli_cpu - info.requested.milli_cpu
    {
        out.push(Reason::InsufficientCpu);
    }
    if want.memory > 0 && want.memory > info.allocatable.memory - info.requested.memory {
        out.push(Reason::InsufficientMemory);
    }
    out
}

/// Why `info`'s node cannot take `pod` (empty: it can).
pub fn filter(pod: &Pod, info: &NodeInfo) -> Vec<Reason> {
    let node = info.node.as_ref();
    if let Some(r) = node_unschedulable(pod, node)
        .or_else(|| taint_toleration(pod, node))
        .or_else(|| node_affinity(pod, node))
        .or_else(|| node_ports(pod, info))
    {
        return vec![r];
    }
    resources_fit(pod, info)
}
