//! The nftables table of the node's network policies, rendered from the
//! pods' resolved rules ([`super::model::PodRules`]); pure, so the text
//! is tested without a kernel.
//!
//! ```text
//! table ip bosun-np-<node> {
//!     map ingress-pods { type ipv4_addr : verdict; elements = { 10.244.1.5 : jump ing-default/web } }
//!     map egress-pods  { ... jump egr-default/web }
//!     chain forward {
//!         type filter hook forward priority 0; policy accept;
//!         ct state established,related accept
//!         fib saddr type local accept
//!         ip daddr vmap @ingress-pods
//!         ip saddr vmap @egress-pods
//!     }
//!     chain ing-default/web { ip saddr { 10.244.2.3 } meta l4proto tcp th dport 80 return; drop }
//! }
//! ```
//!
//! Only forwarded packets pass the `forward` hook: pod to pod on the
//! node's bridge (bridged packets reach it through br_netfilter), to and
//! from other hosts' pods over the host-gw routes. Service traffic is
//! DNAT-ed in `prerouting` before it, so the rules see the backend pod's
//! address. What the node itself sends to its pods (probes) goes through
//! `output`, never here, and so is always allowed, as Kubernetes requires;
//! replies and related packets (`ct state`) pass whatever the rules say
//! now. A pod no policy of a direction selects is in neither map, and its
//! traffic passes untouched.

use std::fmt::Write;

use super::model::{Addrs, Allow, PodRules, L4};

/// The table of the agent of `node`: several nodes on one host each have
/// their own, beside the service proxy's `bosun-<node>`.
pub fn table_name(node: &str) -> String {
    format!("bosun-np-{node}")
}

/// nft's longest chain name is 256 bytes; a pod's chain is named after
/// it when that fits, else after its address.
const MAX_CHAIN: usize = 200;

fn chain_name(prefix: &str, r: &PodRules) -> String {
    let name = format!("{prefix}-{}/{}", r.namespace, r.name);
    if name.len() <= MAX_CHAIN {
        name
    } else {
        format!("{prefix}-{}", r.ip)
    }
}

/// The `nft -f` script that makes the table exactly `table` (a
/// [`render`]ed one) in one transaction: created if missing (so the
/// delete cannot fail), deleted and declared anew. Packets see the old
/// rules or the new ones, never none.
pub fn transaction(name: &str, table: &str) -> String {
    format!("add table ip {name}\ndelete table ip {name}\n{table}")
}

/// The table's declaration.
pub fn render(name: &str, pods: &[PodRules]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "table ip {name} {{");
    let ingress: Vec<String> = pods
        .iter()
        .filter(|p| p.ingress.is_some())
        .map(|p| format!("{} : jump {}", p.ip, chain_name("ing", p)))
        .collect();
    let egress: Vec<String> = pods
        .iter()
        .filter(|p| p.egress.is_some())
        .map(|p| format!("{} : jump {}", p.ip, chain_name("egr", p)))
        .collect();
    map(&mut s, "ingress-pods", &ingress);
    map(&mut s, "egress-pods", &egress);
    chain(
        &mut s,
        "forward",
        Some("type filter hook forward priority 0; policy accept;"),
        &[
            "ct state established,related accept".into(),
            "fib saddr type local accept".into(),
            "ip daddr vmap @ingress-pods".into(),
            "ip saddr vmap @egress-pods".into(),
        ],
    );
    for p in pods {
        if let Some(allows) = &p.ingress {
            chain(&mut s, &chain_name("ing", p), None, &rules(allows, "saddr"));
        }
        if let Some(allows) = &p.egress {
            chain(&mut s, &chain_name("egr", p), None, &rules(allows, "daddr"));
        }
    }
    let _ = writeln!(s, "}}");
    s
}

/// One `return` per allow (the packet goes on to the next check), then
/// `drop`. `peer` is the field naming the other side: `saddr` for
/// ingress, `daddr` for egress.
pub fn rules(allows: &[Allow], peer: &str) -> Vec<String> {
    let mut out: Vec<String> = allows.iter().map(|a| rule(a, peer)).collect();
    out.push("drop".into());
    out
}

fn rule(a: &Allow, peer: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    match &a.addrs {
        Addrs::Any => {}
        Addrs::Pods(ips) => {
            let ips: Vec<String> = ips.iter().map(ToString::to_string).collect();
            parts.push(format!("ip {peer} {{ {} }}", ips.join(", ")));
        }
        Addrs::Block { cidr, except } => {
            parts.push(format!("ip {peer} {cidr}"));
            if !except.is_empty() {
                let ex: Vec<String> = except.iter().map(ToString::to_string).collect();
                parts.push(format!("ip {peer} != {{ {} }}", ex.join(", ")));
            }
        }
    }
    match a.l4 {
        L4::Any => {}
        L4::Proto(p) => parts.push(format!("meta l4proto {}", p.name())),
        L4::Ports(p, from, to) if from == to => {
            parts.push(format!("meta l4proto {} th dport {from}", p.name()))
        }
        L4::Ports(p, from, to) => {
            parts.push(format!("meta l4proto {} th dport {from}-{to}", p.name()))
        }
    }
    parts.push("return".into());
    parts.join(" ")
}

fn map(s: &mut String, name: &str, elements: &[String]) {
    let _ = writeln!(s, "\tmap {name} {{\n\t\ttype ipv4_addr : verdict");
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
