//! Hairpin mode on the ports of the node's pod bridge (kubelet's
//! `hairpin-veth` mode): a pod whose connection to its own service is sent
//! back to itself gets the packet back out of the bridge port it came in
//! by. Docker leaves hairpin mode off, and with br_netfilter on, such a
//! packet is bridged (not routed) back, so without it the pod never gets
//! its own connection.
//!
//! The ports are read and set over rtnetlink, as `bridge link set dev X
//! hairpin on` does, not through `/sys/class/net`: sysfs shows the network
//! namespace it was mounted in, which is not the agent's when it is started
//! with `nsenter --net` (`scripts/hosts.sh`), and there the agent would
//! find no bridge and leave every port as Docker made it.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use nix::sys::socket::{
    bind, recv, send, setsockopt, socket, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag,
    SockProtocol, SockType,
};

/// How often new bridge ports (new pods) are looked for.
pub const PERIOD: Duration = Duration::from_secs(1);

// rtnetlink, from <linux/netlink.h>, <linux/rtnetlink.h>, <linux/if_link.h>.
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x300;
const NLA_F_NESTED: u16 = 0x8000;
const AF_BRIDGE: u8 = 7;
const IFLA_IFNAME: u16 = 3;
const IFLA_MASTER: u16 = 10;
const IFLA_PROTINFO: u16 = 12;
const IFLA_BRPORT_MODE: u16 = 4;
const HEADER: usize = 16; // struct nlmsghdr
const IFINFO: usize = 16; // struct ifinfomsg

/// A port of a bridge, as the kernel lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    pub index: u32,
    pub name: String,
    /// The bridge's interface index.
    pub master: u32,
    pub hairpin: bool,
}

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

/// A netlink message: header, `struct ifinfomsg` for the bridge family
/// and interface `index`, then `attrs` (already laid out).
fn message(kind: u16, flags: u16, seq: u32, index: u32, attrs: &[u8]) -> Vec<u8> {
    let len = HEADER + IFINFO + attrs.len();
    let mut m = Vec::with_capacity(len);
    m.extend((len as u32).to_ne_bytes());
    m.extend(kind.to_ne_bytes());
    m.extend(flags.to_ne_bytes());
    m.extend(seq.to_ne_bytes());
    m.extend(0u32.to_ne_bytes());
    m.extend([AF_BRIDGE, 0]);
    m.extend(0u16.to_ne_bytes());
    m.extend(index.to_ne_bytes());
    m.extend(0u32.to_ne_bytes());
    m.extend(0u32.to_ne_bytes());
    m.extend(attrs);
    m
}

/// One attribute, padded to 4 bytes.
fn attr(kind: u16, data: &[u8]) -> Vec<u8> {
    let len = 4 + data.len();
    let mut a = Vec::with_capacity(len.next_multiple_of(4));
    a.extend((len as u16).to_ne_bytes());
    a.extend(kind.to_ne_bytes());
    a.extend(data);
    a.resize(len.next_multiple_of(4), 0);
    a
}

/// `RTM_SETLINK` turning hairpin mode on for bridge port `index`.
fn hairpin_on_request(seq: u32, index: u32) -> Vec<u8> {
    let mode = attr(IFLA_BRPORT_MODE, &[1]);
    let protinfo = attr(IFLA_PROTINFO | NLA_F_NESTED, &mode);
    message(
        RTM_SETLINK,
        NLM_F_REQUEST | NLM_F_ACK,
        seq,
        index,
        &protinfo,
    )
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The attributes in `b`: (type without flags, data). Stops at the first
/// malformed one.
fn attrs(b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let len = usize::from(u16_at(b, at)?);
        let kind = u16_at(b, at + 2)? & !NLA_F_NESTED;
        let data = b.get(at + 4..at + len.max(4))?;
        at += len.max(4).next_multiple_of(4);
        Some((kind, data))
    })
}

/// What one reply datagram says: the ports in it, whether the reply is
/// complete, or the error the kernel gave.
#[derive(Debug, Default, PartialEq, Eq)]
struct Reply {
    ports: Vec<Port>,
    done: bool,
    error: Option<i32>,
}

fn parse(mut b: &[u8]) -> Reply {
    let mut reply = Reply::default();
    while let (Some(len), Some(kind)) = (u32_at(b, 0), u16_at(b, 4)) {
        let len = len as usize;
        if len < HEADER || len > b.len() {
            break;
        }
        let body = &b[HEADER..len];
        match kind {
            NLMSG_DONE => reply.done = true,
            NLMSG_ERROR => {
                reply.done = true;
                let code = body
                    .get(..4)
                    .map(|c| i32::from_ne_bytes(c.try_into().unwrap()));
                reply.error = code.filter(|c| *c != 0);
            }
            RTM_NEWLINK if body.len() >= IFINFO => {
                let index = u32_at(body, 4).unwrap_or(0);
                let mut port = Port {
                    index,
                    name: String::new(),
                    master: 0,
                    hairpin: false,
                };
                for (t, data) in attrs(&body[IFINFO..]) {
                    match t {
                        IFLA_IFNAME => {
                            let name = data.split(|c| *c == 0).next().unwrap_or_default();
                            port.name = String::from_utf8_lossy(name).into_owned();
                        }
                        IFLA_MASTER => port.master = u32_at(data, 0).unwrap_or(0),
                        IFLA_PROTINFO => {
                            port.hairpin = attrs(data)
                                .any(|(t, d)| t == IFLA_BRPORT_MODE && d.first() == Some(&1));
                        }
                        _ => {}
                    }
                }
                if port.master != 0 {
                    reply.ports.push(port);
                }
            }
            _ => {}
        }
        b = &b[len.next_multiple_of(4).min(b.len())..];
    }
    reply
}

fn route_socket() -> io::Result<OwnedFd> {
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )?;
    bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0))?;
    // The kernel answers at once; never hang the proxy on it.
    setsockopt(
        &fd,
        sockopt::ReceiveTimeout,
        &nix::sys::time::TimeVal::new(2, 0),
    )?;
    Ok(fd)
}

/// Sends `request` and reads the reply until it is complete.
fn exchange(request: &[u8]) -> io::Result<Vec<Port>> {
    let fd = route_socket()?;
    send(fd.as_raw_fd(), request, MsgFlags::empty())?;
    let mut ports = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty())?;
        let reply = parse(&buf[..n]);
        ports.extend(reply.ports);
        if let Some(code) = reply.error {
            return Err(io::Error::from_raw_os_error(-code));
        }
        if reply.done || n == 0 {
            return Ok(ports);
        }
    }
}

/// Every bridge port of this network namespace.
pub fn bridge_ports() -> io::Result<Vec<Port>> {
    exchange(&message(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, 1, 0, &[]))
}

/// Turns hairpin mode on for bridge port `index`.
pub fn set_hairpin(index: u32) -> io::Result<()> {
    exchange(&hairpin_on_request(1, index)).map(drop)
}

/// Turns hairpin mode on for every port of `bridge` that has it off;
/// returns the ports it turned on.
pub fn enable(bridge: &str) -> Vec<String> {
    let Ok(master) = nix::net::if_::if_nametoindex(bridge) else {
        return Vec::new();
    };
    let ports = match bridge_ports() {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "service proxy: listing bridge ports");
            return Vec::new();
        }
    };
    let mut done = Vec::new();
    for port in ports
        .into_iter()
        .filter(|p| p.master == master && !p.hairpin)
    {
        match set_hairpin(port.index) {
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
        if let Some(b) = bridge.clone() {
            let ports = tokio::task::spawn_blocking(move || enable(&b))
                .await
                .unwrap_or_default();
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

    /// A `RTM_NEWLINK` the kernel sends for a bridge port.
    fn newlink(index: u32, name: &str, master: u32, mode: u8) -> Vec<u8> {
        let mut name = name.as_bytes().to_vec();
        name.push(0);
        let mut attrs = attr(IFLA_IFNAME, &name);
        attrs.extend(attr(IFLA_MASTER, &master.to_ne_bytes()));
        let mut protinfo = attr(1, &[3]); // IFLA_BRPORT_STATE: forwarding
        protinfo.extend(attr(IFLA_BRPORT_MODE, &[mode]));
        attrs.extend(attr(IFLA_PROTINFO | NLA_F_NESTED, &protinfo));
        message(RTM_NEWLINK, 2, 1, index, &attrs)
    }

    #[test]
    fn a_dump_gives_each_port_its_bridge_and_hairpin_mode() {
        let mut dump = newlink(7, "veth1", 3, 0);
        dump.extend(newlink(8, "veth2", 3, 1));
        let first = parse(&dump);
        assert_eq!(
            first.ports,
            [
                Port {
                    index: 7,
                    name: "veth1".into(),
                    master: 3,
                    hairpin: false
                },
                Port {
                    index: 8,
                    name: "veth2".into(),
                    master: 3,
                    hairpin: true
                }
            ]
        );
        assert!(!first.done);
        let done = parse(&message(NLMSG_DONE, 2, 1, 0, &[]));
        assert!(done.done && done.ports.is_empty());
    }

    #[test]
    fn errors_and_bad_input_are_reported_not_panicked_on() {
        let mut err = Vec::new();
        err.extend(32u32.to_ne_bytes());
        err.extend(NLMSG_ERROR.to_ne_bytes());
        err.extend([0u8; 10]);
        err.extend((-1i32).to_ne_bytes()); // -EPERM
        err.extend([0u8; 12]);
        assert_eq!(parse(&err).error, Some(-1));
        for cut in 0..40 {
            let _ = parse(&newlink(7, "veth1", 3, 0)[..cut]);
        }
        let mut odd = newlink(7, "veth1", 3, 0);
        odd[HEADER + IFINFO] = 1; // an attribute shorter than its header
        let _ = parse(&odd);
    }

    #[test]
    fn the_set_request_nests_the_port_mode_as_iproute2_does() {
        let req = hairpin_on_request(9, 42);
        assert_eq!(req.len(), HEADER + IFINFO + 12);
        assert_eq!(u32_at(&req, 0), Some(req.len() as u32));
        assert_eq!(u16_at(&req, 4), Some(RTM_SETLINK));
        assert_eq!(req[HEADER], AF_BRIDGE);
        assert_eq!(u32_at(&req, HEADER + 4), Some(42));
        let nested: Vec<_> = attrs(&req[HEADER + IFINFO..]).collect();
        assert_eq!(nested.len(), 1);
        assert_eq!(nested[0].0, IFLA_PROTINFO);
        let mode: Vec<_> = attrs(nested[0].1).collect();
        assert_eq!(mode, [(IFLA_BRPORT_MODE, &[1u8][..])]);
    }

    /// Against this machine's kernel: a dump answers (root or not) and
    /// lists only ports that have a bridge.
    #[test]
    fn the_kernel_answers_a_dump() {
        let ports = bridge_ports().expect("RTM_GETLINK dump");
        assert!(ports.iter().all(|p| p.master != 0 && p.index != 0));
    }
}
