//! Node IPAM (kube-controller-manager's `nodeipam` controller with the
//! range allocator): every Node gets a pod CIDR of its own, a
//! `--node-cidr-mask-size` subnet of `--cluster-cidr`, written to
//! `spec.podCIDR` and `spec.podCIDRs`. The agent makes its pod bridge
//! with it, and the other agents route to it (host-gw).
//!
//! The set of used subnets is rebuilt from every Node in the cache on
//! each pass ([`pass`]), so a restart loses nothing and a deleted Node's
//! subnet is free again once the Node is gone. Subnets handed out but not
//! yet seen in the cache are remembered until they are, so two Nodes never
//! get the same one. A Node that arrives with a pod CIDR (an agent's
//! `--pod-cidr`) keeps it and the subnet is marked used; if another Node
//! already has it, the younger one gets a `CIDRNotAvailable` warning
//! event rather than a silent double.

pub mod cidrset;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};
use serde_json::json;

use bosun::events::{reference_to, EventRecorder, EventType};

use crate::toolkit::{synced, Shared};
pub use cidrset::CidrSet;

const COMPONENT: &str = "node-ipam-controller";
/// The event reason upstream uses when a node's CIDR cannot be had.
pub const CIDR_NOT_AVAILABLE: &str = "CIDRNotAvailable";
pub const CIDR_ASSIGNED: &str = "CIDRAssigned";
/// How often every Node is looked at even without a change.
const RESYNC: Duration = Duration::from_secs(30);

/// `--cluster-cidr` and `--node-cidr-mask-size`.
#[derive(Debug, Clone)]
pub struct NodeIpamOptions {
    pub cluster_cidr: Ipv4Net,
    pub node_mask_size: u8,
}

impl Default for NodeIpamOptions {
    fn default() -> Self {
        NodeIpamOptions {
            cluster_cidr: cidrset::parse("10.244.0.0/16").expect("a valid CIDR"),
            node_mask_size: 24,
        }
    }
}

impl NodeIpamOptions {
    /// From the flags' text; the error names the flag.
    pub fn parse(cluster_cidr: &str, node_mask_size: u8) -> Result<Self, String> {
        let cluster_cidr =
            cidrset::parse(cluster_cidr).map_err(|e| format!("--cluster-cidr: {e}"))?;
        let options = NodeIpamOptions {
            cluster_cidr,
            node_mask_size,
        };
        options.empty_set()?;
        Ok(options)
    }

    fn empty_set(&self) -> Result<CidrSet, String> {
        CidrSet::new(self.cluster_cidr, self.node_mask_size)
    }
}

/// What the passes share.
pub struct Context {
    client: Client,
    nodes: Store<Node>,
    recorder: EventRecorder,
    options: NodeIpamOptions,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Subnets written to a Node that the cache has not shown yet.
    pending: HashMap<String, Ipv4Net>,
    /// Which Node held each subnet at the last pass.
    owners: BTreeMap<Ipv4Net, String>,
    /// Where the next allocation search starts (round robin).
    next: u32,
    /// (node, message) warnings already posted, so a pass does not
    /// repeat them.
    warned: HashSet<(String, String)>,
}

impl Context {
    /// Takes the Node cache from `shared` (before the informers start).
    pub fn new(shared: &Shared, options: NodeIpamOptions) -> Context {
        Context {
            client: shared.client_for("nodeipam"),
            nodes: shared.informers.store::<Node>(),
            recorder: shared.recorder(COMPONENT),
            options,
            state: Mutex::new(State::default()),
        }
    }
}

/// Sets up the controller; the future runs it: a pass on start, on every
/// Node change or deletion, and every 30 s.
pub fn start(shared: &Arc<Shared>, options: NodeIpamOptions) -> BoxFuture<'static, ()> {
    let ctx = Arc::new(Context::new(shared, options));
    let changes = shared.informers.subscribe::<Node>().map(|_| ());
    let deleted = shared.informers.deleted::<Node>().map(|_| ());
    let mut wake = futures::stream::select(changes, deleted);
    // The shared stream is drained all the time (the cache's watch waits
    // for its slowest subscriber); changes that pile up during a pass
    // make one more pass.
    let changed = Arc::new(tokio::sync::Notify::new());
    let notify = changed.clone();
    let drain = async move {
        while wake.next().await.is_some() {
            notify.notify_one();
        }
    };
    let work = async move {
        synced(&ctx.nodes).await;
        let mut tick = tokio::time::interval(RESYNC);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            pass(&ctx).await;
            tokio::select! {
                _ = changed.notified() => {}
                _ = tick.tick() => {}
            }
        }
    };
    async move {
        futures::future::join(drain, work).await;
    }
    .boxed()
}

/// One look at every Node: the used set from the cache, then a subnet
/// for each Node without one.
pub async fn pass(ctx: &Context) {
    let mut nodes = ctx.nodes.state();
    let mut to_assign = Vec::new();
    let mut warnings = Vec::new();
    let mut set = ctx.options.empty_set().expect("checked at parse");
    {
        let mut state = ctx.state.lock().unwrap();
        set.start_at(state.next);
        // Of two Nodes claiming one subnet, the one that held it at the
        // last pass keeps it, else the older one.
        let held = |n: &Node| {
            let cidr = n.spec.as_ref().and_then(|s| s.pod_cidr.as_deref());
            cidr.and_then(|c| cidrset::parse(c).ok())
                .and_then(|c| state.owners.get(&c))
                .is_some_and(|owner| *owner == n.name_any())
        };
        nodes.sort_by_cached_key(|n| {
            (
                !held(n),
                n.metadata.creation_timestamp.as_ref().map(|t| t.0),
                n.name_any(),
            )
        });
        let mut owner: BTreeMap<Ipv4Net, String> = BTreeMap::new();
        let mut without = Vec::new();
        for node in &nodes {
            let name = node.name_any();
            let Some(text) = node.spec.as_ref().and_then(|s| s.pod_cidr.clone()) else {
                without.push(node.clone());
                continue;
            };
            state.pending.remove(&name);
            let cidr = match cidrset::parse(&text) {
                Ok(c) => c,
                Err(e) => {
                    warnings.push((node.clone(), format!("spec.podCIDR: {e}")));
                    continue;
                }
            };
            if let Some(first) = owner.get(&cidr) {
                warnings.push((
                    node.clone(),
                    format!("pod CIDR {cidr} is already node {first}'s; this node's pods may clash with that node's"),
                ));
                continue;
            }
            owner.insert(cidr, name);
            // One outside the cluster CIDR (the API refuses new ones; a
            // Node from before --cluster-cidr changed may hold one) is
            // not the set's.
            set.occupy(&cidr);
        }
        // Drop what was pending for Nodes that are gone.
        let waiting: HashSet<String> = without.iter().map(|n| n.name_any()).collect();
        state.pending.retain(|name, _| waiting.contains(name));
        for cidr in state.pending.values() {
            set.occupy(cidr);
        }
        for node in without {
            let name = node.name_any();
            if state.pending.contains_key(&name) || node.metadata.deletion_timestamp.is_some() {
                continue;
            }
            match set.allocate() {
                Some(cidr) => {
                    state.pending.insert(name, cidr);
                    to_assign.push((node, cidr));
                }
                None => warnings.push((
                    node,
                    format!(
                        "no pod CIDR left: every /{} of {} is in use",
                        ctx.options.node_mask_size, ctx.options.cluster_cidr
                    ),
                )),
            }
        }
        state.next = set.cursor();
        state.owners = owner;
        warnings.retain(|(node, message)| state.warned.insert((node.name_any(), message.clone())));
        let names: HashSet<String> = nodes.iter().map(|n| n.name_any()).collect();
        state.warned.retain(|(n, _)| names.contains(n));
    }
    for (node, message) in warnings {
        tracing::warn!(node = %node.name_any(), %message, "node pod CIDR");
        ctx.recorder.record(
            &reference_to(node.as_ref()),
            EventType::Warning,
            CIDR_NOT_AVAILABLE,
            message,
        );
    }
    for (node, cidr) in to_assign {
        assign(ctx, &node, cidr).await;
    }
}

/// Writes `cidr` into the Node; on failure it is free again for the next
/// pass.
async fn assign(ctx: &Context, node: &Node, cidr: Ipv4Net) {
    let name = node.name_any();
    let api: Api<Node> = Api::all(ctx.client.clone());
    let text = cidr.to_string();
    let patch = json!({"spec": {"podCIDR": text, "podCIDRs": [text]}});
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => {
            tracing::info!(node = %name, pod_cidr = %text, "assigned the node's pod CIDR");
            ctx.recorder.record(
                &reference_to(node),
                EventType::Normal,
                CIDR_ASSIGNED,
                format!("Node {name} got pod CIDR {text}"),
            );
        }
        Err(e) => {
            tracing::warn!(node = %name, error = %e, "writing the node's pod CIDR");
            ctx.state.lock().unwrap().pending.remove(&name);
        }
    }
}
