//! Unit tests of the cluster DNS: the records on a built zone, and the
//! server on real sockets on 127.0.0.1 (forwarding to a tiny resolver
//! started here; nothing leaves the host).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use hickory_server::net::runtime::TokioTime;
use hickory_server::net::xfer::Protocol;
use hickory_server::proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_server::proto::rr::rdata::A;
use hickory_server::proto::rr::{Name, RData, Record, RecordType};
use hickory_server::server::{Request, RequestHandler};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::lookup::{parse_reverse, Answer, MAX_CHAIN};
use super::pods::{PodInfo, Pods};
use super::udp::Encoded;
use super::upstream::{host_resolvers, parse_resolv_conf};
use super::{gateway_of, DnsHandler, DnsServer, DnsSettings, SharedZone, Zone};
use crate::services::tests::{service, slice};
use crate::services::{ServiceState, SliceInfo, SvcInfo};

pub(super) const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 244, 1, 9));

fn pod(ns: &str, name: &str, ip: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": []},
        "status": {"podIP": ip, "podIPs": [{"ip": ip}]}
    }))
    .unwrap()
}

fn key(ns: &str, name: &str) -> (String, String) {
    (ns.to_string(), name.to_string())
}

/// A ClusterIP service `web` (10.96.0.20, port `http` 80), a headless
/// service `nginx` with web-0 and web-1 ready and web-2 not ready, an
/// ExternalName service, and the client pod `client` (10.244.1.9) in
/// `default`.
/// The cluster a test zone is built from.
#[derive(Debug, Default, Clone)]
pub(super) struct ClusterState {
    pub api: ServiceState,
    pub pods: Pods,
}

impl ClusterState {
    pub(super) fn zone(&self) -> Zone {
        Zone::build(&self.api, &self.pods, "cluster.local", 5)
    }
}

pub(super) fn state() -> ClusterState {
    let mut st = ClusterState::default();
    let ports = json!([{"name": "http", "port": 80, "protocol": "TCP"}]);
    st.api.services.insert(
        key("default", "web"),
        SvcInfo::from_service(&service("default", "web", "10.96.0.20", ports.clone())),
    );
    st.api.services.insert(
        key("default", "nginx"),
        SvcInfo::from_service(&service("default", "nginx", "None", ports)),
    );
    let ext: Service = serde_json::from_value(json!({
        "metadata": {"name": "ext", "namespace": "default"},
        "spec": {"type": "ExternalName", "externalName": "db.example.org"}
    }))
    .unwrap();
    st.api
        .services
        .insert(key("default", "ext"), SvcInfo::from_service(&ext));
    let s = slice(
        "default",
        "nginx-abc",
        "nginx",
        json!([
            {"addresses": ["10.244.1.10"], "hostname": "web-0", "conditions": {"ready": true}},
            {"addresses": ["10.244.1.11"], "hostname": "web-1"},
            {"addresses": ["10.244.1.12"], "hostname": "web-2", "conditions": {"ready": false}},
            {"addresses": ["10.244.1.13"], "conditions": {"ready": true}}
        ]),
    );
    st.api.slices.insert(
        key("default", "nginx-abc"),
        SliceInfo::from_slice(&s).unwrap(),
    );
    for (name, ip) in [
        ("client", "10.244.1.9"),
        ("web-0", "10.244.1.10"),
        ("web-1", "10.244.1.11"),
    ] {
        st.pods.insert(
            key("default", name),
            PodInfo::from_pod(&pod("default", name, ip)),
        );
    }
    st.pods.insert(
        key("other", "lonely"),
        PodInfo::from_pod(&pod("other", "lonely", "10.244.1.50")),
    );
    st
}

fn zone() -> Zone {
    state().zone()
}

fn name(n: &str) -> Name {
    Name::from_ascii(n).unwrap()
}

/// (rcode, answers, authority, additionals) of a zone answer.
fn ask_zone(
    z: &Zone,
    q: &str,
    t: RecordType,
) -> (ResponseCode, Vec<Record>, Vec<Record>, Vec<Record>) {
    match z.lookup(&name(q), t, CLIENT) {
        Answer::Zone {
            rcode,
            answers,
            authority,
            additionals,
        } => (rcode, answers, authority, additionals),
        Answer::Forward => panic!("{q} {t} was forwarded"),
    }
}

fn ips(records: &[Record]) -> Vec<IpAddr> {
    let mut v: Vec<IpAddr> = records
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect();
    v.sort();
    v
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn cluster_ip_service_has_an_a_record_with_a_5s_ttl() {
    let (rcode, answers, _, _) = ask_zone(&zone(), "web.default.svc.cluster.local.", RecordType::A);
    assert_eq!(rcode, ResponseCode::NoError);
    assert_eq!(ips(&answers), [ip("10.96.0.20")]);
    assert_eq!(answers[0].ttl, 5);
    // Names are case-insensitive.
    let (_, answers, _, _) = ask_zone(&zone(), "WEB.Default.SVC.cluster.local.", RecordType::A);
    assert_eq!(ips(&answers), [ip("10.96.0.20")]);
}

#[test]
fn headless_service_answers_every_ready_endpoint() {
    let (rcode, answers, _, _) =
        ask_zone(&zone(), "nginx.default.svc.cluster.local.", RecordType::A);
    assert_eq!(rcode, ResponseCode::NoError);
    // web-2 is not ready.
    assert_eq!(
        ips(&answers),
        [ip("10.244.1.10"), ip("10.244.1.11"), ip("10.244.1.13")]
    );
}

#[test]
fn endpoints_with_a_hostname_get_their_own_name() {
    let z = zone();
    let (_, a0, _, _) = ask_zone(&z, "web-0.nginx.default.svc.cluster.local.", RecordType::A);
    assert_eq!(ips(&a0), [ip("10.244.1.10")]);
    let (_, a1, _, _) = ask_zone(&z, "web-1.nginx.default.svc.cluster.local.", RecordType::A);
    assert_eq!(ips(&a1), [ip("10.244.1.11")]);
    // Not ready: no name.
    let (rcode, _, _, _) = ask_zone(&z, "web-2.nginx.default.svc.cluster.local.", RecordType::A);
    assert_eq!(rcode, ResponseCode::NXDomain);
    // No hostname: the dashed IP.
    let (_, a3, _, _) = ask_zone(
        &z,
        "10-244-1-13.nginx.default.svc.cluster.local.",
        RecordType::A,
    );
    assert_eq!(ips(&a3), [ip("10.244.1.13")]);
}

#[test]
fn srv_of_a_cluster_ip_service_points_at_the_service() {
    let (rcode, answers, _, extra) = ask_zone(
        &zone(),
        "_http._tcp.web.default.svc.cluster.local.",
        RecordType::SRV,
    );
    assert_eq!(rcode, ResponseCode::NoError);
    assert_eq!(answers.len(), 1);
    let RData::SRV(srv) = &answers[0].data else {
        panic!("not SRV: {answers:?}")
    };
    assert_eq!(srv.port, 80);
    assert_eq!(srv.target, name("web.default.svc.cluster.local."));
    assert_eq!(ips(&extra), [ip("10.96.0.20")]);
}

#[test]
fn srv_of_a_headless_service_points_at_each_endpoint() {
    let (_, answers, _, extra) = ask_zone(
        &zone(),
        "_web._tcp.nginx.default.svc.cluster.local.",
        RecordType::SRV,
    );
    let mut targets: Vec<String> = answers
        .iter()
        .map(|r| match &r.data {
            RData::SRV(s) => format!("{}:{}", s.target, s.port),
            other => panic!("not SRV: {other:?}"),
        })
        .collect();
    targets.sort();
    assert_eq!(
        targets,
        [
            "10-244-1-13.nginx.default.svc.cluster.local.:80",
            "web-0.nginx.default.svc.cluster.local.:80",
            "web-1.nginx.default.svc.cluster.local.:80",
        ]
    );
    assert_eq!(
        ips(&extra),
        [ip("10.244.1.10"), ip("10.244.1.11"), ip("10.244.1.13")]
    );
}

fn ptr_of(z: &Zone, q: &str) -> String {
    let (rcode, answers, _, _) = ask_zone(z, q, RecordType::PTR);
    assert_eq!(rcode, ResponseCode::NoError, "{q}");
    match &answers[..] {
        [r] => match &r.data {
            RData::PTR(p) => p.0.to_string(),
            other => panic!("not PTR: {other:?}"),
        },
        other => panic!("{q}: {other:?}"),
    }
}

#[test]
fn ptr_for_service_endpoint_and_pod_ips() {
    let z = zone();
    assert_eq!(
        ptr_of(&z, "20.0.96.10.in-addr.arpa."),
        "web.default.svc.cluster.local."
    );
    assert_eq!(
        ptr_of(&z, "10.1.244.10.in-addr.arpa."),
        "web-0.nginx.default.svc.cluster.local."
    );
    assert_eq!(
        ptr_of(&z, "9.1.244.10.in-addr.arpa."),
        "10-244-1-9.default.pod.cluster.local."
    );
    // An address the cluster does not have is the upstreams' business.
    assert_eq!(
        z.lookup(&name("4.3.2.1.in-addr.arpa."), RecordType::PTR, CLIENT),
        Answer::Forward
    );
    assert_eq!(
        parse_reverse("1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.ip6.arpa"),
        Some(ip("db8::1"))
    );
    assert_eq!(parse_reverse("1.2.in-addr.arpa"), None);
}

#[test]
fn pod_names_resolve_to_their_ip() {
    let (_, answers, _, _) = ask_zone(
        &zone(),
        "10-244-1-50.other.pod.cluster.local.",
        RecordType::A,
    );
    assert_eq!(ips(&answers), [ip("10.244.1.50")]);
    // Not a pod of that namespace.
    let (rcode, _, _, _) = ask_zone(
        &zone(),
        "10-244-1-50.default.pod.cluster.local.",
        RecordType::A,
    );
    assert_eq!(rcode, ResponseCode::NXDomain);
}

#[test]
fn unknown_names_are_nxdomain_and_missing_types_nodata_with_the_soa() {
    let z = zone();
    let (rcode, answers, authority, _) =
        ask_zone(&z, "nope.default.svc.cluster.local.", RecordType::A);
    assert_eq!(rcode, ResponseCode::NXDomain);
    assert!(answers.is_empty());
    assert_eq!(authority[0].record_type(), RecordType::SOA);

    for (q, t) in [
        ("web.default.svc.cluster.local.", RecordType::AAAA),
        ("web.default.svc.cluster.local.", RecordType::MX),
        ("default.svc.cluster.local.", RecordType::A),
        ("svc.cluster.local.", RecordType::A),
    ] {
        let (rcode, answers, authority, _) = ask_zone(&z, q, t);
        assert_eq!(rcode, ResponseCode::NoError, "{q} {t}");
        assert!(answers.is_empty(), "{q} {t}: {answers:?}");
        assert_eq!(authority.len(), 1, "{q} {t}");
        assert_eq!(authority[0].record_type(), RecordType::SOA);
    }
    let (_, soa, _, _) = ask_zone(&z, "cluster.local.", RecordType::SOA);
    assert_eq!(soa[0].record_type(), RecordType::SOA);
    // A name that merely ends like the zone is not in it.
    assert_eq!(
        z.lookup(&name("xcluster.local."), RecordType::A, ip("192.0.2.1")),
        Answer::Forward
    );
}

#[test]
fn external_name_services_are_a_cname() {
    let (rcode, answers, _, _) = ask_zone(&zone(), "ext.default.svc.cluster.local.", RecordType::A);
    assert_eq!(rcode, ResponseCode::NoError);
    match &answers[..] {
        [r] => assert_eq!(
            r.data,
            RData::CNAME(hickory_server::proto::rr::rdata::CNAME(name(
                "db.example.org."
            )))
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn external_names_naming_each_other_give_a_bounded_chain() {
    let mut st = state();
    for (name, target) in [
        ("a", "b.default.svc.cluster.local"),
        ("b", "a.default.svc.cluster.local"),
        ("c", "web.default.svc.cluster.local"),
    ] {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": "ExternalName", "externalName": target}
        }))
        .unwrap();
        st.api
            .services
            .insert(key("default", name), SvcInfo::from_service(&svc));
    }
    let z = st.zone();
    // A loop ends after MAX_CHAIN CNAMEs (it overflowed the stack).
    let (rcode, answers, _, _) = ask_zone(&z, "a.default.svc.cluster.local.", RecordType::A);
    assert_eq!(rcode, ResponseCode::NoError);
    assert_eq!(answers.len(), MAX_CHAIN);
    assert!(answers.iter().all(|r| r.record_type() == RecordType::CNAME));
    // A chain into the zone ends at the addresses.
    let (_, answers, _, _) = ask_zone(&z, "c.default.svc.cluster.local.", RecordType::A);
    assert_eq!(answers[0].record_type(), RecordType::CNAME);
    assert_eq!(ips(&answers[1..]), [ip("10.96.0.20")]);
}

#[test]
fn autopath_expands_relative_names_from_the_asking_pods_namespace() {
    let z = zone();
    // busybox's `nslookup web-0.nginx` sends `web-0.nginx.` as it is.
    let (rcode, answers, _, _) = ask_zone(&z, "web-0.nginx.", RecordType::A);
    assert_eq!(rcode, ResponseCode::NoError);
    assert_eq!(answers[0].name, name("web-0.nginx."));
    assert_eq!(
        answers[0].data,
        RData::CNAME(hickory_server::proto::rr::rdata::CNAME(name(
            "web-0.nginx.default.svc.cluster.local."
        )))
    );
    assert_eq!(ips(&answers[1..]), [ip("10.244.1.10")]);
    // `<svc>.<ns>` through `svc.<domain>`.
    let (_, answers, _, _) = ask_zone(&z, "web.default.", RecordType::A);
    assert_eq!(ips(&answers), [ip("10.96.0.20")]);
    // From a pod of another namespace, `web-0.nginx` means nothing of ours.
    assert_eq!(
        z.lookup(&name("web-0.nginx."), RecordType::A, ip("10.244.1.50")),
        Answer::Forward
    );
    // Nor from an address that is no pod.
    assert_eq!(
        z.lookup(&name("web-0.nginx."), RecordType::A, ip("192.0.2.7")),
        Answer::Forward
    );
    // Names of the outside world go out.
    assert_eq!(
        z.lookup(&name("example.org."), RecordType::A, CLIENT),
        Answer::Forward
    );
}

#[test]
fn finished_and_host_network_pods_have_no_names() {
    let mut done = pod("default", "job", "10.244.1.60");
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    assert!(PodInfo::from_pod(&done).ips.is_empty());
    let mut host = pod("default", "h", "192.168.1.10");
    host.spec.as_mut().unwrap().host_network = Some(true);
    assert!(PodInfo::from_pod(&host).ips.is_empty());
    assert_eq!(
        PodInfo::from_pod(&pod("default", "p", "10.244.1.61")).ips,
        [ip("10.244.1.61")]
    );
}

#[test]
fn the_zone_follows_deletions() {
    let mut st = state();
    st.api.slices.clear();
    st.api.services.remove(&key("default", "web"));
    let z = st.zone();
    let (rcode, _, _, _) = ask_zone(&z, "web.default.svc.cluster.local.", RecordType::A);
    assert_eq!(rcode, ResponseCode::NXDomain);
    let (rcode, _, _, _) = ask_zone(&z, "web-0.nginx.default.svc.cluster.local.", RecordType::A);
    assert_eq!(rcode, ResponseCode::NXDomain);
}

#[test]
fn resolv_conf_skips_the_systemd_stub_and_the_server_itself() {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("resolv.conf");
    let real = dir.path().join("real.conf");
    std::fs::write(
        &etc,
        "# stub\nnameserver 127.0.0.53\noptions edns0\nsearch corp.example lab.example.\n",
    )
    .unwrap();
    std::fs::write(&real, "nameserver 192.0.2.53\nnameserver 10.244.1.1\n").unwrap();
    let conf = host_resolvers(&etc, &real, Some(ip("10.244.1.1")));
    assert_eq!(conf.nameservers, [ip("192.0.2.53")]);
    assert_eq!(conf.search, ["corp.example", "lab.example"]);

    std::fs::write(
        &etc,
        "nameserver 198.51.100.1 ; x\nnameserver fe80::1%eth0\n",
    )
    .unwrap();
    let conf = host_resolvers(&etc, &real, None);
    assert_eq!(conf.nameservers, [ip("198.51.100.1"), ip("fe80::1")]);
    assert!(parse_resolv_conf("garbage\n\nnameserver x")
        .nameservers
        .is_empty());
}

#[test]
fn the_gateway_is_the_first_address_of_the_pod_cidr() {
    assert_eq!(
        gateway_of("10.244.3.0/24"),
        Some(Ipv4Addr::new(10, 244, 3, 1))
    );
    assert_eq!(
        gateway_of("10.244.3.7/24"),
        Some(Ipv4Addr::new(10, 244, 3, 1))
    );
    assert_eq!(
        gateway_of("10.244.3.6/30"),
        Some(Ipv4Addr::new(10, 244, 3, 5))
    );
    assert_eq!(gateway_of("10.244.3.6/31"), None, "no room for a gateway");
    assert_eq!(gateway_of("nonsense"), None);
}

// --- the server on real sockets ---

pub(super) fn shared(st: &ClusterState) -> SharedZone {
    Arc::new(RwLock::new(Arc::new(st.zone())))
}

pub(super) async fn start_server(upstreams: Vec<SocketAddr>, timeout: Duration) -> DnsServer {
    serve_zone(upstreams, timeout, shared(&state())).await
}

/// A server on 127.0.0.1 answering from `zone`.
pub(super) async fn serve_zone(
    upstreams: Vec<SocketAddr>,
    timeout: Duration,
    zone: SharedZone,
) -> DnsServer {
    let settings = DnsSettings {
        bind: "127.0.0.1:0".parse().unwrap(),
        domain: "cluster.local".into(),
        upstreams,
        ttl: 5,
        forward_timeout: timeout,
        services: None,
    };
    DnsServer::serve(&settings, zone).await.unwrap()
}

pub(super) fn query_bytes(q: &str, t: RecordType, id: u16) -> Vec<u8> {
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(name(q), t));
    m.to_vec().unwrap()
}

async fn ask_udp(server: SocketAddr, q: &str, t: RecordType) -> Message {
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    sock.send_to(&query_bytes(q, t, 4242), server)
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), sock.recv(&mut buf))
        .await
        .expect("the server answers within 5 s")
        .unwrap();
    let m = Message::from_vec(&buf[..n]).unwrap();
    assert_eq!(m.metadata.id, 4242);
    m
}

/// A resolver on 127.0.0.1 answering every A question with 192.0.2.1,
/// counting what it was asked.
async fn test_resolver() -> (
    SocketAddr,
    Arc<Mutex<Vec<String>>>,
    tokio::task::JoinHandle<()>,
) {
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    let task = tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((n, from)) = sock.recv_from(&mut buf).await else {
                return;
            };
            let Ok(q) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            let mut r = Message::response(q.metadata.id, OpCode::Query);
            r.metadata.recursion_available = true;
            for query in &q.queries {
                log.lock().unwrap().push(query.name().to_string());
                r.add_query(query.clone());
                r.add_answer(Record::from_rdata(
                    query.name().clone(),
                    60,
                    RData::A(A(Ipv4Addr::new(192, 0, 2, 1))),
                ));
            }
            let _ = sock.send_to(&r.to_vec().unwrap(), from).await;
        }
    });
    (addr, asked, task)
}

#[tokio::test]
async fn the_server_answers_zone_names_over_udp_and_tcp() {
    let server = start_server(vec![], Duration::from_millis(300)).await;
    let m = ask_udp(
        server.local_addr,
        "web.default.svc.cluster.local.",
        RecordType::A,
    )
    .await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(m.metadata.authoritative);
    assert_eq!(ips(&m.answers), [ip("10.96.0.20")]);

    let m = ask_udp(
        server.local_addr,
        "web.default.svc.cluster.local.",
        RecordType::AAAA,
    )
    .await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(m.answers.is_empty());
    assert_eq!(m.authorities[0].record_type(), RecordType::SOA);

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(server.local_addr)
        .await
        .unwrap();
    let q = query_bytes("nope.default.svc.cluster.local.", RecordType::A, 7);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend(q);
    tcp.write_all(&framed).await.unwrap();
    let n = tcp.read_u16().await.unwrap() as usize;
    let mut buf = vec![0; n];
    tcp.read_exact(&mut buf).await.unwrap();
    let m = Message::from_vec(&buf).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    server.shutdown().await;
}

#[tokio::test]
async fn names_outside_the_zone_are_forwarded_to_the_upstream() {
    let (up, asked, resolver) = test_resolver().await;
    let server = start_server(vec![up], Duration::from_secs(2)).await;
    let m = ask_udp(server.local_addr, "outside.example.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert_eq!(ips(&m.answers), [ip("192.0.2.1")]);
    assert!(!m.metadata.authoritative);
    assert_eq!(*asked.lock().unwrap(), ["outside.example."]);
    // Zone names are never asked upstream.
    ask_udp(
        server.local_addr,
        "nope.default.svc.cluster.local.",
        RecordType::A,
    )
    .await;
    assert_eq!(asked.lock().unwrap().len(), 1);
    server.shutdown().await;
    resolver.abort();
}

#[tokio::test]
async fn a_dead_or_silent_upstream_gives_servfail_quickly() {
    // Nobody on the port: refused at once.
    let gone = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dead = gone.local_addr().unwrap();
    drop(gone);
    // Somebody who never answers: the deadline.
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for up in [dead, silent.local_addr().unwrap()] {
        let server = start_server(vec![up], Duration::from_millis(400)).await;
        let start = Instant::now();
        let m = ask_udp(server.local_addr, "outside.example.", RecordType::A).await;
        assert_eq!(m.metadata.response_code, ResponseCode::ServFail, "{up}");
        assert!(
            start.elapsed() < Duration::from_millis(1500),
            "SERVFAIL took {:?}",
            start.elapsed()
        );
        server.shutdown().await;
    }
}

#[tokio::test]
async fn two_questions_are_formerr() {
    let server = start_server(vec![], Duration::from_millis(300)).await;
    let mut m = Message::new(9, MessageType::Query, OpCode::Query);
    m.add_query(Query::query(
        name("web.default.svc.cluster.local."),
        RecordType::A,
    ));
    m.add_query(Query::query(
        name("nginx.default.svc.cluster.local."),
        RecordType::A,
    ));
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    sock.send_to(&m.to_vec().unwrap(), server.local_addr)
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), sock.recv(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let r = Message::from_vec(&buf[..n]).unwrap();
    assert_eq!(r.metadata.response_code, ResponseCode::FormErr);
    server.shutdown().await;
}

/// `count` inputs for the parse and answer path: pure noise, valid
/// queries with bytes flipped or cut, and well-formed questions for odd
/// names made of the words of the zone's names.
pub(super) fn fuzz_inputs(seed: u64, count: usize) -> Vec<Vec<u8>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let seeds = [
        query_bytes(
            "_http._tcp.web.default.svc.cluster.local.",
            RecordType::SRV,
            1,
        ),
        query_bytes("9.1.244.10.in-addr.arpa.", RecordType::PTR, 2),
        query_bytes("web-0.nginx.", RecordType::A, 3),
    ];
    let words = [
        "1",
        "244",
        "10",
        "in-addr",
        "ip6",
        "arpa",
        "cluster",
        "local",
        "svc",
        "pod",
        "default",
        "web",
        "nginx",
        "web-0",
        "_http",
        "_tcp",
        "10-244-1-9",
        "x",
    ];
    let types = [
        RecordType::A,
        RecordType::AAAA,
        RecordType::SRV,
        RecordType::PTR,
        RecordType::CNAME,
        RecordType::SOA,
        RecordType::ANY,
        RecordType::MX,
    ];
    (0..count)
        .map(|i| match i % 4 {
            0 => {
                let len = rng.random_range(0..600);
                (0..len).map(|_| rng.random()).collect()
            }
            1 => {
                let mut v = seeds[i % seeds.len()].clone();
                for _ in 0..rng.random_range(1..6) {
                    let at = rng.random_range(0..v.len());
                    v[at] = rng.random();
                }
                v
            }
            2 => {
                let v = &seeds[i % seeds.len()];
                v[..rng.random_range(0..v.len())].to_vec()
            }
            _ => {
                let labels: Vec<&str> = (0..rng.random_range(0..8))
                    .map(|_| words[rng.random_range(0..words.len())])
                    .collect();
                let t = types[rng.random_range(0..types.len())];
                query_bytes(&format!("{}.", labels.join(".")), t, 4)
            }
        })
        .collect()
}

#[tokio::test]
async fn random_bytes_never_panic_the_parse_and_answer_path() {
    let handler = DnsHandler::new(shared(&state()), vec![], Duration::from_millis(50));
    let mut answered = 0;
    for raw in fuzz_inputs(11, 20_000) {
        let Ok(request) = Request::from_bytes(raw, (CLIENT, 5353).into(), Protocol::Udp) else {
            continue;
        };
        if request.metadata.message_type != MessageType::Query {
            continue;
        }
        let capture = Encoded::default();
        handler
            .handle_request::<_, TokioTime>(&request, capture.clone())
            .await;
        let out = capture.take().expect("a response");
        Message::from_vec(&out).expect("our response parses");
        answered += 1;
    }
    assert!(answered > 100, "only {answered} inputs reached the handler");
}

#[tokio::test]
async fn garbage_on_the_socket_leaves_the_server_answering() {
    let server = start_server(vec![], Duration::from_millis(100)).await;
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for _ in 0..2000 {
        let len = rng.random_range(0..1500);
        let raw: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        sock.send_to(&raw, server.local_addr).await.unwrap();
    }
    // An oversized datagram too.
    sock.send_to(&vec![0xab; 9000], server.local_addr)
        .await
        .unwrap();
    let m = ask_udp(
        server.local_addr,
        "web.default.svc.cluster.local.",
        RecordType::A,
    )
    .await;
    assert_eq!(ips(&m.answers), [ip("10.96.0.20")]);
    server.shutdown().await;
}

// --- names that exist before the DNS server starts ---

/// An API server on 127.0.0.1 that answers the DNS cache's three watches
/// with a streaming initial list (`sendInitialEvents`: the objects as
/// ADDED events, then the bookmark that ends the list) and then keeps the
/// watch open with nothing more. The paths it was asked are recorded.
async fn api_with(
    services: Vec<Service>,
    slices: Vec<EndpointSlice>,
    pods: Vec<Pod>,
) -> (
    SocketAddr,
    Arc<Mutex<Vec<String>>>,
    tokio::task::JoinHandle<()>,
) {
    use axum::body::Body;
    use axum::extract::{OriginalUri, State};
    use axum::routing::get;
    use futures::StreamExt;

    type Lists =
        Arc<std::collections::HashMap<&'static str, (&'static str, Vec<serde_json::Value>)>>;
    let lists: Lists = Arc::new(
        [
            (
                "/api/v1/services",
                ("Service", services.iter().map(|o| json!(o)).collect()),
            ),
            (
                "/apis/discovery.k8s.io/v1/endpointslices",
                ("EndpointSlice", slices.iter().map(|o| json!(o)).collect()),
            ),
            (
                "/api/v1/pods",
                ("Pod", pods.iter().map(|o| json!(o)).collect()),
            ),
        ]
        .into(),
    );
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    let watch = move |State(lists): State<Lists>, OriginalUri(uri): OriginalUri| {
        let log = log.clone();
        async move {
            log.lock().unwrap().push(uri.to_string());
            let (kind, objects) = &lists[uri.path()];
            let mut lines: Vec<Result<String, std::io::Error>> = objects
                .iter()
                .map(|o| Ok(format!("{}\n", json!({"type": "ADDED", "object": o}))))
                .collect();
            lines.push(Ok(format!(
                "{}\n",
                json!({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": "v1",
                    "metadata": {"resourceVersion": "10",
                        "annotations": {"k8s.io/initial-events-end": "true"}}}})
            )));
            let body = futures::stream::iter(lines).chain(futures::stream::pending());
            axum::response::Response::builder()
                .header("content-type", "application/json")
                .body(Body::from_stream(body))
                .unwrap()
        }
    };
    let app = axum::Router::new()
        .route("/api/v1/services", get(watch.clone()))
        .route(
            "/apis/discovery.k8s.io/v1/endpointslices",
            get(watch.clone()),
        )
        .route("/api/v1/pods", get(watch))
        .with_state(lists);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, asked, task)
}

/// A server on 127.0.0.1 that forwards nowhere.
fn local_settings(services: Option<crate::services::ServiceCache>) -> DnsSettings {
    DnsSettings {
        bind: "127.0.0.1:0".parse().unwrap(),
        domain: "cluster.local".into(),
        upstreams: vec![],
        ttl: 5,
        forward_timeout: Duration::from_millis(300),
        services,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_exist_before_the_server_starts_resolve_once_it_is_up() {
    // The objects are in the cluster before the DNS server starts: its
    // names come only from the watches' initial lists.
    let ports = json!([{"name": "http", "port": 80, "protocol": "TCP"}]);
    let (api, asked, api_task) = api_with(
        vec![
            service("default", "web", "10.96.0.20", ports.clone()),
            service("default", "nginx", "None", ports),
        ],
        vec![slice(
            "default",
            "nginx-abc",
            "nginx",
            json!([{"addresses": ["10.244.1.10"], "hostname": "web-0"}]),
        )],
        vec![pod("other", "lonely", "10.244.1.50")],
    )
    .await;
    let config = kube::Config::new(format!("http://{api}").parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let server = DnsServer::start(client, local_settings(None))
        .await
        .unwrap();

    let expect = [
        (
            "web.default.svc.cluster.local.",
            RecordType::A,
            "10.96.0.20",
        ),
        (
            "web-0.nginx.default.svc.cluster.local.",
            RecordType::A,
            "10.244.1.10",
        ),
        (
            "nginx.default.svc.cluster.local.",
            RecordType::A,
            "10.244.1.10",
        ),
        (
            "10-244-1-50.other.pod.cluster.local.",
            RecordType::A,
            "10.244.1.50",
        ),
    ];
    let deadline = Instant::now() + Duration::from_secs(10);
    for (q, t, want) in expect {
        loop {
            let m = ask_udp(server.local_addr, q, t).await;
            if m.metadata.response_code == ResponseCode::NoError && ips(&m.answers) == [ip(want)] {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{q} did not resolve to {want} within 10 s of the server starting: {m:?}; the API was asked {:?}",
                asked.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Through the initial lists as watches (streaming lists), not pages.
    let asked = asked.lock().unwrap().clone();
    assert!(
        asked
            .iter()
            .filter(|u| u.contains("watch=true") && u.contains("sendInitialEvents=true"))
            .count()
            >= 3,
        "{asked:?}"
    );
    server.shutdown().await;
    api_task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_and_the_proxy_share_one_watch_of_services_and_of_slices() {
    use crate::services::ServiceCache;
    let ports = json!([{"name": "http", "port": 80, "protocol": "TCP"}]);
    let (api, asked, api_task) = api_with(
        vec![service("default", "web", "10.96.0.20", ports)],
        vec![slice(
            "default",
            "web-abc",
            "web",
            json!([{"addresses": ["10.244.1.10"]}]),
        )],
        vec![],
    )
    .await;
    let config = kube::Config::new(format!("http://{api}").parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let services = ServiceCache::new(client.clone());
    // The proxy's subscription, as `ServiceProxy::start` makes it (first):
    // what it reads each time it is woken.
    let proxy = Arc::new(tokio::sync::Notify::new());
    services.subscribe(&proxy);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let proxy_task = tokio::spawn({
        let (services, seen) = (services.clone(), seen.clone());
        async move {
            loop {
                proxy.notified().await;
                let st = services.read();
                seen.lock()
                    .unwrap()
                    .push((st.services.len(), st.slices.len()));
            }
        }
    });
    let server = DnsServer::start(client, local_settings(Some(services.clone())))
        .await
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = ask_udp(
            server.local_addr,
            "web.default.svc.cluster.local.",
            RecordType::A,
        )
        .await;
        if ips(&m.answers) == [ip("10.96.0.20")] {
            break;
        }
        assert!(Instant::now() < deadline, "web did not resolve: {m:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The proxy was woken by the same watches and read what DNS did.
    while !seen.lock().unwrap().contains(&(1, 1)) {
        assert!(
            Instant::now() < deadline,
            "the proxy never saw the service and its slice: {:?}",
            seen.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    proxy_task.abort();
    let asked = asked.lock().unwrap().clone();
    for path in [
        "/api/v1/services?",
        "/apis/discovery.k8s.io/v1/endpointslices?",
    ] {
        assert_eq!(
            asked.iter().filter(|u| u.starts_with(path)).count(),
            1,
            "one watch of {path} for both: {asked:?}"
        );
    }
    server.shutdown().await;
    api_task.abort();
}
