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
use std::sync::Arc;

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

/// One record of the zone, as compact as it can be kept: hickory's
/// `RData` (184 bytes, and a `Name` of its own per target) is only made
/// when a question is answered. Targets are the zone's own name strings,
/// shared with the index.
#[derive(Debug, Clone, PartialEq)]
enum Rec {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    /// An ExternalName service's target, as the service gives it.
    Cname(Arc<str>),
    /// SRV with priority 0.
    Srv {
        weight: u16,
        port: u16,
        target: Arc<str>,
    },
}

impl Rec {
    fn of_ip(ip: &IpAddr) -> Rec {
        match ip {
            IpAddr::V4(v4) => Rec::A(*v4),
            IpAddr::V6(v6) => Rec::Aaaa(*v6),
        }
    }

    fn record_type(&self) -> RecordType {
        match self {
            Rec::A(_) => RecordType::A,
            Rec::Aaaa(_) => RecordType::AAAA,
            Rec::Cname(_) => RecordType::CNAME,
            Rec::Srv { .. } => RecordType::SRV,
        }
    }

    fn rdata(&self) -> RData {
        match self {
            Rec::A(v4) => RData::A(A(*v4)),
            Rec::Aaaa(v6) => RData::AAAA(AAAA(*v6)),
            Rec::Cname(target) => RData::CNAME(CNAME(fqdn(target))),
            Rec::Srv {
                weight,
                port,
                target,
            } => RData::SRV(SRV::new(0, *weight, *port, fqdn(target))),
        }
    }
}

/// The records of the cluster zone, indexed by lowercased name without
/// the trailing dot. A name present with no records exists (NODATA).
/// Every name string is held once (`Arc<str>`): the index's key, and
/// what PTR and SRV records point to.
#[derive(Debug)]
pub struct Zone {
    domain: String,
    origin: Name,
    ttl: u32,
    names: HashMap<Arc<str>, Box<[Rec]>>,
    ptr: HashMap<IpAddr, Arc<str>>,
    /// Which namespace each pod IP is in, for autopath.
    pod_ns: HashMap<IpAddr, Arc<str>>,
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

/// A zone being built: its lists still growing.
struct Builder<'a> {
    domain: &'a str,
    names: HashMap<Arc<str>, Vec<Rec>>,
    ptr: HashMap<IpAddr, Arc<str>>,
    pod_ns: HashMap<IpAddr, Arc<str>>,
}

impl Builder<'_> {
    /// Marks `name` (normalized) and its ancestors down to the apex as
    /// existing; the name as the zone holds it.
    fn exists(&mut self, name: &str) -> Arc<str> {
        let name = norm(name);
        let held = self.hold(&name);
        let mut n = name.as_str();
        while n != self.domain {
            match n.split_once('.') {
                Some((_, parent)) if parent.len() >= self.domain.len() => n = parent,
                _ => break,
            }
            self.hold(n);
        }
        held
    }

    fn hold(&mut self, name: &str) -> Arc<str> {
        if let Some((held, _)) = self.names.get_key_value(name) {
            return held.clone();
        }
        let held: Arc<str> = Arc::from(name);
        self.names.insert(held.clone(), Vec::new());
        held
    }

    /// Adds `rec` to `name` once; the name as the zone holds it.
    fn add(&mut self, name: &str, rec: Rec) -> Arc<str> {
        let name = self.exists(name);
        let list = self.names.get_mut(&name).expect("just made");
        if !list.contains(&rec) {
            list.push(rec);
        }
        name
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
            domain: &domain,
            names: HashMap::new(),
            ptr: HashMap::new(),
            pod_ns: HashMap::new(),
        };
        z.exists(&domain);
        z.exists(&format!("svc.{domain}"));
        z.exists(&format!("pod.{domain}"));

        // Pods first: endpoint names take over their PTRs below.
        let mut namespaces: HashMap<&str, Arc<str>> = HashMap::new();
        for ((ns, _), pod) in &state.pods {
            for ip in &pod.ips {
                let name = z.add(&format!("{}.{ns}.pod.{domain}", dashed(ip)), Rec::of_ip(ip));
                z.ptr.insert(*ip, name);
                let ns = namespaces
                    .entry(ns.as_str())
                    .or_insert_with(|| Arc::from(ns.as_str()));
                z.pod_ns.insert(*ip, ns.clone());
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
            if let Some(target) = &svc.external_name {
                // A name that is no DNS name has no record.
                if Name::from_ascii(target).is_ok() {
                    z.add(&base, Rec::Cname(Arc::from(target.as_str())));
                }
                continue;
            }
            if !svc.headless {
                for ip in &svc.cluster_ips {
                    z.add(&base, Rec::of_ip(ip));
                    z.ptr.insert(*ip, base.clone());
                }
                for (port, proto, number) in &svc.ports {
                    z.add(
                        &format!("_{port}._{proto}.{base}"),
                        Rec::Srv {
                            weight: 100,
                            port: *number,
                            target: base.clone(),
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
                    let host_name = format!("{host}.{base}");
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
                for ip in ips {
                    let host_name = z.add(host_name, Rec::of_ip(ip));
                    z.ptr.insert(*ip, host_name);
                    if !seen.contains(ip) {
                        seen.push(*ip);
                        z.add(&base, Rec::of_ip(ip));
                    }
                }
            }
            for ((port, proto), targets) in srv {
                let weight = (100 / targets.len().max(1)).max(1) as u16;
                for (number, target) in targets {
                    let target = z.exists(&target);
                    z.add(
                        &format!("_{port}._{proto}.{base}"),
                        Rec::Srv {
                            weight,
                            port: number,
                            target,
                        },
                    );
                }
            }
        }
        Zone {
            domain: domain.clone(),
            origin,
            ttl,
            // Each list cut to its length, in a map sized to hold them.
            names: z
                .names
                .into_iter()
                .map(|(name, recs)| (name, recs.into_boxed_slice()))
                .collect(),
            ptr: z.ptr.into_iter().collect(),
            pod_ns: z.pod_ns.into_iter().collect(),
            soa,
            generation: GENERATIONS.fetch_add(1, Ordering::Relaxed),
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
        self.pod_ns.get(ip).map(|ns| &**ns)
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
            .map(|n| &**n)
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
        if let Some(ns) = self.pod_ns.get(&src) {
            let d = &self.domain;
            for suffix in [format!("{ns}.svc.{d}"), format!("svc.{d}"), d.clone()] {
                let full = format!("{key}.{suffix}");
                if !self.names.contains_key(full.as_str()) {
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
        let Some(recs) = self.names.get(key) else {
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
        let record = |r: &Rec| Record::from_rdata(qname.clone(), self.ttl, r.rdata());
        if qtype != RecordType::CNAME {
            if let Some(cname @ Rec::Cname(target)) =
                recs.iter().find(|r| matches!(r, Rec::Cname(_)))
            {
                let mut answers = vec![record(cname)];
                let tkey = norm(target);
                if self.in_zone(&tkey) {
                    if let Answer::Zone { answers: more, .. } =
                        self.answer_in_zone(&fqdn(target), &tkey, qtype)
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
            if let Rec::Srv { target, .. } = r {
                let name = fqdn(target);
                for rec in self.names.get(&**target).into_iter().flatten() {
                    if matches!(rec, Rec::A(_) | Rec::Aaaa(_)) {
                        additionals.push(Record::from_rdata(name.clone(), self.ttl, rec.rdata()));
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
