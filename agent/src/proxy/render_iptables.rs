//! The iptables rules of the proxy (`--proxy-mode iptables`, where
//! nftables is unavailable), rendered from the same desired service ports
//! as [`super::render`]'s table. Their shape follows kube-proxy's iptables
//! mode, in chains of the agent's own, named `BOSUN-<TAG>-…` where TAG is
//! a hash of the node's name (several agents share one host's tables in
//! tests; iptables names are at most 28 characters):
//!
//! - nat: `PREROUTING` and `OUTPUT` jump first to `…-SERVICES`, which
//!   matches `VIP:port/proto` to a `…-SVC-` chain and, last, addresses of
//!   the host (not loopback) to `…-NODEPORTS` (`…-EXT-` chains). `SVC`
//!   chains pick an endpoint: the client's `-m recent` list first
//!   (`sessionAffinity: ClientIP`), then `-m statistic --mode random`
//!   with probabilities 1/n, 1/(n-1), … 1; `…-SEP-` chains DNAT. What must
//!   be masqueraded is marked (`…-MARK-MASQ`) and masqueraded in
//!   `…-POSTROUTING`, jumped to first from `POSTROUTING`, on the same
//!   cases as the nftables table.
//! - filter: `…-FORWARD` and `…-OUTPUT` reject what is still addressed to
//!   the service range after the DNAT; `…-INPUT` rejects node ports
//!   without endpoints and drops `Local` node ports without local ones.
//!   `…-FORWARD` also accepts service traffic DNATed to this node's pods
//!   (from other hosts, to a node port), which Docker's FORWARD policy
//!   (DROP) would drop; the nftables mode installs that chain alone
//!   ([`forward_accept`]).
//!
//! Every jump from a built-in chain carries the comment `bosun-<node>`
//! (the nftables mode's table name), which is how `scripts/test.sh` finds
//! the chains of a killed test agent.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use super::model::{Backend, ServicePort};
use super::render::Settings;

/// The packet mark of connections to masquerade (kube-proxy's).
const MASQ_MARK: &str = "0x4000";

/// One table's chains of the agent: name → rules (what follows
/// `-A <chain> `), in order.
pub type Chains = BTreeMap<String, Vec<String>>;

/// The agent's chains in the two tables it uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ruleset {
    pub filter: Chains,
    pub nat: Chains,
}

impl Ruleset {
    fn tables(&self) -> [(&'static str, &Chains); 2] {
        [("filter", &self.filter), ("nat", &self.nat)]
    }
}

/// 64-bit FNV-1a: stable across builds and releases (chain names must be
/// the same after an agent restart).
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `n` base32 characters (RFC 4648's alphabet) of the hash of `s`.
fn hash32(s: &str, n: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let h = fnv1a(s);
    (0..n)
        .map(|i| ALPHABET[((h >> (5 * i)) & 31) as usize] as char)
        .collect()
}

/// The prefix of every chain of the agent with table (node) name `table`:
/// `BOSUN-<6 characters>-`.
pub fn chain_prefix(table: &str) -> String {
    format!("BOSUN-{}-", hash32(table, 6))
}

/// The built-in chains the agent jumps from: (table, built-in chain, the
/// agent's chain's suffix).
const HOOKS: [(&str, &str, &str); 6] = [
    ("nat", "PREROUTING", "SERVICES"),
    ("nat", "OUTPUT", "SERVICES"),
    ("nat", "POSTROUTING", "POSTROUTING"),
    ("filter", "FORWARD", "FORWARD"),
    ("filter", "OUTPUT", "OUTPUT"),
    ("filter", "INPUT", "INPUT"),
];

/// The chain-name part naming a service port: `ns/name/port/proto` (also
/// the comment of its rules).
fn port_id(p: &ServicePort) -> String {
    let port = if p.port_name.is_empty() {
        p.port.to_string()
    } else {
        p.port_name.clone()
    };
    format!("{}/{}/{}/{}", p.namespace, p.service, port, p.proto.name())
}

struct Names {
    prefix: String,
}

impl Names {
    fn top(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.prefix)
    }
    fn svc(&self, p: &ServicePort) -> String {
        format!("{}SVC-{}", self.prefix, hash32(&port_id(p), 10))
    }
    fn ext(&self, p: &ServicePort) -> String {
        format!("{}EXT-{}", self.prefix, hash32(&port_id(p), 10))
    }
    fn sep(&self, p: &ServicePort, b: &Backend) -> String {
        let id = format!("{}/{}/{}", port_id(p), b.ip, b.port);
        format!("{}SEP-{}", self.prefix, hash32(&id, 10))
    }
}

/// The agent's chains for `ports`.
pub fn render(settings: &Settings, ports: &[ServicePort]) -> Ruleset {
    let n = Names {
        prefix: chain_prefix(&settings.table),
    };
    let svc_cidr = settings.service_cidr;
    let pod_cidr = settings.pod_cidr;
    let mark_masq = n.top("MARK-MASQ");
    let mut nat = Chains::new();
    let mut filter = Chains::new();

    // Dispatch.
    let mut services = Vec::new();
    let mut node_ports = Vec::new();
    let mut input = Vec::new();
    for p in ports {
        let id = port_id(p);
        let proto = p.proto.name();
        if p.backends.is_empty() {
            // Left to the reject of the range; a node port is rejected.
            if let Some(np) = p.node_port {
                input.push(format!(
                    "-m addrtype --dst-type LOCAL -p {proto} -m {proto} --dport {np} -m comment --comment {id} -j REJECT"
                ));
            }
            continue;
        }
        services.push(format!(
            "-d {}/32 -p {proto} -m {proto} --dport {} -m comment --comment {id} -j {}",
            p.cluster_ip,
            p.port,
            n.svc(p)
        ));
        if let Some(np) = p.node_port {
            node_ports.push(format!(
                "-p {proto} -m {proto} --dport {np} -m comment --comment {id} -j {}",
                n.ext(p)
            ));
            if p.external_local && !p.backends.iter().any(|b| b.local) {
                // Not DNATed (see the ext chain): dropped on arrival.
                input.push(format!(
                    "-m addrtype --dst-type LOCAL -p {proto} -m {proto} --dport {np} -m comment --comment {id} -j DROP"
                ));
            }
        }
    }
    // Node ports first; cluster IPs only for this node's pods and the host
    // itself (another cluster on this host keeps its own traffic).
    let mut dispatch = vec![
        format!(
            "! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j {}",
            n.top("NODEPORTS")
        ),
        format!("! -s {pod_cidr} -m addrtype ! --src-type LOCAL -j RETURN"),
    ];
    dispatch.extend(services);
    nat.insert(n.top("SERVICES"), dispatch);
    nat.insert(n.top("NODEPORTS"), node_ports);
    nat.insert(
        mark_masq.clone(),
        vec![format!("-j MARK --or-mark {MASQ_MARK}")],
    );
    nat.insert(
        n.top("POSTROUTING"),
        vec![
            format!("-m mark ! --mark {MASQ_MARK}/{MASQ_MARK} -j RETURN"),
            format!("-j MARK --xor-mark {MASQ_MARK}"),
            "-j MASQUERADE --random-fully".into(),
        ],
    );

    // The reject of the range after the DNAT; node ports on arrival.
    let reject = format!("-d {svc_cidr} -j REJECT");
    filter.insert(
        n.top("FORWARD"),
        vec![reject.clone(), accept_dnat_to_pods(settings)],
    );
    filter.insert(n.top("OUTPUT"), vec![reject]);
    filter.insert(n.top("INPUT"), input);

    for p in ports.iter().filter(|p| !p.backends.is_empty()) {
        let svc = n.svc(p);
        // From outside the node (neither its pods nor the host):
        // masquerade, the reply must come back this way.
        let mut rules = vec![format!(
            "! -s {pod_cidr} -m addrtype ! --src-type LOCAL -j {mark_masq}"
        )];
        rules.extend(pick(&n, p, &p.backends));
        nat.insert(svc.clone(), rules);

        if p.node_port.is_some() {
            let rules = if p.external_local {
                let local: Vec<Backend> = p.backends.iter().filter(|b| b.local).cloned().collect();
                // Pods and the host itself use every endpoint.
                let mut rules = vec![
                    format!("-s {pod_cidr} -j {svc}"),
                    format!("-m addrtype --src-type LOCAL -j {mark_masq}"),
                    format!("-m addrtype --src-type LOCAL -j {svc}"),
                ];
                // No masquerade: the endpoint sees the client's address.
                // Without a local endpoint nothing is DNATed and the
                // filter input chain drops it.
                if !local.is_empty() {
                    rules.extend(pick(&n, p, &local));
                }
                rules
            } else {
                vec![format!("-j {mark_masq}"), format!("-j {svc}")]
            };
            nat.insert(n.ext(p), rules);
        }

        let id = port_id(p);
        let proto = p.proto.name();
        for b in &p.backends {
            let sep = n.sep(p, b);
            let mut rules = Vec::new();
            if pod_cidr.contains(&b.ip) {
                // Same bridge as the node's pods: the pod itself always,
                // its neighbours unless the bridge passes the reply
                // through conntrack.
                let from = if settings.bridge_netfilter {
                    format!("{}/32", b.ip)
                } else {
                    pod_cidr.to_string()
                };
                rules.push(format!("-s {from} -j {mark_masq}"));
            }
            if p.affinity.is_some() {
                rules.push(format!("-m recent --name {sep} --set --rsource"));
            }
            rules.push(format!(
                "-p {proto} -m comment --comment {id} -j DNAT --to-destination {}:{}",
                b.ip, b.port
            ));
            nat.insert(sep, rules);
        }
    }
    Ruleset { filter, nat }
}

/// Accepts forwarded service traffic DNATed to this node's pods (from
/// other hosts, to a node port), which Docker's FORWARD policy (DROP)
/// drops.
fn accept_dnat_to_pods(settings: &Settings) -> String {
    format!(
        "-d {} -m conntrack --ctstate DNAT -m comment --comment service-traffic-to-local-pods -j ACCEPT",
        settings.pod_cidr
    )
}

/// What the nftables mode needs of iptables: only the accept of forwarded
/// service traffic to this node's pods. A verdict of the nftables table
/// cannot override Docker's iptables FORWARD policy (DROP), so node-port
/// connections from other hosts need an iptables accept.
pub fn forward_accept(settings: &Settings) -> Ruleset {
    let mut filter = Chains::new();
    filter.insert(
        format!("{}FORWARD", chain_prefix(&settings.table)),
        vec![accept_dnat_to_pods(settings)],
    );
    Ruleset {
        filter,
        nat: Chains::new(),
    }
}

/// The rules that send a connection to one of `backends` (not empty):
/// the client's affinity first, then a random pick.
fn pick(n: &Names, p: &ServicePort, backends: &[Backend]) -> Vec<String> {
    let mut rules = Vec::new();
    if let Some(timeout) = p.affinity {
        for b in backends {
            let sep = n.sep(p, b);
            rules.push(format!(
                "-m recent --name {sep} --rcheck --seconds {timeout} --reap --rsource -j {sep}"
            ));
        }
    }
    let count = backends.len();
    for (i, b) in backends.iter().enumerate() {
        let sep = n.sep(p, b);
        if i + 1 < count {
            let probability = 1.0 / (count - i) as f64;
            rules.push(format!(
                "-m statistic --mode random --probability {probability:.10} -j {sep}"
            ));
        } else {
            rules.push(format!("-j {sep}"));
        }
    }
    rules
}

/// The jump to each of the agent's chains of `rules` that a built-in
/// chain jumps to (inserted first), with the comment naming the agent.
fn jumps(settings: &Settings, rules: &Ruleset, forward_from: &str) -> Vec<(&'static str, String)> {
    let prefix = chain_prefix(&settings.table);
    HOOKS
        .iter()
        .filter(|(table, _, suffix)| {
            let chains = if *table == "nat" {
                &rules.nat
            } else {
                &rules.filter
            };
            chains.contains_key(&format!("{prefix}{suffix}"))
        })
        .map(|(table, builtin, suffix)| {
            let from = if *builtin == "FORWARD" {
                forward_from
            } else {
                builtin
            };
            (
                *table,
                format!(
                    "-I {from} 1 -m comment --comment {} -j {prefix}{suffix}",
                    settings.table
                ),
            )
        })
        .collect()
}

fn declare(out: &mut String, chains: &Chains) {
    for name in chains.keys() {
        let _ = writeln!(out, ":{name} - [0:0]");
    }
    for (name, rules) in chains {
        for r in rules {
            let _ = writeln!(out, "-A {name} {r}");
        }
    }
}

/// The `iptables-restore --noflush` input that makes the agent's chains
/// `rules` where it has none (see [`removal`] for leftovers) and jumps to
/// them from the built-in chains; the forward chain's from `forward_from`:
/// Docker's `DOCKER-USER` where there is one, because Docker inserts each
/// new network's accept rules at the top of `FORWARD` (ahead of a jump
/// put first there, so a pod's packet to an unallocated cluster IP would
/// be accepted and routed off the host) but keeps `DOCKER-USER` first and
/// never touches what is in it.
pub fn install(settings: &Settings, rules: &Ruleset, forward_from: &str) -> String {
    let jumps = jumps(settings, rules, forward_from);
    let mut out = String::new();
    for (table, chains) in rules.tables() {
        if chains.is_empty() {
            continue;
        }
        let _ = writeln!(out, "*{table}");
        declare(&mut out, chains);
        for (_, jump) in jumps.iter().filter(|(t, _)| *t == table) {
            let _ = writeln!(out, "{jump}");
        }
        let _ = writeln!(out, "COMMIT");
    }
    out
}

/// What makes the installed `previous` into `next`: the
/// `iptables-restore --noflush` input of one transaction (the chains that
/// changed redeclared, so flushed, with their new rules; the chains that
/// went flushed) and, when chains went, the input that deletes them
/// after it (iptables-nft cannot delete a chain in the transaction that
/// drops the last jump to it). Chains that did not change are not
/// touched: their `-m recent` lists keep their clients. None when nothing
/// changed.
pub fn sync(previous: &Ruleset, next: &Ruleset) -> Option<(String, Option<String>)> {
    let mut out = String::new();
    let mut delete = String::new();
    for ((table, before), (_, after)) in previous.tables().into_iter().zip(next.tables()) {
        let changed: Chains = after
            .iter()
            .filter(|(name, rules)| before.get(*name) != Some(rules))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let gone: Vec<&String> = before.keys().filter(|k| !after.contains_key(*k)).collect();
        if changed.is_empty() && gone.is_empty() {
            continue;
        }
        let _ = writeln!(out, "*{table}");
        for name in &gone {
            let _ = writeln!(out, ":{name} - [0:0]");
        }
        declare(&mut out, &changed);
        let _ = writeln!(out, "COMMIT");
        if !gone.is_empty() {
            let _ = writeln!(delete, "*{table}");
            for name in &gone {
                let _ = writeln!(delete, "-X {name}");
            }
            let _ = writeln!(delete, "COMMIT");
        }
    }
    (!out.is_empty()).then(|| (out, (!delete.is_empty()).then_some(delete)))
}

/// From `iptables-save` output, what removes every chain named with
/// `prefix` and every jump to one: the input that deletes the jumps and
/// flushes the chains, then the one that deletes them. None when there
/// is nothing of the agent.
pub fn removal(saved: &str, prefix: &str) -> Option<(String, String)> {
    let mut tables: BTreeMap<String, (Vec<String>, BTreeSet<String>)> = BTreeMap::new();
    let mut table = String::new();
    for line in saved.lines() {
        if let Some(t) = line.strip_prefix('*') {
            table = t.to_string();
        } else if let Some(decl) = line.strip_prefix(':') {
            let name = decl.split_whitespace().next().unwrap_or("");
            if name.starts_with(prefix) {
                tables
                    .entry(table.clone())
                    .or_default()
                    .1
                    .insert(name.to_string());
            }
        } else if let Some(rule) = line.strip_prefix("-A ") {
            let chain = rule.split_whitespace().next().unwrap_or("");
            let jumps_to_agent = rule
                .split_once(" -j ")
                .is_some_and(|(_, target)| target.starts_with(prefix));
            if !chain.starts_with(prefix) && jumps_to_agent {
                tables
                    .entry(table.clone())
                    .or_default()
                    .0
                    .push(format!("-D {rule}"));
            }
        }
    }
    if tables.is_empty() {
        return None;
    }
    let (mut flush, mut delete) = (String::new(), String::new());
    for (table, (jumps, chains)) in &tables {
        let _ = writeln!(flush, "*{table}");
        for j in jumps {
            let _ = writeln!(flush, "{j}");
        }
        for c in chains {
            let _ = writeln!(flush, "-F {c}");
        }
        let _ = writeln!(flush, "COMMIT");
        if !chains.is_empty() {
            let _ = writeln!(delete, "*{table}");
            for c in chains {
                let _ = writeln!(delete, "-X {c}");
            }
            let _ = writeln!(delete, "COMMIT");
        }
    }
    Some((flush, delete))
}
