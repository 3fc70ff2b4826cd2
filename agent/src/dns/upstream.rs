//! The host's upstream resolvers and search domains, from where the real
//! upstreams are listed: `/etc/resolv.conf`, unless that names only
//! systemd-resolved's stub (`127.0.0.53`), whose own upstreams are in
//! `/run/systemd/resolve/resolv.conf`. The stub would loop queries back
//! through the host, and the cluster DNS server itself is never an
//! upstream.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;

/// systemd-resolved's stub listener.
const SYSTEMD_STUB: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 53));
const SYSTEMD_STUB_54: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 54));

/// What a resolv.conf says.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ResolvConf {
    pub nameservers: Vec<IpAddr>,
    pub search: Vec<String>,
}

pub fn parse_resolv_conf(text: &str) -> ResolvConf {
    let mut out = ResolvConf::default();
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or("");
        let mut words = line.split_whitespace();
        match words.next() {
            Some("nameserver") => {
                // A zone index (`fe80::1%eth0`) is dropped.
                if let Some(ip) = words
                    .next()
                    .and_then(|w| w.split('%').next())
                    .and_then(|w| w.parse().ok())
                {
                    out.nameservers.push(ip);
                }
            }
            // The last of `search` and `domain` wins, as in glibc.
            Some("search") | Some("domain") => {
                out.search = words.map(|w| w.trim_end_matches('.').to_string()).collect();
            }
            _ => {}
        }
    }
    out
}

/// The upstreams and search domains of the host, never `self_ip`. Reads
/// `etc` (`/etc/resolv.conf`), and `systemd` (its list of real upstreams)
/// when `etc` names the stub.
pub fn host_resolvers(etc: &Path, systemd: &Path, self_ip: Option<IpAddr>) -> ResolvConf {
    let read = |p: &Path| std::fs::read_to_string(p).map(|t| parse_resolv_conf(&t));
    let mut conf = read(etc).unwrap_or_default();
    let had_stub = conf
        .nameservers
        .iter()
        .any(|ip| *ip == SYSTEMD_STUB || *ip == SYSTEMD_STUB_54);
    if had_stub {
        if let Ok(real) = read(systemd) {
            conf.nameservers = real.nameservers;
        }
    }
    conf.nameservers
        .retain(|ip| *ip != SYSTEMD_STUB && *ip != SYSTEMD_STUB_54 && Some(*ip) != self_ip);
    conf
}

/// Port 53 of each nameserver.
pub fn as_upstreams(ips: &[IpAddr]) -> Vec<SocketAddr> {
    ips.iter().map(|ip| SocketAddr::new(*ip, 53)).collect()
}
