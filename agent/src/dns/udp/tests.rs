//! The fast path against the general path: on real sockets on 127.0.0.1,
//! every answer equals, byte for byte, what hickory-server's own UDP server
//! gives with the same handler; and the filed answers against a fresh run
//! of the general path, for random input.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use hickory_server::proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_server::proto::rr::{DNSClass, Name, RecordType};
use hickory_server::Server;

use super::super::tests::{fuzz_inputs, query_bytes, serve_zone, shared, state, CLIENT};
use super::super::{DnsHandler, Zone};
use super::answers::{question_key, Answers};
use super::general;

fn with_id(raw: &[u8], id: u16) -> Vec<u8> {
    let mut v = raw.to_vec();
    v[..2].copy_from_slice(&id.to_be_bytes());
    v
}

async fn ask(server: SocketAddr, raw: &[u8]) -> Vec<u8> {
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    sock.send_to(raw, server).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), sock.recv(&mut buf))
        .await
        .expect("an answer within 5 s")
        .unwrap();
    buf.truncate(n);
    buf
}

/// A query with every knob: case as given, class, RD, CD, EDNS.
fn query(q: &str, t: RecordType, class: DNSClass, rd: bool, cd: bool, edns: bool) -> Vec<u8> {
    let mut m = Message::new(1, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = rd;
    m.metadata.checking_disabled = cd;
    let mut query = Query::query(Name::from_ascii(q).unwrap(), t);
    query.set_query_class(class);
    m.add_query(query);
    if edns {
        let mut e = Edns::new();
        e.set_max_payload(4096);
        m.set_edns(e);
    }
    m.to_vec().unwrap()
}

#[tokio::test]
async fn fast_answers_are_the_general_paths_bytes() {
    let zone = shared(&state());
    // hickory-server's own UDP server, with the same handler and zone.
    let handler = DnsHandler::new(zone.clone(), vec![], Duration::from_millis(100));
    let reference_socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let reference = reference_socket.local_addr().unwrap();
    let mut hickory = Server::new(handler);
    hickory.register_socket(reference_socket);
    let ours = serve_zone(vec![], Duration::from_millis(100), zone).await;

    let plain = |q: &str, t| query(q, t, DNSClass::IN, true, false, false);
    let mut in_zone = vec![
        plain("web.default.svc.cluster.local.", RecordType::A),
        plain("WEB.Default.svc.CLUSTER.local.", RecordType::A),
        plain("nginx.default.svc.cluster.local.", RecordType::A),
        plain("web-0.nginx.default.svc.cluster.local.", RecordType::A),
        plain("_http._tcp.web.default.svc.cluster.local.", RecordType::SRV),
        plain(
            "_http._tcp.nginx.default.svc.cluster.local.",
            RecordType::SRV,
        ),
        plain(
            "_HTTP._tcp.Nginx.default.svc.cluster.local.",
            RecordType::SRV,
        ),
        plain("20.0.96.10.in-addr.arpa.", RecordType::PTR),
        plain("10.1.244.10.IN-ADDR.arpa.", RecordType::PTR),
        plain("nope.default.svc.cluster.local.", RecordType::A),
        plain("Nope.Default.svc.cluster.local.", RecordType::A),
        plain("web.default.svc.cluster.local.", RecordType::AAAA),
        plain("svc.cluster.local.", RecordType::A),
        plain("cluster.local.", RecordType::SOA),
        plain("ext.default.svc.cluster.local.", RecordType::A),
        plain("10-244-1-9.default.pod.cluster.local.", RecordType::A),
        plain("web.default.svc.cluster.local.", RecordType::ANY),
    ];
    // The same questions with other flags, EDNS, another class.
    let web = "web.default.svc.cluster.local.";
    for (q, class, rd, cd, edns) in [
        (web, DNSClass::IN, false, false, false),
        (web, DNSClass::IN, true, true, false),
        (web, DNSClass::IN, true, false, true),
        (
            "nope.default.svc.cluster.local.",
            DNSClass::IN,
            true,
            false,
            true,
        ),
        (web, DNSClass::CH, true, false, false),
    ] {
        in_zone.push(query(q, RecordType::A, class, rd, cd, edns));
    }
    // Answers that depend on more than the zone: never filed.
    let elsewhere = [
        plain("outside.example.", RecordType::A),
        plain("web-0.nginx.", RecordType::A),
        plain("1.2.0.192.in-addr.arpa.", RecordType::PTR),
    ];
    for (i, raw) in in_zone.iter().chain(&elsewhere).enumerate() {
        let want = ask(reference, &with_id(raw, 0x1111)).await;
        let rcode = Message::from_vec(&want).unwrap().metadata.response_code;
        // The first time by the general path, then from the filed bytes.
        for id in [0x2222, 0xfedc, 7] {
            let got = ask(ours.local_addr, &with_id(raw, id)).await;
            assert_eq!(got, with_id(&want, id), "query {i} ({rcode}), id {id:#x}");
        }
    }
    assert_eq!(ours.filed_answers(), in_zone.len());

    // Spot checks of what the bytes say.
    let m = |raw: &[u8]| Message::from_vec(raw).unwrap();
    let r = m(&ask(ours.local_addr, &with_id(&in_zone[1], 0xabcd)).await);
    assert_eq!(r.metadata.id, 0xabcd);
    assert!(r.metadata.recursion_desired && r.metadata.authoritative);
    assert_eq!(
        r.queries[0].name().to_ascii(),
        "WEB.Default.svc.CLUSTER.local."
    );
    assert_eq!(r.answers[0].data.to_string(), "10.96.0.20");
    let r = m(&ask(ours.local_addr, &in_zone[17]).await);
    assert!(!r.metadata.recursion_desired);
    let r = m(&ask(ours.local_addr, &in_zone[18]).await);
    assert!(r.metadata.checking_disabled);
    let r = m(&ask(ours.local_addr, &in_zone[9]).await);
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    let r = m(&ask(ours.local_addr, &in_zone[11]).await);
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(r.answers.is_empty() && r.authorities.len() == 1);

    ours.shutdown().await;
    hickory.shutdown_gracefully().await.unwrap();
}

#[tokio::test]
async fn a_new_zone_is_answered_at_once() {
    let mut st = state();
    let zone = shared(&st);
    let server = serve_zone(vec![], Duration::from_millis(100), zone.clone()).await;
    let a = |q: &str| query_bytes(q, RecordType::A, 99);
    let answer_of = |raw: Vec<u8>| {
        let m = Message::from_vec(&raw).unwrap();
        (
            m.metadata.response_code,
            m.answers
                .iter()
                .map(|r| r.data.to_string())
                .collect::<Vec<_>>(),
        )
    };
    let web = a("web.default.svc.cluster.local.");
    let new = a("new.default.svc.cluster.local.");
    for _ in 0..2 {
        assert_eq!(
            answer_of(ask(server.local_addr, &web).await),
            (ResponseCode::NoError, vec!["10.96.0.20".to_string()])
        );
        assert_eq!(
            answer_of(ask(server.local_addr, &new).await).0,
            ResponseCode::NXDomain
        );
    }
    assert_eq!(server.filed_answers(), 2);

    // web moves to another cluster IP and `new` appears.
    let web_key = ("default".to_string(), "web".to_string());
    let mut moved = st.api.services[&web_key].clone();
    moved.cluster_ips = vec!["10.96.0.99".parse().unwrap()];
    st.api.services.insert(web_key, moved.clone());
    st.api
        .services
        .insert(("default".into(), "new".into()), moved.clone());
    *zone.write().unwrap() = Arc::new(st.zone());
    assert_eq!(
        answer_of(ask(server.local_addr, &web).await),
        (ResponseCode::NoError, vec!["10.96.0.99".to_string()])
    );
    assert_eq!(
        answer_of(ask(server.local_addr, &new).await),
        (ResponseCode::NoError, vec!["10.96.0.99".to_string()])
    );
    // Only the new zone's answers are kept.
    assert_eq!(server.filed_answers(), 2);
    server.shutdown().await;
}

#[tokio::test]
async fn random_bytes_never_panic_the_fast_path_and_filed_answers_match() {
    let zone: Arc<RwLock<Arc<Zone>>> = shared(&state());
    let handler = DnsHandler::new(zone.clone(), vec![], Duration::from_millis(20));
    let z = zone.read().unwrap().clone();
    let answers = Answers::default();
    let src: SocketAddr = (CLIENT, 5353).into();
    let (mut filed, mut out) = (0, Vec::new());
    for raw in fuzz_inputs(12, 20_000) {
        let key = question_key(&raw).map(<[u8]>::to_vec);
        let Some((response, alone)) = general(&handler, &z, raw.clone(), src).await else {
            continue;
        };
        Message::from_vec(&response).expect("our response parses");
        let (true, Some(key)) = (alone, key) else {
            continue;
        };
        answers.file(z.generation(), &key, &response);
        filed += 1;
        // The same query with another ID: the filed answer is what the
        // general path gives it.
        let again = with_id(&raw, u16::from_be_bytes([raw[0], raw[1]]) ^ 0x5a5a);
        assert!(answers.answer(
            z.generation(),
            question_key(&again).unwrap(),
            [again[0], again[1]],
            &mut out
        ));
        let (fresh, _) = general(&handler, &z, again, src).await.unwrap();
        assert_eq!(out, fresh);
        // Filed answers are of this zone only.
        assert!(!answers.answer(z.generation() + 1, &key, [0, 0], &mut out));
    }
    assert!(filed > 100, "only {filed} inputs were filed");
    for len in 0..600 {
        question_key(&vec![0u8; len]);
    }
}
