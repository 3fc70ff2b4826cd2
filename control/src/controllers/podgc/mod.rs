//! Pod garbage collection, as kube-controller-manager's pod GC:
//!
//! - pods bound to a node that no longer exists are marked Failed (with a
//!   DisruptionTarget condition) and deleted with no grace period: no
//!   agent is left to stop them (`bosun delete node X`). A node this
//!   process saw deleted counts at once; a node it never saw (a pod bound
//!   by hand to a node whose agent is still registering) only after it
//!   has been missing for the quarantine time, 40 s as upstream. The
//!   node's absence is confirmed with the API before (the cache may lag);
//!   an agent that comes back later removes their containers itself;
//! - when more than `--terminated-pod-gc-threshold` finished pods exist,
//!   the oldest go.
//!
//! It runs every GC period and as soon as a node is deleted.

#[cfg(test)]
mod tests;

use crate::toolkit::synced;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

use crate::toolkit::pods::{delete_this_pod, disrupt_and_delete, Disruption};
use crate::toolkit::{Clock, Shared};

/// Tunables, as kube-controller-manager's flags.
#[derive(Debug, Clone)]
pub struct PodGcOptions {
    /// How often the pods are looked at (Kubernetes: 20 s).
    pub period: Duration,
    /// `--terminated-pod-gc-threshold`: finished pods kept (0: no limit).
    pub terminated_threshold: usize,
    /// How long a node never seen must stay missing before its pods go
    /// (Kubernetes' `quarantineTime`, 40 s).
    pub quarantine: Duration,
}

impl Default for PodGcOptions {
    fn default() -> Self {
        PodGcOptions {
            period: Duration::from_secs(20),
            terminated_threshold: 12500,
            quarantine: Duration::from_secs(40),
        }
    }
}

pub struct Context {
    client: Client,
    pods: Store<Pod>,
    nodes: Store<Node>,
    clock: Arc<dyn Clock>,
    options: PodGcOptions,
    /// Missing nodes and since when; a node seen deleted is entered as
    /// missing since before the quarantine began.
    missing_since: Mutex<HashMap<String, Instant>>,
}

/// Sets up pod GC; the future runs it.
pub fn start(shared: &Arc<Shared>, options: PodGcOptions) -> BoxFuture<'static, ()> {
    let ctx = Arc::new(Context::new(shared, options));
    let mut deleted_nodes = shared.informers.deleted::<Node>();
    async move {
        synced(&ctx.pods).await;
        synced(&ctx.nodes).await;
        let mut tick = tokio::time::interval(ctx.options.period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                Some(Ok(node)) = deleted_nodes.next() => ctx.saw_deleted(&node.name_any()),
            }
            gc(&ctx).await;
        }
    }
    .boxed()
}

impl Context {
    /// The caches it reads (before the informers start).
    pub fn new(shared: &Shared, options: PodGcOptions) -> Context {
        Context {
            client: shared.client_for("podgc"),
            pods: shared.informers.store::<Pod>(),
            nodes: shared.informers.store::<Node>(),
            clock: shared.clock.clone(),
            options,
            missing_since: Mutex::default(),
        }
    }

    /// The node was deleted: its pods need no quarantine.
    fn saw_deleted(&self, node: &str) {
        let long_ago = Instant::now()
            .checked_sub(self.options.quarantine)
            .unwrap_or_else(Instant::now);
        self.missing_since
            .lock()
            .unwrap()
            .insert(node.to_string(), long_ago);
    }

    /// Of the nodes `missing` now, those missing for the quarantine time;
    /// forgets nodes that are no longer missing.
    fn quarantined(&self, missing: &HashSet<&str>) -> Vec<String> {
        let now = Instant::now();
        let mut since = self.missing_since.lock().unwrap();
        since.retain(|n, _| missing.contains(n.as_str()));
        missing
            .iter()
            .filter(|n| {
                let first = *since.entry(n.to_string()).or_insert(now);
                now.duration_since(first) >= self.options.quarantine
            })
            .map(|n| n.to_string())
            .collect()
    }
}

/// One pass.
pub async fn gc(ctx: &Context) {
    gc_orphaned(ctx).await;
    gc_terminated(ctx).await;
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()?
        .node_name
        .as_deref()
        .filter(|n| !n.is_empty())
}

fn is_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

/// Pods whose node is gone.
async fn gc_orphaned(ctx: &Context) {
    let pods = ctx.pods.state();
    let missing: HashSet<&str> = pods
        .iter()
        .filter_map(|p| node_of(p))
        .filter(|n| ctx.nodes.get(&ObjectRef::new(n)).is_none())
        .collect();
    tracing::debug!(pods = pods.len(), missing = ?missing, "pod GC pass");
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    for node in ctx.quarantined(&missing) {
        let node = node.as_str();
        // The cache may lag behind a node that was just created.
        match nodes.get_opt(node).await {
            Ok(None) => {}
            Ok(Some(_)) => continue,
            Err(e) => {
                tracing::warn!(%node, error = %e, "pod GC: checking whether the node exists");
                continue;
            }
        }
        for pod in pods.iter().filter(|p| node_of(p) == Some(node)) {
            tracing::info!(pod = %pod.name_any(), namespace = %pod.namespace().unwrap_or_default(),
                %node, "pod GC: deleting a pod of a node that no longer exists");
            if let Err(e) = force_delete(ctx, pod, true).await {
                tracing::warn!(pod = %pod.name_any(), error = %e, "pod GC");
            }
        }
    }
}

/// The oldest finished pods beyond the threshold.
async fn gc_terminated(ctx: &Context) {
    let threshold = ctx.options.terminated_threshold;
    if threshold == 0 {
        return;
    }
    let mut finished: Vec<Arc<Pod>> = ctx
        .pods
        .state()
        .into_iter()
        .filter(|p| is_finished(p) && p.metadata.deletion_timestamp.is_none())
        .collect();
    if finished.len() <= threshold {
        return;
    }
    finished.sort_by(|a, b| {
        a.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .cmp(&b.metadata.creation_timestamp.as_ref().map(|t| t.0))
            .then_with(|| a.name_any().cmp(&b.name_any()))
    });
    let excess = finished.len() - threshold;
    for pod in finished.iter().take(excess) {
        tracing::info!(pod = %pod.name_any(), "pod GC: deleting a finished pod over the threshold");
        if let Err(e) = force_delete(ctx, pod, false).await {
            tracing::warn!(pod = %pod.name_any(), error = %e, "pod GC");
        }
    }
}

/// Deletes the pod at once; an orphan is first marked Failed with a
/// DisruptionTarget condition, as Kubernetes does.
async fn force_delete(ctx: &Context, pod: &Pod, orphaned: bool) -> kube::Result<()> {
    if orphaned {
        let why = Disruption {
            reason: "DeletionByPodGC",
            message: "PodGC: node no longer exists",
            fail: true,
            grace: Some(0),
        };
        return disrupt_and_delete(&ctx.client, pod, &why, ctx.clock.now()).await;
    }
    delete_this_pod(&ctx.client, pod, Some(0)).await
}
