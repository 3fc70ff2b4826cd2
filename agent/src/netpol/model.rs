//! What the enforcer keeps of Pods, Namespaces and NetworkPolicies
//! ([`PodInfo`], [`NamespaceInfo`], [`PolicyInfo`]), and what it makes of
//! them for one node ([`desired`]): for each pod of the node that a policy
//! of a direction selects, the list of what that direction allows, every
//! selector, named port and peer resolved to addresses and port numbers.
//!
//! The semantics are Kubernetes' (networking/v1 `NetworkPolicySpec`):
//! a pod is isolated for ingress (egress) when some policy of its
//! namespace whose `policyTypes` has `Ingress` (`Egress`) selects it; then
//! only what at least one rule of those policies allows gets through. A
//! rule allows traffic matching one of its peers (none: any) and one of
//! its ports (none: any). A peer's `podSelector` alone means pods of the
//! policy's namespace, `namespaceSelector` alone every pod of the selected
//! namespaces, both together the selected pods of the selected namespaces.
//! Named ports are resolved on the destination pod: the selected pod for
//! ingress, each peer pod for egress.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use bosun::selector::LabelSelector;
use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::services::{Key, Proto};

/// A pod with an address that policies can select or name as a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    pub node: String,
    pub ip: Ipv4Addr,
    pub labels: BTreeMap<String, String>,
    /// The containers' named ports: name, protocol, number.
    pub ports: Vec<(String, Proto, u16)>,
}

impl PodInfo {
    /// None for pods policies do not apply to: without an IPv4 address
    /// yet, on the host's network, or finished (their address may be
    /// someone else's already).
    pub fn from_pod(pod: &Pod) -> Option<PodInfo> {
        let spec = pod.spec.as_ref()?;
        if spec.host_network == Some(true) {
            return None;
        }
        let status = pod.status.as_ref()?;
        if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
            return None;
        }
        let ip: Ipv4Addr = status.pod_ip.as_deref()?.parse().ok()?;
        let ports = spec
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| {
                let name = p.name.clone().filter(|n| !n.is_empty())?;
                let proto = Proto::parse(p.protocol.as_deref())?;
                Some((name, proto, u16::try_from(p.container_port).ok()?))
            })
            .collect();
        Some(PodInfo {
            node: spec.node_name.clone().unwrap_or_default(),
            ip,
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            ports,
        })
    }

    /// The number of the named port `name` of protocol `proto`.
    fn named_port(&self, name: &str, proto: Proto) -> Option<u16> {
        self.ports
            .iter()
            .find(|(n, p, _)| n == name && *p == proto)
            .map(|(_, _, n)| *n)
    }
}

/// What is kept of a Namespace: its labels.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NamespaceInfo {
    pub labels: BTreeMap<String, String>,
}

impl NamespaceInfo {
    pub fn from_namespace(ns: &Namespace) -> Option<NamespaceInfo> {
        Some(NamespaceInfo {
            labels: ns.metadata.labels.clone().unwrap_or_default(),
        })
    }
}

/// What is kept of a NetworkPolicy: its spec (its namespace is its key's).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyInfo {
    pub spec: NetworkPolicySpec,
}

impl PolicyInfo {
    pub fn from_policy(np: &NetworkPolicy) -> Option<PolicyInfo> {
        Some(PolicyInfo {
            spec: np.spec.clone().unwrap_or_default(),
        })
    }

    /// `policyTypes`, defaulted as the API server defaults it (for
    /// objects stored before it did): Ingress, and Egress if there are
    /// egress rules.
    fn types(&self) -> (bool, bool) {
        match self.spec.policy_types.as_deref() {
            Some(t) if !t.is_empty() => (
                t.iter().any(|t| t == "Ingress"),
                t.iter().any(|t| t == "Egress"),
            ),
            _ => (
                true,
                self.spec.egress.as_ref().is_some_and(|e| !e.is_empty()),
            ),
        }
    }
}

/// Everything the watches hold.
#[derive(Debug, Default)]
pub struct PolicyState {
    pub pods: BTreeMap<Key, PodInfo>,
    pub namespaces: BTreeMap<Key, NamespaceInfo>,
    pub policies: BTreeMap<Key, PolicyInfo>,
}

/// Addresses a rule matches (the peer's side of the connection).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Addrs {
    /// Any address.
    Any,
    /// These pods' addresses (never empty).
    Pods(BTreeSet<Ipv4Addr>),
    /// An ipBlock: `cidr` but not `except`.
    Block { cidr: Ipv4Net, except: Vec<Ipv4Net> },
}

/// The layer-4 part of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum L4 {
    Any,
    /// Any port of one protocol.
    Proto(Proto),
    /// Ports `from..=to` of one protocol.
    Ports(Proto, u16, u16),
}

/// One thing a direction allows: traffic with a peer in `addrs` and
/// matching `l4`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Allow {
    pub addrs: Addrs,
    pub l4: L4,
}

/// The policies of one pod of the node: per direction, None when no
/// policy of that direction selects it (nothing is filtered), else what
/// is allowed (empty: nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRules {
    pub namespace: String,
    pub name: String,
    pub ip: Ipv4Addr,
    pub ingress: Option<Vec<Allow>>,
    pub egress: Option<Vec<Allow>>,
}

/// A selector of a policy; a broken one (the API refuses them) selects
/// nothing.
fn selector(
    s: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> LabelSelector {
    match s {
        None => LabelSelector::parse("").unwrap_or_else(|_| LabelSelector::nothing()),
        Some(s) => {
            LabelSelector::from_label_selector(s).unwrap_or_else(|_| LabelSelector::nothing())
        }
    }
}

/// The pods a selector peer (not an ipBlock) of a policy in `policy_ns`
/// names.
fn peer_pods<'a>(
    state: &'a PolicyState,
    policy_ns: &str,
    peer: &NetworkPolicyPeer,
) -> Vec<&'a PodInfo> {
    let pods = selector(peer.pod_selector.as_ref());
    let namespaces = peer.namespace_selector.as_ref().map(|s| selector(Some(s)));
    let empty = NamespaceInfo::default();
    state
        .pods
        .iter()
        .filter(|((ns, _), pod)| {
            let ns_ok = match &namespaces {
                None => ns == policy_ns,
                Some(sel) => {
                    let info = state.namespaces.get(&(String::new(), ns.clone()));
                    sel.matches(&info.unwrap_or(&empty).labels)
                }
            };
            ns_ok && pods.matches(&pod.labels)
        })
        .map(|(_, p)| p)
        .collect()
}

/// The protocol of a policy port (TCP when unset, as defaulted).
fn port_proto(p: &NetworkPolicyPort) -> Option<Proto> {
    Proto::parse(p.protocol.as_deref())
}

/// A numbered port or range: `port` and `endPort`.
fn numbered(p: &NetworkPolicyPort, proto: Proto, n: i32) -> Option<L4> {
    let from = u16::try_from(n).ok()?;
    let to = match p.end_port {
        Some(e) => u16::try_from(e).ok()?,
        None => from,
    };
    Some(L4::Ports(proto, from, to))
}

/// The rules of one direction of `pod` from the policies selecting it.
fn allows(
    state: &PolicyState,
    policies: &[(&str, &PolicyInfo)],
    pod: &PodInfo,
    ingress: bool,
) -> Vec<Allow> {
    let mut out = BTreeSet::new();
    for (ns, policy) in policies {
        let rules: Vec<(&[NetworkPolicyPort], &[NetworkPolicyPeer])> = if ingress {
            policy
                .spec
                .ingress
                .iter()
                .flatten()
                .map(|r| {
                    (
                        r.ports.as_deref().unwrap_or(&[]),
                        r.from.as_deref().unwrap_or(&[]),
                    )
                })
                .collect()
        } else {
            policy
                .spec
                .egress
                .iter()
                .flatten()
                .map(|r| {
                    (
                        r.ports.as_deref().unwrap_or(&[]),
                        r.to.as_deref().unwrap_or(&[]),
                    )
                })
                .collect()
        };
        for (ports, peers) in rules {
            rule_allows(state, ns, pod, ingress, ports, peers, &mut out);
        }
    }
    out.into_iter().collect()
}

/// What one rule allows. For ingress, named ports are the selected pod's;
/// for egress, each destination pod's, so they become one allow per
/// destination pod that has the port.
fn rule_allows(
    state: &PolicyState,
    policy_ns: &str,
    pod: &PodInfo,
    ingress: bool,
    ports: &[NetworkPolicyPort],
    peers: &[NetworkPolicyPeer],
    out: &mut BTreeSet<Allow>,
) {
    // The peers: their address sets, and for egress named ports the pods
    // they may stand for.
    let mut addrs = Vec::new();
    let mut pod_ips = BTreeSet::new();
    let mut candidates: Vec<&PodInfo> = Vec::new();
    if peers.is_empty() {
        addrs.push(Addrs::Any);
        candidates.extend(state.pods.values());
    }
    for peer in peers {
        match &peer.ip_block {
            Some(b) => {
                let Ok(cidr) = b.cidr.parse::<ipnet::IpNet>() else {
                    continue;
                };
                let ipnet::IpNet::V4(cidr) = cidr.trunc() else {
                    continue;
                };
                let except: Vec<Ipv4Net> = b
                    .except
                    .iter()
                    .flatten()
                    .filter_map(|e| match e.parse::<ipnet::IpNet>().ok()?.trunc() {
                        ipnet::IpNet::V4(n) => Some(n),
                        ipnet::IpNet::V6(_) => None,
                    })
                    .collect();
                // Overlapping ranges cannot share one nft set.
                let except = Ipv4Net::aggregate(&except);
                candidates.extend(
                    state.pods.values().filter(|p| {
                        cidr.contains(&p.ip) && !except.iter().any(|e| e.contains(&p.ip))
                    }),
                );
                addrs.push(Addrs::Block { cidr, except });
            }
            None => {
                for p in peer_pods(state, policy_ns, peer) {
                    pod_ips.insert(p.ip);
                    candidates.push(p);
                }
            }
        }
    }
    if !pod_ips.is_empty() {
        addrs.push(Addrs::Pods(pod_ips));
    }
    if ports.is_empty() {
        for a in addrs {
            out.insert(Allow {
                addrs: a,
                l4: L4::Any,
            });
        }
        return;
    }
    for port in ports {
        let Some(proto) = port_proto(port) else {
            continue;
        };
        match &port.port {
            None => {
                for a in &addrs {
                    out.insert(Allow {
                        addrs: a.clone(),
                        l4: L4::Proto(proto),
                    });
                }
            }
            Some(IntOrString::Int(n)) => {
                let Some(l4) = numbered(port, proto, *n) else {
                    continue;
                };
                for a in &addrs {
                    out.insert(Allow {
                        addrs: a.clone(),
                        l4,
                    });
                }
            }
            Some(IntOrString::String(name)) if ingress => {
                let Some(n) = pod.named_port(name, proto) else {
                    continue;
                };
                for a in &addrs {
                    out.insert(Allow {
                        addrs: a.clone(),
                        l4: L4::Ports(proto, n, n),
                    });
                }
            }
            Some(IntOrString::String(name)) => {
                for c in &candidates {
                    if let Some(n) = c.named_port(name, proto) {
                        out.insert(Allow {
                            addrs: Addrs::Pods(BTreeSet::from([c.ip])),
                            l4: L4::Ports(proto, n, n),
                        });
                    }
                }
            }
        }
    }
}

/// The rules of every pod of `node` some policy selects, by pod.
pub fn desired(state: &PolicyState, node: &str) -> Vec<PodRules> {
    // The policies of each namespace with their pod selectors, parsed once.
    let policies: Vec<(&str, &PolicyInfo, LabelSelector, (bool, bool))> = state
        .policies
        .iter()
        .map(|((ns, _), p)| {
            (
                ns.as_str(),
                p,
                selector(p.spec.pod_selector.as_ref()),
                p.types(),
            )
        })
        .collect();
    let mut out = Vec::new();
    for ((ns, name), pod) in &state.pods {
        if pod.node != node {
            continue;
        }
        let mut ingress = Vec::new();
        let mut egress = Vec::new();
        for (pns, p, sel, (i, e)) in &policies {
            if *pns != ns || !sel.matches(&pod.labels) {
                continue;
            }
            if *i {
                ingress.push((*pns, *p));
            }
            if *e {
                egress.push((*pns, *p));
            }
        }
        if ingress.is_empty() && egress.is_empty() {
            continue;
        }
        out.push(PodRules {
            namespace: ns.clone(),
            name: name.clone(),
            ip: pod.ip,
            ingress: (!ingress.is_empty()).then(|| allows(state, &ingress, pod, true)),
            egress: (!egress.is_empty()).then(|| allows(state, &egress, pod, false)),
        });
    }
    out
}
