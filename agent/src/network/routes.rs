//! host-gw routes: to every other Node's pod CIDR via that Node's
//! InternalIP, as flannel's host-gw backend keeps them. Routes bosun made
//! carry their own routing protocol number ([`ROUTE_PROTO`]), so the
//! agent finds and removes exactly its own, also after a restart. They
//! are read and written over rtnetlink ([`super::netlink`]).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::Node;

use super::netlink::{self, Netlink, Route};

/// The `proto` of bosun's routes (`ip route show proto 235`).
pub const ROUTE_PROTO: u8 = 235;

/// The routes this host should have: pod CIDR → gateway, and the pod
/// CIDRs refused because they lie outside the cluster's pod network
/// `cluster` (as `node: cidr`, for the log): a Node claiming `0.0.0.0/1`
/// or this host's own networks gets no route. Nodes without a pod CIDR
/// or an InternalIP are left out, as are this node and nodes whose
/// address is this host's own (several test nodes sharing one engine
/// reach each other's bridges directly).
pub fn desired(
    nodes: &[Node],
    me: &str,
    own_cidr: &str,
    local: &[Ipv4Addr],
    cluster: &Ipv4Net,
) -> (BTreeMap<Ipv4Net, Ipv4Addr>, Vec<String>) {
    let mut routes = BTreeMap::new();
    let mut refused = Vec::new();
    for node in nodes {
        if node.metadata.name.as_deref() == Some(me) {
            continue;
        }
        let Some(cidr) = node.spec.as_ref().and_then(|s| s.pod_cidr.clone()) else {
            continue;
        };
        if cidr == own_cidr {
            continue;
        }
        let Ok(net) = cidr.parse::<Ipv4Net>() else {
            continue;
        };
        if net != net.trunc() || !cluster.contains(&net) {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            refused.push(format!("{name}: {cidr}"));
            continue;
        }
        let via = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .into_iter()
            .flatten()
            .filter(|a| a.type_ == "InternalIP")
            .find_map(|a| match a.address.parse::<IpAddr>() {
                Ok(IpAddr::V4(ip)) => Some(ip),
                _ => None,
            });
        let Some(via) = via else { continue };
        if local.contains(&via) || via.is_loopback() {
            continue;
        }
        routes.insert(net, via);
    }
    (routes, refused)
}

/// Makes bosun's routes exactly `want`: adds and changes what differs,
/// removes the rest. Returns how many routes changed.
pub async fn apply(want: &BTreeMap<Ipv4Net, Ipv4Addr>) -> Result<usize, String> {
    apply_over_netlink(want).await.map_err(|e| e.to_string())
}

async fn apply_over_netlink(want: &BTreeMap<Ipv4Net, Ipv4Addr>) -> Result<usize, netlink::Error> {
    let netlink = Netlink::connect()?;
    let have = netlink.routes(ROUTE_PROTO).await?;
    let mut changed = 0;
    for dest in have.keys().filter(|d| !want.contains_key(*d)) {
        netlink.delete_route(*dest, ROUTE_PROTO).await?;
        tracing::info!(%dest, "removed the route to a node that left");
        changed += 1;
    }
    for (&dest, &via) in want {
        if have.get(&dest) == Some(&via) {
            continue;
        }
        netlink
            .replace_route(Route { dest, via }, ROUTE_PROTO)
            .await?;
        tracing::info!(%dest, %via, "routing another node's pods");
        changed += 1;
    }
    Ok(changed)
}

/// Removes every route bosun made; returns their destinations.
pub async fn remove_all() -> Result<Vec<String>, String> {
    async {
        let netlink = Netlink::connect()?;
        let have = netlink.routes(ROUTE_PROTO).await?;
        for dest in have.keys() {
            netlink.delete_route(*dest, ROUTE_PROTO).await?;
        }
        Ok::<_, netlink::Error>(have.into_keys().map(|d| d.to_string()).collect())
    }
    .await
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, cidr: Option<&str>, ip: Option<&str>) -> Node {
        let mut n = json!({"metadata": {"name": name}, "spec": {}, "status": {}});
        if let Some(c) = cidr {
            n["spec"]["podCIDR"] = json!(c);
        }
        if let Some(ip) = ip {
            n["status"]["addresses"] = json!([
                {"type": "Hostname", "address": name},
                {"type": "InternalIP", "address": ip}]);
        }
        serde_json::from_value(n).unwrap()
    }

    #[test]
    fn routes_go_to_other_hosts_only() {
        let nodes = [
            node("a", Some("10.244.1.0/24"), Some("172.31.250.11")),
            node("b", Some("10.244.2.0/24"), Some("172.31.250.12")),
            node("c", Some("10.244.3.0/24"), Some("172.31.250.13")),
            node("no-cidr", None, Some("172.31.250.14")),
            node("no-ip", Some("10.244.5.0/24"), None),
            node("same-host", Some("10.244.6.0/24"), Some("172.31.250.11")),
            node("v6", Some("fd00::/64"), Some("172.31.250.15")),
        ];
        let local: Vec<Ipv4Addr> = vec!["172.31.250.11".parse().unwrap()];
        let cluster: Ipv4Net = "10.244.0.0/16".parse().unwrap();
        let (got, refused) = desired(&nodes, "a", "10.244.1.0/24", &local, &cluster);
        assert!(refused.is_empty(), "{refused:?}");
        let want: BTreeMap<Ipv4Net, Ipv4Addr> = [
            (
                "10.244.2.0/24".parse().unwrap(),
                "172.31.250.12".parse().unwrap(),
            ),
            (
                "10.244.3.0/24".parse().unwrap(),
                "172.31.250.13".parse().unwrap(),
            ),
        ]
        .into();
        assert_eq!(got, want);
    }

    #[test]
    fn pod_cidrs_outside_the_cluster_get_no_route() {
        let nodes = [
            node("a", Some("10.244.1.0/24"), Some("172.31.250.11")),
            node("good", Some("10.244.2.0/24"), Some("172.31.250.12")),
            node("greedy", Some("0.0.0.0/1"), Some("172.31.250.13")),
            node("elsewhere", Some("192.168.0.0/24"), Some("172.31.250.14")),
            node("wide", Some("10.0.0.0/8"), Some("172.31.250.15")),
            node("host-bits", Some("10.244.3.7/24"), Some("172.31.250.16")),
        ];
        let cluster: Ipv4Net = "10.244.0.0/16".parse().unwrap();
        let (got, refused) = desired(&nodes, "a", "10.244.1.0/24", &[], &cluster);
        let got: Vec<String> = got.keys().map(|k| k.to_string()).collect();
        assert_eq!(got, ["10.244.2.0/24"]);
        assert_eq!(
            refused,
            [
                "greedy: 0.0.0.0/1",
                "elsewhere: 192.168.0.0/24",
                "wide: 10.0.0.0/8",
                "host-bits: 10.244.3.7/24"
            ]
        );
    }
}
