//! progress.go and the condition helpers of `deploymentutil`: the
//! Progressing condition (with the progress deadline) and Available.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::replicas;
use super::rollout::Rollout;
use super::Error;
use crate::toolkit::{from_chrono, to_chrono, Clock};

pub const PROGRESSING: &str = "Progressing";
pub const AVAILABLE: &str = "Available";

pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
pub const PAUSED: &str = "DeploymentPaused";
pub const RESUMED: &str = "DeploymentResumed";
pub const FAILED_RS_CREATE: &str = "ReplicaSetCreateError";
pub const MIN_AVAILABLE: &str = "MinimumReplicasAvailable";
pub const MIN_UNAVAILABLE: &str = "MinimumReplicasUnavailable";

/// Now, to the second (what the API keeps of a timestamp).
fn now_time(clock: &dyn Clock) -> Time {
    let now = clock.now();
    from_chrono(chrono::DateTime::from_timestamp(now.timestamp(), 0).unwrap_or(now))
}

/// A condition that changed now.
pub fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    clock: &dyn Clock,
) -> DeploymentCondition {
    let now = now_time(clock);
    DeploymentCondition {
        type_: Some(type_.into()),
        status: Some(status.into()),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(now.clone()),
        last_transition_time: Some(now),
    }
}

pub fn get_condition<'s>(
    status: &'s DeploymentStatus,
    type_: &str,
) -> Option<&'s DeploymentCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_.as_deref() == Some(type_))
}

/// Sets a condition unless one of the same status and reason is there;
/// keeps the transition time when only the reason changes
/// (`SetDeploymentCondition`).
pub fn set_condition(status: &mut DeploymentStatus, mut c: DeploymentCondition) {
    let type_ = c.type_.clone().unwrap_or_default();
    if let Some(current) = get_condition(status, &type_) {
        if current.status == c.status && current.reason == c.reason {
            return;
        }
        if current.status == c.status {
            c.last_transition_time = current.last_transition_time.clone();
        }
    }
    remove_condition(status, &type_);
    status.conditions.get_or_insert_with(Vec::new).push(c);
}

pub fn remove_condition(status: &mut DeploymentStatus, type_: &str) {
    if let Some(cs) = status.conditions.as_mut() {
        cs.retain(|c| c.type_.as_deref() != Some(type_));
    }
}

fn progress_deadline(d: &Deployment) -> Option<i32> {
    d.spec.progress_deadline_seconds.filter(|s| *s != i32::MAX)
}

pub fn has_progress_deadline(d: &Deployment) -> bool {
    progress_deadline(d).is_some()
}

/// Every replica is updated and available, and the status is current.
pub fn deployment_complete(d: &Deployment, status: &DeploymentStatus) -> bool {
    let n = replicas::desired(d);
    status.updated_replicas.unwrap_or(0) == n
        && status.replicas.unwrap_or(0) == n
        && status.available_replicas.unwrap_or(0) == n
        && status.observed_generation >= d.metadata.generation
}

/// Something moved since the status the Deployment has.
fn deployment_progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let v = |x: Option<i32>| x.unwrap_or(0);
    let old_old = v(old.replicas) - v(old.updated_replicas);
    let new_old = v(new.replicas) - v(new.updated_replicas);
    v(new.updated_replicas) > v(old.updated_replicas)
        || new_old < old_old
        || v(new.ready_replicas) > v(old.ready_replicas)
        || v(new.available_replicas) > v(old.available_replicas)
}

/// How long until the deadline, from the last progress recorded in
/// `cond` (negative once past).
fn until_deadline(
    d: &Deployment,
    cond: &DeploymentCondition,
    clock: &dyn Clock,
) -> Option<chrono::Duration> {
    let secs = progress_deadline(d)?;
    let from = to_chrono(cond.last_update_time.as_ref()?);
    Some(from + chrono::Duration::seconds(i64::from(secs)) - clock.now())
}

fn deployment_timed_out(d: &Deployment, new: &DeploymentStatus, clock: &dyn Clock) -> bool {
    let Some(cond) = get_condition(new, PROGRESSING) else {
        return false;
    };
    match cond.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => false,
        Some(TIMED_OUT) => true,
        _ => until_deadline(d, cond, clock).is_some_and(|left| left < chrono::Duration::zero()),
    }
}

impl Rollout<'_> {
    /// The Progressing condition follows `spec.paused`
    /// (`checkPausedConditions`); a timed-out rollout stays so.
    pub async fn check_paused_conditions(&mut self) -> Result<(), Error> {
        if !has_progress_deadline(&self.d) {
            return Ok(());
        }
        let mut status = self.status();
        let cond = get_condition(&status, PROGRESSING);
        if cond.is_some_and(|c| c.reason.as_deref() == Some(TIMED_OUT)) {
            return Ok(());
        }
        let paused_cond = cond.is_some_and(|c| c.reason.as_deref() == Some(PAUSED));
        let c = if self.paused() && !paused_cond {
            new_condition(
                PROGRESSING,
                "Unknown",
                PAUSED,
                "Deployment is paused".into(),
                self.ctx.clock.as_ref(),
            )
        } else if !self.paused() && paused_cond {
            new_condition(
                PROGRESSING,
                "Unknown",
                RESUMED,
                "Deployment is resumed".into(),
                self.ctx.clock.as_ref(),
            )
        } else {
            return Ok(());
        };
        set_condition(&mut status, c);
        self.write_status(status).await
    }

    /// Status with progress estimation, after a rollout step
    /// (`syncRolloutStatus`).
    pub async fn sync_rollout_status(&mut self) -> Result<(), Error> {
        let mut new = self.calculate_status();
        if !has_progress_deadline(&self.d) {
            remove_condition(&mut new, PROGRESSING);
        }
        let name = self.name();
        let rs_name = self.new_set().and_then(|rs| rs.metadata.name.clone());
        let current = get_condition(&self.status(), PROGRESSING).cloned();
        let complete_already = new.replicas == new.updated_replicas
            && current
                .as_ref()
                .is_some_and(|c| c.reason.as_deref() == Some(NEW_RS_AVAILABLE));
        let clock = self.ctx.clock.as_ref();
        if has_progress_deadline(&self.d) && !complete_already {
            if deployment_complete(&self.d, &new) {
                let msg = match &rs_name {
                    Some(rs) => format!("ReplicaSet {rs:?} has successfully progressed."),
                    None => format!("Deployment {name:?} has successfully progressed."),
                };
                set_condition(
                    &mut new,
                    new_condition(PROGRESSING, "True", NEW_RS_AVAILABLE, msg, clock),
                );
            } else if deployment_progressing(&self.d, &new) {
                let msg = match &rs_name {
                    Some(rs) => format!("ReplicaSet {rs:?} is progressing."),
                    None => format!("Deployment {name:?} is progressing."),
                };
                let mut c = new_condition(PROGRESSING, "True", RS_UPDATED, msg, clock);
                // Progress refreshes lastUpdateTime even with the same
                // reason; the transition time stays while it stays True.
                if let Some(cur) = &current {
                    if cur.status.as_deref() == Some("True") {
                        c.last_transition_time = cur.last_transition_time.clone();
                    }
                    remove_condition(&mut new, PROGRESSING);
                }
                set_condition(&mut new, c);
            } else if deployment_timed_out(&self.d, &new, clock) {
                let msg = match &rs_name {
                    Some(rs) => format!("ReplicaSet {rs:?} has timed out progressing."),
                    None => format!("Deployment {name:?} has timed out progressing."),
                };
                set_condition(
                    &mut new,
                    new_condition(PROGRESSING, "False", TIMED_OUT, msg, clock),
                );
            }
        }
        if self.d.status.as_ref() == Some(&new) {
            self.requeue_stuck(&new);
            return Ok(());
        }
        self.write_status(new).await
    }

    /// A rollout without progress is looked at again when its deadline
    /// passes, news or not (`requeueStuckDeployment`).
    fn requeue_stuck(&mut self, new: &DeploymentStatus) {
        let Some(cond) = get_condition(&self.status(), PROGRESSING).cloned() else {
            return;
        };
        if !has_progress_deadline(&self.d)
            || deployment_complete(&self.d, new)
            || cond.reason.as_deref() == Some(TIMED_OUT)
        {
            return;
        }
        let Some(left) = until_deadline(&self.d, &cond, self.ctx.clock.as_ref()) else {
            return;
        };
        let after = left.to_std().unwrap_or(Duration::ZERO);
        self.requeue = Some(if after < Duration::from_secs(1) {
            Duration::from_millis(100)
        } else {
            after + Duration::from_secs(1)
        });
    }
}
