//! Preemption, as kube-scheduler's DefaultPreemption plugin: when no node
//! fits a pod, find the nodes where removing pods of lower priority makes
//! it fit, choose the fewest and least important victims on each, pick
//! one node by upstream's criteria, and evict its victims so the pod can
//! be placed there once they are gone.
//!
//! PodDisruptionBudgets: [`Budgets`] says which victims a budget protects
//! ([`PdbBudgets`], the cluster's budgets, as upstream's
//! `filterPodsWithPDBViolation`); victims that would violate one are
//! reprieved first and nodes with fewer violations are preferred, as
//! upstream does. A budget is respected where possible, not always: when
//! only violating victims make room, they go.

use std::cmp::Ordering;

use bosun::selector::LabelSelector;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::filters::{filter, Reason};
use super::nodeinfo::NodeInfo;
use crate::toolkit::clock::to_chrono;

/// The pod's priority (`spec.priority`, set by admission; 0 if unset).
pub fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// When the pod started; a pod not yet started counts as starting now
/// (upstream's `GetPodStartTime`).
pub fn start_time(pod: &Pod) -> Option<DateTime<Utc>> {
    pod.status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(to_chrono)
}

fn start_or_now(pod: &Pod) -> DateTime<Utc> {
    start_time(pod).unwrap_or_else(Utc::now)
}

/// Upstream's `MoreImportantPod` as an ordering: the more important pod
/// first (higher priority, then the one that started earlier).
pub fn by_importance(a: &Pod, b: &Pod) -> Ordering {
    priority(b)
        .cmp(&priority(a))
        .then_with(|| start_or_now(a).cmp(&start_or_now(b)))
}

/// Whether `pod` may preempt at all (upstream's
/// `PodEligibleToPreemptOthers`): not with `preemptionPolicy: Never`, and
/// not again while the victims of its last preemption, on the node it was
/// nominated to, are still going.
pub fn eligible(pod: &Pod, infos: &[NodeInfo]) -> bool {
    let spec = pod.spec.as_ref();
    if spec.and_then(|s| s.preemption_policy.as_deref()) == Some("Never") {
        return false;
    }
    let nominated = pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty());
    if let Some(node) = nominated {
        if let Some(info) = infos.iter().find(|i| i.name() == node) {
            let mine = priority(pod);
            let going = info
                .pod_list
                .iter()
                .any(|p| p.metadata.deletion_timestamp.is_some() && priority(p) < mine);
            if going {
                return false;
            }
        }
    }
    true
}

/// Whether removing pods could cure a node's failures: not for cordoned
/// nodes, taints, affinity or volumes (upstream's
/// UnschedulableAndUnresolvable), yes for room and ports.
pub fn resolvable(reasons: &[Reason]) -> bool {
    !reasons.is_empty()
        && reasons.iter().all(|r| {
            matches!(
                r,
                Reason::InsufficientCpu
                    | Reason::InsufficientMemory
                    | Reason::TooManyPods
                    | Reason::HostPorts
            )
        })
}

/// Which pods a PodDisruptionBudget protects: removing one of the given
/// victims would take a budget below what it allows.
pub trait Budgets {
    /// Splits `pods` (in importance order) into those whose removal
    /// violates a budget and those whose does not, each in the given
    /// order (upstream's `filterPodsWithPDBViolation`).
    fn split_violating(&self, pods: Vec<Pod>) -> (Vec<Pod>, Vec<Pod>);
}

/// No PodDisruptionBudgets: no pod is protected.
pub struct NoBudgets;

impl Budgets for NoBudgets {
    fn split_violating(&self, pods: Vec<Pod>) -> (Vec<Pod>, Vec<Pod>) {
        (Vec::new(), pods)
    }
}

/// The cluster's PodDisruptionBudgets. Going through the victims in order,
/// each takes one from the `disruptionsAllowed` of every budget of its
/// namespace that selects it (a budget with an empty selector selects
/// nothing here, and a pod already in its `disruptedPods` takes nothing);
/// a victim that takes a budget below zero violates it.
pub struct PdbBudgets(pub Vec<PodDisruptionBudget>);

impl Budgets for PdbBudgets {
    fn split_violating(&self, pods: Vec<Pod>) -> (Vec<Pod>, Vec<Pod>) {
        let mut allowed: Vec<i32> = self
            .0
            .iter()
            .map(|b| {
                b.status
                    .as_ref()
                    .and_then(|s| s.disruptions_allowed)
                    .unwrap_or(0)
            })
            .collect();
        let (mut violating, mut rest) = (Vec::new(), Vec::new());
        for pod in pods {
            let labels = pod.metadata.labels.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let mut violated = false;
            for (i, budget) in self.0.iter().enumerate() {
                if labels.is_empty() || budget.metadata.namespace != pod.metadata.namespace {
                    continue;
                }
                let Some(selector) = budget.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
                    continue;
                };
                let empty = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
                    && selector
                        .match_expressions
                        .as_ref()
                        .is_none_or(|e| e.is_empty());
                let selects = !empty
                    && LabelSelector::from_optional(Some(selector))
                        .is_ok_and(|s| s.matches(&labels));
                let disrupted = budget
                    .status
                    .as_ref()
                    .and_then(|s| s.disrupted_pods.as_ref())
                    .is_some_and(|d| d.contains_key(&name));
                if selects && !disrupted {
                    allowed[i] -= 1;
                    violated |= allowed[i] < 0;
                }
            }
            if violated {
                violating.push(pod);
            } else {
                rest.push(pod);
            }
        }
        (violating, rest)
    }
}

/// The pods to remove from one node, most important first.
#[derive(Debug, Clone)]
pub struct Victims {
    pub pods: Vec<Pod>,
    pub pdb_violations: usize,
}

fn fits(pod: &Pod, info: &NodeInfo) -> bool {
    filter(pod, info).is_empty()
}

fn node_with(info: &NodeInfo, pods: &[Pod]) -> NodeInfo {
    let mut out = NodeInfo::new(info.node.clone());
    for p in pods {
        out.add_pod(p);
    }
    out
}

/// Upstream's `SelectVictimsOnNode`: remove every pod of lower priority;
/// if the pod then fits, put them back one at a time, the most important
/// first (those protected by a budget before the rest), keeping each
/// that still lets the pod fit. None if the pod does not fit even with
/// all of them gone.
pub fn select_victims(pod: &Pod, info: &NodeInfo, budgets: &dyn Budgets) -> Option<Victims> {
    let mine = priority(pod);
    let (mut potential, kept): (Vec<Pod>, Vec<Pod>) = info
        .pod_list
        .iter()
        .map(|p| Pod::clone(p))
        .partition(|p| priority(p) < mine);
    if potential.is_empty() {
        return None;
    }
    let mut remaining = kept;
    if !fits(pod, &node_with(info, &remaining)) {
        return None;
    }
    potential.sort_by(by_importance);
    let (violating, non_violating) = budgets.split_violating(potential);
    let mut victims = Vec::new();
    let mut pdb_violations = 0;
    for (protected, p) in violating
        .into_iter()
        .map(|p| (true, p))
        .chain(non_violating.into_iter().map(|p| (false, p)))
    {
        remaining.push(p);
        if fits(pod, &node_with(info, &remaining)) {
            continue;
        }
        let p = remaining.pop().expect("just pushed");
        if protected {
            pdb_violations += 1;
        }
        victims.push(p);
    }
    victims.sort_by(by_importance);
    Some(Victims {
        pods: victims,
        pdb_violations,
    })
}

/// Upstream's `pickOneNodeForPreemption`: of the candidates (an index
/// and its victims), a node needing no victims at once; else the fewest
/// budget violations, then the lowest highest-priority victim, then the
/// lowest sum of priorities, then the fewest victims, then the latest
/// start among the highest-priority victims; the first of any tie.
pub fn pick_node(candidates: &[(usize, Victims)]) -> Option<usize> {
    if let Some((i, _)) = candidates.iter().find(|(_, v)| v.pods.is_empty()) {
        return Some(*i);
    }
    let mut left: Vec<&(usize, Victims)> = candidates.iter().collect();
    let criteria: [&dyn Fn(&Victims) -> i128; 5] = [
        &|v| -(v.pdb_violations as i128),
        &|v| -(priority(&v.pods[0]) as i128),
        &|v| {
            -v.pods
                .iter()
                .map(|p| priority(p) as i128 + i32::MAX as i128 + 1)
                .sum::<i128>()
        },
        &|v| -(v.pods.len() as i128),
        &|v| {
            let top = priority(&v.pods[0]);
            v.pods
                .iter()
                .filter(|p| priority(p) == top)
                .map(|p| start_or_now(p).timestamp_nanos_opt().unwrap_or(i64::MAX))
                .min()
                .unwrap_or(i64::MIN) as i128
        },
    ];
    for score in criteria {
        let best = left.iter().map(|(_, v)| score(v)).max()?;
        left.retain(|(_, v)| score(v) == best);
        if left.len() == 1 {
            break;
        }
    }
    left.first().map(|(i, _)| *i)
}

/// The whole dry run: for each node whose failure removing pods may cure,
/// the victims that make room there; then the node to preempt on.
/// `failures[i]` are node `i`'s filter failures.
pub fn find_node(
    pod: &Pod,
    infos: &[NodeInfo],
    failures: &[Vec<Reason>],
    budgets: &dyn Budgets,
) -> Option<(usize, Victims)> {
    let candidates: Vec<(usize, Victims)> = infos
        .iter()
        .enumerate()
        .filter(|(i, _)| failures.get(*i).is_some_and(|r| resolvable(r)))
        .filter_map(|(i, info)| select_victims(pod, info, budgets).map(|v| (i, v)))
        .collect();
    let chosen = pick_node(&candidates)?;
    candidates.into_iter().find(|(i, _)| *i == chosen)
}

#[cfg(test)]
mod tests;
