//! Hairpin mode on the ports of the node's pod bridge (kubelet's
//! `hairpin-veth` mode): a pod whose connection to its own service is sent
//! back to itself gets the packet back out of the bridge port it came in
//! by. Docker leaves hairpin mode off, and with br_netfilter on, such a
//! packet is bridged (not routed) back, so without it the pod never gets
//! its own connection.
//!
//! The ports are read and set over rtnetlink ([`crate::network::netlink`]),
//! as `ip link set dev X type bridge_slave hairpin on` does, not through
//! `/sys/class/net`: sysfs shows the network namespace it was mounted in,
//! which is not the agent's when it is started with `nsenter --net`
//! (`scripts/hosts.sh`), and there the agent would find no bridge and
//! leave every port as Docker made it.

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::network::netlink::Netlink;

/// How often new bridge ports (new pods) are looked for.
pub const PERIOD: Duration = Duration::from_secs(1);

/// The interface holding `addr` (the pod bridge, by its gateway address).
pub fn interface_with(addr: Ipv4Addr) -> Option<String> {
    nix::ifaddrs::getifaddrs()
        .ok()?
        .find(|i| {
            i.address
                .and_then(|a| a.as_sockaddr_in().map(|s| s.ip()))
                .is_some_and(|ip| ip == addr)
        })
        .map(|i| i.interface_name)
}

/// Turns hairpin mode on for every port of `bridge` that has it off;
/// returns the ports it turned on.
pub async fn enable(bridge: &str) -> Vec<String> {
    let Ok(master) = nix::net::if_::if_nametoindex(bridge) else {
        return Vec::new();
    };
    let ports = match Netlink::connect() {
        Ok(netlink) => netlink.bridge_ports(master).await.map(|p| (netlink, p)),
        Err(e) => Err(e),
    };
    let (netlink, ports) = match ports {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "service proxy: listing bridge ports");
            return Vec::new();
        }
    };
    let mut done = Vec::new();
    for port in ports.into_iter().filter(|p| !p.hairpin) {
        match netlink.set_hairpin(port.index).await {
            Ok(()) => done.push(port.name),
            Err(e) => {
                tracing::warn!(port = %port.name, error = %e, "service proxy: turning hairpin mode on")
            }
        }
    }
    done
}

/// Keeps hairpin mode on for the ports of the bridge holding `gateway`
/// (once that bridge exists).
pub async fn run(gateway: Ipv4Addr) {
    let mut bridge = None;
    loop {
        if bridge.is_none() {
            bridge = interface_with(gateway);
        }
        if let Some(b) = bridge.as_deref() {
            let ports = enable(b).await;
            if !ports.is_empty() {
                tracing::debug!(bridge = ?bridge, ?ports, "service proxy: hairpin mode on");
            }
        }
        tokio::time::sleep(PERIOD).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interface_holding_an_address_is_found() {
        assert_eq!(interface_with(Ipv4Addr::LOCALHOST).as_deref(), Some("lo"));
        assert_eq!(interface_with(Ipv4Addr::new(192, 0, 2, 254)), None);
    }

    /// Against this machine's kernel: a bridge that does not exist has no
    /// ports to turn on, and nothing fails.
    #[tokio::test]
    async fn no_bridge_no_ports() {
        assert!(enable("bosun-no-such-br").await.is_empty());
        assert!(enable("lo").await.is_empty());
    }
}
