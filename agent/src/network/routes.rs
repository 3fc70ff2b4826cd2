//! host-gw routes: to every other Node's pod CIDR via that Node's
//! InternalIP, as flannel's host-gw backend keeps them. Routes bosun made
//! carry their own routing protocol number ([`ROUTE_PROTO`]), so the
//! agent finds and removes exactly its own, also after a restart.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::Node;

/// The `proto` of bosun's routes (`ip route show proto 235`).
pub const ROUTE_PROTO: &str = "235";

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
) -> (BTreeMap<String, Ipv4Addr>, Vec<String>) {
    let mut routes = BTreeMap::new();
    let mut refused = Vec::new();
    for node in nodes {
        if node.metadata.name.as_deref() == Some(me) {
            continue;
        }
        let Some(cidr) = node.spec.as_ref().and_then(|s| s.pod_cidr.clone()) else {
            continue;
        };
        if cidr == own_cidr || !is_ipv4_cidr(&cidr) {
            continue;
        }
        let inside = cidr
            .parse::<Ipv4Net>()
            .is_ok_and(|net| net == net.trunc() && cluster.contains(&net));
        if !inside {
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
        routes.insert(cidr, via);
    }
    (routes, refused)
}

fn is_ipv4_cidr(s: &str) -> bool {
    s.split_once('/').is_some_and(|(ip, len)| {
        ip.parse::<Ipv4Addr>().is_ok() && len.parse::<u8>().is_ok_and(|l| l <= 32)
    })
}

/// bosun's routes in `ip -4 route show proto 235` output.
pub fn parse_routes(out: &str) -> BTreeMap<String, Ipv4Addr> {
    out.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let dest = words.next()?.to_string();
            let mut via = None;
            while let Some(w) = words.next() {
                if w == "via" {
                    via = words.next()?.parse().ok();
                }
            }
            Some((dest, via?))
        })
        .collect()
}

/// Runs `ip` with `args`; the error says what failed.
async fn ip(args: &[&str]) -> Result<String, String> {
    let out = tokio::process::Command::new("ip")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| format!("running ip {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The routes bosun has on this host now.
pub async fn current() -> Result<BTreeMap<String, Ipv4Addr>, String> {
    Ok(parse_routes(
        &ip(&["-4", "route", "show", "proto", ROUTE_PROTO]).await?,
    ))
}

/// Makes bosun's routes exactly `want`: adds and changes what differs,
/// removes the rest. Returns how many routes changed.
pub async fn apply(want: &BTreeMap<String, Ipv4Addr>) -> Result<usize, String> {
    let have = current().await?;
    let mut changed = 0;
    for dest in have.keys().filter(|d| !want.contains_key(*d)) {
        ip(&["route", "del", dest, "proto", ROUTE_PROTO]).await?;
        tracing::info!(%dest, "removed the route to a node that left");
        changed += 1;
    }
    for (dest, via) in want {
        if have.get(dest) == Some(via) {
            continue;
        }
        let via = via.to_string();
        ip(&["route", "replace", dest, "via", &via, "proto", ROUTE_PROTO]).await?;
        tracing::info!(%dest, %via, "routing another node's pods");
        changed += 1;
    }
    Ok(changed)
}

/// Removes every route bosun made; returns their destinations.
pub async fn remove_all() -> Result<Vec<String>, String> {
    let have = current().await?;
    for dest in have.keys() {
        ip(&["route", "del", dest, "proto", ROUTE_PROTO]).await?;
    }
    Ok(have.into_keys().collect())
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
        let want: BTreeMap<String, Ipv4Addr> = [
            (
                "10.244.2.0/24".to_string(),
                "172.31.250.12".parse().unwrap(),
            ),
            (
                "10.244.3.0/24".to_string(),
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
        assert_eq!(got.keys().collect::<Vec<_>>(), ["10.244.2.0/24"]);
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

    #[test]
    fn ip_route_output_is_read() {
        let out = "10.244.2.0/24 via 172.31.250.12 dev eth0 \n\
                   10.244.3.0/24 via 172.31.250.13 dev eth0 onlink\n\
                   blackhole 10.9.0.0/16\n";
        let got = parse_routes(out);
        assert_eq!(got.len(), 2);
        assert_eq!(got["10.244.3.0/24"].to_string(), "172.31.250.13");
    }
}
