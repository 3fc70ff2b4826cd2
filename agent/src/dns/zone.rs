//! The cluster zone: the records the Kubernetes DNS specification asks
//! for, built from the shared Services and EndpointSlices and the Pods
//! ([`Zone::build`]); [`super::lookup`] answers from it.
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
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use hickory_server::proto::rr::rdata::SOA;
use hickory_server::proto::rr::{Name, RData, Record};

use super::arena::{norm, Builder, Draft, Table};
use super::pods::Pods;
use crate::services::{ServiceState, SliceInfo};

/// The records of the cluster zone, by lowercased name without the
/// trailing dot, packed in a [`Table`] (see [`super::arena`]).
#[derive(Debug)]
pub struct Zone {
    pub(super) domain: String,
    origin: Name,
    pub(super) ttl: u32,
    pub(super) table: Table,
    pub(super) soa: Record,
    /// Distinct for every zone built in this process: what answers
    /// encoded from this zone are filed under.
    generation: u64,
}

pub(super) fn fqdn(name: &str) -> Name {
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

impl Zone {
    pub fn build(services: &ServiceState, pods: &Pods, domain: &str, ttl: u32) -> Zone {
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
        let mut z = Builder::new(&domain);
        z.exists(&domain);
        z.exists(&format!("svc.{domain}"));
        z.exists(&format!("pod.{domain}"));

        // Pods first: endpoint names take over their PTRs below.
        for ((ns, _), pod) in pods {
            for ip in &pod.ips {
                let name = z.add(&format!("{}.{ns}.pod.{domain}", dashed(ip)), Draft::Ip(*ip));
                z.ptr.insert(*ip, name);
                let ns = z.push_text(ns);
                z.pod_ns.insert(*ip, ns);
            }
        }

        let mut slices_of: HashMap<(&str, &str), Vec<&SliceInfo>> = HashMap::new();
        for ((ns, _), slice) in &services.slices {
            slices_of
                .entry((ns.as_str(), slice.service.as_str()))
                .or_default()
                .push(slice);
        }
        for ((ns, name), svc) in &services.services {
            let base = z.exists(&format!("{name}.{ns}.svc.{domain}"));
            let base_name = z.str(base).to_string();
            if let Some(target) = svc.external_name.as_ref().filter(|n| !n.is_empty()) {
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
                for p in svc.ports.iter().filter(|p| !p.name.is_empty()) {
                    z.add(
                        &format!("_{}._{}.{base_name}", p.name, p.proto.name()),
                        Draft::Srv {
                            weight: 100,
                            port: p.port,
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
            let mut srv: BTreeMap<(String, &str), Vec<(u16, String)>> = BTreeMap::new();
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
                    for (port, proto, number) in slice.ports.iter().filter(|p| !p.0.is_empty()) {
                        srv.entry((port.clone(), proto.name()))
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
        Zone {
            domain,
            origin,
            ttl,
            table: z.finish(),
            soa,
            generation: GENERATIONS.fetch_add(1, Ordering::Relaxed),
        }
    }

    pub(super) fn in_zone(&self, key: &str) -> bool {
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
        self.table.pod_ns.get(ip).map(|&ns| self.table.str(ns))
    }

    /// Which build of the zone this is (each build has its own).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// How many names the zone holds (for logs).
    pub fn len(&self) -> usize {
        self.table.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.names.is_empty()
    }

    /// The zone's apex.
    pub fn origin(&self) -> &Name {
        &self.origin
    }
}
