//! The zone's store: every name's text in one string (a [`Span`] says
//! where), the names sorted by it, every record in one array, and two
//! maps from IPs; and the [`Builder`] that gathers the names and records
//! as they are mentioned and packs them. A zone is rebuilt on every burst
//! of changes: as a few large blocks it is given back to the system whole
//! when the next one replaces it, where one small allocation per name and
//! record stayed scattered over the heap among the caches' long-lived
//! entries and kept its pages in the RSS.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use hickory_server::proto::rr::RecordType;

/// A name as the zone holds it: lowercased, without the trailing dot.
pub(super) fn norm(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Where a string is in the zone's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    at: u32,
    len: u32,
}

impl Span {
    pub(super) fn of<'t>(text: &'t str) -> impl Fn(Span) -> &'t str + 't {
        move |s| &text[s.at as usize..(s.at + s.len) as usize]
    }
}

/// One record of the zone, as compact as it can be kept: hickory's
/// `RData` (184 bytes, and a `Name` of its own per target) is only made
/// when a question is answered. Targets are places in the zone: the index
/// of a name of the zone, or the text of an outside one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Rec {
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
    pub(super) fn record_type(&self) -> RecordType {
        match self {
            Rec::A(_) => RecordType::A,
            Rec::Aaaa(_) => RecordType::AAAA,
            Rec::Cname(_) => RecordType::CNAME,
            Rec::Srv { .. } => RecordType::SRV,
        }
    }
}

/// A name of the zone: where its text is, and where its records start in
/// [`Table::recs`] (they end where the next name's start).
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub(super) name: Span,
    pub(super) recs: u32,
}

/// A packed zone: the names sorted by their text, each with its records.
/// A name present with no records exists (NODATA).
#[derive(Debug)]
pub(super) struct Table {
    pub(super) text: String,
    pub(super) names: Vec<Entry>,
    pub(super) recs: Vec<Rec>,
    /// The name each address points back to (its index in `names`).
    pub(super) ptr: HashMap<IpAddr, u32>,
    /// Which namespace each pod IP is in, for autopath.
    pub(super) pod_ns: HashMap<IpAddr, Span>,
}

impl Table {
    pub(super) fn str(&self, s: Span) -> &str {
        &self.text[s.at as usize..(s.at + s.len) as usize]
    }

    /// The number of the name `key` (normalized), if the zone has it.
    pub(super) fn find(&self, key: &str) -> Option<usize> {
        self.names
            .binary_search_by(|e| self.str(e.name).cmp(key))
            .ok()
    }

    /// The records of name number `i`.
    pub(super) fn recs_of(&self, i: usize) -> &[Rec] {
        let start = self.names[i].recs as usize;
        let end = self
            .names
            .get(i + 1)
            .map_or(self.recs.len(), |e| e.recs as usize);
        &self.recs[start..end]
    }
}

/// A record as the builder gathers it: targets are still text.
#[derive(Debug, Clone, Copy)]
pub(super) enum Draft {
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
pub(super) struct Builder {
    domain: String,
    text: String,
    mentions: Vec<(Span, Option<Draft>)>,
    pub(super) ptr: HashMap<IpAddr, Span>,
    pub(super) pod_ns: HashMap<IpAddr, Span>,
}

impl Builder {
    /// An empty zone with apex `domain` (normalized).
    pub(super) fn new(domain: &str) -> Builder {
        Builder {
            domain: domain.to_string(),
            text: String::new(),
            mentions: Vec::new(),
            ptr: HashMap::new(),
            pod_ns: HashMap::new(),
        }
    }

    pub(super) fn push_text(&mut self, s: &str) -> Span {
        let at = self.text.len() as u32;
        self.text.push_str(s);
        Span {
            at,
            len: s.len() as u32,
        }
    }

    pub(super) fn str(&self, s: Span) -> &str {
        &self.text[s.at as usize..(s.at + s.len) as usize]
    }

    /// Marks `name` as existing (with its ancestors down to the apex, at
    /// the end); the name as the zone holds it.
    pub(super) fn exists(&mut self, name: &str) -> Span {
        let span = self.push_text(&norm(name));
        self.mentions.push((span, None));
        span
    }

    /// Adds `rec` to the name `at` (once).
    pub(super) fn add_at(&mut self, at: Span, rec: Draft) {
        self.mentions.push((at, Some(rec)));
    }

    /// Adds `rec` to `name` (once); the name as the zone holds it.
    pub(super) fn add(&mut self, name: &str, rec: Draft) -> Span {
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

    pub(super) fn finish(mut self) -> Table {
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
        Table {
            text,
            names,
            recs,
            ptr,
            pod_ns,
        }
    }
}
