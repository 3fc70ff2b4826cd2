//! Unit tests of the model and the renderer. That `nft` accepts the
//! rendered tables is shown end to end (agent/tests/service_proxy.rs).

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

use super::model::{desired, Backend, Cidr, Proto, ProxyState, ServicePort, SliceInfo, SvcInfo};
use super::render::{render, transaction, Settings};

fn settings() -> Settings {
    Settings {
        table: "bosun-n1".into(),
        service_cidr: Cidr::parse("10.96.0.0/12").unwrap(),
        pod_cidr: Cidr::parse("10.244.1.0/24").unwrap(),
        bridge_netfilter: false,
    }
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn web(backends: &[(&str, bool)]) -> ServicePort {
    ServicePort {
        namespace: "default".into(),
        service: "web".into(),
        port_name: "http".into(),
        proto: Proto::Tcp,
        cluster_ip: ip("10.96.0.20"),
        port: 80,
        node_port: None,
        external_local: false,
        affinity: None,
        backends: backends
            .iter()
            .map(|(a, local)| Backend {
                ip: ip(a),
                port: 8080,
                local: *local,
            })
            .collect(),
    }
}

/// The lines of `chain` in `table`, trimmed.
fn chain_of(table: &str, chain: &str) -> Vec<String> {
    let start = table
        .find(&format!("\tchain {chain} {{\n"))
        .unwrap_or_else(|| panic!("no chain {chain} in\n{table}"));
    table[start..]
        .lines()
        .skip(1)
        .take_while(|l| l.trim() != "}")
        .map(|l| l.trim().to_string())
        .collect()
}

#[test]
fn endpoints_are_picked_at_random_and_dnatted() {
    let t = render(
        &settings(),
        &[web(&[("10.244.1.5", true), ("10.244.2.7", false)])],
    );
    assert!(
        t.contains("elements = { 10.96.0.20 . tcp . 80 : goto svc-default/web/http/tcp }"),
        "{t}"
    );
    let svc = chain_of(&t, "svc-default/web/http/tcp");
    assert_eq!(
        svc,
        [
            "ip saddr != 10.244.1.0/24 fib saddr type != local jump mark-for-masquerade",
            "numgen random mod 2 vmap { 0 : goto ep-default/web/http/tcp/10.244.1.5/8080, \
             1 : goto ep-default/web/http/tcp/10.244.2.7/8080 }"
        ]
    );
    // A local endpoint (the node's bridge) masquerades the node's pods.
    assert_eq!(
        chain_of(&t, "ep-default/web/http/tcp/10.244.1.5/8080"),
        [
            "ip saddr 10.244.1.0/24 jump mark-for-masquerade",
            "meta l4proto tcp dnat to 10.244.1.5:8080"
        ]
    );
    assert_eq!(
        chain_of(&t, "ep-default/web/http/tcp/10.244.2.7/8080"),
        ["meta l4proto tcp dnat to 10.244.2.7:8080"]
    );
    // With br_netfilter, only the pod's connections to itself.
    let bridged = Settings {
        bridge_netfilter: true,
        ..settings()
    };
    let t2 = render(&bridged, &[web(&[("10.244.1.5", true)])]);
    assert_eq!(
        chain_of(&t2, "ep-default/web/http/tcp/10.244.1.5/8080"),
        [
            "ip saddr 10.244.1.5 jump mark-for-masquerade",
            "meta l4proto tcp dnat to 10.244.1.5:8080"
        ]
    );
    // Both hooks dispatch; the rest of the range is rejected after them.
    assert_eq!(chain_of(&t, "nat-prerouting")[1], "jump services");
    assert_eq!(chain_of(&t, "nat-output")[1], "jump services");
    assert_eq!(
        chain_of(&t, "filter-forward")[1],
        "ip daddr 10.96.0.0/12 reject"
    );
    assert_eq!(
        chain_of(&t, "filter-output-post-dnat"),
        [
            "type filter hook output priority -90; policy accept;",
            "ip daddr 10.96.0.0/12 reject"
        ]
    );
}

#[test]
fn a_service_without_ready_endpoints_is_left_to_the_reject() {
    let mut p = web(&[]);
    p.node_port = Some(31234);
    let t = render(&settings(), &[p]);
    assert!(!t.contains("svc-default"), "{t}");
    assert!(!t.contains("10.96.0.20"), "not dispatched: {t}");
    assert!(t.contains("elements = { tcp . 31234 }"), "{t}");
    assert!(chain_of(&t, "filter-input")[1].contains("@no-endpoint-nodeports reject"));
    // The empty table still rejects the whole range.
    let empty = transaction(&settings(), &render(&settings(), &[]), None);
    assert!(
        empty.starts_with("add table ip bosun-n1\ndelete table ip bosun-n1\ntable ip bosun-n1 {\n")
    );
    assert!(empty.contains("ip daddr 10.96.0.0/12 reject"));
}

#[test]
fn a_node_port_is_dispatched_on_local_addresses_and_masqueraded() {
    let mut p = web(&[("10.244.2.7", false)]);
    p.node_port = Some(31234);
    let t = render(&settings(), &[p]);
    assert!(
        t.contains("elements = { tcp . 31234 : goto ext-default/web/http/tcp }"),
        "{t}"
    );
    assert!(chain_of(&t, "services").contains(
        &"fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports"
            .to_string()
    ));
    assert_eq!(
        chain_of(&t, "ext-default/web/http/tcp"),
        ["jump mark-for-masquerade", "goto svc-default/web/http/tcp"]
    );
    assert_eq!(
        chain_of(&t, "nat-postrouting")[1..],
        [
            "mark and 0x4000 == 0 return",
            "mark set mark xor 0x4000",
            "masquerade fully-random"
        ]
    );
}

#[test]
fn local_policy_uses_only_local_endpoints_without_masquerade() {
    let mut p = web(&[("10.244.1.5", true), ("10.244.2.7", false)]);
    p.node_port = Some(31234);
    p.external_local = true;
    let t = render(&settings(), &[p.clone()]);
    assert_eq!(
        chain_of(&t, "ext-default/web/http/tcp"),
        [
            "ip saddr 10.244.1.0/24 goto svc-default/web/http/tcp",
            "fib saddr type local jump mark-for-masquerade",
            "fib saddr type local goto svc-default/web/http/tcp",
            "numgen random mod 1 vmap { 0 : goto ep-default/web/http/tcp/10.244.1.5/8080 }"
        ]
    );
    // No local endpoint: outside traffic is dropped, not sent elsewhere.
    p.backends.retain(|b| !b.local);
    let t = render(&settings(), &[p]);
    assert_eq!(
        chain_of(&t, "ext-default/web/http/tcp").last().unwrap(),
        "drop"
    );
}

#[test]
fn client_ip_affinity_keeps_a_set_per_endpoint_with_the_timeout() {
    let mut p = web(&[("10.244.1.5", true), ("10.244.2.7", false)]);
    p.affinity = Some(60);
    let t = render(&settings(), &[p]);
    assert!(t.contains(
        "\tset aff-default/web/http/tcp/10.244.1.5/8080 {\n\t\ttype ipv4_addr\n\t\tflags dynamic,timeout\n\t\ttimeout 60s\n\t}"
    ), "{t}");
    let svc = chain_of(&t, "svc-default/web/http/tcp");
    assert_eq!(
        svc[1..3],
        [
            "ip saddr @aff-default/web/http/tcp/10.244.1.5/8080 goto ep-default/web/http/tcp/10.244.1.5/8080",
            "ip saddr @aff-default/web/http/tcp/10.244.2.7/8080 goto ep-default/web/http/tcp/10.244.2.7/8080"
        ]
    );
    assert!(svc[3].starts_with("numgen random mod 2"));
    assert_eq!(
        chain_of(&t, "ep-default/web/http/tcp/10.244.2.7/8080"),
        [
            "update @aff-default/web/http/tcp/10.244.2.7/8080 { ip saddr }",
            "meta l4proto tcp dnat to 10.244.2.7:8080"
        ]
    );
}

#[test]
fn udp_ports_are_dnatted_as_udp() {
    let mut p = web(&[("10.244.2.7", false)]);
    p.proto = Proto::Udp;
    p.port_name = String::new();
    p.port = 53;
    let t = render(&settings(), &[p]);
    assert!(
        t.contains("10.96.0.20 . udp . 53 : goto svc-default/web/53/udp"),
        "{t}"
    );
    assert!(
        t.contains("meta l4proto udp dnat to 10.244.2.7:8080"),
        "{t}"
    );
}

fn service(v: serde_json::Value) -> SvcInfo {
    SvcInfo::from_service(&serde_json::from_value::<Service>(v).unwrap()).unwrap()
}

fn slice(v: serde_json::Value) -> SliceInfo {
    SliceInfo::from_slice(&serde_json::from_value::<EndpointSlice>(v).unwrap()).unwrap()
}

#[test]
fn only_ready_endpoints_of_the_services_slices_serve_it() {
    let mut state = ProxyState::default();
    state.services.insert(
        ("default".into(), "web".into()),
        service(json!({"metadata": {"name": "web"}, "spec": {
            "type": "NodePort", "clusterIP": "10.96.0.20", "sessionAffinity": "ClientIP",
            "externalTrafficPolicy": "Local",
            "ports": [{"name": "http", "port": 80, "nodePort": 31234}]}})),
    );
    state.slices.insert(
        ("default".into(), "web-abc".into()),
        slice(json!({"metadata": {"name": "web-abc",
            "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": ["10.244.1.5"], "conditions": {"ready": true}, "nodeName": "n1"},
                {"addresses": ["10.244.2.7"], "conditions": {"ready": true}, "nodeName": "n2"},
                {"addresses": ["10.244.1.6"], "conditions": {"ready": false}, "nodeName": "n1"}]})),
    );
    // Another service's slice.
    state.slices.insert(
        ("default".into(), "other-x".into()),
        slice(json!({"metadata": {"name": "other-x",
            "labels": {"kubernetes.io/service-name": "other"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 9}],
            "endpoints": [{"addresses": ["10.244.1.9"]}]})),
    );
    let ports = desired(&state, "n1", Cidr::parse("10.244.1.0/24").unwrap());
    assert_eq!(ports.len(), 1);
    let p = &ports[0];
    assert_eq!(p.node_port, Some(31234));
    assert!(p.external_local);
    assert_eq!(p.affinity, Some(10800), "the default timeout");
    assert_eq!(
        p.backends,
        [
            Backend {
                ip: ip("10.244.1.5"),
                port: 8080,
                local: true
            },
            Backend {
                ip: ip("10.244.2.7"),
                port: 8080,
                local: false
            },
        ]
    );
}

#[test]
fn headless_and_external_name_services_are_not_proxied() {
    for spec in [
        json!({"clusterIP": "None", "ports": [{"port": 80}]}),
        json!({"type": "ExternalName", "externalName": "example.com"}),
    ] {
        let svc: Service =
            serde_json::from_value(json!({"metadata": {"name": "h"}, "spec": spec})).unwrap();
        assert!(SvcInfo::from_service(&svc).is_none());
    }
}

#[test]
fn a_sync_over_the_last_table_keeps_it_and_deletes_what_went() {
    let mut p = web(&[("10.244.1.5", true), ("10.244.2.7", false)]);
    p.affinity = Some(60);
    let before = render(&settings(), &[p.clone()]);
    p.backends.pop();
    let after = render(&settings(), &[p]);
    let script = transaction(&settings(), &after, Some(&before));
    let (head, tail) = script.split_once(&after).unwrap();
    assert_eq!(
        head,
        "add table ip bosun-n1\nflush table ip bosun-n1\nflush map ip bosun-n1 service-ips\n\
         flush map ip bosun-n1 service-nodeports\nflush set ip bosun-n1 no-endpoint-nodeports\n"
    );
    assert_eq!(
        tail,
        "delete chain ip bosun-n1 ep-default/web/http/tcp/10.244.2.7/8080\n\
         delete set ip bosun-n1 aff-default/web/http/tcp/10.244.2.7/8080\n"
    );
    assert!(!script.contains("delete table"), "{script}");
}
