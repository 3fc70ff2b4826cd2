//! The agent's one netlink layer, on the rust-netlink project's
//! `rtnetlink`: the host-gw routes of [`super::routes`] and the pod
//! bridge's ports for the service proxy's hairpin mode. Messages are
//! built and read with `rtnetlink`'s typed builders and attributes; no
//! message layout is written here, and nothing shells out to `ip`.
//!
//! Each [`Netlink`] is one rtnetlink socket of the agent's network
//! namespace (the one it was started in, also under `nsenter --net`,
//! which `/sys/class/net` would not show). Every request has a deadline:
//! the kernel answers at once, and the agent must never hang on it.

use std::collections::BTreeMap;
use std::io;
use std::net::Ipv4Addr;
use std::time::Duration;

use futures::TryStreamExt;
use ipnet::Ipv4Net;
use rtnetlink::packet_route::link::{
    InfoBridgePort, InfoPortData, LinkAttribute, LinkInfo, LinkMessage,
};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use rtnetlink::{Handle, LinkBridgePort, RouteMessageBuilder};

/// How long one request may wait for the kernel's answer.
const DEADLINE: Duration = Duration::from_secs(2);

/// What failed, and the kernel's (or the socket's) reason.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("opening a netlink socket: {0}")]
    Socket(#[source] io::Error),
    #[error("{what}: {source}")]
    Request {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("{what}: no answer from the kernel in {DEADLINE:?}")]
    Timeout { what: String },
}

/// A route of the main table to an IPv4 network through a gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub dest: Ipv4Net,
    pub via: Ipv4Addr,
}

/// A port of a bridge, as the kernel lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    pub index: u32,
    pub name: String,
    /// The bridge's interface index.
    pub master: u32,
    pub hairpin: bool,
}

/// One rtnetlink connection; its task ends when this is dropped.
pub struct Netlink {
    handle: Handle,
}

impl Netlink {
    /// Opens a socket in the current network namespace. Needs a Tokio
    /// runtime (the connection runs as a task on it).
    pub fn connect() -> Result<Self, Error> {
        let (connection, handle, _) = rtnetlink::new_connection().map_err(Error::Socket)?;
        tokio::spawn(connection);
        Ok(Self { handle })
    }

    /// The main table's IPv4 routes of routing protocol `proto` that have
    /// a gateway (`ip -4 route show proto PROTO`), by destination.
    pub async fn routes(&self, proto: u8) -> Result<BTreeMap<Ipv4Net, Ipv4Addr>, Error> {
        let what = format!("listing the routes of proto {proto}");
        let dump = self
            .handle
            .route()
            .get(RouteMessageBuilder::<Ipv4Addr>::new().build())
            .execute()
            .try_collect::<Vec<_>>();
        let routes = within(&what, dump).await?;
        Ok(routes
            .iter()
            .filter_map(|m| gateway_route(m, proto))
            .map(|r| (r.dest, r.via))
            .collect())
    }

    /// Adds the route, or changes the one to the same destination (`ip
    /// route replace DEST via VIA proto PROTO`).
    pub async fn replace_route(&self, route: Route, proto: u8) -> Result<(), Error> {
        let what = format!("routing {} via {}", route.dest, route.via);
        let request = self
            .handle
            .route()
            .add(replace_message(route, proto))
            .replace()
            .execute();
        within(&what, request).await
    }

    /// Removes the route to `dest` of routing protocol `proto` from the
    /// main table (`ip route del DEST proto PROTO`).
    pub async fn delete_route(&self, dest: Ipv4Net, proto: u8) -> Result<(), Error> {
        let what = format!("removing the route to {dest}");
        let request = self
            .handle
            .route()
            .del(delete_message(dest, proto))
            .execute();
        within(&what, request).await
    }

    /// The ports of bridge `master` (by interface index).
    pub async fn bridge_ports(&self, master: u32) -> Result<Vec<Port>, Error> {
        let what = "listing the bridge's ports".to_string();
        let mut get = self.handle.link().get();
        // The kernel filters the dump by master; the ports are checked
        // again below in case it does not.
        get.message_mut()
            .attributes
            .push(LinkAttribute::Controller(master));
        let links = within(&what, get.execute().try_collect::<Vec<_>>()).await?;
        Ok(links
            .iter()
            .filter_map(port_of)
            .filter(|p| p.master == master)
            .collect())
    }

    /// Turns hairpin mode on for bridge port `index` (`ip link set dev
    /// PORT type bridge_slave hairpin on`).
    pub async fn set_hairpin(&self, index: u32) -> Result<(), Error> {
        let what = format!("turning hairpin mode on for interface {index}");
        let request = self
            .handle
            .link()
            .set_port(hairpin_message(index))
            .execute();
        within(&what, request).await
    }
}

/// Runs one request with the [`DEADLINE`], naming it in the error.
async fn within<T>(
    what: &str,
    request: impl std::future::Future<Output = Result<T, rtnetlink::Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(DEADLINE, request).await {
        Err(_) => Err(Error::Timeout {
            what: what.to_string(),
        }),
        Ok(Err(e)) => Err(Error::Request {
            what: what.to_string(),
            source: match e {
                rtnetlink::Error::NetlinkError(m) => m.to_io(),
                other => io::Error::other(other.to_string()),
            },
        }),
        Ok(Ok(v)) => Ok(v),
    }
}

/// `RTM_NEWROUTE` for `route`: main table, unicast, universe scope.
fn replace_message(route: Route, proto: u8) -> RouteMessage {
    RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(route.dest.network(), route.dest.prefix_len())
        .gateway(route.via)
        .protocol(RouteProtocol::from(proto))
        .build()
}

/// `RTM_DELROUTE` as iproute2 sends it: any scope and type, only this
/// destination and routing protocol in the main table.
fn delete_message(dest: Ipv4Net, proto: u8) -> RouteMessage {
    RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(dest.network(), dest.prefix_len())
        .protocol(RouteProtocol::from(proto))
        .scope(RouteScope::NoWhere)
        .kind(RouteType::Unspec)
        .build()
}

/// The route `m` says, if it is one of the main table's with routing
/// protocol `proto`, an IPv4 destination and a gateway.
fn gateway_route(m: &RouteMessage, proto: u8) -> Option<Route> {
    if m.header.table != RouteHeader::RT_TABLE_MAIN
        || m.header.protocol != RouteProtocol::from(proto)
    {
        return None;
    }
    let mut dest = Ipv4Addr::UNSPECIFIED;
    let mut via = None;
    for attr in &m.attributes {
        match attr {
            RouteAttribute::Destination(RouteAddress::Inet(a)) => dest = *a,
            RouteAttribute::Gateway(RouteAddress::Inet(a)) => via = Some(*a),
            _ => {}
        }
    }
    let dest = Ipv4Net::new(dest, m.header.destination_prefix_length).ok()?;
    Some(Route { dest, via: via? })
}

/// `RTM_NEWLINK` setting bridge port `index`'s hairpin mode on.
fn hairpin_message(index: u32) -> LinkMessage {
    LinkBridgePort::new(index).hairpin(true).build()
}

/// The bridge port `m` describes; `None` for an interface with no master.
fn port_of(m: &LinkMessage) -> Option<Port> {
    let mut port = Port {
        index: m.header.index,
        name: String::new(),
        master: 0,
        hairpin: false,
    };
    for attr in &m.attributes {
        match attr {
            LinkAttribute::IfName(name) => port.name = name.clone(),
            LinkAttribute::Controller(master) => port.master = *master,
            LinkAttribute::LinkInfo(infos) => {
                port.hairpin = infos.iter().any(|i| match i {
                    LinkInfo::PortData(InfoPortData::BridgePort(opts)) => opts
                        .iter()
                        .any(|o| matches!(o, InfoBridgePort::HairpinMode(true))),
                    _ => false,
                });
            }
            _ => {}
        }
    }
    (port.master != 0 && port.index != 0).then_some(port)
}

#[cfg(test)]
mod tests;
