//! A StatefulSet's status (`computeReplicaStatus`, `completeRollingUpdate`,
//! `updateStatefulSetStatus`).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use serde_json::json;

use super::identity::revision_of;
use super::{Context, Error};
use crate::toolkit::pods::{running_and_ready, until_available};
use crate::toolkit::status::patch_status;

/// The status the set's pods add up to.
pub fn compute(
    set: &StatefulSet,
    pods: &[Arc<Pod>],
    current: &ControllerRevision,
    update: &ControllerRevision,
    collision_count: i32,
    now: DateTime<Utc>,
) -> StatefulSetStatus {
    let min_ready = Some(&set.spec)
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
        .max(0);
    let current_name = current.name_any();
    let update_name = update.name_any();
    let mut status = StatefulSetStatus {
        observed_generation: set.metadata.generation,
        collision_count: Some(collision_count),
        current_revision: Some(current_name.clone()),
        update_revision: Some(update_name.clone()),
        conditions: set.status.as_ref().and_then(|s| s.conditions.clone()),
        ..Default::default()
    };
    let (mut ready, mut available, mut at_current, mut updated) = (0, 0, 0, 0);
    for pod in pods {
        status.replicas += 1;
        if running_and_ready(pod) {
            ready += 1;
        }
        if until_available(pod, i64::from(min_ready), now) == Some(Duration::ZERO) {
            available += 1;
        }
        if pod.metadata.deletion_timestamp.is_none() {
            let revision = revision_of(pod);
            if revision == Some(current_name.as_str()) {
                at_current += 1;
            }
            if revision == Some(update_name.as_str()) {
                updated += 1;
            }
        }
    }
    status.ready_replicas = Some(ready);
    status.available_replicas = Some(available);
    status.current_replicas = Some(at_current);
    status.updated_replicas = Some(updated);
    let rolling = Some(&set.spec)
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate");
    // A finished rolling update makes the update revision current: every
    // replica the set wants is there, updated and ready (a pod deleted and
    // not yet re-created must not count as finished).
    let desired = set.spec.replicas.unwrap_or(1);
    if rolling && status.replicas == desired && updated == desired && ready == desired {
        status.current_replicas = Some(updated);
        status.current_revision = Some(update_name);
    }
    status
}

/// How long until the next ready pod has been ready `minReadySeconds`
/// and counts as available, if one is due to: the set is synced again
/// then, whatever its pod management policy, so `availableReplicas`
/// catches up without another change (as `syncStatefulSet` requeues).
pub fn next_available(
    set: &StatefulSet,
    pods: &[Arc<Pod>],
    now: DateTime<Utc>,
) -> Option<Duration> {
    let min_ready = i64::from(set.spec.min_ready_seconds.unwrap_or(0).max(0));
    if min_ready == 0 {
        return None;
    }
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| until_available(p, min_ready, now))
        .filter(|d| !d.is_zero())
        .min()
}

/// Writes `status` through the status subresource when it changed.
pub async fn write(
    ctx: &Context,
    set: &StatefulSet,
    status: StatefulSetStatus,
) -> Result<(), Error> {
    if set.status.as_ref() == Some(&status) {
        return Ok(());
    }
    Ok(patch_status(&ctx.client, set, json!(status), false).await?)
}
