//! Answering one question from the zone: A, AAAA, SRV (with the
//! targets' addresses), PTR, CNAME chains of ExternalName services,
//! NXDOMAIN/NODATA with the SOA, and autopath for relative names.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use hickory_server::proto::op::ResponseCode;
use hickory_server::proto::rr::rdata::{A, AAAA, CNAME, PTR, SRV};
use hickory_server::proto::rr::{Name, RData, Record, RecordType};

use super::arena::{norm, Rec};
use super::zone::{fqdn, Zone};

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

impl Zone {
    fn rdata(&self, rec: &Rec) -> RData {
        match *rec {
            Rec::A(v4) => RData::A(A(v4)),
            Rec::Aaaa(v6) => RData::AAAA(AAAA(v6)),
            Rec::Cname(target) => RData::CNAME(CNAME(fqdn(self.table.str(target)))),
            Rec::Srv {
                weight,
                port,
                target,
            } => RData::SRV(SRV::new(
                0,
                weight,
                port,
                fqdn(self.table.str(self.table.names[target as usize].name)),
            )),
        }
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
            .and_then(|ip| self.table.ptr.get(&ip))
            .map(|&i| self.table.str(self.table.names[i as usize].name))
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
                if self.table.find(&full).is_none() {
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
        let Some(recs) = self.table.find(key).map(|i| self.table.recs_of(i)) else {
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
                let target = self.table.str(*target);
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
                let name = fqdn(self.table.str(self.table.names[target as usize].name));
                for rec in self.table.recs_of(target as usize) {
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
}
