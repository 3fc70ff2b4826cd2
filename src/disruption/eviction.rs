//! Whether an eviction may go ahead, as kube-apiserver's `EvictionREST`
//! decides it (`canIgnorePDB`, `getPodDisruptionBudgets`,
//! `checkAndDecrement`): pure functions the eviction subresource calls,
//! and any other caller that must honour budgets (preemption, say).

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::budget::update_allowed_condition;
use super::{from_chrono, is_ready, phase_of};
use crate::selector::LabelSelector;

/// The message of the 429 an eviction gets when a budget forbids it.
pub const VIOLATES_BUDGET: &str =
    "Cannot evict pod as it would violate the pod's disruption budget.";
/// The StatusCause type naming the budget (`policyv1.DisruptionBudgetCause`).
pub const DISRUPTION_BUDGET_CAUSE: &str = "DisruptionBudget";
/// The 500 when more than one budget selects the pod.
pub const MORE_THAN_ONE_BUDGET: &str =
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";
/// How many disruptions may wait for the controller's confirmation
/// (`MaxDisruptedPodSize`).
pub const MAX_DISRUPTED_PODS: usize = 2000;

/// `policyv1.AlwaysAllow`.
pub const ALWAYS_ALLOW: &str = "AlwaysAllow";

/// The budgets whose selector matches the pod's labels, from `pdbs`
/// (any namespace; only the pod's counts). A missing selector matches
/// nothing; an empty one matches every pod of the namespace (policy/v1).
pub fn matching_budgets<'a>(
    pod: &Pod,
    pdbs: impl IntoIterator<Item = &'a PodDisruptionBudget>,
) -> Vec<&'a PodDisruptionBudget> {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    pdbs.into_iter()
        .filter(|pdb| pdb.metadata.namespace == pod.metadata.namespace)
        .filter(|pdb| {
            LabelSelector::from_optional(pdb.spec.as_ref().and_then(|s| s.selector.as_ref()))
                .is_ok_and(|sel| sel.matches(&labels))
        })
        .collect()
}

/// `canIgnorePDB`: a pod that is not running (Pending, Succeeded, Failed)
/// or already being deleted is evicted whatever the budgets say.
pub fn can_ignore_budgets(pod: &Pod) -> bool {
    matches!(phase_of(pod), "Succeeded" | "Failed" | "Pending")
        || pod.metadata.deletion_timestamp.is_some()
}

/// What an eviction of one pod comes to.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Delete the pod; no budget is touched.
    Delete,
    /// Delete the pod, which is not Ready, only while it still is the
    /// version looked at (a resourceVersion precondition): an unhealthy
    /// pod the budget lets go without spending a disruption.
    DeleteUnhealthy,
    /// Write this budget (one disruption spent, the pod recorded in
    /// `disruptedPods`) over the version read, then delete the pod.
    Decrement(Box<PodDisruptionBudget>),
    /// 429 TooManyRequests, with this DisruptionBudget cause.
    TooManyRequests(String),
    /// 403 Forbidden on the budget, with this message.
    Forbidden(String),
    /// 500: more than one budget selects the pod.
    MoreThanOneBudget,
}

/// Decides an eviction of `pod` given every budget of its namespace.
pub fn decide(pod: &Pod, pdbs: &[PodDisruptionBudget], now: DateTime<Utc>) -> Verdict {
    if can_ignore_budgets(pod) {
        return Verdict::Delete;
    }
    let matching = matching_budgets(pod, pdbs);
    match matching.as_slice() {
        [] => Verdict::Delete,
        [pdb] => decide_one(pod, pdb, now),
        _ => Verdict::MoreThanOneBudget,
    }
}

/// The eviction of `pod` under its one budget `pdb`.
pub fn decide_one(pod: &Pod, pdb: &PodDisruptionBudget, now: DateTime<Utc>) -> Verdict {
    let status = pdb.status.clone().unwrap_or_default();
    if !is_ready(pod) {
        let policy = pdb
            .spec
            .as_ref()
            .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref());
        if policy == Some(ALWAYS_ALLOW) {
            return Verdict::DeleteUnhealthy;
        }
        // IfHealthyBudget (the default): an unready pod may go while the
        // application is not disrupted.
        let (current, desired) = (
            status.current_healthy.unwrap_or(0),
            status.desired_healthy.unwrap_or(0),
        );
        if current >= desired && desired > 0 {
            return Verdict::DeleteUnhealthy;
        }
    }
    check_and_decrement(pod, pdb, now)
}

/// `checkAndDecrement`: spends one disruption of `pdb` on `pod`, or says
/// why not.
pub fn check_and_decrement(pod: &Pod, pdb: &PodDisruptionBudget, now: DateTime<Utc>) -> Verdict {
    let name = pdb.metadata.name.clone().unwrap_or_default();
    let mut status = pdb.status.clone().unwrap_or_default();
    let allowed = status.disruptions_allowed.unwrap_or(0);
    if status.observed_generation.unwrap_or(0) < pdb.metadata.generation.unwrap_or(0) {
        return Verdict::TooManyRequests(format!(
            "The disruption budget {name} is still being processed by the server."
        ));
    }
    if allowed < 0 {
        return Verdict::Forbidden("pdb disruptions allowed is negative".into());
    }
    if status.disrupted_pods.as_ref().map_or(0, |d| d.len()) > MAX_DISRUPTED_PODS {
        return Verdict::Forbidden(
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller".into(),
        );
    }
    if allowed == 0 {
        return Verdict::TooManyRequests(format!(
            "The disruption budget {name} needs {} healthy pods and has {} currently",
            status.desired_healthy.unwrap_or(0),
            status.current_healthy.unwrap_or(0)
        ));
    }
    status.disruptions_allowed = Some(allowed - 1);
    if allowed == 1 {
        update_allowed_condition(&mut status, now);
    }
    status
        .disrupted_pods
        .get_or_insert_with(Default::default)
        .insert(
            pod.metadata.name.clone().unwrap_or_default(),
            from_chrono(now),
        );
    let mut next = pdb.clone();
    next.status = Some(status);
    Verdict::Decrement(Box::new(next))
}
