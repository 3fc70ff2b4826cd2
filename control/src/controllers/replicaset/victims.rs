//! Which pods a ReplicaSet deletes first when it scales down, in
//! Kubernetes' order (`controller.ActivePodsWithRanks`, kept as a pure
//! function so each rule is tested on its own).
//!
//! A pod sorts before another (is deleted sooner) when, at the first rule
//! that tells them apart, it is:
//!
//! 1. not yet scheduled (no `spec.nodeName`) while the other is;
//! 2. in an earlier phase: Pending before Unknown before Running;
//! 3. not ready while the other is ready;
//! 4. cheaper to delete: a lower `controller.kubernetes.io/pod-deletion-cost`
//!    (missing or unparsable counts as 0);
//! 5. on a node that hosts more active pods of the set (and of its sibling
//!    sets under the same owner): its rank;
//! 6. ready for a shorter time (both ready): the later Ready transition
//!    first, an unknown transition time first of all;
//! 7. restarted more often (the most restarts of any container; then of
//!    any sidecar, an init container with `restartPolicy: Always`);
//! 8. newer: the later creationTimestamp first, a missing one first of all.
//!
//! Kubernetes' LogarithmicScaleDown buckets rules 6 and 8 by powers of two
//! of age and breaks ties at random; here ages compare exactly, as the
//! seed describes, so the order is deterministic.

use std::cmp::Ordering;
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;

use crate::toolkit::pods::{is_active, is_ready, phase_of, ready_since};
use crate::toolkit::to_chrono;

/// The annotation that tells the controller how costly a pod's deletion is.
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

fn phase_ordinal(pod: &Pod) -> u8 {
    match phase_of(pod) {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST))
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(0)
}

/// The most restarts of any regular container, then of any sidecar.
fn max_restarts(pod: &Pod) -> (i32, i32) {
    let Some(status) = pod.status.as_ref() else {
        return (0, 0);
    };
    let regular = status
        .container_statuses
        .iter()
        .flatten()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0);
    let sidecars: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    let sidecar = status
        .init_container_statuses
        .iter()
        .flatten()
        .filter(|c| sidecars.contains(&c.name.as_str()))
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0);
    (regular, sidecar)
}

/// `afterOrZero`: an unknown time first, then the later one first.
fn later_first(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(&a),
    }
}

/// How two pods with their ranks compare: `Less` deletes `a` first.
fn compare(a: &Pod, rank_a: usize, b: &Pod, rank_b: usize) -> Ordering {
    let (node_a, node_b) = (node_name(a), node_name(b));
    if node_a != node_b && (node_a.is_empty() || node_b.is_empty()) {
        return if node_a.is_empty() {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    phase_ordinal(a)
        .cmp(&phase_ordinal(b))
        .then_with(|| is_ready(a).cmp(&is_ready(b)))
        .then_with(|| deletion_cost(a).cmp(&deletion_cost(b)))
        .then_with(|| rank_b.cmp(&rank_a))
        .then_with(|| {
            if is_ready(a) && is_ready(b) {
                later_first(ready_since(a), ready_since(b))
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| max_restarts(b).cmp(&max_restarts(a)))
        .then_with(|| {
            later_first(
                a.metadata.creation_timestamp.as_ref().map(to_chrono),
                b.metadata.creation_timestamp.as_ref().map(to_chrono),
            )
        })
}

/// The `count` pods of `candidates` to delete first. `related` are the
/// pods whose placement ranks the candidates (the set's own and its
/// siblings' under the same owner); only active ones count.
pub fn pods_to_delete<'a>(candidates: &[&'a Pod], related: &[&Pod], count: usize) -> Vec<&'a Pod> {
    if count >= candidates.len() {
        return candidates.to_vec();
    }
    let mut on_node: HashMap<&str, usize> = HashMap::new();
    for p in related.iter().filter(|p| is_active(p)) {
        *on_node.entry(node_name(p)).or_default() += 1;
    }
    let mut ranked: Vec<(&Pod, usize)> = candidates
        .iter()
        .map(|p| (*p, on_node.get(node_name(p)).copied().unwrap_or(0)))
        .collect();
    ranked.sort_by(|(a, ra), (b, rb)| compare(a, *ra, b, *rb));
    ranked.into_iter().take(count).map(|(p, _)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    const T0: &str = "2026-01-01T00:00:00Z";

    /// A Running, ready pod on node n1, created and ready at T0, with no
    /// restarts: each test changes one thing.
    fn base(name: &str) -> Value {
        json!({
            "metadata": {"name": name, "namespace": "default", "uid": name,
                         "creationTimestamp": T0},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": T0}],
                       "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true,
                                              "restartCount": 0}]}
        })
    }

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).expect("a pod")
    }

    /// Which of the two pods is deleted first, when one is to go.
    fn first_of(a: Value, b: Value) -> String {
        let (a, b) = (pod(a), pod(b));
        let related = [&a, &b];
        let name = |p: Vec<&Pod>| p[0].metadata.name.clone().unwrap();
        let one = name(pods_to_delete(&[&a, &b], &related, 1));
        let other = name(pods_to_delete(&[&b, &a], &related, 1));
        assert_eq!(one, other, "the order must not depend on the input order");
        one
    }

    #[test]
    fn unscheduled_before_scheduled() {
        let mut a = base("scheduled");
        let mut b = base("unscheduled");
        b["spec"].as_object_mut().unwrap().remove("nodeName");
        // Even a Running unscheduled pod goes before a Pending scheduled one.
        a["status"]["phase"] = json!("Pending");
        assert_eq!(first_of(a, b), "unscheduled");
    }

    #[test]
    fn pending_before_unknown_before_running() {
        let mut pending = base("pending");
        pending["status"]["phase"] = json!("Pending");
        let mut unknown = base("unknown");
        unknown["status"]["phase"] = json!("Unknown");
        let running = base("running");
        assert_eq!(first_of(pending.clone(), unknown.clone()), "pending");
        assert_eq!(first_of(unknown, running.clone()), "unknown");
        assert_eq!(first_of(running, pending), "pending");
    }

    #[test]
    fn not_ready_before_ready() {
        let ready = base("ready");
        let mut not_ready = base("not-ready");
        not_ready["status"]["conditions"][0]["status"] = json!("False");
        // Even if the ready one is cheaper to delete.
        let mut cheap = ready.clone();
        cheap["metadata"]["annotations"] = json!({POD_DELETION_COST: "-100"});
        assert_eq!(first_of(ready, not_ready.clone()), "not-ready");
        assert_eq!(first_of(cheap, not_ready), "not-ready");
    }

    #[test]
    fn lower_deletion_cost_first() {
        let mut cheap = base("cheap");
        cheap["metadata"]["annotations"] = json!({POD_DELETION_COST: "-5"});
        let mut dear = base("dear");
        dear["metadata"]["annotations"] = json!({POD_DELETION_COST: "10"});
        // No annotation (or a bad one) is 0.
        let plain = base("plain");
        let mut bad = base("bad");
        bad["metadata"]["annotations"] = json!({POD_DELETION_COST: "lots"});
        // A cheaper pod goes first even when it is older.
        dear["metadata"]["creationTimestamp"] = json!("2026-01-01T01:00:00Z");
        assert_eq!(first_of(cheap.clone(), dear.clone()), "cheap");
        assert_eq!(first_of(plain.clone(), dear), "plain");
        assert_eq!(first_of(cheap, bad.clone()), "cheap");
        // bad and plain tie on cost; the newer one goes.
        bad["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:01Z");
        assert_eq!(first_of(plain, bad), "bad");
    }

    #[test]
    fn pods_on_crowded_nodes_first() {
        // Two pods of the set on n1, one on n2: one of n1's goes first.
        let crowded = base("crowded");
        let mut neighbour = base("neighbour");
        // Older and restarted more, so only the rank can pick "crowded".
        neighbour["metadata"]["creationTimestamp"] = json!("2025-12-31T00:00:00Z");
        let mut alone = base("alone");
        alone["spec"]["nodeName"] = json!("n2");
        alone["metadata"]["creationTimestamp"] = json!("2026-01-01T05:00:00Z");
        alone["status"]["containerStatuses"][0]["restartCount"] = json!(7);
        let (crowded, neighbour, alone) = (pod(crowded), pod(neighbour), pod(alone));
        let related = [&crowded, &neighbour, &alone];
        let picked = pods_to_delete(&[&alone, &crowded], &related, 1);
        assert_eq!(picked[0].metadata.name.as_deref(), Some("crowded"));
        // Terminating related pods do not crowd a node.
        let mut gone = base("gone");
        gone["spec"]["nodeName"] = json!("n2");
        gone["metadata"]["deletionTimestamp"] = json!(T0);
        let gone = pod(gone);
        let mut other = base("other");
        other["spec"]["nodeName"] = json!("n2");
        let other = pod(other);
        let related = [&crowded, &neighbour, &alone, &gone];
        let picked = pods_to_delete(&[&alone, &crowded], &related, 1);
        assert_eq!(picked[0].metadata.name.as_deref(), Some("crowded"));
        let related = [&crowded, &neighbour, &alone, &other, &gone];
        // Now 2 on each node: equal rank, so more restarts decide.
        let picked = pods_to_delete(&[&alone, &crowded], &related, 1);
        assert_eq!(picked[0].metadata.name.as_deref(), Some("alone"));
    }

    #[test]
    fn more_recently_ready_first() {
        let long = base("ready-long");
        let mut short = base("ready-short");
        short["status"]["conditions"][0]["lastTransitionTime"] = json!("2026-01-01T00:10:00Z");
        // The recently ready one is older, so age cannot be what picks it.
        short["metadata"]["creationTimestamp"] = json!("2025-12-01T00:00:00Z");
        assert_eq!(first_of(long.clone(), short), "ready-short");
        let mut unknown = base("ready-unknown");
        unknown["status"]["conditions"][0]
            .as_object_mut()
            .unwrap()
            .remove("lastTransitionTime");
        unknown["metadata"]["creationTimestamp"] = json!("2025-12-01T00:00:00Z");
        assert_eq!(first_of(long, unknown), "ready-unknown");
    }

    #[test]
    fn more_restarts_first() {
        let calm = base("calm");
        let mut crashy = base("crashy");
        crashy["status"]["containerStatuses"][0]["restartCount"] = json!(3);
        // Older, so age cannot be what picks it.
        crashy["metadata"]["creationTimestamp"] = json!("2025-12-01T00:00:00Z");
        assert_eq!(first_of(calm.clone(), crashy), "crashy");
        // With equal regular restarts, a restarting sidecar decides.
        let mut sidecar = base("sidecar");
        sidecar["metadata"]["creationTimestamp"] = json!("2025-12-01T00:00:00Z");
        sidecar["spec"]["initContainers"] =
            json!([{"name": "log", "image": "i", "restartPolicy": "Always"}]);
        sidecar["status"]["initContainerStatuses"] = json!([{"name": "log", "image": "i",
            "imageID": "", "ready": true, "restartCount": 2}]);
        assert_eq!(first_of(calm, sidecar), "sidecar");
    }

    #[test]
    fn newer_before_older() {
        let old = base("old");
        let mut new = base("new");
        new["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:05Z");
        assert_eq!(first_of(old.clone(), new), "new");
        let mut none = base("no-timestamp");
        none["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("creationTimestamp");
        assert_eq!(first_of(old, none), "no-timestamp");
    }

    #[test]
    fn picks_the_requested_number_in_order() {
        let mut pending = base("pending");
        pending["status"]["phase"] = json!("Pending");
        let mut unscheduled = base("unscheduled");
        unscheduled["spec"]
            .as_object_mut()
            .unwrap()
            .remove("nodeName");
        let mut not_ready = base("not-ready");
        not_ready["status"]["conditions"][0]["status"] = json!("False");
        let keep = base("keep");
        let pods: Vec<Pod> = [keep, not_ready, pending, unscheduled]
            .into_iter()
            .map(pod)
            .collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let names: Vec<_> = pods_to_delete(&refs, &refs, 3)
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["unscheduled", "pending", "not-ready"]);
        assert_eq!(pods_to_delete(&refs, &refs, 9).len(), 4);
    }
}
