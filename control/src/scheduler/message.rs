//! The FailedScheduling message, worded and ordered as kube-scheduler's
//! `FitError`: `0/3 nodes are available: 1 node(s) had untolerated taint
//! {dedicated: gpu}, 2 Insufficient cpu.`

use std::collections::HashMap;

use super::filters::Reason;

/// What kube-scheduler says when the cluster has no node at all.
pub const NO_NODES: &str = "no nodes available to schedule pods";

/// The message for a pod no node fits: each reason with the number of
/// nodes that gave it, sorted as strings (as Kubernetes sorts them).
pub fn fit_error(total_nodes: usize, per_node: &[Vec<Reason>]) -> String {
    if total_nodes == 0 {
        return NO_NODES.to_string();
    }
    let mut histogram: HashMap<String, usize> = HashMap::new();
    for reasons in per_node {
        for r in reasons {
            *histogram.entry(r.to_string()).or_default() += 1;
        }
    }
    let mut parts: Vec<String> = histogram
        .into_iter()
        .map(|(reason, n)| format!("{n} {reason}"))
        .collect();
    parts.sort();
    let mut msg = format!("0/{total_nodes} nodes are available:");
    if !parts.is_empty() {
        msg.push_str(&format!(" {}.", parts.join(", ")));
    }
    msg
}

/// The message for a pod its PreFilter step rejects before any node is
/// looked at (a missing claim, unbound immediate claims), worded as
/// kube-scheduler's.
pub fn prefilter_error(total_nodes: usize, why: &str) -> String {
    if total_nodes == 0 {
        return NO_NODES.to_string();
    }
    format!("0/{total_nodes} nodes are available: {why}.")
}
