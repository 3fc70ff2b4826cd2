//! Is the node's agent alive? Signs of life are a new heartbeat time on
//! the Ready condition or a renewed Lease; they are timed by this
//! controller's clock when it sees them (as Kubernetes' `probeTimestamp`),
//! never by the times the agent wrote. A node without one for the grace
//! period gets every condition Unknown.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use bosun::events::{reference_to, EventType};

use super::Context;
use crate::toolkit::{from_chrono, to_chrono};

use bosun::well_known::NODE_LEASE_NAMESPACE as LEASE_NAMESPACE;

/// The conditions Kubernetes marks Unknown on a silent node.
const MONITORED: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// What was last seen of one node.
#[derive(Debug, Clone)]
pub struct Observed {
    ready_heartbeat: Option<DateTime<Utc>>,
    lease_renew: Option<DateTime<Utc>>,
    /// When (by our clock) the last sign of life was seen.
    probe: DateTime<Utc>,
    /// The Ready status last seen, to report transitions.
    ready_status: String,
}

/// The status of the node's Ready condition ("" when it has none).
pub fn ready_status(node: &Node) -> &str {
    condition(node, "Ready").map_or("", |c| c.status.as_str())
}

fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Records the node's signs of life, marks it Unknown when they stopped
/// for longer than the grace period, and reports Ready transitions as
/// events. Returns the node as it now is.
pub async fn update(ctx: &Context, node: &Node) -> kube::Result<Node> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let now = ctx.clock.now();
    let heartbeat = condition(node, "Ready")
        .and_then(|c| c.last_heartbeat_time.as_ref())
        .map(to_chrono);
    let lease = ctx
        .leases
        .get(&ObjectRef::new(&name).within(LEASE_NAMESPACE))
        .and_then(|l| l.spec.as_ref()?.renew_time.as_ref().map(|t| t.0))
        .and_then(|t| DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond().max(0) as u32));
    let silent_for = {
        let mut observed = ctx.observed.lock().unwrap();
        let seen = observed.entry(name.clone()).or_insert_with(|| Observed {
            ready_heartbeat: heartbeat,
            lease_renew: lease,
            probe: now,
            ready_status: ready_status(node).to_string(),
        });
        if heartbeat != seen.ready_heartbeat {
            seen.ready_heartbeat = heartbeat;
            seen.probe = now;
        }
        if lease.is_some_and(|l| seen.lease_renew.is_none_or(|s| l > s)) {
            seen.lease_renew = lease;
            seen.probe = now;
        }
        now - seen.probe
    };
    let grace = chrono::Duration::from_std(ctx.options.grace_period).unwrap_or_default();
    let mut node = node.clone();
    if silent_for > grace {
        if let Some(conditions) = unknown_conditions(&node, now) {
            let nodes: Api<Node> = Api::all(ctx.client.clone());
            tracing::info!(node = %name, silent_for = ?silent_for.to_std().unwrap_or_default(),
                "node stopped posting status; marking it Unknown");
            node = nodes
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({
                        "metadata": {"resourceVersion": node.metadata.resource_version},
                        "status": {"conditions": conditions},
                    })),
                )
                .await?;
        }
    }
    report_transition(ctx, &node);
    Ok(node)
}

/// The node's conditions with every monitored one Unknown, or None when
/// they already are.
pub fn unknown_conditions(node: &Node, now: DateTime<Utc>) -> Option<Vec<NodeCondition>> {
    let mut conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut changed = false;
    for type_ in MONITORED {
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(c) if c.status == "Unknown" => {}
            Some(c) => {
                c.status = "Unknown".into();
                c.reason = Some("NodeStatusUnknown".into());
                c.message = Some("Kubelet stopped posting node status.".into());
                c.last_transition_time = Some(from_chrono(now));
                changed = true;
            }
            None => {
                conditions.push(NodeCondition {
                    type_: type_.into(),
                    status: "Unknown".into(),
                    reason: Some("NodeStatusNeverUpdated".into()),
                    message: Some("Kubelet never posted node status.".into()),
                    last_heartbeat_time: node.metadata.creation_timestamp.clone(),
                    last_transition_time: Some(from_chrono(now)),
                });
                changed = true;
            }
        }
    }
    changed.then_some(conditions)
}

/// `NodeNotReady` / `NodeReady` events when the Ready status changes.
fn report_transition(ctx: &Context, node: &Node) {
    let name = node.metadata.name.clone().unwrap_or_default();
    let status = ready_status(node).to_string();
    let before = {
        let mut observed = ctx.observed.lock().unwrap();
        let Some(seen) = observed.get_mut(&name) else {
            return;
        };
        std::mem::replace(&mut seen.ready_status, status.clone())
    };
    let (was, is) = (before == "True", status == "True");
    if was != is {
        let reason = if is { "NodeReady" } else { "NodeNotReady" };
        ctx.recorder.record(
            &reference_to(node),
            EventType::Normal,
            reason,
            format!("Node {name} status is now: {reason}"),
        );
    }
}
