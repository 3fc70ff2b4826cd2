//! A DaemonSet's status (`updateDaemonSetStatus`, `storeDaemonSetStatus`):
//! per node that should run the set, whether it has a pod, and whether
//! the oldest one is ready, available and up to date; pods on nodes that
//! should not run the set are misscheduled. Written only when a count
//! changed or the generation was not yet observed.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use serde_json::json;

use super::node_pods::{sort_oldest_first, NodePods};
use super::placement::placement;
use super::update::min_ready;
use super::{is_updated, template_generation, Context, Error};
use crate::toolkit::pods::{is_ready, until_available};
use crate::toolkit::status::patch_status;

/// The counts the set's pods add up to, and the soonest a ready pod turns
/// available.
pub fn compute(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    node_pods: &NodePods,
    hash: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> (DaemonSetStatus, Option<Duration>) {
    let generation = template_generation(ds);
    let min_ready = min_ready(ds);
    let mut s = DaemonSetStatus::default();
    let (mut updated, mut available) = (0, 0);
    let mut due: Option<Duration> = None;
    for node in nodes {
        let pods = node_pods.get(&node.name_any());
        let scheduled = pods.is_some_and(|p| !p.is_empty());
        if !placement(ds, node).should_run {
            if scheduled {
                s.number_misscheduled += 1;
            }
            continue;
        }
        s.desired_number_scheduled += 1;
        let Some(pods) = pods.filter(|_| scheduled) else {
            continue;
        };
        s.current_number_scheduled += 1;
        let mut pods = pods.clone();
        sort_oldest_first(&mut pods);
        let pod = &pods[0];
        if is_ready(pod) {
            s.number_ready += 1;
            match until_available(pod, min_ready, now) {
                Some(Duration::ZERO) => available += 1,
                Some(wait) => due = Some(due.map_or(wait, |d| d.min(wait))),
                None => {}
            }
        }
        if is_updated(pod, hash, generation) {
            updated += 1;
        }
    }
    s.updated_number_scheduled = Some(updated);
    s.number_available = Some(available);
    s.number_unavailable = Some(s.desired_number_scheduled - available);
    (s, due)
}

/// Computes the status and writes it when it changed; `observed` says the
/// sync acted on this generation (else observedGeneration stays).
pub async fn update(
    ctx: &Context,
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    node_pods: &NodePods,
    hash: &str,
    observed: bool,
) -> Result<Option<Duration>, Error> {
    let (mut status, due) = compute(ds, nodes, node_pods, hash, ctx.clock.now());
    let old = ds.status.clone().unwrap_or_default();
    let generation = ds.metadata.generation.unwrap_or(0);
    let up_to_date = old.observed_generation.unwrap_or(0) >= generation;
    // The counts, not the conditions or the generation.
    let counts = |s: &DaemonSetStatus| {
        (
            s.desired_number_scheduled,
            s.current_number_scheduled,
            s.number_misscheduled,
            s.number_ready,
            s.updated_number_scheduled.unwrap_or(0),
            s.number_available.unwrap_or(0),
            s.number_unavailable.unwrap_or(0),
        )
    };
    if counts(&status) == counts(&old) && up_to_date {
        return Ok(due);
    }
    status.observed_generation = if observed {
        Some(generation)
    } else {
        old.observed_generation
    };
    status.collision_count = old.collision_count;
    status.conditions = old.conditions;
    patch_status(&ctx.client, ds, json!(status), false).await?;
    Ok(due)
}
