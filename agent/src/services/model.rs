//! The slimmed Service and EndpointSlice: what the cluster DNS and the
//! service proxy need of them, kept once for both (the watch caches hold
//! these, never the objects). Each consumer reads its own view: DNS the
//! cluster IPs, ExternalName, named ports and endpoint hostnames; the
//! proxy the IPv4 cluster IP, every TCP/UDP port with its node port,
//! traffic policy, affinity and the endpoints' nodes.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

pub use bosun::well_known::SERVICE_NAME_LABEL;

/// kube-proxy's default `sessionAffinityConfig.clientIP.timeoutSeconds`.
pub const DEFAULT_AFFINITY_TIMEOUT: u32 = 10800;

/// (namespace, name) of an object.
pub type Key = (String, String);

/// A port's protocol: the three the API accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Proto {
    Tcp,
    Udp,
    Sctp,
}

impl Proto {
    /// The protocol of a port (the default is TCP); None for what the
    /// API does not accept.
    pub fn parse(p: Option<&str>) -> Option<Proto> {
        match p.unwrap_or("TCP") {
            "TCP" => Some(Proto::Tcp),
            "UDP" => Some(Proto::Udp),
            "SCTP" => Some(Proto::Sctp),
            _ => None,
        }
    }

    /// Lowercased, as SRV names (`_http._tcp`) and nftables say it.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Sctp => "sctp",
        }
    }
}

/// One port of a service.
#[derive(Debug, Clone, PartialEq)]
pub struct SvcPort {
    /// "" for a service's one unnamed port.
    pub name: String,
    pub proto: Proto,
    pub port: u16,
    /// Only for NodePort and LoadBalancer services.
    pub node_port: Option<u16>,
}

/// What the agent keeps of a Service.
#[derive(Debug, Clone, PartialEq)]
pub struct SvcInfo {
    /// `clusterIPs` (or `clusterIP`), parsed: empty for a headless service.
    pub cluster_ips: Vec<IpAddr>,
    /// `clusterIP: None`.
    pub headless: bool,
    /// `type: ExternalName`: its `externalName` (which may be "").
    pub external_name: Option<String>,
    pub ports: Vec<SvcPort>,
    /// `externalTrafficPolicy: Local` on a NodePort/LoadBalancer service.
    pub external_local: bool,
    /// `sessionAffinity: ClientIP`: its timeout in seconds.
    pub affinity: Option<u32>,
}

impl SvcInfo {
    pub fn from_service(svc: &Service) -> SvcInfo {
        let Some(spec) = svc.spec.as_ref() else {
            return SvcInfo {
                cluster_ips: Vec::new(),
                headless: false,
                external_name: None,
                ports: Vec::new(),
                external_local: false,
                affinity: None,
            };
        };
        let mut ips: Vec<&str> = spec
            .cluster_ips
            .iter()
            .flatten()
            .map(|s| s.as_str())
            .collect();
        if ips.is_empty() {
            ips.extend(spec.cluster_ip.as_deref());
        }
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
        SvcInfo {
            cluster_ips: ips.iter().filter_map(|ip| ip.parse().ok()).collect(),
            headless: ips.contains(&"None"),
            external_name: (spec.type_.as_deref() == Some("ExternalName"))
                .then(|| spec.external_name.clone().unwrap_or_default()),
            ports,
            external_local: node_ports && spec.external_traffic_policy.as_deref() == Some("Local"),
            affinity,
        }
    }
}

/// One endpoint of a slice.
#[derive(Debug, Clone, PartialEq)]
pub struct EpInfo {
    pub addresses: Vec<IpAddr>,
    pub hostname: Option<String>,
    /// `nodeName`: where it runs.
    pub node: Option<String>,
    /// Unknown readiness counts as ready, as the API says.
    pub ready: bool,
}

/// What the agent keeps of an EndpointSlice.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceInfo {
    /// The service it belongs to (its `kubernetes.io/service-name`).
    pub service: String,
    /// `addressType: IPv4`.
    pub ipv4: bool,
    pub endpoints: Vec<EpInfo>,
    /// (name, protocol, port); the name is "" for a service's one unnamed
    /// port. Ports without a number are left out.
    pub ports: Vec<(String, Proto, u16)>,
}

impl SliceInfo {
    /// None for a slice without a service-name label.
    pub fn from_slice(slice: &EndpointSlice) -> Option<SliceInfo> {
        let service = slice
            .metadata
            .labels
            .as_ref()?
            .get(SERVICE_NAME_LABEL)?
            .clone();
        Some(SliceInfo {
            service,
            ipv4: slice.address_type == "IPv4",
            endpoints: slice
                .endpoints
                .iter()
                .flatten()
                .map(|e| EpInfo {
                    addresses: e.addresses.iter().filter_map(|a| a.parse().ok()).collect(),
                    hostname: e.hostname.clone().filter(|h| !h.is_empty()),
                    node: e.node_name.clone(),
                    ready: e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true),
                })
                .collect(),
            ports: slice
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
                .collect(),
        })
    }
}

/// Every Service and EndpointSlice of the cluster, by (namespace, name).
#[derive(Debug, Default, Clone)]
pub struct ServiceState {
    pub services: BTreeMap<Key, SvcInfo>,
    pub slices: BTreeMap<Key, SliceInfo>,
}

impl ServiceState {
    /// The slices of service `name` in namespace `ns`.
    pub fn slices_of<'s>(
        &'s self,
        ns: &'s str,
        name: &'s str,
    ) -> impl Iterator<Item = &'s SliceInfo> {
        self.slices
            .range((ns.to_string(), String::new())..)
            .take_while(move |((sns, _), _)| sns == ns)
            .map(|(_, s)| s)
            .filter(move |s| s.service == name)
    }
}
