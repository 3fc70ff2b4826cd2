//! One sync of a DaemonSet (`syncDaemonSet`, `manage`, `podsShouldBeOnNode`,
//! `syncNodes`).
//!
//! For every node: a node that should run the set's pod and has none gets
//! one; on a node whose pod may stay, failed and finished pods are
//! deleted (the next sync makes a new one; a failed one with a back-off
//! per node, so a node that keeps failing it is not hot-looped) and of several live pods all
//! but the oldest are (with `maxSurge`, an old and a new pod may share a
//! node while the new one becomes available); a node that should not run
//! the pod loses all of them. Unbound pods for nodes that no longer
//! exist are deleted (bound ones are pod GC's). Then the rolling update, the history clean-up and the status.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::ResourceExt;

use bosun::events::{reference_to, EventType};

use super::node_pods::{by_node, sort_oldest_first, Changes, NodePods};
use super::placement::{add_daemon_tolerations, pin_to_node, placement};
use super::revision::{cleanup_history, construct_history};
use super::update::{self, Strategy};
use super::{
    is_updated, selector_of, status, template_generation, Context, Error, BURST_REPLICAS,
    GENERATION_LABEL, HASH_LABEL,
};
use crate::toolkit::pods::{is_ready, phase_of, until_available, PodControl};
use crate::toolkit::{expectations_key, pod_from_template, ClaimManager};

fn terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// One sync of a set. Returns when to look again (a pod due to become
/// available after `minReadySeconds`).
pub async fn sync(ds: &DaemonSet, ctx: &Context) -> Result<Option<Duration>, Error> {
    // A set on its way out is the garbage collector's.
    if ds.metadata.deletion_timestamp.is_some() {
        return Ok(None);
    }
    let Some(selector) = selector_of(ds) else {
        ctx.recorder.record(
            &reference_to(ds),
            EventType::Warning,
            "SelectingAll",
            "This daemon set is selecting all pods. A non-empty selector is required.".to_string(),
        );
        return Ok(None);
    };
    let ns = ds.namespace();
    let key = expectations_key(ds);
    let ns_name = ns.as_deref().unwrap_or_default();
    // Every pod of its namespace, read from the cache itself, not from the
    // pod index: with the index's own and orphaned pods, a DaemonSet's
    // rolling update advanced one node a minute (agent/tests/daemonset.rs
    // timed out); the cause is not yet found.
    let in_ns: Vec<Arc<Pod>> = ctx
        .pods
        .store()
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns_name))
        .collect();
    let satisfied = ctx.expectations.satisfied_by(&key, &in_ns);
    let claims = ClaimManager::new(ctx.client.clone(), ds, Some(&selector));
    let pods = claims.claim(in_ns).await?;
    let revisions: Vec<Arc<ControllerRevision>> = ctx
        .revisions
        .state()
        .into_iter()
        .filter(|r| r.namespace() == ns)
        .collect();
    let revisions = claims.claim(revisions).await?;
    let (current, old) = construct_history(ctx, ds, revisions).await?;
    let hash = current
        .labels()
        .get(HASH_LABEL)
        .cloned()
        .unwrap_or_default();
    let nodes = ctx.nodes.state();
    let node_pods = by_node(&pods);

    // As Kubernetes: the status is written even when acting failed, and
    // the first error is the one reported.
    let acted = if satisfied {
        act(ctx, ds, &nodes, &node_pods, &pods, old, &hash).await
    } else {
        Ok(None)
    };
    let due = status::update(ctx, ds, &nodes, &node_pods, &hash, satisfied).await;
    let (retry_in, due) = (acted?, due?);
    Ok(match (due, retry_in) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    })
}

/// Creates and deletes for placement, then for the rolling update, then
/// trims the history (`updateDaemonSet`). Returns when a failed pod's
/// back-off is over.
async fn act(
    ctx: &Context,
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    node_pods: &NodePods,
    pods: &[Arc<Pod>],
    old: Vec<Arc<ControllerRevision>>,
    hash: &str,
) -> Result<Option<Duration>, Error> {
    let changes = manage(ctx, ds, nodes, node_pods, hash);
    apply(ctx, ds, &changes, hash).await?;
    // The rolling update acts on what the cache shows only once the
    // creates and deletes above are seen.
    if changes.is_empty() {
        if let Some(strategy) = Strategy::of(ds) {
            let now = ctx.clock.now();
            let rolling = update::rolling_update(ds, strategy, nodes, node_pods, hash, now);
            apply(ctx, ds, &rolling, hash).await?;
        }
    }
    let live: HashSet<String> = pods
        .iter()
        .filter_map(|p| p.labels().get(HASH_LABEL).cloned())
        .collect();
    cleanup_history(ctx, ds, old, &live).await?;
    Ok(changes.retry_in)
}

/// What should change on each node (`manage` / `podsShouldBeOnNode`).
pub fn manage(
    ctx: &Context,
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    node_pods: &NodePods,
    hash: &str,
) -> Changes {
    let mut changes = Changes::default();
    let surge = update::allows_surge(ds);
    let min_ready = update::min_ready(ds);
    let generation = template_generation(ds);
    let now = ctx.clock.now();
    for node in nodes {
        let name = node.name_any();
        let place = placement(ds, node);
        let pods = node_pods.get(&name).map(Vec::as_slice).unwrap_or(&[]);
        if place.should_run && pods.is_empty() {
            changes.create_on.push(name);
            continue;
        }
        if !place.should_continue_running {
            changes
                .delete
                .extend(pods.iter().filter(|p| !terminating(p)).cloned());
            continue;
        }
        let mut running = Vec::new();
        for pod in pods.iter().filter(|p| !terminating(p)) {
            match phase_of(pod) {
                "Failed" => {
                    let backoff_key = format!(
                        "{}/{}/{name}",
                        ds.uid().unwrap_or_default(),
                        ds.status
                            .as_ref()
                            .and_then(|s| s.observed_generation)
                            .unwrap_or(0)
                    );
                    if let Some(wait) = ctx.failed_pods.wait(&backoff_key, now) {
                        changes.retry_in = Some(changes.retry_in.map_or(wait, |r| r.min(wait)));
                        continue;
                    }
                    ctx.failed_pods.next(&backoff_key, now);
                    event(
                        ctx,
                        ds,
                        EventType::Warning,
                        "FailedDaemonPod",
                        format!(
                            "Found failed daemon pod {}/{} on node {name}, will try to kill it",
                            pod.namespace().unwrap_or_default(),
                            pod.name_any()
                        ),
                    );
                    changes.delete.push(pod.clone());
                }
                "Succeeded" => {
                    event(
                        ctx,
                        ds,
                        EventType::Normal,
                        "SucceededDaemonPod",
                        format!(
                        "Found succeeded daemon pod {}/{} on node {name}, will try to delete it",
                        pod.namespace().unwrap_or_default(),
                        pod.name_any()
                    ),
                    );
                    changes.delete.push(pod.clone());
                }
                _ => running.push(pod.clone()),
            }
        }
        sort_oldest_first(&mut running);
        if !surge {
            // One pod per node: the oldest stays.
            changes.delete.extend(running.into_iter().skip(1));
            continue;
        }
        if running.is_empty() {
            if place.should_run {
                changes.create_on.push(name);
            }
            continue;
        }
        // Surging: the oldest new pod and the oldest old pod may share the
        // node until the new one is available (or the old one is not
        // ready); everything else goes.
        let (mut oldest_new, mut oldest_old) = (None, None);
        for pod in running {
            let slot = if is_updated(&pod, hash, generation) {
                &mut oldest_new
            } else {
                &mut oldest_old
            };
            if slot.is_none() {
                *slot = Some(pod);
            } else {
                changes.delete.push(pod);
            }
        }
        if let (Some(new), Some(old)) = (oldest_new, oldest_old) {
            if !is_ready(&old) || until_available(&new, min_ready, now) == Some(Duration::ZERO) {
                changes.delete.push(old);
            }
        }
    }
    // Pods for nodes that are gone: the ones not bound yet go
    // (`getUnscheduledPodsWithoutNode`); bound ones are pod GC's.
    let known: HashSet<String> = nodes.iter().map(|n| n.name_any()).collect();
    for (node, pods) in node_pods {
        if !known.contains(node) {
            changes.delete.extend(
                pods.iter()
                    .filter(|p| !terminating(p) && !is_bound(p))
                    .cloned(),
            );
        }
    }
    changes
}

fn is_bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

fn event(ctx: &Context, ds: &DaemonSet, type_: EventType, reason: &str, message: String) {
    ctx.recorder
        .record(&reference_to(ds), type_, reason, message);
}

/// A new pod of the set for `node` (`CreatePodTemplate` and the node
/// affinity of `syncNodes`): the template, the daemon tolerations, the
/// revision hash and template generation labels, pinned to the node.
pub fn new_pod(ds: &DaemonSet, node: &str, hash: &str) -> Pod {
    let mut pod = pod_from_template(ds, Some(&ds.spec.template));
    let labels = pod.metadata.labels.get_or_insert_with(Default::default);
    if let Some(g) = template_generation(ds) {
        labels.insert(GENERATION_LABEL.into(), g.to_string());
    }
    if !hash.is_empty() {
        labels.insert(HASH_LABEL.into(), hash.to_string());
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    add_daemon_tolerations(spec);
    pin_to_node(spec, node);
    pod
}

/// Creates and deletes what a pass decided, at most [`BURST_REPLICAS`] of
/// each, creates in slow-start batches (`syncNodes`).
async fn apply(ctx: &Context, ds: &DaemonSet, changes: &Changes, hash: &str) -> Result<(), Error> {
    if changes.is_empty() {
        return Ok(());
    }
    let control = PodControl {
        api: Api::namespaced(ctx.client.clone(), &ds.namespace().unwrap_or_default()),
        recorder: &ctx.recorder,
        owner: reference_to(ds),
        expectations: &ctx.expectations,
        key: expectations_key(ds),
    };
    let pods: Vec<Pod> = changes
        .create_on
        .iter()
        .take(BURST_REPLICAS)
        .map(|node| new_pod(ds, node, hash))
        .collect();
    let created = control.create(pods).await;
    let victims: Vec<&Pod> = changes
        .delete
        .iter()
        .take(BURST_REPLICAS)
        .map(Arc::as_ref)
        .collect();
    let deleted = control.delete(&victims).await;
    created.map_err(Error::Create)?;
    deleted.map_err(Error::Delete)
}
