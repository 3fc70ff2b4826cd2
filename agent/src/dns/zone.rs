//! The cluster zone: the records the Kubernetes DNS specification asks
//! for, built from a snapshot of Services, EndpointSlices and Pods, and the
//! lookup that answers one question.
//!
//! - `<svc>.<ns>.svc.<domain>`: A/AAAA of the ClusterIP; for a headless
//!   service, of every ready endpoint; CNAME for an ExternalName service.
//! - `<host>.<svc>.<ns>.svc.<domain>` for each ready endpoint of a
//!   headless service, `<host>` being its hostname or its dashed IP.
//! - `_<port>._<proto>.<svc>.<ns>.svc.<domain>` SRV for each named port:
//!   the service name, or for a headless service every endpoint's name.
//! - `<a-b-c-d>.<ns>.pod.<domain>` A for every pod with that IP.
//! - PTR for ClusterIPs (the service name), headless endpoints (their
//!   name) and pods (their pod name).
//! - Names of the zone with no records of the asked type (AAAA of an
//!   IPv4 service, `svc.<domain>`) are NODATA; names not in it NXDOMAIN;
//!   both carry the zone's SOA for negative caching.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};

use hickory_server::proto::op::ResponseCode;
use hickory_server::proto::rr::rdata::{A, AAAA, CNAME, PTR, SOA, SRV};
use hickory_server::proto::rr::{Name, RData, Record, RecordType};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// The label that ties an EndpointSlice to its service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What DNS needs of a Service.
#[derive(Debug, Clone, PartialEq)]
pub struct SvcInfo {
    pub cluster_ips: Vec<IpAddr>,
    pub headless: bool,
    pub external_name: Option<String>,
    /// (name, protocol lowercased, port) of the named ports.
    pub ports: Vec<(String, String, u16)>,
}

impl SvcInfo {
    pub fn from_service(svc: &Service) -> SvcInfo {
        let spec = svc.spec.clone().unwrap_or_default();
        let mut ips: Vec<String> = spec.cluster_ips.clone().unwrap_or_default();
        if ips.is_empty() {
            ips.extend(spec.cluster_ip.clone());
        }
        let headless = ips.iter().any(|ip| ip == "None");
        let external_name = (spec.type_.as_deref() == Some("ExternalName"))
            .then(|| spec.external_name.clone())
            .flatten()
            .filter(|n| !n.is_empty());
        SvcInfo {
            cluster_ips: ips.iter().filter_map(|ip| ip.parse().ok()).collect(),
            headless,
            external_name,
            ports: spec
                .ports
                .unwrap_or_default()
                .into_iter()
                .filter_map(|p| {
                    let name = p.name.filter(|n| !n.is_empty())?;
                    let proto = p.protocol.unwrap_or_else(|| "TCP".into());
                    Some((name, proto.to_ascii_lowercase(), p.port as u16))
                })
                .collect(),
        }
    }
}

/// One endpoint of a slice.
#[derive(Debug, Clone, PartialEq)]
pub struct EpInfo {
    pub addresses: Vec<IpAddr>,
    pub hostname: Option<String>,
    pub ready: bool,
}

/// What DNS needs of an EndpointSlice.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceInfo {
    /// The service it belongs to (its `kubernetes.io/service-name`).
    pub service: String,
    pub endpoints: Vec<EpInfo>,
    /// (name, protocol lowercased, port) of the named ports.
    pub ports: Vec<(String, String, u16)>,
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
            endpoints: slice
                .endpoints
                .iter()
                .flatten()
                .map(|e| EpInfo {
                    addresses: e.addresses.iter().filter_map(|a| a.parse().ok()).collect(),
                    hostname: e.hostname.clone().filter(|h| !h.is_empty()),
                    // Unknown readiness counts as ready, as the API says.
                    ready: e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true),
                })
                .collect(),
            ports: slice
                .ports
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|p| {
                    let name = p.name.filter(|n| !n.is_empty())?;
                    let proto = p.protocol.unwrap_or_else(|| "TCP".into());
                    Some((name, proto.to_ascii_lowercase(), p.port? as u16))
                })
                .collect(),
        })
    }
}

/// What DNS needs of a Pod: its IPs (none for host-network pods, whose IP
/// is the node's, nor for finished ones, whose IP is free again).
#[derive(Debug, Clone, PartialEq)]
pub struct PodInfo {
    pub ips: Vec<IpAddr>,
}

impl PodInfo {
    pub fn from_pod(pod: &Pod) -> PodInfo {
        let host_network = pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false);
        let status = pod.status.clone().unwrap_or_default();
        let mut ips: Vec<IpAddr> = status
            .pod_ips
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.ip.parse().ok())
            .collect();
        if ips.is_empty() {
            ips.extend(status.pod_ip.and_then(|ip| ip.parse::<IpAddr>().ok()));
        }
        // A finished pod's IP may already be another pod's.
        let finished = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
        if host_network || finished {
            ips.clear();
        }
        PodInfo { ips }
    }
}

/// (namespace, name).
pub type Key = (String, String);

/// A snapshot of what the zone is built from.
#[derive(Debug, Default, Clone)]
pub struct ClusterState {
    pub services: BTreeMap<Key, SvcInfo>,
    pub slices: BTreeMap<Key, SliceInfo>,
    pub pods: BTreeMap<Key, PodInfo>,
}

/// The answer to one question.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Answered from the zone.
    Zone {
        rcode: ResponseCode,
        answers: Vec<Record>,
        authority: Vec<Record>,
        additionals: Vec<Record>,
    },
    /// Not ours: ask the upstream resolvers.
    Forward,
}

/// The most CNAMEs of one answer (ExternalName services naming others
/// in the zone are followed; a loop of them stops here).
pub const MAX_CHAIN: usize = 8;

/// Where a string is in the zone's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    at: u32,
    len: u32,
}

impl Span {
    fn of<'t>(text: &'t str) -> impl Fn(Span) -> &'t str + 't {
        move |s| &text[s.at as usize..(s.at + s.len) as usize]
    }
}

/// One record of the zone, as compact as it can be kept: hickory's
/// `RData` (184 bytes, and a `Name` of its own per target) is only made
/// when a question is answered. Targets are places in the zone: the index
/// of a name of the zone, or the text of an outside one.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rec {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    /// An ExternalName service's target, as the service gives it.
    Cname(Span),
    /// SRV with priority 0 to the zone's name number `target`.
    Srv {
        weight: u16,
        port: u16,
        target: u32,
    },
}

impl Rec {
    fn record_type(&self) -> RecordType {
        match self {
            Rec::A(_) => RecordType::A,
            Rec::Aaaa(_) => RecordType::AAAA,
            Rec::Cname(_) => RecordType::CNAME,
            Rec::Srv { .. } => RecordType::SRV,
        }
    }
}

/// A name of the zone: where its text is, and where its records start in
/// [`Zone::recs`] (they end where the next name's start).
#[derive(Debug, Clone, Copy)]
struct Entry {
    name: Span,
    recs: u32,
}

/// The records of the cluster zone, by lowercased name without the
/// trailing dot. A name present with no records exists (NODATA).
///
/// The whole zone is a handful of flat arrays: every name's text once,
/// one after the other (with the outside names CNAMEs point to and the
/// pods' namespaces); the names sorted by their text (found by binary
/// search); every record; and two maps from IPs. A zone is rebuilt on
/// every burst of changes: as a few large blocks it is given back to the
/// system whole when the next one replaces it, where one small allocation
/// per name and record stayed scattered over the heap among the caches'
/// long-lived entries and kept its pages in the RSS.
#[derive(Debug)]
pub struct Zone {
    domain: String,
    origin: Name,
    ttl: u32,
    text: String,
    names: Vec<Entry>,
    recs: Vec<Rec>,
    /// The name each address points back to (its index in `names`).
    ptr: HashMap<IpAddr, u32>,
    /// Which namespace each pod IP is in, for autopath.
    pod_ns: HashMap<IpAddr, Span>,
    soa: Record,
    /// Distinct for every zone built in this process: what answers
    /// encoded from this zone are filed under.
    generation: u64,
}

fn norm(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

fn fqdn(name: &str) -> Name {
    // Names here are made of Kubernetes object names, which the API
    // checked to be DNS labels.
    let mut n = Name::from_ascii(name).unwrap_or_else(|_| Name::root());
    n.set_fqdn(true);
    n
}

fn dashed(ip: &IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string().replace('.', "-"),
        IpAddr::V6(v6) => v6
            .segments()
            .iter()
            .map(|s| format!("{s:x}"))
            .collect::<Vec<_>>()
            .join("-"),
    }
}

/// The IP a reverse name (`4.3.2.1.in-addr.arpa`, or nibbles under
/// `ip6.arpa`) stands for.
pub fn parse_reverse(name: &str) -> Option<IpAddr> {
    if let Some(rest) = name.strip_suffix(".in-addr.arpa") {
        let octets: Vec<u8> = rest
            .split('.')
            .map(|o| o.parse().ok())
            .collect::<Option<_>>()?;
        if let [d, c, b, a] = octets[..] {
            return Some(IpAddr::V4(Ipv4Addr::new(a, b, c, d)));
        }
        return None;
    }
    let rest = name.strip_suffix(".ip6.arpa")?;
    let nibbles: Vec<u8> = rest
        .split('.')
        .map(|n| u8::from_str_radix(n, 16).ok().filter(|_| n.len() == 1))
        .collect::<Option<_>>()?;
    if nibbles.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, pair) in nibbles.rchunks(2).enumerate() {
        bytes[i] = (pair[1] << 4) | pair[0];
    }
    Some(IpAddr::V6(Ipv6Addr::from(bytes)))
}

/// A record as the builder gathers it: targets are still text.
#[derive(Debug, Clone, Copy)]
enum Draft {
    Ip(IpAddr),
    Cname(Span),
    Srv {
        weight: u16,
        port: u16,
        target: Span,
    },
}

/// A zone being built: every name as it is mentioned, in one text, with
/// the record it gets (or none: it only exists), in the order mentioned.
/// [`Builder::finish`] sorts them, keeps each name and each record of a
/// name once (in the order first mentioned), and adds the ancestors.
struct Builder {
    domain: String,
    text: String,
    mentions: Vec<(Span, Option<Draft>)>,
    ptr: HashMap<IpAddr, Span>,
    pod_ns: HashMap<IpAddr, Span>,
}

impl Builder {
    fn push_text(&mut self, s: &str) -> Span {
        let at = self.text.len() as u32;
        self.text.push_str(s);
        Span {
            at,
            len: s.len() as u32,
        }
    }

    fn str(&self, s: Span) -> &str {
        &self.text[s.at as usize..(s.at + s.len) as usize]
    }

    /// Marks `name` as existing (with its ancestors down to the apex, at
    /// the end); the name as the zone holds it.
    fn exists(&mut self, name: &str) -> Span {
        let span = self.push_text(&norm(name));
        self.mentions.push((span, None));
        span
    }

    /// Adds `rec` to the name `at` (once).
    fn add_at(&mut self, at: Span, rec: Draft) {
        self.mentions.push((at, Some(rec)));
    }

    /// Adds `rec` to `name` (once); the name as the zone holds it.
    fn add(&mut self, name: &str, rec: Draft) -> Span {
        let span = self.push_text(&norm(name));
        self.add_at(span, rec);
        span
    }

    /// The ancestors of `name` down to the apex, as [`Span`]s within it.
    fn ancestors(&self, name: Span, out: &mut Vec<Span>) {
        let text = self.str(name);
        let mut n = text;
        while n != self.domain {
            match n.split_once('.') {
                Some((_, parent)) if parent.len() >= self.domain.len() => n = parent,
                _ => break,
            }
            let skip = (text.len() - n.len()) as u32;
            out.push(Span {
                at: name.at + skip,
                len: name.len - skip,
            });
        }
    }

    fn finish(mut self, origin: Name, ttl: u32, soa: Record, generation: u64) -> Zone {
        let mut mentions = std::mem::take(&mut self.mentions);
        // By name; a stable sort keeps each name's records in the order
        // they were added.
        mentions.sort_by(|a, b| self.str(a.0).cmp(self.str(b.0)));
        // The ancestors of every name, those not mentioned themselves.
        let mut ancestors = Vec::new();
        let mut last: Option<&str> = None;
        for (name, _) in &mentions {
            let s = self.str(*name);
            if last != Some(s) {
                self.ancestors(*name, &mut ancestors);
                last = Some(s);
            }
        }
        ancestors.sort_by(|a, b| self.str(*a).cmp(self.str(*b)));
        ancestors.dedup_by(|a, b| self.str(*a) == self.str(*b));
        ancestors.retain(|a| {
            mentions
                .binary_search_by(|(n, _)| self.str(*n).cmp(self.str(*a)))
                .is_err()
        });
        mentions.extend(ancestors.into_iter().map(|a| (a, None)));
        mentions.sort_by(|a, b| self.str(a.0).cmp(self.str(b.0)));

        // Each name once, in order; its text once.
        let distinct = {
            let mut n = 0;
            let mut last: Option<&str> = None;
            for (name, _) in &mentions {
                let s = self.str(*name);
                if last != Some(s) {
                    n += 1;
                    last = Some(s);
                }
            }
            n
        };
        let mut text = String::with_capacity(
            mentions
                .iter()
                .map(|(n, _)| n.len as usize)
                .sum::<usize>()
                .min(self.text.len()),
        );
        let mut names: Vec<Entry> = Vec::with_capacity(distinct);
        // Where each mention's name went (its index in `names`).
        let mut index_of: Vec<u32> = Vec::with_capacity(mentions.len());
        for (name, _) in &mentions {
            let s = self.str(*name);
            let same = names.last().is_some_and(|e| Span::of(&text)(e.name) == s);
            if !same {
                let at = text.len() as u32;
                text.push_str(s);
                names.push(Entry {
                    name: Span {
                        at,
                        len: s.len() as u32,
                    },
                    recs: 0,
                });
            }
            index_of.push(names.len() as u32 - 1);
        }
        text.shrink_to_fit();
        let find = |text: &str, names: &[Entry], s: &str| -> u32 {
            names
                .binary_search_by(|e| Span::of(text)(e.name).cmp(s))
                .expect("every target was marked as existing") as u32
        };

        // Outside names (CNAME targets) and namespaces go after the names.
        let mut outside: HashMap<&str, Span> = HashMap::new();
        fn hold<'s>(outside: &mut HashMap<&'s str, Span>, text: &mut String, s: &'s str) -> Span {
            *outside.entry(s).or_insert_with(|| {
                let at = text.len() as u32;
                text.push_str(s);
                Span {
                    at,
                    len: s.len() as u32,
                }
            })
        }
        let mut recs: Vec<Rec> = Vec::new();
        let mut current = u32::MAX;
        let mut first_of_name = 0;
        for ((_, draft), &i) in mentions.iter().zip(&index_of) {
            if i != current {
                current = i;
                names[i as usize].recs = recs.len() as u32;
                first_of_name = recs.len();
            }
            let Some(draft) = draft else { continue };
            let rec = match *draft {
                Draft::Ip(IpAddr::V4(v4)) => Rec::A(v4),
                Draft::Ip(IpAddr::V6(v6)) => Rec::Aaaa(v6),
                Draft::Cname(target) => Rec::Cname(hold(&mut outside, &mut text, self.str(target))),
                Draft::Srv {
                    weight,
                    port,
                    target,
                } => Rec::Srv {
                    weight,
                    port,
                    target: find(&text, &names, self.str(target)),
                },
            };
            if !recs[first_of_name..].contains(&rec) {
                recs.push(rec);
            }
        }
        recs.shrink_to_fit();
        let ptr = self
            .ptr
            .iter()
            .map(|(ip, name)| (*ip, find(&text, &names, self.str(*name))))
            .collect();
        let pod_ns = self
            .pod_ns
            .iter()
            .map(|(ip, ns)| (*ip, hold(&mut outside, &mut text, self.str(*ns))))
            .collect();
        Zone {
            domain: self.domain,
            origin,
            ttl,
            text,
            names,
            recs,
            ptr,
            pod_ns,
            soa,
            generation,
        }
    }
}

impl Zone {
    pub fn build(state: &ClusterState, domain: &str, ttl: u32) -> Zone {
        static GENERATIONS: AtomicU64 = AtomicU64::new(0);
        let domain = norm(domain);
        let origin = fqdn(&domain);
        let soa = Record::from_rdata(
            origin.clone(),
            ttl,
            RData::SOA(SOA::new(
                fqdn(&format!("ns.dns.{domain}")),
                fqdn(&format!("hostmaster.{domain}")),
                1,
                7200,
                1800,
                86400,
                ttl,
            )),
        );
        let mut z = Builder {
            domain: domain.clone(),
            text: String::new(),
            mentions: Vec::new(),
            ptr: HashMap::new(),
            pod_ns: HashMap::new(),
        };
        z.exists(&domain);
        z.exists(&format!("svc.{domain}"));
        z.exists(&format!("pod.{domain}"));

        // Pods first: endpoint names take over their PTRs below.
        for ((ns, _), pod) in &state.pods {
            for ip in &pod.ips {
                let name = z.add(&format!("{}.{ns}.pod.{domain}", dashed(ip)), Draft::Ip(*ip));
                z.ptr.insert(*ip, name);
                let ns = z.push_text(ns);
                z.pod_ns.insert(*ip, ns);
            }
        }

        let mut slices_of: HashMap<(&str, &str), Vec<&SliceInfo>> = HashMap::new();
        for ((ns, _), slice) in &state.slices {
            slices_of
                .entry((ns.as_str(), slice.service.as_str()))
                .or_default()
                .push(slice);
        }
        for ((ns, name), svc) in &state.services {
            let base = z.exists(&format!("{name}.{ns}.svc.{domain}"));
            let base_name = z.str(base).to_string();
            if let Some(target) = &svc.external_name {
                // A name that is no DNS name has no record.
                if Name::from_ascii(target).is_ok() {
                    let target = z.push_text(target);
                    z.add_at(base, Draft::Cname(target));
                }
                continue;
            }
            if !svc.headless {
                for ip in &svc.cluster_ips {
                    z.add_at(base, Draft::Ip(*ip));
                    z.ptr.insert(*ip, base);
                }
                for (port, proto, number) in &svc.ports {
                    z.add(
                        &format!("_{port}._{proto}.{base_name}"),
                        Draft::Srv {
                            weight: 100,
                            port: *number,
                            target: base,
                        },
                    );
                }
                continue;
            }
            let slices = slices_of
                .get(&(ns.as_str(), name.as_str()))
                .cloned()
                .unwrap_or_default();
            // (endpoint name, its addresses) of the ready endpoints, once.
            let mut eps: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
            let mut srv: BTreeMap<(String, String), Vec<(u16, String)>> = BTreeMap::new();
            for slice in &slices {
                for ep in slice.endpoints.iter().filter(|e| e.ready) {
                    let Some(first) = ep.addresses.first() else {
                        continue;
                    };
                    let host = ep.hostname.clone().unwrap_or_else(|| dashed(first));
                    let host_name = format!("{host}.{base_name}");
                    for ip in &ep.addresses {
                        let list = eps.entry(host_name.clone()).or_default();
                        if !list.contains(ip) {
                            list.push(*ip);
                        }
                    }
                    for (port, proto, number) in &slice.ports {
                        srv.entry((port.clone(), proto.clone()))
                            .or_default()
                            .push((*number, host_name.clone()));
                    }
                }
            }
            let mut seen = Vec::new();
            for (host_name, ips) in &eps {
                let host = z.exists(host_name);
                for ip in ips {
                    z.add_at(host, Draft::Ip(*ip));
                    z.ptr.insert(*ip, host);
                    if !seen.contains(ip) {
                        seen.push(*ip);
                        z.add_at(base, Draft::Ip(*ip));
                    }
                }
            }
            for ((port, proto), targets) in srv {
                let weight = (100 / targets.len().max(1)).max(1) as u16;
                let srv_name = z.exists(&format!("_{port}._{proto}.{base_name}"));
                for (number, target) in targets {
                    let target = z.exists(&target);
                    z.add_at(
                        srv_name,
                        Draft::Srv {
                            weight,
                            port: number,
                            target,
                        },
                    );
                }
            }
        }
        let generation = GENERATIONS.fetch_add(1, Ordering::Relaxed);
        z.finish(origin, ttl, soa, generation)
    }

    /// The text of `span`.
    fn str(&self, span: Span) -> &str {
        Span::of(&self.text)(span)
    }

    /// The number of the name `key` (normalized), if the zone has it.
    fn find(&self, key: &str) -> Option<usize> {
        self.names
            .binary_search_by(|e| self.str(e.name).cmp(key))
            .ok()
    }

    /// The records of name number `i`.
    fn recs_of(&self, i: usize) -> &[Rec] {
        let start = self.names[i].recs as usize;
        let end = self
            .names
            .get(i + 1)
            .map_or(self.recs.len(), |e| e.recs as usize);
        &self.recs[start..end]
    }

    fn rdata(&self, rec: &Rec) -> RData {
        match *rec {
            Rec::A(v4) => RData::A(A(v4)),
            Rec::Aaaa(v6) => RData::AAAA(AAAA(v6)),
            Rec::Cname(target) => RData::CNAME(CNAME(fqdn(self.str(target)))),
            Rec::Srv {
                weight,
                port,
                target,
            } => RData::SRV(SRV::new(
                0,
                weight,
                port,
                fqdn(self.str(self.names[target as usize].name)),
            )),
        }
    }

    fn in_zone(&self, key: &str) -> bool {
        key == self.domain
            || (key.len() > self.domain.len()
                && key.ends_with(&self.domain)
                && key.as_bytes()[key.len() - self.domain.len() - 1] == b'.')
    }

    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The zone's SOA record.
    pub fn soa(&self) -> &Record {
        &self.soa
    }

    /// The namespace of the pod with this IP, if one has it.
    pub fn pod_namespace(&self, ip: &IpAddr) -> Option<&str> {
        self.pod_ns.get(ip).map(|&ns| self.str(ns))
    }

    /// Which build of the zone this is (each build has its own).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether the answer to `qname` comes from the zone alone, the same
    /// for every client: names of the zone, and reverse names of its
    /// addresses (not autopath, which depends on who asks, nor forwarding).
    pub fn answers_alone(&self, qname: &Name) -> bool {
        let key = norm(&qname.to_ascii());
        self.in_zone(&key) || self.reverse_target(&key).is_some()
    }

    /// The name a reverse name (`9.1.244.10.in-addr.arpa`) points to, if
    /// the zone has that address.
    fn reverse_target(&self, key: &str) -> Option<&str> {
        if !(key.ends_with(".in-addr.arpa") || key.ends_with(".ip6.arpa")) {
            return None;
        }
        parse_reverse(key)
            .and_then(|ip| self.ptr.get(&ip))
            .map(|&i| self.str(self.names[i as usize].name))
    }

    /// How many names the zone holds (for logs).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Answers `qname`/`qtype` asked by `src` (a pod's IP, for autopath).
    pub fn lookup(&self, qname: &Name, qtype: RecordType, src: IpAddr) -> Answer {
        let key = norm(&qname.to_ascii());
        if self.in_zone(&key) {
            return self.answer_in_zone(qname, &key, qtype);
        }
        if let Some(target) = self.reverse_target(&key) {
            let answers = if matches!(qtype, RecordType::PTR | RecordType::ANY) {
                vec![Record::from_rdata(
                    qname.clone(),
                    self.ttl,
                    RData::PTR(PTR(fqdn(target))),
                )]
            } else {
                Vec::new()
            };
            return Answer::Zone {
                rcode: ResponseCode::NoError,
                answers,
                authority: Vec::new(),
                additionals: Vec::new(),
            };
        }
        if key.ends_with(".in-addr.arpa") || key.ends_with(".ip6.arpa") {
            return Answer::Forward;
        }
        // Autopath: a relative name sent as is (busybox's `nslookup
        // web-0.nginx`) is expanded through the asking pod's search path.
        if let Some(ns) = self.pod_namespace(&src) {
            let d = &self.domain;
            for suffix in [format!("{ns}.svc.{d}"), format!("svc.{d}"), d.clone()] {
                let full = format!("{key}.{suffix}");
                if self.find(&full).is_none() {
                    continue;
                }
                let target = fqdn(&full);
                let Answer::Zone {
                    rcode,
                    answers,
                    authority,
                    additionals,
                } = self.answer_in_zone(&target, &full, qtype)
                else {
                    continue;
                };
                let mut all = vec![Record::from_rdata(
                    qname.clone(),
                    self.ttl,
                    RData::CNAME(CNAME(target)),
                )];
                all.extend(answers);
                return Answer::Zone {
                    rcode,
                    answers: all,
                    authority,
                    additionals,
                };
            }
        }
        Answer::Forward
    }

    fn answer_in_zone(&self, qname: &Name, key: &str, qtype: RecordType) -> Answer {
        self.answer_chain(qname, key, qtype, 0)
    }

    /// The answer for `key`, `depth` CNAMEs down a chain: a chain is
    /// followed within the zone for at most [`MAX_CHAIN`] links (two
    /// ExternalName services naming each other once overflowed the stack).
    fn answer_chain(&self, qname: &Name, key: &str, qtype: RecordType, depth: usize) -> Answer {
        let Some(recs) = self.find(key).map(|i| self.recs_of(i)) else {
            return self.negative(ResponseCode::NXDomain);
        };
        if key == self.domain && matches!(qtype, RecordType::SOA | RecordType::ANY) {
            return Answer::Zone {
                rcode: ResponseCode::NoError,
                answers: vec![self.soa.clone()],
                authority: Vec::new(),
                additionals: Vec::new(),
            };
        }
        let record = |r: &Rec| Record::from_rdata(qname.clone(), self.ttl, self.rdata(r));
        if qtype != RecordType::CNAME {
            if let Some(cname @ Rec::Cname(target)) =
                recs.iter().find(|r| matches!(r, Rec::Cname(_)))
            {
                let mut answers = vec![record(cname)];
                let target = self.str(*target);
                let tkey = norm(target);
                if self.in_zone(&tkey) && depth + 1 < MAX_CHAIN {
                    if let Answer::Zone { answers: more, .. } =
                        self.answer_chain(&fqdn(target), &tkey, qtype, depth + 1)
                    {
                        answers.extend(more);
                    }
                }
                return Answer::Zone {
                    rcode: ResponseCode::NoError,
                    answers,
                    authority: Vec::new(),
                    additionals: Vec::new(),
                };
            }
        }
        let matching = || {
            recs.iter()
                .filter(|r| qtype == RecordType::ANY || r.record_type() == qtype)
        };
        let answers: Vec<Record> = matching().map(record).collect();
        if answers.is_empty() {
            return self.negative(ResponseCode::NoError);
        }
        // The addresses of SRV targets, so no second query is needed.
        let mut additionals = Vec::new();
        for r in matching() {
            if let Rec::Srv { target, .. } = *r {
                let name = fqdn(self.str(self.names[target as usize].name));
                for rec in self.recs_of(target as usize) {
                    if matches!(rec, Rec::A(_) | Rec::Aaaa(_)) {
                        additionals.push(Record::from_rdata(
                            name.clone(),
                            self.ttl,
                            self.rdata(rec),
                        ));
                    }
                }
            }
        }
        Answer::Zone {
            rcode: ResponseCode::NoError,
            answers,
            authority: Vec::new(),
            additionals,
        }
    }

    /// NXDOMAIN or NODATA, with the SOA for negative caching.
    fn negative(&self, rcode: ResponseCode) -> Answer {
        Answer::Zone {
            rcode,
            answers: Vec::new(),
            authority: vec![self.soa.clone()],
            additionals: Vec::new(),
        }
    }

    /// The zone's apex.
    pub fn origin(&self) -> &Name {
        &self.origin
    }
}
