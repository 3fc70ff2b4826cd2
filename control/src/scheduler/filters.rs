//! The filters: whether a pod fits a node, and if not, why, in the words
//! kube-scheduler's plugins use. They run in kube-scheduler's order
//! (NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts,
//! NodeResourcesFit) and a node is rejected by the first that fails.

use std::fmt;

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration,
};

use super::nodeinfo::{host_ports, pod_requests, NodeInfo};

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

/// The taint the node lifecycle puts on a node that is not Ready (False:
/// not-ready; Unknown: unreachable).
pub use bosun::well_known::{
    TAINT_NOT_READY as NOT_READY_TAINT, TAINT_UNREACHABLE as UNREACHABLE_TAINT,
    TAINT_UNSCHEDULABLE as UNSCHEDULABLE_TAINT,
};

/// Whether the node's Ready condition is True.
pub fn is_ready(node: &Node) -> bool {
    ready_status(node) == Some("True")
}

fn ready_status(node: &Node) -> Option<&str> {
    node.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str())
}

/// The node's taints, plus the NoSchedule taint a node that is not Ready
/// carries in Kubernetes: the node lifecycle controller puts it there
/// within its monitor period; reading the condition too closes that gap
/// (and covers a control plane run without that controller).
pub fn effective_taints(node: &Node) -> Vec<Taint> {
    let mut taints: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let implied = match ready_status(node) {
        Some("True") => None,
        Some("Unknown") => Some(UNREACHABLE_TAINT),
        _ => Some(NOT_READY_TAINT),
    };
    if let Some(key) = implied {
        if !taints
            .iter()
            .any(|t| t.key == key && t.effect == "NoSchedule")
        {
            taints.push(Taint {
                key: key.to_string(),
                effect: "NoSchedule".to_string(),
                ..Default::default()
            });
        }
    }
    taints
}

/// Kubernetes' `Toleration.ToleratesTaint`.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

pub fn tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[])
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

/// TaintToleration: the first NoSchedule/NoExecute taint not tolerated
/// (the DaemonSet controller asks the same before it makes a node's pod).
pub fn taint_toleration(pod: &Pod, node: &Node) -> Option<Reason> {
    let tols = tolerations(pod);
    effective_taints(node)
        .into_iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tols.iter().any(|tol| tolerates(tol, t)))
        .map(|t| Reason::UntoleratedTaint {
            key: t.key,
            value: t.value.unwrap_or_default(),
        })
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// One node selector requirement against the node's labels.
fn label_requirement_matches(req: &NodeSelectorRequirement, node: &Node) -> bool {
    let value = label(node, &req.key);
    let values = req.values.as_deref().unwrap_or(&[]);
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), [bound]) = (value, values) else {
                return false;
            };
            match (v.parse::<i64>(), bound.parse::<i64>()) {
                (Ok(v), Ok(bound)) if req.operator == "Gt" => v > bound,
                (Ok(v), Ok(bound)) => v < bound,
                _ => false,
            }
        }
        _ => false,
    }
}

/// One field requirement: only `metadata.name` is a node field.
fn field_requirement_matches(req: &NodeSelectorRequirement, node: &Node) -> bool {
    if req.key != "metadata.name" {
        return false;
    }
    let name = node.metadata.name.as_deref().unwrap_or("");
    let values = req.values.as_deref().unwrap_or(&[]);
    match req.operator.as_str() {
        "In" => values.iter().any(|v| v == name),
        "NotIn" => !values.iter().any(|v| v == name),
        _ => false,
    }
}

/// A term matches when all its requirements do; an empty term matches
/// nothing.
pub fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs.iter().all(|r| label_requirement_matches(r, node))
        && fields.iter().all(|r| field_requirement_matches(r, node))
}

/// NodeAffinity: every nodeSelector label, and one of the required terms
/// (the DaemonSet controller asks the same before it makes a node's pod).
pub fn node_affinity(pod: &Pod, node: &Node) -> Option<Reason> {
    let spec = pod.spec.as_ref()?;
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| label(node, k) == Some(v.as_str()));
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let affinity_ok = required.is_none_or(|sel| {
        sel.node_selector_terms
            .iter()
            .any(|term| term_matches(term, node))
    });
    (!(selector_ok && affinity_ok)).then_some(Reason::NodeAffinity)
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
