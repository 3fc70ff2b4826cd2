//! Whether a pod may run on a node, as kube-scheduler and the controllers
//! that place pods themselves (DaemonSets) or evict them (taint eviction)
//! both ask it: Kubernetes' `component-helpers/scheduling`. Taints and
//! tolerations, required node affinity and node selectors, node readiness.

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration,
};

/// The taints of an unschedulable (cordoned) node and of one that is not
/// Ready (False: not-ready; Unknown: unreachable).
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

/// The first NoSchedule or NoExecute taint of the node (with the one a
/// node that is not Ready implies) the pod does not tolerate
/// (`FindMatchingUntoleratedTaint`).
pub fn untolerated_taint(pod: &Pod, node: &Node) -> Option<Taint> {
    let tols = tolerations(pod);
    effective_taints(node)
        .into_iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tols.iter().any(|tol| tolerates(tol, t)))
}

/// The node's own taints with `effect`.
pub fn taints_with_effect<'a>(node: &'a Node, effect: &str) -> Vec<&'a Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[])
        .iter()
        .filter(|t| t.effect == effect)
        .collect()
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

/// Every nodeSelector label, and one of the required node affinity terms
/// (`GetRequiredNodeAffinity(pod).Match(node)`).
pub fn required_affinity_matches(pod: &Pod, node: &Node) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
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
    selector_ok && affinity_ok
}

/// What of a node the scheduler's filters and scores read (not its
/// heartbeats): the scheduler retries waiting pods and the DaemonSet
/// controller looks again at its sets when it changes.
pub fn node_fingerprint(node: &Node) -> String {
    let status = node.status.as_ref();
    serde_json::to_string(&(
        &node.metadata.labels,
        node.spec.as_ref().map(|s| (&s.taints, s.unschedulable)),
        status.map(|s| &s.allocatable),
        is_ready(node),
    ))
    .unwrap_or_default()
}
