//! The set of node pod CIDRs carved out of the cluster CIDR, as
//! kube-controller-manager's `cidrset`: the cluster CIDR is cut into
//! subnets of the node mask size, each either used or free. Allocation
//! goes round from the subnet after the last one handed out, so a subnet
//! that was just freed is the last to be handed out again.

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// An IPv4 CIDR (`10.244.0.0/16`), with its address masked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    pub base: u32,
    pub prefix: u8,
}

impl Cidr {
    fn mask(prefix: u8) -> u32 {
        if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - prefix)
        }
    }

    /// Whether `other` lies wholly inside this CIDR.
    pub fn contains(&self, other: &Cidr) -> bool {
        other.prefix >= self.prefix && other.base & Cidr::mask(self.prefix) == self.base
    }
}

impl FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not an IPv4 CIDR like 10.244.0.0/16");
        let (addr, prefix) = s.split_once('/').ok_or_else(bad)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        if prefix > 32 {
            return Err(bad());
        }
        let base = u32::from(addr);
        if base & Cidr::mask(prefix) != base {
            return Err(format!(
                "{s:?} has host bits set (did you mean {}/{prefix}?)",
                Ipv4Addr::from(base & Cidr::mask(prefix))
            ));
        }
        Ok(Cidr { base, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.base), self.prefix)
    }
}

/// Which node subnets of the cluster CIDR are taken.
#[derive(Debug, Clone)]
pub struct CidrSet {
    cluster: Cidr,
    node_prefix: u8,
    used: BTreeSet<u32>,
    /// Where the next search starts.
    next: u32,
}

impl CidrSet {
    /// `cluster` cut into subnets of `/node_prefix`; the node mask must be
    /// at least the cluster's and leave a host part.
    pub fn new(cluster: Cidr, node_prefix: u8) -> Result<CidrSet, String> {
        if node_prefix < cluster.prefix || node_prefix > 30 {
            return Err(format!(
                "--node-cidr-mask-size {node_prefix} must be between the cluster CIDR's \
                 prefix ({}) and 30",
                cluster.prefix
            ));
        }
        if node_prefix - cluster.prefix > 16 {
            return Err(format!(
                "--node-cidr-mask-size {node_prefix}: {cluster} would be cut into more \
                 than 65536 node subnets"
            ));
        }
        Ok(CidrSet {
            cluster,
            node_prefix,
            used: BTreeSet::new(),
            next: 0,
        })
    }

    /// How many node subnets there are.
    pub fn size(&self) -> u32 {
        1 << (self.node_prefix - self.cluster.prefix)
    }

    fn subnet(&self, index: u32) -> Cidr {
        Cidr {
            base: self.cluster.base + (index << (32 - self.node_prefix)),
            prefix: self.node_prefix,
        }
    }

    /// The index of `cidr` if it is one of this set's node subnets.
    fn index_of(&self, cidr: &Cidr) -> Option<u32> {
        (cidr.prefix == self.node_prefix && self.cluster.contains(cidr))
            .then(|| (cidr.base - self.cluster.base) >> (32 - self.node_prefix))
    }

    /// Where the next search starts, to carry the round robin from one
    /// set to the next.
    pub fn cursor(&self) -> u32 {
        self.next
    }

    pub fn start_at(&mut self, cursor: u32) {
        self.next = cursor % self.size();
    }

    /// Takes the next free subnet, or None when all are used.
    pub fn allocate(&mut self) -> Option<Cidr> {
        let size = self.size();
        (0..size)
            .map(|i| (self.next + i) % size)
            .find(|i| !self.used.contains(i))
            .map(|i| {
                self.used.insert(i);
                self.next = (i + 1) % size;
                self.subnet(i)
            })
    }

    /// Marks `cidr` used; false if it is not one of this set's subnets
    /// (outside the cluster CIDR or another size), which the caller
    /// leaves alone.
    pub fn occupy(&mut self, cidr: &Cidr) -> bool {
        match self.index_of(cidr) {
            Some(i) => {
                self.used.insert(i);
                true
            }
            None => false,
        }
    }

    /// Frees `cidr` for later nodes.
    pub fn release(&mut self, cidr: &Cidr) {
        if let Some(i) = self.index_of(cidr) {
            self.used.remove(&i);
        }
    }

    pub fn is_used(&self, cidr: &Cidr) -> bool {
        self.index_of(cidr).is_some_and(|i| self.used.contains(&i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn cidrs_parse_and_print() {
        assert_eq!(cidr("10.244.0.0/16").to_string(), "10.244.0.0/16");
        let err = "10.244.1.0/16".parse::<Cidr>().unwrap_err();
        assert!(err.contains("10.244.0.0/16"), "{err}");
        assert!("10.244.0.0".parse::<Cidr>().is_err());
        assert!("10.244.0.0/33".parse::<Cidr>().is_err());
        assert!("fd00::/64".parse::<Cidr>().is_err());
    }

    #[test]
    fn hands_out_every_subnet_once_then_none() {
        let mut set = CidrSet::new(cidr("10.244.0.0/16"), 24).unwrap();
        assert_eq!(set.size(), 256);
        let mut seen = BTreeSet::new();
        for _ in 0..256 {
            let c = set.allocate().expect("a free subnet");
            assert!(cidr("10.244.0.0/16").contains(&c));
            assert!(seen.insert(c), "{c} handed out twice");
        }
        assert_eq!(set.allocate(), None);
        set.release(&cidr("10.244.7.0/24"));
        assert_eq!(set.allocate(), Some(cidr("10.244.7.0/24")));
    }

    #[test]
    fn occupied_subnets_are_skipped_and_freed_ones_come_back_last() {
        let mut set = CidrSet::new(cidr("10.0.0.0/22"), 24).unwrap();
        assert!(set.occupy(&cidr("10.0.0.0/24")));
        assert!(
            !set.occupy(&cidr("10.9.0.0/24")),
            "outside the cluster CIDR"
        );
        assert!(!set.occupy(&cidr("10.0.0.0/25")), "not a node-sized subnet");
        assert_eq!(set.allocate(), Some(cidr("10.0.1.0/24")));
        set.release(&cidr("10.0.1.0/24"));
        assert_eq!(set.allocate(), Some(cidr("10.0.2.0/24")));
        assert_eq!(set.allocate(), Some(cidr("10.0.3.0/24")));
        assert_eq!(set.allocate(), Some(cidr("10.0.1.0/24")));
        assert_eq!(set.allocate(), None);
    }

    #[test]
    fn bad_mask_sizes_are_refused() {
        assert!(CidrSet::new(cidr("10.244.0.0/16"), 8).is_err());
        assert!(CidrSet::new(cidr("10.244.0.0/16"), 31).is_err());
        assert!(CidrSet::new(cidr("10.0.0.0/8"), 28).is_err());
    }
}
