//! Where a DaemonSet's pods belong (`NodeShouldRunDaemonPod` and
//! `daemon/util`): which nodes should run one, the tolerations every
//! daemon pod gets, and the node affinity that pins a pod to its node.
//!
//! The checks are the scheduler's own filters (nodeSelector and required
//! node affinity, NoSchedule/NoExecute taints against the pod's
//! tolerations), run on the pod the set would make for the node. A
//! cordoned node (`spec.unschedulable`) does not stop a daemon pod: every
//! daemon pod tolerates `node.kubernetes.io/unschedulable`.

use bosun::well_known;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodSpec, Toleration,
};
use kube::ResourceExt;

use crate::toolkit::scheduling::{
    required_affinity_matches, taints_with_effect, tolerates, tolerations, untolerated_taint,
};

/// The field a node is selected by name with (`metav1.ObjectNameField`).
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// Whether a node should run the set's pod, and whether a pod already
/// there may stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// Make a pod here if there is none.
    pub should_run: bool,
    /// A pod already here may keep running (a NoSchedule taint keeps new
    /// pods away but evicts nobody; a NoExecute one does).
    pub should_continue_running: bool,
}

/// The tolerations every daemon pod gets (`AddOrUpdateDaemonPodTolerations`):
/// it stays through not-ready and unreachable (NoExecute, for ever), and
/// is placed despite disk, memory and pid pressure and a cordon
/// (NoSchedule); a hostNetwork pod also despite an unavailable network.
pub fn add_daemon_tolerations(spec: &mut PodSpec) {
    let exists = |key: &str, effect: &str| Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some(effect.into()),
        ..Default::default()
    };
    let mut wanted = vec![
        exists(well_known::TAINT_NOT_READY, "NoExecute"),
        exists(well_known::TAINT_UNREACHABLE, "NoExecute"),
        exists(well_known::TAINT_DISK_PRESSURE, "NoSchedule"),
        exists(well_known::TAINT_MEMORY_PRESSURE, "NoSchedule"),
        exists(well_known::TAINT_PID_PRESSURE, "NoSchedule"),
        exists(well_known::TAINT_UNSCHEDULABLE, "NoSchedule"),
    ];
    if spec.host_network == Some(true) {
        wanted.push(exists(well_known::TAINT_NETWORK_UNAVAILABLE, "NoSchedule"));
    }
    let list = spec.tolerations.get_or_insert_with(Vec::new);
    for t in wanted {
        add_or_update_toleration(list, t);
    }
}

/// Adds `t`, or replaces a toleration of the same key, operator, value and
/// effect (`AddOrUpdateTolerationInPodSpec`).
fn add_or_update_toleration(list: &mut Vec<Toleration>, t: Toleration) {
    let same = |a: &Toleration| {
        a.key == t.key
            && a.effect == t.effect
            && a.operator.as_deref().unwrap_or("Equal") == t.operator.as_deref().unwrap_or("Equal")
            && a.value.as_deref().unwrap_or("") == t.value.as_deref().unwrap_or("")
    };
    match list.iter_mut().find(|a| same(a)) {
        Some(existing) => *existing = t,
        None => list.push(t),
    }
}

/// Pins a pod to `node` with a required node affinity on the node's name,
/// replacing any required node selector it had (the set checked that the
/// node matches it): `ReplaceDaemonSetPodNodeNameNodeAffinity`.
pub fn pin_to_node(spec: &mut PodSpec, node: &str) {
    let selector = NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: NODE_NAME_FIELD.into(),
                operator: "In".into(),
                values: Some(vec![node.to_string()]),
            }]),
            match_expressions: None,
        }],
    };
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(selector);
}

/// The node a daemon pod is for: its `nodeName` once bound, else the
/// node its required affinity names (`GetTargetNodeName`).
pub fn target_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(name) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(name.to_string());
    }
    let required = spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?;
    required
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == NODE_NAME_FIELD && r.operator == "In")
        .and_then(|r| match r.values.as_deref() {
            Some([one]) => Some(one.clone()),
            _ => None,
        })
}

/// The pod the set would run on `node`, as the checks see it (`NewPod`).
fn pod_for_checks(ds: &DaemonSet, node: &Node) -> Pod {
    let template = ds.spec.template.clone();
    let mut spec = template.spec.unwrap_or_default();
    add_daemon_tolerations(&mut spec);
    spec.node_name = Some(node.name_any());
    Pod {
        metadata: template.metadata.unwrap_or_default(),
        spec: Some(spec),
        status: None,
    }
}

/// Whether `node` should run the set's pod (`NodeShouldRunDaemonPod`).
///
/// The taints are the node's as the scheduler sees them (a node that is
/// not Ready carries Kubernetes' not-ready NoSchedule taint), so the set
/// does not make pods the scheduler would refuse to place.
pub fn placement(ds: &DaemonSet, node: &Node) -> Placement {
    const NOWHERE: Placement = Placement {
        should_run: false,
        should_continue_running: false,
    };
    let pod = pod_for_checks(ds, node);
    let wanted_node = ds
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty());
    if wanted_node.is_some_and(|n| Some(n) != node.metadata.name.as_deref()) {
        return NOWHERE;
    }
    if !required_affinity_matches(&pod, node) {
        return NOWHERE;
    }
    if untolerated_taint(&pod, node).is_some() {
        // Only an untolerated NoExecute taint evicts a pod already there.
        let tols = tolerations(&pod);
        let evicts = taints_with_effect(node, "NoExecute")
            .into_iter()
            .any(|t| !tols.iter().any(|tol| tolerates(tol, t)));
        return Placement {
            should_run: false,
            should_continue_running: !evicts,
        };
    }
    Placement {
        should_run: true,
        should_continue_running: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn node(name: &str, extra: Value) -> Node {
        let mut n = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        if let Value::Object(extra) = extra {
            for (k, v) in extra {
                n[k.as_str()] = v;
            }
        }
        serde_json::from_value(n).unwrap()
    }

    fn ds(pod_spec: Value) -> DaemonSet {
        let mut spec = json!({"containers": [{"name": "c", "image": "i"}]});
        if let Value::Object(extra) = pod_spec {
            for (k, v) in extra {
                spec[k.as_str()] = v;
            }
        }
        serde_json::from_value(json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "d", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "d"}},
                     "template": {"metadata": {"labels": {"app": "d"}}, "spec": spec}}}))
        .unwrap()
    }

    const RUN: Placement = Placement {
        should_run: true,
        should_continue_running: true,
    };
    const STAY: Placement = Placement {
        should_run: false,
        should_continue_running: true,
    };
    const NONE: Placement = Placement {
        should_run: false,
        should_continue_running: false,
    };

    #[test]
    fn selectors_affinity_and_node_name_decide_where_pods_go() {
        let plain = ds(json!({}));
        assert_eq!(placement(&plain, &node("a", json!({}))), RUN);
        let ssd = node(
            "a",
            json!({"metadata": {"name": "a", "labels": {"disk": "ssd"}}}),
        );
        let selecting = ds(json!({"nodeSelector": {"disk": "ssd"}}));
        assert_eq!(placement(&selecting, &ssd), RUN);
        assert_eq!(placement(&selecting, &node("b", json!({}))), NONE);
        let by_name = ds(json!({"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}}}}));
        assert_eq!(placement(&by_name, &node("a", json!({}))), NONE);
        assert_eq!(placement(&by_name, &node("b", json!({}))), RUN);
        let named = ds(json!({"nodeName": "b"}));
        assert_eq!(placement(&named, &node("a", json!({}))), NONE);
    }

    #[test]
    fn taints_keep_new_pods_away_and_only_no_execute_evicts() {
        let taint = |effect: &str| {
            node(
                "a",
                json!({"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": effect}]}}),
            )
        };
        let plain = ds(json!({}));
        assert_eq!(placement(&plain, &taint("NoSchedule")), STAY);
        assert_eq!(placement(&plain, &taint("NoExecute")), NONE);
        assert_eq!(placement(&plain, &taint("PreferNoSchedule")), RUN);
        let tolerating = ds(json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}));
        assert_eq!(placement(&tolerating, &taint("NoExecute")), RUN);
        // A cordoned node still runs daemon pods (the automatic toleration),
        // and a not-ready one keeps them (NoExecute is tolerated) but gets
        // no new one (Kubernetes' not-ready NoSchedule taint).
        let cordoned = node(
            "a",
            json!({"spec": {"unschedulable": true,
            "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}}),
        );
        assert_eq!(placement(&plain, &cordoned), RUN);
        let not_ready = node(
            "a",
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]},
            "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]}}),
        );
        assert_eq!(placement(&plain, &not_ready), STAY);
    }

    #[test]
    fn daemon_tolerations_are_added_once_and_replace_equal_ones() {
        let mut spec: PodSpec = serde_json::from_value(json!({"containers": [],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}]}))
        .unwrap();
        add_daemon_tolerations(&mut spec);
        add_daemon_tolerations(&mut spec);
        let tols = spec.tolerations.clone().unwrap();
        assert_eq!(tols.len(), 6, "{tols:?}");
        assert_eq!(tols[0].toleration_seconds, None, "tolerated for ever");
        spec.host_network = Some(true);
        add_daemon_tolerations(&mut spec);
        assert!(spec.tolerations.unwrap().iter().any(|t| t.key.as_deref()
            == Some("node.kubernetes.io/network-unavailable")
            && t.effect.as_deref() == Some("NoSchedule")));
    }

    #[test]
    fn pods_are_pinned_by_name_and_read_back() {
        let mut spec: PodSpec = serde_json::from_value(json!({"containers": [],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["old"]}]}]}}}}))
        .unwrap();
        pin_to_node(&mut spec, "b");
        let terms = &spec
            .affinity
            .as_ref()
            .unwrap()
            .node_affinity
            .as_ref()
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .unwrap()
            .node_selector_terms;
        assert_eq!(terms.len(), 1);
        let pod = Pod {
            spec: Some(spec.clone()),
            ..Default::default()
        };
        assert_eq!(target_node(&pod).as_deref(), Some("b"));
        assert!(spec.node_name.is_none(), "left to the scheduler to bind");
        let mut bound = pod.clone();
        bound.spec.as_mut().unwrap().node_name = Some("c".into());
        assert_eq!(target_node(&bound).as_deref(), Some("c"));
        assert_eq!(target_node(&Pod::default()), None);
    }
}
