//! The set of node pod CIDRs carved out of the cluster CIDR, as
//! kube-controller-manager's `cidrset`: the cluster CIDR is cut into
//! subnets of the node mask size, each either used or free. Allocation
//! goes round from the subnet after the last one handed out, so a subnet
//! that was just freed is the last to be handed out again.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

/// An IPv4 CIDR (`10.244.0.0/16`) with no host bits set; the error says
/// what is wrong with `s`.
pub fn parse(s: &str) -> Result<Ipv4Net, String> {
    let net: Ipv4Net = s
        .parse()
        .map_err(|_| format!("{s:?} is not an IPv4 CIDR like 10.244.0.0/16"))?;
    if net != net.trunc() {
        return Err(format!(
            "{s:?} has host bits set (did you mean {}?)",
            net.trunc()
        ));
    }
    Ok(net)
}

/// Which node subnets of the cluster CIDR are taken.
#[derive(Debug, Clone)]
pub struct CidrSet {
    cluster: Ipv4Net,
    node_prefix: u8,
    used: BTreeSet<u32>,
    /// Where the next search starts.
    next: u32,
}

impl CidrSet {
    /// `cluster` cut into subnets of `/node_prefix`; the node mask must be
    /// at least the cluster's and leave a host part.
    pub fn new(cluster: Ipv4Net, node_prefix: u8) -> Result<CidrSet, String> {
        let cluster = cluster.trunc();
        if node_prefix < cluster.prefix_len() || node_prefix > 30 {
            return Err(format!(
                "--node-cidr-mask-size {node_prefix} must be between the cluster CIDR's \
                 prefix ({}) and 30",
                cluster.prefix_len()
            ));
        }
        if node_prefix - cluster.prefix_len() > 16 {
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
        1 << (self.node_prefix - self.cluster.prefix_len())
    }

    /// The node subnet at `index` (below [`Self::size`]).
    fn subnet(&self, index: u32) -> Ipv4Net {
        let base = u32::from(self.cluster.network()) + (index << (32 - self.node_prefix));
        Ipv4Net::new(Ipv4Addr::from(base), self.node_prefix).expect("a prefix of at most 30")
    }

    /// The index of `cidr` if it is one of this set's node subnets.
    fn index_of(&self, cidr: &Ipv4Net) -> Option<u32> {
        (cidr.prefix_len() == self.node_prefix
            && *cidr == cidr.trunc()
            && self.cluster.contains(cidr))
        .then(|| {
            (u32::from(cidr.network()) - u32::from(self.cluster.network()))
                >> (32 - self.node_prefix)
        })
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
    pub fn allocate(&mut self) -> Option<Ipv4Net> {
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
    pub fn occupy(&mut self, cidr: &Ipv4Net) -> bool {
        match self.index_of(cidr) {
            Some(i) => {
                self.used.insert(i);
                true
            }
            None => false,
        }
    }

    /// Frees `cidr` for later nodes.
    pub fn release(&mut self, cidr: &Ipv4Net) {
        if let Some(i) = self.index_of(cidr) {
            self.used.remove(&i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Ipv4Net {
        parse(s).unwrap()
    }

    #[test]
    fn cidrs_parse_and_print() {
        assert_eq!(cidr("10.244.0.0/16").to_string(), "10.244.0.0/16");
        let err = parse("10.244.1.0/16").unwrap_err();
        assert_eq!(
            err,
            "\"10.244.1.0/16\" has host bits set (did you mean 10.244.0.0/16?)"
        );
        let err = parse("10.244.0.0").unwrap_err();
        assert_eq!(err, "\"10.244.0.0\" is not an IPv4 CIDR like 10.244.0.0/16");
        assert!(parse("10.244.0.0/33").is_err());
        assert!(parse("fd00::/64").is_err());
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
        assert!(
            !set.occupy(&"10.0.1.7/24".parse().unwrap()),
            "host bits set"
        );
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
