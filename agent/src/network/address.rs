//! Which address the node is reached at (its InternalIP, and the gateway
//! other hosts route its pod CIDR through): `--node-ip`, else the address
//! of `--node-interface`, else the host's only candidate. With several
//! candidates bosun refuses to guess, and it never takes Vagrant's NAT
//! address (10.0.2.15, the same on every VM) by itself.

use std::net::{IpAddr, Ipv4Addr};

/// The address Vagrant's VirtualBox NAT gives every VM alike.
pub const VAGRANT_NAT: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 15);

/// Interfaces that are never the node's: Docker's bridges and the veth
/// ends of containers.
fn is_container_side(interface: &str) -> bool {
    interface.starts_with("docker") || interface.starts_with("br-") || interface.starts_with("veth")
}

/// Every IPv4 address of this host with its interface.
pub fn host_addresses() -> std::io::Result<Vec<(String, Ipv4Addr)>> {
    Ok(nix::ifaddrs::getifaddrs()?
        .filter_map(|i| {
            let ip = i.address?.as_sockaddr_in()?.ip();
            Some((i.interface_name, ip))
        })
        .collect())
}

/// Picks the node's address from `addresses` (interface, IPv4).
pub fn choose(
    explicit: Option<IpAddr>,
    interface: Option<&str>,
    addresses: &[(String, Ipv4Addr)],
) -> Result<IpAddr, String> {
    if let Some(ip) = explicit {
        return Ok(ip);
    }
    if let Some(want) = interface {
        return addresses
            .iter()
            .find(|(name, _)| name == want)
            .map(|(_, ip)| IpAddr::V4(*ip))
            .ok_or_else(|| {
                format!("--node-interface {want}: no such interface with an IPv4 address")
            });
    }
    let mut found: Vec<&(String, Ipv4Addr)> = addresses
        .iter()
        .filter(|(name, ip)| !ip.is_loopback() && !is_container_side(name))
        .collect();
    found.sort_by_key(|(_, ip)| *ip);
    found.dedup_by_key(|(_, ip)| *ip);
    let vagrant = found.iter().any(|(_, ip)| *ip == VAGRANT_NAT);
    found.retain(|(_, ip)| *ip != VAGRANT_NAT);
    let list = |f: &[&(String, Ipv4Addr)]| {
        f.iter()
            .map(|(n, ip)| format!("{ip} on {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match found.as_slice() {
        [one] => Ok(IpAddr::V4(one.1)),
        [] if vagrant => Err(format!(
            "the only address of this host is {VAGRANT_NAT}, Vagrant's NAT address, which every \
             VM has; give the node's own with --node-ip or --node-interface"
        )),
        [] => Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        many => Err(format!(
            "this host has several addresses ({}); say which is the node's with --node-ip or \
             --node-interface",
            list(many)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(list: &[(&str, &str)]) -> Vec<(String, Ipv4Addr)> {
        list.iter()
            .map(|(n, ip)| (n.to_string(), ip.parse().unwrap()))
            .collect()
    }

    #[test]
    fn the_one_candidate_is_taken_and_bridges_and_loopback_are_not_candidates() {
        let a = addrs(&[
            ("lo", "127.0.0.1"),
            ("eth0", "192.0.2.2"),
            ("docker0", "172.17.0.1"),
            ("br-1234", "10.244.1.1"),
        ]);
        assert_eq!(choose(None, None, &a).unwrap().to_string(), "192.0.2.2");
        assert_eq!(
            choose(None, None, &addrs(&[("lo", "127.0.0.1")])).unwrap(),
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
    }

    #[test]
    fn several_candidates_are_refused_unless_named() {
        let a = addrs(&[("eth0", "192.168.56.11"), ("eth1", "172.31.250.11")]);
        let err = choose(None, None, &a).unwrap_err();
        assert!(
            err.contains("--node-ip") && err.contains("172.31.250.11 on eth1"),
            "{err}"
        );
        assert_eq!(
            choose(None, Some("eth1"), &a).unwrap().to_string(),
            "172.31.250.11"
        );
        let err = choose(None, Some("eth9"), &a).unwrap_err();
        assert!(err.starts_with("--node-interface eth9"), "{err}");
        let ip: IpAddr = "10.9.9.9".parse().unwrap();
        assert_eq!(choose(Some(ip), None, &a).unwrap(), ip);
    }

    #[test]
    fn vagrants_nat_address_is_never_picked_by_itself() {
        let a = addrs(&[("eth0", "10.0.2.15"), ("eth1", "192.168.56.11")]);
        assert_eq!(choose(None, None, &a).unwrap().to_string(), "192.168.56.11");
        let err = choose(None, None, &addrs(&[("eth0", "10.0.2.15")])).unwrap_err();
        assert!(
            err.contains("Vagrant") && err.contains("--node-ip"),
            "{err}"
        );
        // Named, it is the user's choice.
        assert_eq!(
            choose(None, Some("eth0"), &addrs(&[("eth0", "10.0.2.15")]))
                .unwrap()
                .to_string(),
            "10.0.2.15"
        );
    }
}
