//! Fitting a service's desired endpoints into its existing slices with
//! few writes (a simpler cousin of Kubernetes' slice reconciler): an
//! endpoint stays in the slice it is already in (refreshed), new ones fill
//! slices with room, then new slices of at most [`MAX_ENDPOINTS_PER_SLICE`];
//! slices left empty, or whose ports nobody has any more, are deleted. A
//! service with no endpoints keeps one empty placeholder slice, as
//! upstream's does.

use std::collections::BTreeMap;

use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};

use super::desired::{endpoint_key, ports_key, PortsKey};

/// Kubernetes' default `--max-endpoints-per-slice`.
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;

/// What to write: new slices' contents, existing slices' new contents, and
/// the names of slices to delete.
#[derive(Debug, Default)]
pub struct Plan {
    pub create: Vec<(PortsKey, Vec<Endpoint>)>,
    pub update: Vec<(EndpointSlice, Vec<Endpoint>)>,
    pub keep: Vec<EndpointSlice>,
    pub delete: Vec<String>,
}

pub fn plan(
    existing: Vec<EndpointSlice>,
    mut desired: BTreeMap<PortsKey, BTreeMap<(String, String), Endpoint>>,
    max: usize,
) -> Plan {
    let mut plan = Plan::default();
    if desired.values().all(BTreeMap::is_empty) {
        // The placeholder: one slice without ports or endpoints.
        let mut kept = false;
        for slice in existing {
            let empty = slice.endpoints.as_deref().unwrap_or_default().is_empty()
                && slice.ports.as_deref().unwrap_or_default().is_empty();
            if empty && !kept && slice.address_type == "IPv4" {
                kept = true;
                plan.keep.push(slice);
            } else {
                plan.delete
                    .push(slice.metadata.name.clone().unwrap_or_default());
            }
        }
        if !kept {
            plan.create.push((Vec::new(), Vec::new()));
        }
        return plan;
    }
    // Existing slices by port set; slices of port sets no longer wanted go.
    let mut by_ports: BTreeMap<PortsKey, Vec<(EndpointSlice, Vec<Endpoint>)>> = BTreeMap::new();
    for slice in existing {
        let key = ports_key(slice.ports.as_deref().unwrap_or_default());
        if slice.address_type != "IPv4" || !desired.contains_key(&key) {
            plan.delete
                .push(slice.metadata.name.clone().unwrap_or_default());
            continue;
        }
        by_ports.entry(key).or_default().push((slice, Vec::new()));
    }
    for (key, wanted) in desired.iter_mut() {
        let slices = by_ports.entry(key.clone()).or_default();
        // Endpoints stay where they are, refreshed.
        for (slice, next) in slices.iter_mut() {
            for ep in slice.endpoints.iter().flatten() {
                if next.len() < max {
                    if let Some(fresh) = wanted.remove(&endpoint_key(ep)) {
                        next.push(fresh);
                    }
                }
            }
        }
        // New ones fill slices with room, fullest first.
        slices.sort_by_key(|(_, next)| std::cmp::Reverse(next.len()));
        let mut rest = std::mem::take(wanted).into_values();
        for (_, next) in slices.iter_mut() {
            while next.len() < max {
                let Some(ep) = rest.next() else { break };
                next.push(ep);
            }
        }
        let rest: Vec<Endpoint> = rest.collect();
        for chunk in rest.chunks(max) {
            plan.create.push((key.clone(), chunk.to_vec()));
        }
    }
    for (_, slices) in by_ports {
        for (slice, next) in slices {
            if next.is_empty() {
                plan.delete
                    .push(slice.metadata.name.clone().unwrap_or_default());
            } else if next == slice.endpoints.as_deref().unwrap_or_default() {
                plan.keep.push(slice);
            } else {
                plan.update.push((slice, next));
            }
        }
    }
    plan
}
