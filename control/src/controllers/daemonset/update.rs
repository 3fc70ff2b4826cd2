//! The RollingUpdate strategy (`update.go` `rollingUpdate`,
//! `updatedDesiredNodeCounts`, `findUpdatedPodsOnNode`).
//!
//! With `maxSurge` 0, old pods are deleted (the next sync makes their
//! replacements) while no more than `maxUnavailable` of the nodes that
//! should run the set are without an available pod; an old pod that is
//! not available is replaced at once. With `maxSurge`, a new pod starts
//! next to the old one on up to `maxSurge` nodes and the old one goes
//! once the new one is available. Both are counts or percentages of
//! `desiredNumberScheduled`, rounded up; both 0 means `maxUnavailable` 1.
//! OnDelete does nothing here: pods are replaced when the user deletes
//! them.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::node_pods::{Changes, NodePods};
use super::placement::placement;
use super::{is_updated, template_generation};
use crate::toolkit::pods::until_available;

/// `maxUnavailable` and `maxSurge` as the set wrote them.
#[derive(Debug, Clone)]
pub struct Strategy {
    pub max_unavailable: Option<IntOrString>,
    pub max_surge: Option<IntOrString>,
}

impl Strategy {
    /// The rolling update settings; None for OnDelete.
    pub fn of(ds: &DaemonSet) -> Option<Strategy> {
        let strategy = ds.spec.update_strategy.as_ref();
        if strategy
            .and_then(|s| s.type_.as_deref())
            .is_some_and(|t| t != "RollingUpdate")
        {
            return None;
        }
        let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
        Some(Strategy {
            max_unavailable: rolling
                .and_then(|r| r.max_unavailable.clone())
                .or(Some(IntOrString::Int(1))),
            max_surge: rolling.and_then(|r| r.max_surge.clone()),
        })
    }
}

/// Whether old and new pods may share a node (`AllowsSurge`).
pub fn allows_surge(ds: &DaemonSet) -> bool {
    Strategy::of(ds).is_some_and(|s| scaled(s.max_surge.as_ref(), 1) > 0)
}

pub fn min_ready(ds: &DaemonSet) -> i64 {
    ds.spec.min_ready_seconds.unwrap_or(0).max(0).into()
}

/// A count or a percentage of `total`, rounded up
/// (`GetScaledValueFromIntOrPercent`); unset or unreadable is 0.
pub fn scaled(value: Option<&IntOrString>, total: i32) -> i32 {
    match value {
        Some(IntOrString::Int(n)) => (*n).max(0),
        Some(IntOrString::String(s)) => s
            .strip_suffix('%')
            .and_then(|p| p.parse::<i64>().ok())
            .map_or(0, |p| ((p.max(0) * i64::from(total) + 99) / 100) as i32),
        None => 0,
    }
}

/// A node's new and old pod.
type NewAndOld<'a> = (Option<&'a Arc<Pod>>, Option<&'a Arc<Pod>>);

/// The node's single new and single old live pod; None when it has more
/// than one of either (the manage pass sorts that out first).
fn updated_and_old<'a>(
    pods: &'a [Arc<Pod>],
    hash: &str,
    generation: Option<i64>,
) -> Option<NewAndOld<'a>> {
    let (mut new, mut old) = (None, None);
    for pod in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let slot = if is_updated(pod, hash, generation) {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(pod);
    }
    Some((new, old))
}

/// What the rolling update changes in this sync.
pub fn rolling_update(
    ds: &DaemonSet,
    strategy: Strategy,
    nodes: &[Arc<Node>],
    node_pods: &NodePods,
    hash: &str,
    now: DateTime<Utc>,
) -> Changes {
    let generation = template_generation(ds);
    let min_ready = min_ready(ds);
    let available = |p: &Pod| until_available(p, min_ready, now) == Some(Duration::ZERO);
    // Every node that should run the set counts, with or without a pod.
    let mut node_pods = node_pods.clone();
    let mut desired = 0;
    for node in nodes {
        if placement(ds, node).should_run {
            desired += 1;
            node_pods.entry(node.name_any()).or_default();
        }
    }
    let mut max_unavailable = scaled(strategy.max_unavailable.as_ref(), desired);
    let max_surge = scaled(strategy.max_surge.as_ref(), desired);
    if max_unavailable == 0 && max_surge == 0 {
        max_unavailable = 1;
    }
    let mut changes = Changes::default();

    if max_surge == 0 {
        let mut unavailable = 0;
        let mut candidates = Vec::new();
        for pods in node_pods.values() {
            match updated_and_old(pods, hash, generation) {
                // Several pods: the manage pass deals with it.
                None => unavailable += 1,
                Some((None, None)) | Some((Some(_), Some(_))) => unavailable += 1,
                Some((Some(new), None)) => {
                    if !available(new) {
                        unavailable += 1;
                    }
                }
                Some((None, Some(old))) => {
                    if !available(old) {
                        // Not serving anyway: replace it now.
                        changes.delete.push(old.clone());
                    } else {
                        candidates.push(old.clone());
                    }
                }
            }
        }
        let room = (max_unavailable - unavailable).max(0) as usize;
        changes.delete.extend(candidates.into_iter().take(room));
        return changes;
    }

    let mut surging = 0;
    let mut candidates = Vec::new();
    for (node_name, pods) in &node_pods {
        match updated_and_old(pods, hash, generation) {
            None => surging += 1,
            Some((_, None)) => {}
            Some((None, Some(old))) => {
                if !available(old) {
                    let runs = nodes
                        .iter()
                        .find(|n| &n.name_any() == node_name)
                        .is_some_and(|n| placement(ds, n).should_run);
                    if runs {
                        changes.create_on.push(node_name.clone());
                    }
                } else {
                    candidates.push(node_name.clone());
                }
            }
            Some((Some(new), Some(old))) => {
                if available(new) {
                    changes.delete.push(old.clone());
                } else {
                    surging += 1;
                }
            }
        }
    }
    let room = (max_surge - surging).max(0) as usize;
    changes.create_on.extend(candidates.into_iter().take(room));
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    const NEW: &str = "new-hash";

    fn ds(rolling: Value) -> DaemonSet {
        serde_json::from_value(json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "d", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "d"}},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling},
                     "template": {"metadata": {"labels": {"app": "d"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
        .unwrap()
    }

    fn nodes(n: usize) -> Vec<Arc<Node>> {
        (0..n)
            .map(|i| {
                Arc::new(
                    serde_json::from_value(json!({"metadata": {"name": format!("n{i}")},
                        "status": {"conditions": [{"type": "Ready", "status": "True"}]}}))
                    .unwrap(),
                )
            })
            .collect()
    }

    fn pod(name: &str, hash: &str, ready: bool) -> Arc<Pod> {
        let status = if ready {
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
        } else {
            json!({"phase": "Pending"})
        };
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name,
                "labels": {"app": "d", "controller-revision-hash": hash}},
                "spec": {"containers": []}, "status": status}))
            .unwrap(),
        )
    }

    /// One pod per node: `(hash, ready)` for each.
    fn layout(pods: &[(&str, bool)]) -> NodePods {
        pods.iter()
            .enumerate()
            .map(|(i, (hash, ready))| (format!("n{i}"), vec![pod(&format!("p{i}"), hash, *ready)]))
            .collect()
    }

    fn run(ds: &DaemonSet, n: usize, pods: &NodePods) -> (Vec<String>, Vec<String>) {
        let strategy = Strategy::of(ds).unwrap();
        let c = rolling_update(ds, strategy, &nodes(n), pods, NEW, Utc::now());
        let mut deleted: Vec<String> = c.delete.iter().map(|p| p.name_any()).collect();
        deleted.sort();
        (c.create_on, deleted)
    }

    #[test]
    fn max_unavailable_bounds_how_many_old_pods_go_at_once() {
        let four_old = layout(&[("old", true), ("old", true), ("old", true), ("old", true)]);
        // Default: one at a time.
        let (create, delete) = run(&ds(json!({})), 4, &four_old);
        assert!(create.is_empty());
        assert_eq!(delete.len(), 1);
        // 50% of 4: two. 30% of 4 rounds up to two as well.
        assert_eq!(
            run(&ds(json!({"maxUnavailable": "50%"})), 4, &four_old)
                .1
                .len(),
            2
        );
        assert_eq!(
            run(&ds(json!({"maxUnavailable": "30%"})), 4, &four_old)
                .1
                .len(),
            2
        );
        // One node already without an available pod (a new one starting)
        // uses up the budget of one.
        let starting = layout(&[
            ("new-hash", false),
            ("old", true),
            ("old", true),
            ("old", true),
        ]);
        assert!(run(&ds(json!({"maxUnavailable": 1})), 4, &starting)
            .1
            .is_empty());
        // A node that should run the set but has no pod counts too.
        let mut missing = four_old.clone();
        missing.remove("n3");
        assert!(run(&ds(json!({"maxUnavailable": 1})), 4, &missing)
            .1
            .is_empty());
        // An old pod that is not available is replaced whatever the budget.
        let broken = layout(&[("new-hash", false), ("old", false), ("old", true)]);
        assert_eq!(run(&ds(json!({"maxUnavailable": 1})), 3, &broken).1, ["p1"]);
        // All updated: nothing to do.
        let done = layout(&[("new-hash", true), ("new-hash", true)]);
        assert_eq!(run(&ds(json!({})), 2, &done), (vec![], vec![]));
    }

    #[test]
    fn max_surge_starts_new_pods_next_to_old_ones_first() {
        let surge = ds(json!({"maxUnavailable": 0, "maxSurge": 1}));
        let three_old = layout(&[("old", true), ("old", true), ("old", true)]);
        let (create, delete) = run(&surge, 3, &three_old);
        assert_eq!(
            (create.len(), delete.len()),
            (1, 0),
            "one surge pod, nothing deleted"
        );
        // The new pod next to the old one is not available yet: wait.
        let mut surging = three_old.clone();
        surging
            .get_mut("n0")
            .unwrap()
            .push(pod("p0-new", NEW, false));
        assert_eq!(run(&surge, 3, &surging), (vec![], vec![]));
        // Available: the old one goes, and the next node surges.
        surging.get_mut("n0").unwrap()[1] = pod("p0-new", NEW, true);
        let (create, delete) = run(&surge, 3, &surging);
        assert_eq!(delete, ["p0"]);
        assert_eq!(create.len(), 1);
        assert_ne!(create[0], "n0");
        // maxSurge as a percentage rounds up: 50% of 3 is 2.
        let (create, _) = run(
            &ds(json!({"maxUnavailable": 0, "maxSurge": "50%"})),
            3,
            &three_old,
        );
        assert_eq!(create.len(), 2);
    }

    #[test]
    fn on_delete_has_no_rolling_update() {
        let mut d = ds(json!({}));
        d.spec.update_strategy.as_mut().unwrap().type_ = Some("OnDelete".into());
        assert!(Strategy::of(&d).is_none());
        assert!(!allows_surge(&d));
        assert!(allows_surge(&ds(
            json!({"maxUnavailable": 0, "maxSurge": 1})
        )));
    }
}
