//! The taint eviction controller: deletes the pods of a node with a
//! NoExecute taint they do not tolerate, as kube-controller-manager's
//! taint-eviction-controller does. A pod whose toleration has
//! `tolerationSeconds` stays that long after the taint was added (the
//! API server gives every pod 300 s for `not-ready` and `unreachable`
//! unless it says otherwise); a toleration without it keeps the pod for
//! good. When the taint goes before the time is up, the pod stays.
//!
//! Evicted pods are deleted as a user would (with their grace period), so
//! on a node whose agent is gone they stay Terminating: a ReplicaSet
//! replaces them at once, a StatefulSet only once the old pod is really
//! gone, so an identity never runs twice.

#[cfg(test)]
mod tests;

use crate::toolkit::synced;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::core::v1::{Node, Pod, Toleration};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::Controller;
use kube::{Client, ResourceExt};

use bosun::events::{reference_to, EventRecorder, EventType};

use crate::toolkit::pods::{disrupt_and_delete, Disruption};
use crate::toolkit::scheduling::{taints_with_effect, tolerates, tolerations};
use crate::toolkit::{run_controller, to_chrono, Clock, PodIndex, Shared};

const COMPONENT: &str = "taint-eviction-controller";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("evicting pod {pod}: {source}")]
    Evict { pod: String, source: kube::Error },
}

/// What to do with one pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// No NoExecute taint it must leave for (or tolerated for good).
    Keep,
    /// Tolerated until then.
    EvictAt(DateTime<Utc>),
    /// A taint it does not tolerate, or its time is up.
    EvictNow,
}

/// Kubernetes' rule: every NoExecute taint must be tolerated; the pod
/// may stay for the shortest `tolerationSeconds` of the tolerations used
/// (none: for good), counted from when the newest taint was added.
pub fn decide(pod: &Pod, node: &Node, now: DateTime<Utc>) -> Decision {
    let taints = taints_with_effect(node, "NoExecute");
    if taints.is_empty() {
        return Decision::Keep;
    }
    let tolerations = tolerations(pod);
    let mut used: Vec<&Toleration> = Vec::new();
    for taint in &taints {
        let matching: Vec<&Toleration> =
            tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        if matching.is_empty() {
            return Decision::EvictNow;
        }
        used.extend(matching);
    }
    let Some(seconds) = used.iter().filter_map(|t| t.toleration_seconds).min() else {
        return Decision::Keep;
    };
    if seconds <= 0 {
        return Decision::EvictNow;
    }
    let since = taints
        .iter()
        .filter_map(|t| t.time_added.as_ref().map(to_chrono))
        .max()
        .unwrap_or(now);
    let at = since + chrono::Duration::seconds(seconds);
    if at <= now {
        Decision::EvictNow
    } else {
        Decision::EvictAt(at)
    }
}

/// What every reconcile needs.
pub struct Context {
    client: Client,
    nodes: Store<Node>,
    clock: Arc<dyn Clock>,
    recorder: EventRecorder,
    /// Pods (by uid) waiting out a toleration, to report a cancelled
    /// eviction.
    scheduled: Mutex<HashSet<String>>,
}

/// Sets up the controller; the future runs it.
pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    let pods = shared.informers.store::<Pod>();
    let ctx = Arc::new(Context {
        client: shared.client_for("tainteviction"),
        nodes: shared.informers.store::<Node>(),
        clock: shared.clock.clone(),
        recorder: shared.recorder(COMPONENT),
        scheduled: Mutex::new(HashSet::new()),
    });
    let by_node = shared.informers.pods();
    let controller = Controller::for_shared_stream(shared.informers.subscribe::<Pod>(), pods)
        .watches_shared_stream(
            shared.informers.subscribe::<Node>(),
            move |node: Arc<Node>| pods_on(&by_node, &node.name_any()),
        );
    run_controller("tainteviction", controller, ctx, reconcile).boxed()
}

/// The pods bound to `node` (from the pod cache's node index).
fn pods_on(pods: &PodIndex, node: &str) -> Vec<ObjectRef<Pod>> {
    pods.refs_on(node)
}

pub async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, Error> {
    synced(&ctx.nodes).await;
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .and_then(|n| ctx.nodes.get(&ObjectRef::new(n)));
    let decision = match node {
        Some(node) if pod.metadata.deletion_timestamp.is_none() => {
            decide(&pod, &node, ctx.clock.now())
        }
        _ => Decision::Keep,
    };
    match decision {
        Decision::Keep => {
            if ctx.scheduled.lock().unwrap().remove(&uid)
                && pod.metadata.deletion_timestamp.is_none()
            {
                ctx.recorder.record(
                    &reference_to(pod.as_ref()),
                    EventType::Normal,
                    "TaintManagerEviction",
                    format!("Cancelling deletion of Pod {}", key(&pod)),
                );
            }
            Ok(Action::await_change())
        }
        Decision::EvictAt(at) => {
            ctx.scheduled.lock().unwrap().insert(uid);
            let wait = (at - ctx.clock.now()).to_std().unwrap_or_default();
            Ok(Action::requeue(wait.max(Duration::from_millis(100))))
        }
        Decision::EvictNow => {
            ctx.scheduled.lock().unwrap().remove(&uid);
            evict(&ctx, &pod).await?;
            Ok(Action::await_change())
        }
    }
}

fn key(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

/// Marks the pod as disrupted (condition DisruptionTarget) and deletes it
/// with its own grace period.
async fn evict(ctx: &Context, pod: &Pod) -> Result<(), Error> {
    ctx.recorder.record(
        &reference_to(pod),
        EventType::Normal,
        "TaintManagerEviction",
        format!("Marking for deletion Pod {}", key(pod)),
    );
    tracing::info!(pod = %key(pod), "evicting: its node has a NoExecute taint it does not tolerate");
    let why = Disruption {
        reason: "DeletionByTaintManager",
        message: "Taint manager: deleting due to NoExecute taint",
        fail: false,
        grace: None,
    };
    disrupt_and_delete(&ctx.client, pod, &why, ctx.clock.now())
        .await
        .map_err(|source| Error::Evict {
            pod: key(pod),
            source,
        })
}
