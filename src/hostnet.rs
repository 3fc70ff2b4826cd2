//! This host's IPv4 routes, and the address ranges a cluster may take
//! without clashing with them: `bosun up` picks its cluster and service
//! ranges from what no route (every Docker network has one) and no other
//! bosun cluster on the host uses, and the agent refuses a pod CIDR that
//! a route of the host already covers.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

/// One entry of the kernel's IPv4 routing table (main table, as
/// `/proc/net/route` shows it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRoute {
    pub net: Ipv4Net,
    pub dev: String,
    /// The next hop, if the route has one.
    pub gateway: Option<Ipv4Addr>,
}

impl std::fmt::Display for HostRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.net)?;
        if let Some(gw) = self.gateway {
            write!(f, " via {gw}")?;
        }
        write!(f, " dev {}", self.dev)
    }
}

/// The routes of the network namespace this process runs in.
pub fn ipv4_routes() -> std::io::Result<Vec<HostRoute>> {
    Ok(parse_proc_net_route(&std::fs::read_to_string(
        "/proc/net/route",
    )?))
}

/// Parses `/proc/net/route`: a header line, then one tab-separated line
/// per route with the destination, gateway and mask in hex, in the
/// machine's byte order.
pub fn parse_proc_net_route(text: &str) -> Vec<HostRoute> {
    let hex = |s: &str| u32::from_str_radix(s, 16).ok().map(u32::to_ne_bytes);
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            let dst = Ipv4Addr::from(hex(f[1])?);
            let gateway = Ipv4Addr::from(hex(f[2])?);
            let mask = u32::from_be_bytes(hex(f[7])?);
            let prefix = mask.count_ones() as u8;
            Some(HostRoute {
                net: Ipv4Net::new(dst, prefix).ok()?.trunc(),
                dev: f[0].to_string(),
                gateway: (!gateway.is_unspecified()).then_some(gateway),
            })
        })
        .collect()
}

/// Whether two ranges share an address.
pub fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// The routes that cover part of `net`, the default route left out (it
/// covers everything and takes nothing away).
pub fn routes_overlapping<'a>(net: &Ipv4Net, routes: &'a [HostRoute]) -> Vec<&'a HostRoute> {
    routes
        .iter()
        .filter(|r| r.net.prefix_len() > 0 && overlaps(net, &r.net))
        .collect()
}

/// The first of `candidates` that overlaps none of `taken`.
pub fn first_free(candidates: &[Ipv4Net], taken: &[Ipv4Net]) -> Option<Ipv4Net> {
    candidates
        .iter()
        .find(|c| !taken.iter().any(|t| overlaps(c, t)))
        .copied()
}

/// Where `bosun up` looks for a cluster (pod) range: kubeadm's and
/// flannel's 10.244.0.0/16 first, then its neighbours.
pub fn cluster_cidr_candidates() -> Vec<Ipv4Net> {
    (244..=255)
        .chain((200..244).rev())
        .map(|b| Ipv4Net::new(Ipv4Addr::new(10, b, 0, 0), 16).expect("a valid prefix"))
        .collect()
}

/// Where `bosun up` looks for a service range: kubeadm's 10.96.0.0/12
/// first, then the /12s beside it (below the cluster candidates).
pub fn service_cidr_candidates() -> Vec<Ipv4Net> {
    [96u8, 112, 128, 144, 160, 176]
        .into_iter()
        .map(|b| Ipv4Net::new(Ipv4Addr::new(10, b, 0, 0), 12).expect("a valid prefix"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> Ipv4Net {
        s.parse().unwrap()
    }

    #[test]
    fn proc_net_route_is_read_in_the_machines_byte_order() {
        // As a little-endian kernel prints it; built from the addresses so
        // that the test holds on either byte order.
        let hex = |ip: [u8; 4]| format!("{:08X}", u32::from_ne_bytes(ip));
        let text = format!(
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
             eth0\t{}\t{}\t0003\t0\t0\t0\t{}\t0\t0\t0\n\
             docker0\t{}\t{}\t0001\t0\t0\t0\t{}\t0\t0\t0\n",
            hex([0, 0, 0, 0]),
            hex([172, 31, 0, 1]),
            hex([0, 0, 0, 0]),
            hex([172, 17, 0, 0]),
            hex([0, 0, 0, 0]),
            hex([255, 255, 0, 0]),
        );
        let routes = parse_proc_net_route(&text);
        assert_eq!(routes.len(), 2);
        assert_eq!(routes[0].net, net("0.0.0.0/0"));
        assert_eq!(routes[0].gateway, Some(Ipv4Addr::new(172, 31, 0, 1)));
        assert_eq!(routes[1].net, net("172.17.0.0/16"));
        assert_eq!(routes[1].to_string(), "172.17.0.0/16 dev docker0");
    }

    #[test]
    fn this_hosts_table_parses() {
        // Whatever this machine has: at least the lines parse.
        let text = std::fs::read_to_string("/proc/net/route").unwrap();
        assert_eq!(parse_proc_net_route(&text).len(), text.lines().count() - 1);
    }

    #[test]
    fn overlap_is_containment_either_way() {
        assert!(overlaps(&net("10.244.0.0/16"), &net("10.244.3.0/24")));
        assert!(overlaps(&net("10.244.3.0/24"), &net("10.0.0.0/8")));
        assert!(!overlaps(&net("10.244.0.0/16"), &net("10.245.0.0/16")));
        let routes = vec![
            HostRoute {
                net: net("0.0.0.0/0"),
                dev: "eth0".into(),
                gateway: Some(Ipv4Addr::new(172, 31, 0, 1)),
            },
            HostRoute {
                net: net("10.244.0.0/24"),
                dev: "br-1".into(),
                gateway: None,
            },
        ];
        let hit = routes_overlapping(&net("10.244.0.0/16"), &routes);
        assert_eq!(hit.len(), 1, "the default route takes nothing away");
        assert_eq!(hit[0].dev, "br-1");
    }

    #[test]
    fn the_first_free_candidate_is_taken() {
        let taken = [net("10.244.0.0/24"), net("10.245.0.0/16")];
        assert_eq!(
            first_free(&cluster_cidr_candidates(), &taken),
            Some(net("10.246.0.0/16"))
        );
        assert_eq!(
            first_free(&service_cidr_candidates(), &[net("10.96.0.0/12")]),
            Some(net("10.112.0.0/12"))
        );
        assert_eq!(first_free(&[net("10.0.0.0/8")], &taken), None);
        // No candidate of one kind overlaps one of the other.
        for c in cluster_cidr_candidates() {
            assert!(!service_cidr_candidates().iter().any(|s| overlaps(&c, s)));
        }
    }
}
