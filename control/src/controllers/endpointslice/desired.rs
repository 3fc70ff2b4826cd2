//! The endpoints a service should have, as EndpointSlice `Endpoint`s
//! grouped by their resolved ports (each slice carries one port set), as
//! Kubernetes' `podToEndpoint` and `getEndpointPorts` compute them.
//! Terminating pods stay, with `terminating: true`, so that clients can
//! drain them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};

use crate::controllers::endpoints::pods::{
    find_port, hostname_for, is_ready, is_terminating, node_name_of, pod_ip, pod_ref, protocol_of,
    publishes_not_ready, service_ports, should_be_in_endpoints,
};

/// A slice's ports as a sortable key: (name, port, protocol, appProtocol).
pub type PortsKey = Vec<(String, i32, String, Option<String>)>;

/// The key of a slice's ports, whatever their order.
pub fn ports_key(ports: &[EndpointPort]) -> PortsKey {
    let mut key: PortsKey = ports
        .iter()
        .map(|p| {
            (
                p.name.clone().unwrap_or_default(),
                p.port.unwrap_or(0),
                p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                p.app_protocol.clone(),
            )
        })
        .collect();
    key.sort();
    key
}

/// The ports a key stands for.
pub fn ports_of(key: &PortsKey) -> Vec<EndpointPort> {
    key.iter()
        .map(|(name, port, protocol, app_protocol)| EndpointPort {
            name: Some(name.clone()),
            port: Some(*port),
            protocol: Some(protocol.clone()),
            app_protocol: app_protocol.clone(),
        })
        .collect()
}

/// An endpoint's identity across syncs: its address and its pod.
pub fn endpoint_key(ep: &Endpoint) -> (String, String) {
    let uid = ep
        .target_ref
        .as_ref()
        .and_then(|r| r.uid.clone())
        .unwrap_or_default();
    (ep.addresses.first().cloned().unwrap_or_default(), uid)
}

/// The endpoints of `svc` for `pods` (already selected by it), by ports.
pub fn desired_endpoints(
    svc: &Service,
    pods: &[impl AsRef<Pod>],
) -> BTreeMap<PortsKey, BTreeMap<(String, String), Endpoint>> {
    let publish = publishes_not_ready(svc);
    let mut out: BTreeMap<PortsKey, BTreeMap<(String, String), Endpoint>> = BTreeMap::new();
    for pod in pods {
        let pod = pod.as_ref();
        if !should_be_in_endpoints(pod, true) {
            continue;
        }
        let serving = publish || is_ready(pod);
        let terminating = is_terminating(pod);
        let ready = publish || (serving && !terminating);
        let mut key: PortsKey = service_ports(svc)
            .iter()
            .filter_map(|p| {
                Some((
                    p.name.clone().unwrap_or_default(),
                    find_port(pod, p)?,
                    protocol_of(p).to_string(),
                    p.app_protocol.clone(),
                ))
            })
            .collect();
        key.sort();
        let ep = Endpoint {
            addresses: vec![pod_ip(pod).unwrap_or_default().to_string()],
            conditions: Some(EndpointConditions {
                ready: Some(ready),
                serving: Some(serving),
                terminating: Some(terminating),
            }),
            hostname: hostname_for(pod, svc),
            node_name: node_name_of(pod),
            target_ref: Some(pod_ref(pod)),
            ..Default::default()
        };
        out.entry(key).or_default().insert(endpoint_key(&ep), ep);
    }
    out
}
