//! Hairpin mode on the ports of the node's pod bridge (kubelet's
//! `hairpin-veth` mode): a pod whose connection to its own service is sent
//! back to itself gets the packet back out of the bridge port it came in
//! by. Docker leaves hairpin mode off, and with br_netfilter on, such a
//! packet is bridged (not routed) back, so without it the pod never gets
//! its own connection.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

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
pub fn enable(sys_net: &Path, bridge: &str) -> Vec<String> {
    let Ok(ports) = std::fs::read_dir(sys_net.join(bridge).join("brif")) else {
        return Vec::new();
    };
    let mut done = Vec::new();
    for port in ports.flatten() {
        let mode = port.path().join("hairpin_mode");
        if std::fs::read_to_string(&mode).is_ok_and(|m| m.trim() == "0") {
            match std::fs::write(&mode, "1") {
                Ok(()) => done.push(port.file_name().to_string_lossy().into_owned()),
                Err(e) => {
                    tracing::warn!(port = ?port.file_name(), error = %e, "service proxy: turning hairpin mode on")
                }
            }
        }
    }
    done
}

/// Keeps hairpin mode on for the ports of the bridge holding `gateway`
/// (once that bridge exists).
pub async fn run(gateway: Ipv4Addr) {
    let sys_net = Path::new("/sys/class/net");
    let mut bridge = None;
    loop {
        if bridge.is_none() {
            bridge = interface_with(gateway);
        }
        if let Some(b) = &bridge {
            let ports = enable(sys_net, b);
            if !ports.is_empty() {
                tracing::debug!(bridge = %b, ?ports, "service proxy: hairpin mode on");
            }
        }
        tokio::time::sleep(PERIOD).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_with_hairpin_off_are_turned_on() {
        let dir = tempfile::tempdir().unwrap();
        for (port, mode) in [("veth1", "0\n"), ("veth2", "1\n")] {
            let p = dir.path().join("br-x/brif").join(port);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("hairpin_mode"), mode).unwrap();
        }
        assert_eq!(enable(dir.path(), "br-x"), ["veth1"]);
        let mode = std::fs::read_to_string(dir.path().join("br-x/brif/veth1/hairpin_mode"));
        assert_eq!(mode.unwrap(), "1");
        assert!(enable(dir.path(), "br-x").is_empty());
        assert!(enable(dir.path(), "br-none").is_empty());
    }
}
