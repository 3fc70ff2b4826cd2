use rtnetlink::packet_core::{Emitable, Parseable};
use rtnetlink::packet_route::link::InfoPortKind;

use super::*;

fn route(dest: &str, via: &str) -> Route {
    Route {
        dest: dest.parse().unwrap(),
        via: via.parse().unwrap(),
    }
}

/// The message as the kernel would read it: emitted, then parsed back.
fn through_the_wire(m: &RouteMessage) -> RouteMessage {
    let mut buf = vec![0; m.buffer_len()];
    m.emit(&mut buf);
    RouteMessage::parse(&buf[..]).unwrap()
}

#[test]
fn a_replaced_route_is_the_main_tables_unicast_route_of_bosuns_protocol() {
    let r = route("10.244.2.0/24", "172.31.250.12");
    let m = through_the_wire(&replace_message(r, 235));
    assert_eq!(m.header.table, RouteHeader::RT_TABLE_MAIN);
    assert_eq!(m.header.protocol, RouteProtocol::Other(235));
    assert_eq!(m.header.scope, RouteScope::Universe);
    assert_eq!(m.header.kind, RouteType::Unicast);
    assert_eq!(m.header.destination_prefix_length, 24);
    // Read back as a route of bosun's, not of another protocol.
    assert_eq!(gateway_route(&m, 235), Some(r));
    assert_eq!(gateway_route(&m, 4), None);
}

#[test]
fn a_deleted_route_names_only_its_destination_and_protocol() {
    let m = through_the_wire(&delete_message("10.244.3.0/24".parse().unwrap(), 235));
    assert_eq!(m.header.table, RouteHeader::RT_TABLE_MAIN);
    assert_eq!(m.header.protocol, RouteProtocol::Other(235));
    assert_eq!(m.header.scope, RouteScope::NoWhere);
    assert_eq!(m.header.kind, RouteType::Unspec);
    assert_eq!(m.header.destination_prefix_length, 24);
    assert_eq!(
        m.attributes,
        [RouteAttribute::Destination(RouteAddress::Inet(
            "10.244.3.0".parse().unwrap()
        ))]
    );
}

#[test]
fn routes_of_other_tables_and_routes_without_a_gateway_are_not_read() {
    let r = route("10.244.2.0/24", "172.31.250.12");
    let mut other_table = replace_message(r, 235);
    other_table.header.table = 100;
    assert_eq!(gateway_route(&other_table, 235), None);
    let blackhole = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix("10.9.0.0".parse().unwrap(), 16)
        .protocol(RouteProtocol::Other(235))
        .kind(RouteType::BlackHole)
        .build();
    assert_eq!(gateway_route(&blackhole, 235), None);
    let host = route("10.244.9.7/32", "172.31.250.13");
    assert_eq!(
        gateway_route(&replace_message(host, 235), 235),
        Some(host),
        "a /32 keeps its prefix"
    );
}

#[test]
fn hairpin_mode_is_set_as_bridge_port_data_of_that_port() {
    let m = hairpin_message(42);
    let mut buf = vec![0; m.buffer_len()];
    m.emit(&mut buf);
    let m = LinkMessage::parse(&buf[..]).unwrap();
    assert_eq!(m.header.index, 42);
    let [LinkAttribute::LinkInfo(infos)] = &m.attributes[..] else {
        panic!("{:?}", m.attributes)
    };
    assert!(infos.contains(&LinkInfo::PortKind(InfoPortKind::Bridge)));
    assert!(
        infos.contains(&LinkInfo::PortData(InfoPortData::BridgePort(vec![
            InfoBridgePort::HairpinMode(true)
        ])))
    );
}

#[test]
fn a_dump_gives_each_port_its_bridge_and_hairpin_mode() {
    let link = |index, name: &str, master, hairpin| {
        let mut m = LinkMessage::default();
        m.header.index = index;
        m.attributes.push(LinkAttribute::IfName(name.to_string()));
        if master != 0 {
            m.attributes.push(LinkAttribute::Controller(master));
        }
        m.attributes.push(LinkAttribute::LinkInfo(vec![
            LinkInfo::PortKind(InfoPortKind::Bridge),
            LinkInfo::PortData(InfoPortData::BridgePort(vec![
                InfoBridgePort::Learning(true),
                InfoBridgePort::HairpinMode(hairpin),
            ])),
        ]));
        m
    };
    let port = |index, name: &str, hairpin| Port {
        index,
        name: name.into(),
        master: 3,
        hairpin,
    };
    assert_eq!(
        port_of(&link(7, "veth1", 3, false)),
        Some(port(7, "veth1", false))
    );
    assert_eq!(
        port_of(&link(8, "veth2", 3, true)),
        Some(port(8, "veth2", true))
    );
    assert_eq!(port_of(&link(9, "eth0", 0, false)), None, "no master");
}

#[test]
fn errors_name_what_failed_and_the_kernels_reason() {
    let e = Error::Request {
        what: "routing 10.244.2.0/24 via 172.31.250.12".into(),
        source: io::Error::from_raw_os_error(101),
    };
    assert!(
        e.to_string()
            .starts_with("routing 10.244.2.0/24 via 172.31.250.12: Network is unreachable"),
        "{e}"
    );
}

/// Against this machine's kernel: dumps answer (root or not).
#[tokio::test]
async fn the_kernel_answers_dumps() {
    let nl = Netlink::connect().expect("netlink socket");
    nl.routes(235).await.expect("route dump");
    let lo = nix::net::if_::if_nametoindex("lo").expect("lo");
    let ports = nl.bridge_ports(lo).await.expect("link dump");
    assert!(ports.is_empty(), "lo is no bridge: {ports:?}");
}

/// As root, in a network namespace of its own (gone with the thread): a
/// route is added, changed, listed and removed, and a bridge port gets
/// hairpin mode, as the agent does them. Passes without doing anything
/// where no namespace can be made (not root).
#[test]
fn routes_and_hairpin_in_a_namespace_of_its_own() {
    std::thread::spawn(|| {
        if let Err(e) = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET) {
            eprintln!("skipped: no network namespace of our own ({e})");
            return;
        }
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(in_a_namespace_of_its_own());
    })
    .join()
    .unwrap();
}

async fn in_a_namespace_of_its_own() {
    use rtnetlink::{LinkBridge, LinkUnspec, LinkVeth};
    let (connection, handle, _) = rtnetlink::new_connection().unwrap();
    tokio::spawn(connection);
    let links = handle.link();
    links
        .add(LinkBridge::new("br-test").build())
        .execute()
        .await
        .unwrap();
    links
        .add(LinkVeth::new("veth-a", "veth-b").build())
        .execute()
        .await
        .unwrap();
    let index = |name| nix::net::if_::if_nametoindex(name).unwrap();
    let (br, a, b) = (index("br-test"), index("veth-a"), index("veth-b"));
    for msg in [
        LinkUnspec::new_with_index(a).controller(br).up().build(),
        LinkUnspec::new_with_index(b).up().build(),
        LinkUnspec::new_with_index(br).up().build(),
    ] {
        links.set(msg).execute().await.unwrap();
    }
    handle
        .address()
        .add(br, "192.0.2.1".parse().unwrap(), 24)
        .execute()
        .await
        .unwrap();

    let nl = Netlink::connect().unwrap();
    let ports = nl.bridge_ports(br).await.unwrap();
    let port = |hairpin| Port {
        index: a,
        name: "veth-a".into(),
        master: br,
        hairpin,
    };
    assert_eq!(ports, [port(false)]);
    nl.set_hairpin(a).await.unwrap();
    assert_eq!(nl.bridge_ports(br).await.unwrap(), [port(true)]);

    let dest: Ipv4Net = "10.244.2.0/24".parse().unwrap();
    let r = route("10.244.2.0/24", "192.0.2.2");
    nl.replace_route(r, 235).await.unwrap();
    assert_eq!(nl.routes(235).await.unwrap(), [(dest, r.via)].into());
    assert!(
        nl.routes(4).await.unwrap().is_empty(),
        "of another protocol"
    );
    let moved = route("10.244.2.0/24", "192.0.2.3");
    nl.replace_route(moved, 235).await.unwrap();
    assert_eq!(nl.routes(235).await.unwrap(), [(dest, moved.via)].into());
    nl.delete_route(dest, 235).await.unwrap();
    assert!(nl.routes(235).await.unwrap().is_empty());
    let err = nl.delete_route(dest, 235).await.unwrap_err().to_string();
    assert!(
        err.starts_with("removing the route to 10.244.2.0/24: No such process"),
        "{err}"
    );
    let err = nl
        .replace_route(route("10.244.3.0/24", "198.51.100.1"), 235)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("routing 10.244.3.0/24 via 198.51.100.1: Network is unreachable"),
        "{err}"
    );
}
