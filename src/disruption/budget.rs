//! A budget's numbers, as upstream's disruption controller computes them
//! (`getExpectedPodCount`, `getExpectedScale`, `buildDisruptedPodMap`,
//! `countHealthyPods`, `updatePdbStatus`): pure functions of the budget,
//! its pods, the scales of the pods' controllers and the time.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{from_chrono, is_ready, to_chrono};
use crate::owners::controller_of;

/// How long a pod named in `disruptedPods` is expected to take to be
/// deleted (upstream's `DeletionTimeout`); past it the pod counts again.
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(120);

/// The condition type the controller keeps (`DisruptionAllowedCondition`).
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
/// Its reasons (`SufficientPodsReason`, `InsufficientPodsReason`, `SyncFailedReason`).
pub const SUFFICIENT_PODS: &str = "SufficientPods";
pub const INSUFFICIENT_PODS: &str = "InsufficientPods";
pub const SYNC_FAILED: &str = "SyncFailed";

/// What `getExpectedPodCount` finds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expected {
    pub expected_count: i32,
    pub desired_healthy: i32,
    /// Pods without a controller, left out of a scale-based count.
    pub unmanaged: Vec<String>,
}

/// The controller found for a pod and its scale (upstream's
/// `controllerAndScale`): a ReplicaSet of a Deployment gives the
/// Deployment's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerScale {
    pub uid: String,
    pub replicas: i32,
}

/// `intstr.GetScaledValueFromIntOrPercent`: a number as is, a percentage
/// of `total`, rounded up or down.
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match v {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let Some(number) = s.strip_suffix('%') else {
                return Err(
                    "invalid value for IntOrString: invalid type: string is not a percentage"
                        .to_string(),
                );
            };
            let percent: i64 = number
                .parse()
                .map_err(|_| format!("invalid value {s:?}: invalid syntax"))?;
            let product = percent * i64::from(total);
            let value = if round_up {
                (product + 99).div_euclid(100)
            } else {
                product.div_euclid(100)
            };
            Ok(value as i32)
        }
    }
}

/// `getExpectedScale`: the sum of the scales of the pods' controllers,
/// each counted once (by uid). `scales` holds what was found for each
/// pod's controllerRef uid; a pod whose controller has no entry fails the sync, as
/// upstream's "found no controllers for pod". Pods without a controller
/// are listed as unmanaged and not counted.
pub fn expected_scale(
    pods: &[Arc<Pod>],
    scales: &HashMap<String, ControllerScale>,
) -> Result<(i32, Vec<String>), String> {
    let mut seen: HashMap<&str, i32> = HashMap::new();
    let mut by_controller: HashMap<&str, i32> = HashMap::new();
    let mut unmanaged = Vec::new();
    for pod in pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(owner) = controller_of(&pod.metadata) else {
            unmanaged.push(name);
            continue;
        };
        if seen.contains_key(owner.uid.as_str()) {
            continue;
        }
        let Some(scale) = scales.get(&owner.uid) else {
            return Err(format!("found no controllers for pod {name:?}"));
        };
        seen.insert(owner.uid.as_str(), scale.replicas);
        by_controller.insert(scale.uid.as_str(), scale.replicas);
    }
    Ok((by_controller.values().sum(), unmanaged))
}

/// `getExpectedPodCount`: how many pods there should be and how many of
/// them must be healthy. A number in `minAvailable` counts the selected
/// pods; a percentage, or `maxUnavailable`, counts the controllers' scale.
pub fn expected_pod_count(
    pdb: &PodDisruptionBudget,
    pods: &[Arc<Pod>],
    scales: &HashMap<String, ControllerScale>,
) -> Result<Expected, String> {
    let spec = pdb.spec.clone().unwrap_or_default();
    let mut out = Expected::default();
    if let Some(max) = &spec.max_unavailable {
        let (count, unmanaged) = expected_scale(pods, scales)?;
        let max = scaled_value(max, count, true)?;
        out.expected_count = count;
        out.unmanaged = unmanaged;
        out.desired_healthy = (count - max).max(0);
    } else if let Some(min) = &spec.min_available {
        match min {
            IntOrString::Int(n) => {
                out.desired_healthy = *n;
                out.expected_count = pods.len() as i32;
            }
            IntOrString::String(_) => {
                let (count, unmanaged) = expected_scale(pods, scales)?;
                out.expected_count = count;
                out.unmanaged = unmanaged;
                out.desired_healthy = scaled_value(min, count, true)?;
            }
        }
    }
    Ok(out)
}

/// Whether the budget needs its pods' controllers' scales.
pub fn needs_scales(pdb: &PodDisruptionBudget) -> bool {
    let spec = pdb.spec.as_ref();
    spec.is_some_and(|s| {
        s.max_unavailable.is_some() || matches!(s.min_available, Some(IntOrString::String(_)))
    })
}

fn deadline(at: &Time) -> DateTime<Utc> {
    to_chrono(at) + chrono::Duration::from_std(DELETION_TIMEOUT).expect("fits")
}

/// `buildDisruptedPodMap`: the entries of `status.disruptedPods` still
/// pending (named pods, not yet being deleted, within the deletion
/// timeout), the pods past it (`NotDeleted`), and when the next one
/// times out (then the budget is synced again).
pub fn disrupted_pods(
    pdb: &PodDisruptionBudget,
    pods: &[Arc<Pod>],
    now: DateTime<Utc>,
) -> (BTreeMap<String, Time>, Vec<String>, Option<DateTime<Utc>>) {
    let mut kept = BTreeMap::new();
    let mut overdue = Vec::new();
    let mut recheck: Option<DateTime<Utc>> = None;
    let Some(recorded) = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref()) else {
        return (kept, overdue, recheck);
    };
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(at) = recorded.get(&name) else {
            continue;
        };
        let expected = deadline(at);
        if expected < now {
            overdue.push(name);
        } else {
            recheck = Some(recheck.map_or(expected, |r| r.min(expected)));
            kept.insert(name, at.clone());
        }
    }
    (kept, overdue, recheck)
}

/// `countHealthyPods`: the Ready pods neither being deleted nor about to be.
pub fn count_healthy(
    pods: &[Arc<Pod>],
    disrupted: &BTreeMap<String, Time>,
    now: DateTime<Utc>,
) -> i32 {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let name = p.metadata.name.as_deref().unwrap_or_default();
            disrupted.get(name).is_none_or(|at| deadline(at) <= now)
        })
        .filter(|p| is_ready(p))
        .count() as i32
}

/// `apimeta.SetStatusCondition`: replaces the condition of the same type,
/// keeping its transition time unless the status changed.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.status == new.status {
                new.last_transition_time = old.last_transition_time.clone();
            }
            *old = new;
        }
        None => conditions.push(new),
    }
}

fn condition(
    status: &str,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> Condition {
    Condition {
        type_: DISRUPTION_ALLOWED.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: from_chrono(now),
    }
}

/// `UpdateDisruptionAllowedCondition`: True with `SufficientPods` while a
/// disruption is allowed, False with `InsufficientPods` otherwise.
pub fn update_allowed_condition(status: &mut PodDisruptionBudgetStatus, now: DateTime<Utc>) {
    let c = if status.disruptions_allowed.unwrap_or(0) > 0 {
        condition("True", SUFFICIENT_PODS, "", status.observed_generation, now)
    } else {
        condition(
            "False",
            INSUFFICIENT_PODS,
            "",
            status.observed_generation,
            now,
        )
    };
    set_condition(status.conditions.get_or_insert_with(Vec::new), c);
}

/// `updatePdbStatus`: the status the numbers make. A budget that expects
/// no pods allows no disruption (its first pods may appear before it is
/// synced again).
pub fn status_of(
    pdb: &PodDisruptionBudget,
    current_healthy: i32,
    expected: &Expected,
    disrupted: BTreeMap<String, Time>,
    now: DateTime<Utc>,
) -> PodDisruptionBudgetStatus {
    let mut allowed = current_healthy - expected.desired_healthy;
    if expected.expected_count <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let mut status = PodDisruptionBudgetStatus {
        current_healthy: Some(current_healthy),
        desired_healthy: Some(expected.desired_healthy),
        expected_pods: Some(expected.expected_count),
        disruptions_allowed: Some(allowed),
        disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
        observed_generation: pdb.metadata.generation,
        conditions: pdb.status.as_ref().and_then(|s| s.conditions.clone()),
    };
    update_allowed_condition(&mut status, now);
    status
}

/// `failSafe`: a budget whose numbers cannot be worked out allows no
/// disruption, with a `SyncFailed` condition saying why.
pub fn fail_safe(
    pdb: &PodDisruptionBudget,
    error: &str,
    now: DateTime<Utc>,
) -> PodDisruptionBudgetStatus {
    let mut status = pdb.status.clone().unwrap_or_default();
    status.disruptions_allowed = Some(0);
    let c = condition("False", SYNC_FAILED, error, status.observed_generation, now);
    set_condition(status.conditions.get_or_insert_with(Vec::new), c);
    status
}
