//! The nftables ruleset of the proxy, rendered from the desired service
//! ports: one table of the agent's own (`ip bosun-<node>`), redeclared in
//! one `nft -f` transaction per sync ([`transaction`]: its rules and maps
//! anew, the affinity sets of staying endpoints kept). Its shape follows kube-proxy's
//! nftables mode:
//!
//! - `nat-prerouting` / `nat-output` (priority dstnat, -100) jump to
//!   `services`, which dispatches `VIP . proto . port` through the
//!   `service-ips` verdict map, and `proto . port` addressed to a local
//!   address (not loopback) through `service-nodeports`.
//! - `svc-…` chains pick one ready endpoint (`numgen random mod N`), after
//!   the `aff-…` sets of `sessionAffinity: ClientIP`; `ep-…` chains DNAT.
//! - What must be masqueraded is marked (`mark-for-masquerade`) and
//!   masqueraded in `nat-postrouting`: traffic to a cluster IP from outside
//!   the node (neither its pods nor the host), NodePort traffic of the `Cluster`
//!   policy, and a pod's traffic to itself (hairpin). Pod traffic to
//!   another endpoint on the node's own bridge is masqueraded too unless
//!   br_netfilter passes bridged packets through the host's conntrack
//!   ([`Settings::bridge_netfilter`]): the reply would bypass the un-DNAT.
//! - Filter chains after the DNAT (`filter-forward`,
//!   `filter-output-post-dnat`) reject whatever is still addressed to the
//!   service range: an unallocated cluster IP, a service without ready
//!   endpoints. `filter-input` rejects node ports without endpoints.

use std::fmt::Write;

use ipnet::Ipv4Net;

use super::model::{Backend, ServicePort};

/// The packet mark of connections to masquerade (kube-proxy's).
const MASQ_MARK: &str = "0x4000";

/// What the ruleset depends on besides the service ports.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The table's name (in family `ip`).
    pub table: String,
    /// The cluster's service range (`--service-cluster-ip-range`).
    pub service_cidr: Ipv4Net,
    /// This node's pod subnet.
    pub pod_cidr: Ipv4Net,
    /// Bridged IPv4 packets go through the host's netfilter hooks
    /// (`net.bridge.bridge-nf-call-iptables = 1`), so replies between pods
    /// of one bridge are un-DNATed without masquerading.
    pub bridge_netfilter: bool,
}

/// Whether this host passes bridged IPv4 packets through netfilter.
pub fn host_bridge_netfilter() -> bool {
    std::fs::read_to_string("/proc/sys/net/bridge/bridge-nf-call-iptables")
        .is_ok_and(|v| v.trim() == "1")
}

/// The table name of the agent of `node`: several agents on one host each
/// have their own.
pub fn table_name(node: &str) -> String {
    format!("bosun-{node}")
}

/// The `nft -f` script that makes the table `table` (a [`render`]ed one)
/// in one transaction. With no `previous` table: create it (so the delete
/// cannot fail), delete it, declare it anew. After `previous`: flush its
/// rules and dispatch maps, declare the new one over it, and delete the
/// chains and sets `previous` had and it has not; the affinity sets of
/// endpoints that stay keep their clients, as kube-proxy's do.
pub fn transaction(settings: &Settings, table: &str, previous: Option<&str>) -> String {
    let t = &settings.table;
    let Some(previous) = previous else {
        return format!("add table ip {t}\ndelete table ip {t}\n{table}");
    };
    let mut out = format!(
        "add table ip {t}\nflush table ip {t}\nflush map ip {t} service-ips\n\
         flush map ip {t} service-nodeports\nflush set ip {t} no-endpoint-nodeports\n{table}"
    );
    let now = declared(table);
    for (kind, name) in declared(previous).difference(&now) {
        let _ = writeln!(out, "delete {kind} ip {t} {name}");
    }
    out
}

/// The (kind, name) of the chains, sets and maps `table` declares.
fn declared(table: &str) -> std::collections::BTreeSet<(&str, &str)> {
    table
        .lines()
        .filter_map(|l| {
            let l = l.strip_prefix('\t')?;
            let (kind, rest) = l.split_once(' ')?;
            let name = rest.strip_suffix(" {")?;
            matches!(kind, "chain" | "set" | "map").then_some((kind, name))
        })
        .collect()
}

/// The chain-name part naming a service port: `ns/name/port/proto`.
fn port_id(p: &ServicePort) -> String {
    let port = if p.port_name.is_empty() {
        p.port.to_string()
    } else {
        p.port_name.clone()
    };
    format!("{}/{}/{}/{}", p.namespace, p.service, port, p.proto.name())
}

fn ep_id(p: &ServicePort, b: &Backend) -> String {
    format!("{}/{}/{}", port_id(p), b.ip, b.port)
}

/// The table's declaration.
pub fn render(settings: &Settings, ports: &[ServicePort]) -> String {
    let mut out = String::new();
    let s = &mut out;
    let svc_cidr = settings.service_cidr;
    let pod_cidr = settings.pod_cidr;
    let _ = writeln!(s, "table ip {} {{", settings.table);

    // Dispatch maps.
    let ips: Vec<String> = ports
        .iter()
        .filter(|p| !p.backends.is_empty())
        .map(|p| {
            format!(
                "{} . {} . {} : goto svc-{}",
                p.cluster_ip,
                p.proto.name(),
                p.port,
                port_id(p)
            )
        })
        .collect();
    map(
        s,
        "service-ips",
        "ipv4_addr . inet_proto . inet_service",
        &ips,
    );
    let node_ports: Vec<String> = ports
        .iter()
        .filter_map(|p| {
            let np = p.node_port?;
            // Without ready endpoints, filter-input rejects it.
            (!p.backends.is_empty())
                .then(|| format!("{} . {np} : goto ext-{}", p.proto.name(), port_id(p)))
        })
        .collect();
    map(
        s,
        "service-nodeports",
        "inet_proto . inet_service",
        &node_ports,
    );
    let no_endpoint_ports: Vec<String> = ports
        .iter()
        .filter(|p| p.backends.is_empty())
        .filter_map(|p| Some(format!("{} . {}", p.proto.name(), p.node_port?)))
        .collect();
    let _ = writeln!(
        s,
        "\tset no-endpoint-nodeports {{\n\t\ttype inet_proto . inet_service"
    );
    if !no_endpoint_ports.is_empty() {
        let _ = writeln!(s, "\t\telements = {{ {} }}", no_endpoint_ports.join(", "));
    }
    let _ = writeln!(s, "\t}}");

    // Hooks.
    chain(
        s,
        "nat-prerouting",
        Some("type nat hook prerouting priority -100; policy accept;"),
        &["jump services".into()],
    );
    chain(
        s,
        "nat-output",
        Some("type nat hook output priority -100; policy accept;"),
        &["jump services".into()],
    );
    chain(
        s,
        "nat-postrouting",
        Some("type nat hook postrouting priority 100; policy accept;"),
        &[
            format!("mark and {MASQ_MARK} == 0 return"),
            format!("mark set mark xor {MASQ_MARK}"),
            "masquerade fully-random".into(),
        ],
    );
    let reject = vec![format!("ip daddr {svc_cidr} reject")];
    chain(
        s,
        "filter-forward",
        Some("type filter hook forward priority -10; policy accept;"),
        &reject,
    );
    chain(
        s,
        "filter-output-post-dnat",
        Some("type filter hook output priority -90; policy accept;"),
        &reject,
    );
    chain(
        s,
        "filter-input",
        Some("type filter hook input priority -10; policy accept;"),
        &["fib daddr type local meta l4proto . th dport @no-endpoint-nodeports reject".into()],
    );

    // Dispatch. Cluster IPs only for this node's pods and the host itself:
    // another cluster on this host (with the same service range, say)
    // keeps its own traffic.
    chain(
        s,
        "services",
        None,
        &[
            "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports"
                .into(),
            format!("ip saddr != {pod_cidr} fib saddr type != local return"),
            "ip daddr . meta l4proto . th dport vmap @service-ips".into(),
        ],
    );
    chain(
        s,
        "mark-for-masquerade",
        None,
        &[format!("mark set mark or {MASQ_MARK}")],
    );

    for p in ports.iter().filter(|p| !p.backends.is_empty()) {
        let id = port_id(p);
        // The cluster chain: from outside the node, masquerade (the reply
        // must come back this way). The host's own connections are not:
        // their replies come back to it anyway, and one masquerade
        // address runs out of ports under many short connections.
        let mut rules = vec![format!(
            "ip saddr != {pod_cidr} fib saddr type != local jump mark-for-masquerade"
        )];
        rules.extend(pick(p, &p.backends));
        chain(s, &format!("svc-{id}"), None, &rules);

        if p.node_port.is_some() {
            let rules = if p.external_local {
                let local: Vec<Backend> = p.backends.iter().filter(|b| b.local).cloned().collect();
                let mut rules = vec![
                    // Pods and the host itself use every endpoint.
                    format!("ip saddr {pod_cidr} goto svc-{id}"),
                    "fib saddr type local jump mark-for-masquerade".into(),
                    format!("fib saddr type local goto svc-{id}"),
                ];
                if local.is_empty() {
                    rules.push("drop".into());
                } else {
                    // No masquerade: the endpoint sees the client's address.
                    rules.extend(pick(p, &local));
                }
                rules
            } else {
                vec!["jump mark-for-masquerade".into(), format!("goto svc-{id}")]
            };
            chain(s, &format!("ext-{id}"), None, &rules);
        }

        for b in &p.backends {
            let eid = ep_id(p, b);
            if let Some(timeout) = p.affinity {
                let _ = writeln!(
                    s,
                    "\tset aff-{eid} {{\n\t\ttype ipv4_addr\n\t\tflags dynamic,timeout\n\t\ttimeout {timeout}s\n\t}}"
                );
            }
            let mut rules = Vec::new();
            if pod_cidr.contains(&b.ip) {
                // Same bridge as the node's pods: the pod itself always
                // (its reply would not leave it), its neighbours unless
                // the bridge passes the reply through conntrack.
                let from = if settings.bridge_netfilter {
                    b.ip.to_string()
                } else {
                    pod_cidr.to_string()
                };
                rules.push(format!("ip saddr {from} jump mark-for-masquerade"));
            }
            if p.affinity.is_some() {
                rules.push(format!("update @aff-{eid} {{ ip saddr }}"));
            }
            rules.push(format!(
                "meta l4proto {} dnat to {}:{}",
                p.proto.name(),
                b.ip,
                b.port
            ));
            chain(s, &format!("ep-{eid}"), None, &rules);
        }
    }
    let _ = writeln!(s, "}}");
    out
}

/// The rules that send a connection to one of `backends` (not empty):
/// the client's affinity first, then a random pick.
fn pick(p: &ServicePort, backends: &[Backend]) -> Vec<String> {
    let mut rules = Vec::new();
    if p.affinity.is_some() {
        for b in backends {
            let eid = ep_id(p, b);
            rules.push(format!("ip saddr @aff-{eid} goto ep-{eid}"));
        }
    }
    let arms: Vec<String> = backends
        .iter()
        .enumerate()
        .map(|(i, b)| format!("{i} : goto ep-{}", ep_id(p, b)))
        .collect();
    rules.push(format!(
        "numgen random mod {} vmap {{ {} }}",
        backends.len(),
        arms.join(", ")
    ));
    rules
}

fn map(s: &mut String, name: &str, key: &str, elements: &[String]) {
    let _ = writeln!(s, "\tmap {name} {{\n\t\ttype {key} : verdict");
    if !elements.is_empty() {
        let _ = writeln!(s, "\t\telements = {{ {} }}", elements.join(", "));
    }
    let _ = writeln!(s, "\t}}");
}

fn chain(s: &mut String, name: &str, hook: Option<&str>, rules: &[String]) {
    let _ = writeln!(s, "\tchain {name} {{");
    if let Some(h) = hook {
        let _ = writeln!(s, "\t\t{h}");
    }
    for r in rules {
        let _ = writeln!(s, "\t\t{r}");
    }
    let _ = writeln!(s, "\t}}");
}
