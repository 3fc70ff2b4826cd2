//! A set's status (`calculateStatus` / `updateReplicaSetStatus`).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use serde_json::json;

use super::{message_of, Context, Error, ReplicatedSet, REPLICA_FAILURE};
use crate::toolkit::from_chrono;
use crate::toolkit::pods::{is_ready, ready_since};
use crate::toolkit::status::patch_status;

/// The status the set should have, and how long until one of its ready
/// pods becomes available (`calculateStatus`).
pub(super) fn calculate_status<K: ReplicatedSet>(
    rs: &K,
    owned: &[&Pod],
    manage_error: Option<&Error>,
    now: DateTime<Utc>,
) -> (ReplicaSetStatus, Option<Duration>) {
    let template_labels: BTreeMap<String, String> = rs
        .template()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let min_ready = chrono::Duration::seconds(rs.min_ready_seconds());
    let (mut fully_labeled, mut ready, mut available) = (0, 0, 0);
    let mut next_available: Option<Duration> = None;
    for pod in owned {
        let labels = pod.labels();
        if template_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
        {
            fully_labeled += 1;
        }
        if !is_ready(pod) {
            continue;
        }
        ready += 1;
        if min_ready.is_zero() {
            available += 1;
            continue;
        }
        match ready_since(pod) {
            Some(since) if since + min_ready < now => available += 1,
            Some(since) => {
                // Come back just after it has been ready long enough.
                let wait = (since + min_ready - now).to_std().unwrap_or_default()
                    + Duration::from_millis(10);
                next_available = Some(next_available.map_or(wait, |w| w.min(wait)));
            }
            None => {}
        }
    }

    let old = rs.current_status();
    let mut conditions = old.conditions.clone().unwrap_or_default();
    let failing = conditions
        .iter()
        .any(|c| c.type_.as_deref() == Some(REPLICA_FAILURE));
    match manage_error {
        Some(e) if !failing => {
            let want = rs.replicas();
            let reason = if owned.len() < want {
                "FailedCreate"
            } else {
                "FailedDelete"
            };
            conditions.push(ReplicaSetCondition {
                type_: Some(REPLICA_FAILURE.into()),
                status: Some("True".into()),
                reason: Some(reason.into()),
                message: Some(e.to_string()),
                last_transition_time: Some(from_chrono(now)),
            });
        }
        None if failing => conditions.retain(|c| c.type_.as_deref() != Some(REPLICA_FAILURE)),
        _ => {}
    }
    let status = ReplicaSetStatus {
        replicas: owned.len() as i32,
        fully_labeled_replicas: Some(fully_labeled),
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        observed_generation: rs.meta().generation,
        conditions: (!conditions.is_empty()).then_some(conditions),
        ..Default::default()
    };
    (status, next_available)
}

/// Writes `status` through the status subresource if it differs from the
/// set's current one.
pub(super) async fn update_status<K: ReplicatedSet>(
    rs: &K,
    ctx: &Context<K>,
    status: ReplicaSetStatus,
) -> Result<(), Error> {
    let old = rs.current_status();
    let count = |v: Option<i32>| v.unwrap_or(0);
    let unchanged = old.replicas == status.replicas
        && count(old.fully_labeled_replicas) == count(status.fully_labeled_replicas)
        && count(old.ready_replicas) == count(status.ready_replicas)
        && count(old.available_replicas) == count(status.available_replicas)
        && old.observed_generation == status.observed_generation
        && old.conditions.clone().unwrap_or_default()
            == status.conditions.clone().unwrap_or_default();
    if unchanged {
        return Ok(());
    }
    let patch = json!({
        "replicas": status.replicas,
        "fullyLabeledReplicas": status.fully_labeled_replicas,
        "readyReplicas": status.ready_replicas,
        "availableReplicas": status.available_replicas,
        "observedGeneration": status.observed_generation,
        // null removes the list under a merge patch.
        "conditions": status.conditions,
    });
    patch_status(&ctx.client, rs, patch, false)
        .await
        .map_err(|e| Error::Status {
            kind: K::kind(&()).into_owned(),
            set: rs.name_any(),
            message: message_of(&e),
        })
}
