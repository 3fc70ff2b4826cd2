//! The node lifecycle controller: notices nodes whose agent stopped
//! heartbeating and says so in the API, as kube-controller-manager's
//! node lifecycle controller does.
//!
//! Every monitor period it looks at each node in the cache:
//!
//! - [`health`]: when did the agent last show life (a new Ready heartbeat
//!   time or a renewed Lease in `kube-node-lease`, timed by this
//!   controller's own clock, so clock skew between hosts does not
//!   matter)? After the grace period without one, the node's conditions
//!   become Unknown (`NodeStatusUnknown`);
//! - [`taints`]: the taints that say what the conditions say: NoSchedule
//!   for the scheduler (`not-ready`, `unreachable`, `unschedulable`, the
//!   pressure conditions) and NoExecute `not-ready` / `unreachable`, which
//!   the taint eviction controller acts on;
//! - [`pods`]: the pods of a node that is not Ready are marked not Ready,
//!   so endpoints and DNS drop them at once.
//!
//! Eviction itself is the taint eviction controller's
//! ([`super::tainteviction`]), and deleting the pods of a deleted node is
//! pod GC's ([`super::podgc`]).

pub mod health;
pub mod pods;
pub mod taints;

#[cfg(test)]
mod tests;

use crate::toolkit::synced;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Client;

use bosun::events::EventRecorder;

use crate::toolkit::{Clock, Shared};
use health::Observed;

const COMPONENT: &str = "node-controller";

/// Tunables, as kube-controller-manager's flags of the same names.
#[derive(Debug, Clone)]
pub struct NodeLifecycleOptions {
    /// `--node-monitor-period`: how often nodes are looked at.
    pub monitor_period: Duration,
    /// `--node-monitor-grace-period`: how long a node may go without a
    /// heartbeat before it is Unknown.
    pub grace_period: Duration,
}

impl Default for NodeLifecycleOptions {
    fn default() -> Self {
        NodeLifecycleOptions {
            monitor_period: Duration::from_secs(5),
            grace_period: Duration::from_secs(40),
        }
    }
}

/// What every monitor pass needs.
pub struct Context {
    client: Client,
    nodes: Store<Node>,
    leases: Store<Lease>,
    pods: crate::toolkit::PodIndex,
    clock: Arc<dyn Clock>,
    recorder: EventRecorder,
    options: NodeLifecycleOptions,
    /// Per node: the last signs of life seen, and when they were seen.
    observed: Mutex<HashMap<String, Observed>>,
}

impl Context {
    /// Takes the caches it reads from `shared` (before the informers start).
    pub fn new(shared: &Shared, options: NodeLifecycleOptions) -> Context {
        Context {
            client: shared.client_for("nodelifecycle"),
            nodes: shared.informers.store::<Node>(),
            leases: shared.informers.store::<Lease>(),
            pods: shared.informers.pods(),
            clock: shared.clock.clone(),
            recorder: shared.recorder(COMPONENT),
            options,
            observed: Mutex::new(HashMap::new()),
        }
    }
}

/// Sets up the controller; the future runs it.
pub fn start(shared: &Arc<Shared>, options: NodeLifecycleOptions) -> BoxFuture<'static, ()> {
    let ctx = Arc::new(Context::new(shared, options));
    async move {
        synced(&ctx.nodes).await;
        synced(&ctx.leases).await;
        synced(ctx.pods.store()).await;
        let mut tick = tokio::time::interval(ctx.options.monitor_period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            monitor(&ctx).await;
        }
    }
    .boxed()
}

/// One pass over every node: health, taints, pods.
pub async fn monitor(ctx: &Context) {
    let nodes = ctx.nodes.state();
    ctx.observed
        .lock()
        .unwrap()
        .retain(|name, _| ctx.nodes.get(&ObjectRef::new(name)).is_some());
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let node = match health::update(ctx, &node).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "updating node health");
                continue;
            }
        };
        if let Err(e) = taints::reconcile(ctx, &node).await {
            tracing::warn!(node = %name, error = %e, "updating node taints");
        }
        pods::mark_not_ready(ctx, &node).await;
    }
}
