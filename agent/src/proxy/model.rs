//! The proxy's desired state: the service ports it makes of the shared
//! Services and EndpointSlices (`crate::services`, fed by one watch of
//! each for the whole agent), each with the ready endpoints that serve it.
//! Pure: the renderer turns the result into an nftables table.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::Ipv4Net;

pub use crate::services::Proto;
use crate::services::{ServiceState, SvcInfo};

/// The address the proxy serves a service on: its IPv4 cluster IP. None
/// for services it has nothing to do for: headless ones, ExternalName
/// ones, and those without an IPv4 cluster IP.
pub fn cluster_ipv4(svc: &SvcInfo) -> Option<Ipv4Addr> {
    if svc.headless || svc.external_name.is_some() {
        return None;
    }
    match svc.cluster_ips.first()? {
        IpAddr::V4(v4) => Some(*v4),
        IpAddr::V6(_) => None,
    }
}

/// An IPv4 CIDR as given on the command line (`10.96.0.0/12`), its host
/// bits cleared.
pub fn parse_cidr(s: &str) -> Option<Ipv4Net> {
    s.parse::<Ipv4Net>().ok().map(|n| n.trunc())
}

/// A ready endpoint of a service port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Backend {
    pub ip: Ipv4Addr,
    pub port: u16,
    /// On this node (its pod subnet's bridge).
    pub local: bool,
}

/// One port of one service with the endpoints that serve it: the unit the
/// renderer makes chains of.
#[derive(Debug, Clone, PartialEq)]
pub struct ServicePort {
    pub namespace: String,
    pub service: String,
    pub port_name: String,
    pub proto: Proto,
    pub cluster_ip: Ipv4Addr,
    pub port: u16,
    pub node_port: Option<u16>,
    pub external_local: bool,
    pub affinity: Option<u32>,
    /// Ready endpoints, sorted, no duplicates.
    pub backends: Vec<Backend>,
}

/// The service ports of `state` with their ready endpoints; an endpoint is
/// local when it names `node` or, naming none, is in `pod_cidr`. Only
/// TCP and UDP ports, and IPv4 endpoints, are proxied.
pub fn desired(state: &ServiceState, node: &str, pod_cidr: Ipv4Net) -> Vec<ServicePort> {
    let mut out = Vec::new();
    for ((ns, name), svc) in &state.services {
        let Some(cluster_ip) = cluster_ipv4(svc) else {
            continue;
        };
        let slices: Vec<_> = state.slices_of(ns, name).filter(|s| s.ipv4).collect();
        for p in svc.ports.iter().filter(|p| p.proto != Proto::Sctp) {
            let mut backends = BTreeSet::new();
            for slice in &slices {
                let Some((_, _, target)) = slice
                    .ports
                    .iter()
                    .find(|(n, proto, _)| *n == p.name && *proto == p.proto)
                else {
                    continue;
                };
                for ep in slice.endpoints.iter().filter(|e| e.ready) {
                    for ip in &ep.addresses {
                        let IpAddr::V4(ip) = *ip else { continue };
                        let local = match &ep.node {
                            Some(n) => n == node,
                            None => pod_cidr.contains(&ip),
                        };
                        backends.insert(Backend {
                            ip,
                            port: *target,
                            local,
                        });
                    }
                }
            }
            out.push(ServicePort {
                namespace: ns.clone(),
                service: name.clone(),
                port_name: p.name.clone(),
                proto: p.proto,
                cluster_ip,
                port: p.port,
                node_port: p.node_port,
                external_local: svc.external_local,
                affinity: svc.affinity,
                backends: backends.into_iter().collect(),
            });
        }
    }
    out
}
