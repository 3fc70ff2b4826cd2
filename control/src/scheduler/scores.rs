//! The scores: how much a node that fits a pod is preferred, each score
//! 0..=100 per node and weighted as kube-scheduler's default profile
//! weighs its plugins.

use k8s_openapi::api::core::v1::Pod;

use super::nodeinfo::{controller_uid, pod_requests, NodeInfo, Resources};
use crate::toolkit::scheduling::{effective_taints, term_matches, tolerates, tolerations};

pub const MAX_SCORE: i64 = 100;
/// NodeResourcesFit (LeastAllocated).
pub const LEAST_ALLOCATED_WEIGHT: i64 = 1;
/// Spreading of one owner's pods (PodTopologySpread's default
/// constraint on hostname).
pub const SPREAD_WEIGHT: i64 = 2;
/// NodeAffinity's preferred terms.
pub const NODE_AFFINITY_WEIGHT: i64 = 2;
/// TaintToleration's PreferNoSchedule count.
pub const TAINT_WEIGHT: i64 = 3;

/// LeastAllocated: the share of cpu and memory left free after the pod
/// lands, averaged (pods without requests count kube-scheduler's defaults).
pub fn least_allocated(pod: &Pod, info: &NodeInfo) -> i64 {
    let want = pod
        .spec
        .as_ref()
        .map(|s| pod_requests(s, true))
        .unwrap_or_default();
    let free = |capacity: i64, requested: i64| {
        if capacity <= 0 || requested > capacity {
            0
        } else {
            (capacity - requested) * MAX_SCORE / capacity
        }
    };
    let Resources { milli_cpu, memory } = info.non_zero_requested;
    let cpu = free(info.allocatable.milli_cpu, milli_cpu + want.milli_cpu);
    let mem = free(info.allocatable.memory, memory + want.memory);
    (cpu + mem) / 2
}

/// Fewer pods of the pod's controlling owner on a node scores higher:
/// 100 for the emptiest, 0 for the fullest (all 100 without an owner).
pub fn spread(pod: &Pod, infos: &[&NodeInfo]) -> Vec<i64> {
    let Some(uid) = controller_uid(pod) else {
        return vec![MAX_SCORE; infos.len()];
    };
    let counts: Vec<i64> = infos
        .iter()
        .map(|i| i.owners.get(uid).copied().unwrap_or(0) as i64)
        .collect();
    let max = counts.iter().copied().max().unwrap_or(0);
    counts
        .iter()
        .map(|&c| {
            if max == 0 {
                MAX_SCORE
            } else {
                (max - c) * MAX_SCORE / max
            }
        })
        .collect()
}

/// The summed weights of the preferred node affinity terms each node
/// matches, scaled so the best node scores 100.
pub fn preferred_node_affinity(pod: &Pod, infos: &[&NodeInfo]) -> Vec<i64> {
    let preferred = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or(&[]);
    let raw: Vec<i64> = infos
        .iter()
        .map(|info| {
            preferred
                .iter()
                .filter(|p| p.weight != 0 && term_matches(&p.preference, &info.node))
                .map(|p| i64::from(p.weight))
                .sum()
        })
        .collect();
    normalize(&raw, false)
}

/// Fewer PreferNoSchedule taints the pod does not tolerate scores higher.
pub fn prefer_no_schedule(pod: &Pod, infos: &[&NodeInfo]) -> Vec<i64> {
    let tols: Vec<_> = tolerations(pod)
        .iter()
        .filter(|t| {
            t.effect
                .as_deref()
                .is_none_or(|e| e.is_empty() || e == "PreferNoSchedule")
        })
        .collect();
    let raw: Vec<i64> = infos
        .iter()
        .map(|info| {
            effective_taints(&info.node)
                .iter()
                .filter(|t| t.effect == "PreferNoSchedule")
                .filter(|t| !tols.iter().any(|tol| tolerates(tol, t)))
                .count() as i64
        })
        .collect();
    normalize(&raw, true)
}

/// kube-scheduler's `DefaultNormalizeScore`: scales to 0..=100 by the
/// highest raw score, reversed when fewer is better.
fn normalize(raw: &[i64], reverse: bool) -> Vec<i64> {
    let max = raw.iter().copied().max().unwrap_or(0);
    raw.iter()
        .map(|&r| {
            if max == 0 {
                if reverse {
                    MAX_SCORE
                } else {
                    0
                }
            } else {
                let s = r * MAX_SCORE / max;
                if reverse {
                    MAX_SCORE - s
                } else {
                    s
                }
            }
        })
        .collect()
}

/// Every node's weighted total.
pub fn score(pod: &Pod, infos: &[&NodeInfo]) -> Vec<i64> {
    let spread = spread(pod, infos);
    let affinity = preferred_node_affinity(pod, infos);
    let taints = prefer_no_schedule(pod, infos);
    infos
        .iter()
        .enumerate()
        .map(|(i, info)| {
            least_allocated(pod, info) * LEAST_ALLOCATED_WEIGHT
                + spread[i] * SPREAD_WEIGHT
                + affinity[i] * NODE_AFFINITY_WEIGHT
                + taints[i] * TAINT_WEIGHT
        })
        .collect()
}

/// The index of the highest score, ties broken at random (each of the
/// tied nodes equally likely, as kube-scheduler's `selectHost`).
pub fn pick(scores: &[i64]) -> Option<usize> {
    use rand::Rng;
    let mut rng = rand::rng();
    let mut best: Option<(usize, i64)> = None;
    let mut ties = 0u32;
    for (i, &s) in scores.iter().enumerate() {
        match best {
            Some((_, b)) if s < b => {}
            Some((_, b)) if s == b => {
                ties += 1;
                if rng.random_range(0..ties) == 0 {
                    best = Some((i, s));
                }
            }
            _ => {
                best = Some((i, s));
                ties = 1;
            }
        }
    }
    best.map(|(i, _)| i)
}
