//! The proxy's desired state: what it keeps of Services and EndpointSlices
//! (fed by watches, see [`super::sync`]) and the service ports it makes of
//! them, each with the ready endpoints that serve it. Pure: the renderer
//! turns the result into an nftables table.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::dns::zone::SERVICE_NAME_LABEL;

/// (namespace, name) of an object.
pub type Key = (String, String);

/// kube-proxy's default `sessionAffinityConfig.clientIP.timeoutSeconds`.
pub const DEFAULT_AFFINITY_TIMEOUT: u32 = 10800;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    /// TCP and UDP (the default is TCP); None for SCTP and the rest.
    pub fn parse(p: Option<&str>) -> Option<Proto> {
        match p.unwrap_or("TCP") {
            "TCP" => Some(Proto::Tcp),
            "UDP" => Some(Proto::Udp),
            _ => None,
        }
    }

    /// The nftables keyword.
    pub fn nft(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

/// One port of a service.
#[derive(Debug, Clone, PartialEq)]
pub struct SvcPort {
    pub name: String,
    pub proto: Proto,
    pub port: u16,
    pub node_port: Option<u16>,
}

/// What the proxy needs of a Service.
#[derive(Debug, Clone, PartialEq)]
pub struct SvcInfo {
    pub cluster_ip: Ipv4Addr,
    pub ports: Vec<SvcPort>,
    /// `externalTrafficPolicy: Local`.
    pub external_local: bool,
    /// `sessionAffinity: ClientIP`: its timeout in seconds.
    pub affinity: Option<u32>,
}

impl SvcInfo {
    /// None for services the proxy has nothing to do for: headless ones,
    /// ExternalName ones, and those without an IPv4 cluster IP.
    pub fn from_service(svc: &Service) -> Option<SvcInfo> {
        let spec = svc.spec.as_ref()?;
        if spec.type_.as_deref() == Some("ExternalName") {
            return None;
        }
        let cluster_ip: Ipv4Addr = spec.cluster_ip.as_deref()?.parse().ok()?;
        let node_ports = matches!(spec.type_.as_deref(), Some("NodePort" | "LoadBalancer"));
        let ports = spec
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                Some(SvcPort {
                    name: p.name.clone().unwrap_or_default(),
                    proto: Proto::parse(p.protocol.as_deref())?,
                    port: u16::try_from(p.port).ok()?,
                    node_port: p
                        .node_port
                        .filter(|_| node_ports)
                        .and_then(|n| u16::try_from(n).ok()),
                })
            })
            .collect();
        let affinity = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
            spec.session_affinity_config
                .as_ref()
                .and_then(|c| c.client_ip.as_ref())
                .and_then(|c| c.timeout_seconds)
                .and_then(|t| u32::try_from(t).ok())
                .filter(|t| *t > 0)
                .unwrap_or(DEFAULT_AFFINITY_TIMEOUT)
        });
        Some(SvcInfo {
            cluster_ip,
            ports,
            external_local: node_ports && spec.external_traffic_policy.as_deref() == Some("Local"),
            affinity,
        })
    }
}

/// One endpoint of a slice.
#[derive(Debug, Clone, PartialEq)]
pub struct EpInfo {
    pub ip: Ipv4Addr,
    pub ready: bool,
    pub node: Option<String>,
}

/// What the proxy needs of an EndpointSlice.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceInfo {
    /// The service it belongs to (its `kubernetes.io/service-name`).
    pub service: String,
    pub endpoints: Vec<EpInfo>,
    /// (name, protocol, port); the name is "" for a service's one unnamed port.
    pub ports: Vec<(String, Proto, u16)>,
}

impl SliceInfo {
    /// None for a slice of no service, or of another address family.
    pub fn from_slice(slice: &EndpointSlice) -> Option<SliceInfo> {
        if slice.address_type != "IPv4" {
            return None;
        }
        let service = slice
            .metadata
            .labels
            .as_ref()?
            .get(SERVICE_NAME_LABEL)?
            .clone();
        let endpoints = slice
            .endpoints
            .iter()
            .flatten()
            .flat_map(|e| {
                // Unknown readiness counts as ready, as the API says.
                let ready = e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
                e.addresses.iter().filter_map(move |a| {
                    Some(EpInfo {
                        ip: a.parse().ok()?,
                        ready,
                        node: e.node_name.clone(),
                    })
                })
            })
            .collect();
        let ports = slice
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                Some((
                    p.name.clone().unwrap_or_default(),
                    Proto::parse(p.protocol.as_deref())?,
                    u16::try_from(p.port?).ok()?,
                ))
            })
            .collect();
        Some(SliceInfo {
            service,
            endpoints,
            ports,
        })
    }
}

/// The watched state: services and slices by (namespace, name).
#[derive(Debug, Default)]
pub struct ProxyState {
    pub services: BTreeMap<Key, SvcInfo>,
    pub slices: BTreeMap<Key, SliceInfo>,
}

/// An IPv4 CIDR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Option<Cidr> {
        let (addr, len) = s.split_once('/')?;
        let addr: Ipv4Addr = addr.parse().ok()?;
        let len: u8 = len.parse().ok().filter(|l| *l <= 32)?;
        let cidr = Cidr { addr, len };
        Some(Cidr {
            addr: Ipv4Addr::from(u32::from(addr) & cidr.mask()),
            len,
        })
    }

    fn mask(&self) -> u32 {
        if self.len == 0 {
            0
        } else {
            u32::MAX << (32 - self.len)
        }
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == u32::from(self.addr)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
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
/// local when it names `node` or, naming none, is in `pod_cidr`.
pub fn desired(state: &ProxyState, node: &str, pod_cidr: Cidr) -> Vec<ServicePort> {
    let mut out = Vec::new();
    for ((ns, name), svc) in &state.services {
        let slices: Vec<&SliceInfo> = state
            .slices
            .range((ns.clone(), String::new())..)
            .take_while(|((sns, _), _)| sns == ns)
            .map(|(_, s)| s)
            .filter(|s| &s.service == name)
            .collect();
        for p in &svc.ports {
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
                    let local = match &ep.node {
                        Some(n) => n == node,
                        None => pod_cidr.contains(ep.ip),
                    };
                    backends.insert(Backend {
                        ip: ep.ip,
                        port: *target,
                        local,
                    });
                }
            }
            out.push(ServicePort {
                namespace: ns.clone(),
                service: name.clone(),
                port_name: p.name.clone(),
                proto: p.proto,
                cluster_ip: svc.cluster_ip,
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
