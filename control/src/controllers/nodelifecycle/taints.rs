//! Taints that say what a node's conditions say (Kubernetes'
//! TaintNodesByCondition and taint-based eviction): NoSchedule taints
//! keep new pods off a node that is not ready, unreachable, cordoned or
//! under pressure; NoExecute `not-ready` / `unreachable` taints make the
//! taint eviction controller move pods that do not tolerate them. Taints
//! of anyone else are left as they are.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::health::ready_status;
use super::Context;
use crate::toolkit::from_chrono;
use bosun::well_known::{
    TAINT_DISK_PRESSURE as DISK_PRESSURE_TAINT, TAINT_MEMORY_PRESSURE as MEMORY_PRESSURE_TAINT,
    TAINT_NETWORK_UNAVAILABLE as NETWORK_UNAVAILABLE_TAINT, TAINT_NOT_READY as NOT_READY_TAINT,
    TAINT_PID_PRESSURE as PID_PRESSURE_TAINT, TAINT_UNREACHABLE as UNREACHABLE_TAINT,
    TAINT_UNSCHEDULABLE as UNSCHEDULABLE_TAINT,
};

const NO_SCHEDULE: &str = "NoSchedule";
const NO_EXECUTE: &str = "NoExecute";

/// Every (key, effect) this controller owns.
const MANAGED: [(&str, &str); 9] = [
    (NOT_READY_TAINT, NO_SCHEDULE),
    (UNREACHABLE_TAINT, NO_SCHEDULE),
    (UNSCHEDULABLE_TAINT, NO_SCHEDULE),
    (MEMORY_PRESSURE_TAINT, NO_SCHEDULE),
    (DISK_PRESSURE_TAINT, NO_SCHEDULE),
    (PID_PRESSURE_TAINT, NO_SCHEDULE),
    (NETWORK_UNAVAILABLE_TAINT, NO_SCHEDULE),
    (NOT_READY_TAINT, NO_EXECUTE),
    (UNREACHABLE_TAINT, NO_EXECUTE),
];

/// The managed taints the node's state calls for.
fn wanted(node: &Node) -> Vec<(&'static str, &'static str)> {
    let mut out = Vec::new();
    match ready_status(node) {
        "True" => {}
        "False" => out.extend([
            (NOT_READY_TAINT, NO_SCHEDULE),
            (NOT_READY_TAINT, NO_EXECUTE),
        ]),
        // Unknown: the agent went silent. A node that never reported is
        // left alone until the grace period makes it Unknown.
        "Unknown" => out.extend([
            (UNREACHABLE_TAINT, NO_SCHEDULE),
            (UNREACHABLE_TAINT, NO_EXECUTE),
        ]),
        _ => {}
    }
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    for c in conditions.into_iter().flatten() {
        let key = match c.type_.as_str() {
            "MemoryPressure" => MEMORY_PRESSURE_TAINT,
            "DiskPressure" => DISK_PRESSURE_TAINT,
            "PIDPressure" => PID_PRESSURE_TAINT,
            "NetworkUnavailable" => NETWORK_UNAVAILABLE_TAINT,
            _ => continue,
        };
        if c.status == "True" {
            out.push((key, NO_SCHEDULE));
        }
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        out.push((UNSCHEDULABLE_TAINT, NO_SCHEDULE));
    }
    out
}

/// The node's taints as they should be, or None when they already are:
/// managed taints the state no longer calls for are dropped, missing ones
/// added (NoExecute ones stamped with `now`, from which tolerationSeconds
/// count), everything else kept in place.
pub fn desired_taints(node: &Node, now: DateTime<Utc>) -> Option<Vec<Taint>> {
    let current = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let wanted = wanted(node);
    let is = |t: &Taint, (k, e): (&str, &str)| t.key == k && t.effect == e;
    let mut next: Vec<Taint> = current
        .iter()
        .filter(|t| !MANAGED.iter().any(|m| is(t, *m)) || wanted.iter().any(|w| is(t, *w)))
        .cloned()
        .collect();
    for (key, effect) in wanted {
        if !next.iter().any(|t| is(t, (key, effect))) {
            next.push(Taint {
                key: key.into(),
                effect: effect.into(),
                value: None,
                time_added: (effect == NO_EXECUTE).then(|| from_chrono(now)),
            });
        }
    }
    (next != current).then_some(next)
}

/// Writes the node's taints if they are not as they should be.
pub async fn reconcile(ctx: &Context, node: &Node) -> kube::Result<()> {
    let Some(taints) = desired_taints(node, ctx.clock.now()) else {
        return Ok(());
    };
    let name = node.metadata.name.as_deref().unwrap_or_default();
    tracing::info!(node = %name, taints = ?taints.iter().map(|t| format!("{}:{}", t.key, t.effect)).collect::<Vec<_>>(),
        "updating the node's taints");
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    nodes
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"resourceVersion": node.metadata.resource_version},
                "spec": {"taints": taints},
            })),
        )
        .await?;
    Ok(())
}
