//! Unit tests of the model and the renderer. That `nft` accepts the
//! rendered tables is shown end to end (agent/tests/service_proxy.rs).

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

use super::model::{cluster_ipv4, desired, parse_cidr, Backend, Proto, ServicePort};
use super::render::{render, transaction, Settings};
use crate::services::{ServiceState, SliceInfo, SvcInfo};

fn settings() -> Settings {
    Settings {
        table: "bosun-n1".into(),
        service_cidr: parse_cidr("10.96.0.0/12").unwrap(),
        pod_cidr: parse_cidr("10.244.1.0/24").unwrap(),
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
    // Node ports for anyone; cluster IPs for this node's pods and the host.
    assert_eq!(
        chain_of(&t, "services"),
        [
            "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports",
            "ip saddr != 10.244.1.0/24 fib saddr type != local return",
            "ip daddr . meta l4proto . th dport vmap @service-ips",
        ]
    );
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
    SvcInfo::from_service(&serde_json::from_value::<Service>(v).unwrap())
}

fn slice(v: serde_json::Value) -> SliceInfo {
    SliceInfo::from_slice(&serde_json::from_value::<EndpointSlice>(v).unwrap()).unwrap()
}

#[test]
fn only_ready_endpoints_of_the_services_slices_serve_it() {
    let mut state = ServiceState::default();
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
    let ports = desired(&state, "n1", parse_cidr("10.244.1.0/24").unwrap());
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
        assert!(cluster_ipv4(&SvcInfo::from_service(&svc)).is_none());
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

// The iptables mode's renderer.

mod iptables {
    use super::*;
    use crate::proxy::render_iptables::{chain_prefix, install, removal, render, sync, Chains};

    /// The chain of `rules` whose rules mention `needle` (the one chain).
    fn chain_with<'a>(chains: &'a Chains, needle: &str) -> (&'a String, &'a Vec<String>) {
        let found: Vec<_> = chains
            .iter()
            .filter(|(_, rules)| rules.iter().any(|r| r.contains(needle)))
            .collect();
        assert_eq!(found.len(), 1, "{needle} in {chains:#?}");
        found[0]
    }

    fn prefix() -> String {
        chain_prefix("bosun-n1")
    }

    #[test]
    fn chain_names_are_the_agents_own_and_fit_iptables() {
        let p = prefix();
        assert!(p.starts_with("BOSUN-") && p.len() == 13, "{p}");
        assert_ne!(p, chain_prefix("bosun-n2"), "each agent has its own chains");
        let mut port = web(&[("10.244.1.5", true), ("10.244.2.7", false)]);
        port.node_port = Some(31234);
        let r = render(&settings(), &[port]);
        for name in r.nat.keys().chain(r.filter.keys()) {
            assert!(name.starts_with(&p), "{name}");
            assert!(name.len() <= 28, "{name} is longer than iptables allows");
        }
    }

    #[test]
    fn endpoints_are_picked_at_random_and_dnatted() {
        let p = prefix();
        let r = render(
            &settings(),
            &[web(&[
                ("10.244.1.5", true),
                ("10.244.2.7", false),
                ("10.244.3.9", false),
            ])],
        );
        let services = &r.nat[&format!("{p}SERVICES")];
        assert_eq!(
            services[0],
            format!("! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j {p}NODEPORTS")
        );
        // Cluster IPs are this node's pods' and the host's only.
        assert_eq!(
            services[1],
            "! -s 10.244.1.0/24 -m addrtype ! --src-type LOCAL -j RETURN"
        );
        assert!(services[2].starts_with(
            "-d 10.96.0.20/32 -p tcp -m tcp --dport 80 -m comment --comment default/web/http/tcp -j "
        ), "{services:?}");
        let svc = services[2].rsplit(' ').next().unwrap();
        assert!(svc.starts_with(&format!("{p}SVC-")), "{svc}");
        let rules = &r.nat[svc];
        assert_eq!(
            rules[0],
            format!("! -s 10.244.1.0/24 -m addrtype ! --src-type LOCAL -j {p}MARK-MASQ")
        );
        // 1/3, then 1/2 of the rest, then the last: each a third.
        assert!(
            rules[1].starts_with("-m statistic --mode random --probability 0.3333333333 -j "),
            "{rules:?}"
        );
        assert!(
            rules[2].starts_with("-m statistic --mode random --probability 0.5000000000 -j "),
            "{rules:?}"
        );
        assert!(rules[3].starts_with(&format!("-j {p}SEP-")), "{rules:?}");
        // A local endpoint masquerades the node's pods (no br_netfilter).
        let (_, local) = chain_with(&r.nat, "--to-destination 10.244.1.5:8080");
        assert_eq!(
            local,
            &[
                format!("-s 10.244.1.0/24 -j {p}MARK-MASQ"),
                "-p tcp -m comment --comment default/web/http/tcp -j DNAT --to-destination 10.244.1.5:8080".to_string()
            ]
        );
        let (_, remote) = chain_with(&r.nat, "--to-destination 10.244.2.7:8080");
        assert_eq!(remote.len(), 1, "{remote:?}");
        // With br_netfilter, only the pod's connections to itself.
        let bridged = Settings {
            bridge_netfilter: true,
            ..settings()
        };
        let r2 = render(&bridged, &[web(&[("10.244.1.5", true)])]);
        let (_, local) = chain_with(&r2.nat, "--to-destination 10.244.1.5:8080");
        assert_eq!(local[0], format!("-s 10.244.1.5/32 -j {p}MARK-MASQ"));
        // The range is rejected after the DNAT, in forward and output.
        assert_eq!(
            r.filter[&format!("{p}OUTPUT")],
            ["-d 10.96.0.0/12 -j REJECT"]
        );
        assert_eq!(
            r.filter[&format!("{p}FORWARD")][0],
            "-d 10.96.0.0/12 -j REJECT"
        );
        assert_eq!(
            r.nat[&format!("{p}POSTROUTING")],
            [
                "-m mark ! --mark 0x4000/0x4000 -j RETURN",
                "-j MARK --xor-mark 0x4000",
                "-j MASQUERADE --random-fully"
            ]
        );
    }

    #[test]
    fn a_service_without_ready_endpoints_is_left_to_the_reject() {
        let p = prefix();
        let mut port = web(&[]);
        port.node_port = Some(31234);
        let r = render(&settings(), &[port]);
        assert!(
            !r.nat
                .keys()
                .any(|k| k.contains("SVC-") || k.contains("EXT-")),
            "{r:#?}"
        );
        assert_eq!(
            r.nat[&format!("{p}SERVICES")].len(),
            2,
            "only the node-port dispatch and the return of others' traffic"
        );
        assert_eq!(
            r.filter[&format!("{p}INPUT")],
            ["-m addrtype --dst-type LOCAL -p tcp -m tcp --dport 31234 -m comment --comment default/web/http/tcp -j REJECT"]
        );
    }

    #[test]
    fn node_ports_masquerade_unless_local_which_uses_only_local_endpoints() {
        let p = prefix();
        let mut port = web(&[("10.244.1.5", true), ("10.244.2.7", false)]);
        port.node_port = Some(31234);
        let r = render(&settings(), &[port.clone()]);
        let np = &r.nat[&format!("{p}NODEPORTS")];
        assert_eq!(np.len(), 1);
        assert!(np[0].starts_with(
            "-p tcp -m tcp --dport 31234 -m comment --comment default/web/http/tcp -j "
        ));
        let ext = np[0].rsplit(' ').next().unwrap();
        let svc = r.nat[&format!("{p}SERVICES")][2]
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string();
        assert_eq!(
            r.nat[ext],
            [format!("-j {p}MARK-MASQ"), format!("-j {svc}")]
        );

        port.external_local = true;
        let r = render(&settings(), &[port.clone()]);
        let rules = &r.nat[ext];
        assert_eq!(
            rules[..3],
            [
                format!("-s 10.244.1.0/24 -j {svc}"),
                format!("-m addrtype --src-type LOCAL -j {p}MARK-MASQ"),
                format!("-m addrtype --src-type LOCAL -j {svc}"),
            ]
        );
        // Only the local endpoint, unmasqueraded: one unconditional jump.
        assert_eq!(rules.len(), 4, "{rules:?}");
        let (local_sep, _) = chain_with(&r.nat, "--to-destination 10.244.1.5:8080");
        assert_eq!(rules[3], format!("-j {local_sep}"));
        assert!(r.filter[&format!("{p}INPUT")].is_empty());

        // No local endpoint: not DNATed, dropped on arrival.
        port.backends.retain(|b| !b.local);
        let r = render(&settings(), &[port]);
        assert_eq!(r.nat[ext].len(), 3, "{:?}", r.nat[ext]);
        assert_eq!(
            r.filter[&format!("{p}INPUT")],
            ["-m addrtype --dst-type LOCAL -p tcp -m tcp --dport 31234 -m comment --comment default/web/http/tcp -j DROP"]
        );
    }

    #[test]
    fn client_ip_affinity_uses_a_recent_list_per_endpoint_with_the_timeout() {
        let mut port = web(&[("10.244.1.5", true), ("10.244.2.7", false)]);
        port.affinity = Some(60);
        let r = render(&settings(), &[port]);
        let (sep, rules) = chain_with(&r.nat, "--to-destination 10.244.2.7:8080");
        assert_eq!(rules[0], format!("-m recent --name {sep} --set --rsource"));
        let (_, svc) = chain_with(&r.nat, "-m statistic");
        assert!(
            svc.contains(&format!(
                "-m recent --name {sep} --rcheck --seconds 60 --reap --rsource -j {sep}"
            )),
            "{svc:?}"
        );
        // The affinity checks come before the random pick.
        assert!(
            svc[1].contains("--rcheck")
                && svc[2].contains("--rcheck")
                && svc[3].contains("statistic")
        );
    }

    #[test]
    fn udp_ports_are_dnatted_as_udp() {
        let mut port = web(&[("10.244.2.7", false)]);
        port.proto = Proto::Udp;
        port.port_name = String::new();
        port.port = 53;
        let r = render(&settings(), &[port]);
        assert!(r.nat[&format!("{}SERVICES", prefix())][2].starts_with(
            "-d 10.96.0.20/32 -p udp -m udp --dport 53 -m comment --comment default/web/53/udp -j "
        ));
        chain_with(&r.nat, "-p udp -m comment --comment default/web/53/udp -j DNAT --to-destination 10.244.2.7:8080");
    }

    #[test]
    fn the_install_makes_the_chains_and_jumps_first_from_the_built_in_ones() {
        let p = prefix();
        let script = install(&settings(), &render(&settings(), &[]), "FORWARD");
        for jump in [
            format!("-I PREROUTING 1 -m comment --comment bosun-n1 -j {p}SERVICES"),
            format!("-I OUTPUT 1 -m comment --comment bosun-n1 -j {p}SERVICES"),
            format!("-I POSTROUTING 1 -m comment --comment bosun-n1 -j {p}POSTROUTING"),
            format!("-I FORWARD 1 -m comment --comment bosun-n1 -j {p}FORWARD"),
            format!("-I OUTPUT 1 -m comment --comment bosun-n1 -j {p}OUTPUT"),
            format!("-I INPUT 1 -m comment --comment bosun-n1 -j {p}INPUT"),
        ] {
            assert!(
                script.contains(&format!("{jump}\n")),
                "{jump} missing from\n{script}"
            );
        }
        assert!(
            script.starts_with(&format!("*filter\n:{p}FORWARD - [0:0]\n")),
            "{script}"
        );
        assert_eq!(script.matches("COMMIT\n").count(), 2);
    }

    #[test]
    fn a_sync_rewrites_only_what_changed_and_deletes_what_went_after() {
        let mut port = web(&[("10.244.1.5", true), ("10.244.2.7", false)]);
        port.affinity = Some(60);
        let before = render(&settings(), &[port.clone()]);
        assert_eq!(sync(&before, &before), None, "nothing to do");
        port.backends.pop();
        let after = render(&settings(), &[port]);
        let (gone_sep, _) = chain_with(&before.nat, "--to-destination 10.244.2.7:8080");
        let (kept_sep, _) = chain_with(&before.nat, "--to-destination 10.244.1.5:8080");
        let (svc, _) = chain_with(&after.nat, "--rcheck");
        let (script, delete) = sync(&before, &after).unwrap();
        // Only nat changed; the service chain is redeclared (flushed) and
        // refilled, the gone endpoint's flushed; the staying endpoint's
        // chain (its recent list) is not touched.
        assert!(!script.contains("*filter"), "{script}");
        assert!(script.contains(&format!(":{svc} - [0:0]\n")), "{script}");
        assert!(
            script.contains(&format!(":{gone_sep} - [0:0]\n")),
            "{script}"
        );
        assert!(!script.contains(&format!(":{kept_sep} ")), "{script}");
        assert!(!script.contains(&format!("-A {kept_sep} ")), "{script}");
        assert!(!script.contains("-X"), "{script}");
        assert_eq!(delete.unwrap(), format!("*nat\n-X {gone_sep}\nCOMMIT\n"));
    }

    #[test]
    fn removal_takes_the_agents_jumps_and_chains_and_nothing_else() {
        let p = prefix();
        let other = chain_prefix("bosun-n2");
        let saved = format!(
            "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:{p}FORWARD - [0:0]\n:{other}FORWARD - [0:0]\n:DOCKER-USER - [0:0]\n\
             -A FORWARD -m comment --comment bosun-n1 -j {p}FORWARD\n-A FORWARD -m comment --comment bosun-n2 -j {other}FORWARD\n\
             -A FORWARD -j DOCKER-USER\n-A {p}FORWARD -d 10.96.0.0/12 -j REJECT --reject-with icmp-port-unreachable\nCOMMIT\n\
             *nat\n:PREROUTING ACCEPT [0:0]\n:{p}SERVICES - [0:0]\n:{p}SVC-ABCDEFGHIJ - [0:0]\n\
             -A PREROUTING -m comment --comment bosun-n1 -j {p}SERVICES\n-A {p}SERVICES -d 10.96.0.20/32 -j {p}SVC-ABCDEFGHIJ\nCOMMIT\n"
        );
        let (flush, delete) = removal(&saved, &p).unwrap();
        assert_eq!(
            flush,
            format!(
                "*filter\n-D FORWARD -m comment --comment bosun-n1 -j {p}FORWARD\n-F {p}FORWARD\nCOMMIT\n\
                 *nat\n-D PREROUTING -m comment --comment bosun-n1 -j {p}SERVICES\n-F {p}SERVICES\n-F {p}SVC-ABCDEFGHIJ\nCOMMIT\n"
            )
        );
        assert_eq!(
            delete,
            format!("*filter\n-X {p}FORWARD\nCOMMIT\n*nat\n-X {p}SERVICES\n-X {p}SVC-ABCDEFGHIJ\nCOMMIT\n")
        );
        assert_eq!(removal("*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n", &p), None);
    }
}

#[test]
fn the_nftables_mode_needs_of_iptables_only_the_forward_accept() {
    use crate::proxy::render_iptables::{chain_prefix, forward_accept, install};
    let p = chain_prefix("bosun-n1");
    assert_eq!(
        install(&settings(), &forward_accept(&settings()), "FORWARD"),
        format!(
            "*filter\n:{p}FORWARD - [0:0]\n\
             -A {p}FORWARD -d 10.244.1.0/24 -m conntrack --ctstate DNAT -m comment --comment service-traffic-to-local-pods -j ACCEPT\n\
             -I FORWARD 1 -m comment --comment bosun-n1 -j {p}FORWARD\nCOMMIT\n"
        )
    );
}
