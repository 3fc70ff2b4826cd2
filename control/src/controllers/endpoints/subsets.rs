//! A service's Endpoints subsets from its pods, as Kubernetes' endpoints
//! controller computes them: one address per pod (ready ones in
//! `addresses`, the others in `notReadyAddresses`, all of them ready with
//! `publishNotReadyAddresses`), each service port resolved on each pod,
//! and pods grouped into one subset per set of resolved ports
//! (`RepackSubsets`), in a stable order.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, EndpointSubset, Pod, Service};

use super::pods::{
    find_port, hostname_for, is_headless, is_ready, node_name_of, pod_ip, pod_ref, protocol_of,
    publishes_not_ready, service_ports, should_be_in_endpoints,
};

/// A subset's ports as a sortable key: (name, port, protocol, appProtocol).
type PortsKey = Vec<(String, i32, String, Option<String>)>;

/// The subsets of `svc`'s Endpoints for `pods` (already selected by it).
pub fn subsets_for(svc: &Service, pods: &[impl AsRef<Pod>]) -> Vec<EndpointSubset> {
    let tolerate_unready = publishes_not_ready(svc);
    let ports = service_ports(svc);
    let mut groups: BTreeMap<PortsKey, (Vec<EndpointAddress>, Vec<EndpointAddress>)> =
        BTreeMap::new();
    for pod in pods {
        let pod = pod.as_ref();
        if !should_be_in_endpoints(pod, tolerate_unready) {
            continue;
        }
        let key: PortsKey = if ports.is_empty() {
            // Only a headless service may have endpoints without ports.
            if !is_headless(svc) {
                continue;
            }
            Vec::new()
        } else {
            let mut key: PortsKey = ports
                .iter()
                .filter_map(|p| {
                    let number = find_port(pod, p)?;
                    Some((
                        p.name.clone().unwrap_or_default(),
                        number,
                        protocol_of(p).to_string(),
                        p.app_protocol.clone(),
                    ))
                })
                .collect();
            if key.is_empty() {
                continue;
            }
            key.sort();
            key
        };
        let address = EndpointAddress {
            ip: pod_ip(pod).unwrap_or_default().to_string(),
            hostname: hostname_for(pod, svc),
            node_name: node_name_of(pod),
            target_ref: Some(pod_ref(pod)),
        };
        let (ready, not_ready) = groups.entry(key).or_default();
        if tolerate_unready || is_ready(pod) {
            ready.push(address);
        } else {
            not_ready.push(address);
        }
    }
    groups
        .into_iter()
        .map(|(key, (mut ready, mut not_ready))| {
            let order = |a: &EndpointAddress| {
                let uid = a.target_ref.as_ref().and_then(|r| r.uid.clone());
                (a.ip.clone(), uid)
            };
            ready.sort_by_key(order);
            not_ready.sort_by_key(order);
            EndpointSubset {
                addresses: (!ready.is_empty()).then_some(ready),
                not_ready_addresses: (!not_ready.is_empty()).then_some(not_ready),
                ports: (!key.is_empty()).then(|| {
                    key.into_iter()
                        .map(|(name, port, protocol, app_protocol)| EndpointPort {
                            name: (!name.is_empty()).then_some(name),
                            port,
                            protocol: Some(protocol),
                            app_protocol,
                        })
                        .collect()
                }),
            }
        })
        .collect()
}

/// Keeps at most `max` addresses, ready ones first (subset by subset),
/// then not-ready ones; says whether any were left out.
pub fn truncate(mut subsets: Vec<EndpointSubset>, max: usize) -> (Vec<EndpointSubset>, bool) {
    let total: usize = subsets
        .iter()
        .map(|s| {
            s.addresses.as_ref().map_or(0, Vec::len)
                + s.not_ready_addresses.as_ref().map_or(0, Vec::len)
        })
        .sum();
    if total <= max {
        return (subsets, false);
    }
    let mut room = max;
    for s in subsets.iter_mut() {
        if let Some(ready) = s.addresses.as_mut() {
            ready.truncate(room);
            room -= ready.len();
        }
    }
    for s in subsets.iter_mut() {
        if let Some(not_ready) = s.not_ready_addresses.as_mut() {
            not_ready.truncate(room);
            room -= not_ready.len();
        }
    }
    for s in subsets.iter_mut() {
        s.addresses = s.addresses.take().filter(|a| !a.is_empty());
        s.not_ready_addresses = s.not_ready_addresses.take().filter(|a| !a.is_empty());
    }
    subsets.retain(|s| s.addresses.is_some() || s.not_ready_addresses.is_some());
    (subsets, true)
}
