//! Unit tests of the policy model (what a node's pods allow, resolved as
//! Kubernetes' NetworkPolicy semantics say) and of its nftables text.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::json;

use super::model::{
    desired, Addrs, Allow, NamespaceInfo, PodInfo, PodRules, PolicyInfo, PolicyState, L4,
};
use super::render::{render, rules, transaction};
use crate::services::Proto;

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn pod(node: &str, addr: &str, labels: &[(&str, &str)], ports: &[(&str, Proto, u16)]) -> PodInfo {
    PodInfo {
        node: node.into(),
        ip: ip(addr),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ports: ports
            .iter()
            .map(|(n, p, x)| (n.to_string(), *p, *x))
            .collect(),
    }
}

/// A cluster: namespaces `a` (team=a) and `b` (team=b); on node n1
/// `a/web` (app=web, port http 8080/TCP, dns 53/UDP) and `a/db`
/// (app=db); on node n2 `a/client` (app=client) and `b/client`
/// (app=client, port http 9090).
fn cluster() -> PolicyState {
    let mut s = PolicyState::default();
    for (ns, team) in [("a", "a"), ("b", "b")] {
        s.namespaces.insert(
            (String::new(), ns.into()),
            NamespaceInfo {
                labels: BTreeMap::from([("team".to_string(), team.to_string())]),
            },
        );
    }
    let pods = [
        (
            "a",
            "web",
            pod(
                "n1",
                "10.244.1.2",
                &[("app", "web")],
                &[("http", Proto::Tcp, 8080), ("dns", Proto::Udp, 53)],
            ),
        ),
        ("a", "db", pod("n1", "10.244.1.3", &[("app", "db")], &[])),
        (
            "a",
            "client",
            pod("n2", "10.244.2.2", &[("app", "client")], &[]),
        ),
        (
            "b",
            "client",
            pod(
                "n2",
                "10.244.2.3",
                &[("app", "client")],
                &[("http", Proto::Tcp, 9090)],
            ),
        ),
    ];
    for (ns, name, p) in pods {
        s.pods.insert((ns.into(), name.into()), p);
    }
    s
}

fn with_policy(mut s: PolicyState, ns: &str, spec: serde_json::Value) -> PolicyState {
    let np: NetworkPolicy = serde_json::from_value(json!({
        "metadata": {"name": format!("p{}", s.policies.len()), "namespace": ns},
        "spec": spec,
    }))
    .unwrap();
    let key = (ns.to_string(), np.metadata.name.clone().unwrap());
    s.policies
        .insert(key, PolicyInfo::from_policy(&np).unwrap());
    s
}

fn pods(ips: &[&str]) -> Addrs {
    Addrs::Pods(ips.iter().map(|s| ip(s)).collect::<BTreeSet<_>>())
}

fn rules_of<'a>(rules: &'a [PodRules], name: &str) -> Option<&'a PodRules> {
    rules.iter().find(|r| r.name == name)
}

/// Each case: a policy in namespace `a` → the ingress and egress rules
/// of `a/web` on n1 (None: not isolated that way).
#[test]
fn desired_rules_of_upstream_cases() {
    type Case = (
        &'static str,
        serde_json::Value,
        Option<Vec<Allow>>,
        Option<Vec<Allow>>,
    );
    let any = |l4| Allow {
        addrs: Addrs::Any,
        l4,
    };
    let cases: Vec<Case> = vec![
        (
            "deny all ingress: an empty podSelector and no rules",
            json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
            Some(vec![]),
            None,
        ),
        (
            "policyTypes left out: Ingress only, even with no ingress rules",
            json!({"podSelector": {"matchLabels": {"app": "web"}}}),
            Some(vec![]),
            None,
        ),
        (
            "policyTypes left out with egress rules: both",
            json!({"podSelector": {}, "egress": [{}]}),
            Some(vec![]),
            Some(vec![any(L4::Any)]),
        ),
        (
            "egress only",
            json!({"podSelector": {}, "policyTypes": ["Egress"]}),
            None,
            Some(vec![]),
        ),
        (
            "allow all ingress: one empty rule",
            json!({"podSelector": {}, "ingress": [{}]}),
            Some(vec![any(L4::Any)]),
            None,
        ),
        (
            "a policy selecting other pods leaves web alone",
            json!({"podSelector": {"matchLabels": {"app": "db"}}}),
            None,
            None,
        ),
        (
            "podSelector peer: pods of the policy's namespace only",
            json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "client"}}}]}]}),
            Some(vec![Allow {
                addrs: pods(&["10.244.2.2"]),
                l4: L4::Any,
            }]),
            None,
        ),
        (
            "namespaceSelector peer: every pod of the selected namespaces",
            json!({"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "b"}}}]}]}),
            Some(vec![Allow {
                addrs: pods(&["10.244.2.3"]),
                l4: L4::Any,
            }]),
            None,
        ),
        (
            "both selectors in one peer: the selected pods of the selected namespaces",
            json!({"podSelector": {}, "ingress": [{"from": [{
                "namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "client"}}}]}]}),
            Some(vec![Allow {
                addrs: pods(&["10.244.2.2", "10.244.2.3"]),
                l4: L4::Any,
            }]),
            None,
        ),
        (
            "a selector matching no pod allows nothing",
            json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "none"}}}]}]}),
            Some(vec![]),
            None,
        ),
        (
            "ipBlock with except",
            json!({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.244.2.0/24"]}}]}]}),
            Some(vec![Allow {
                addrs: Addrs::Block {
                    cidr: "10.0.0.0/8".parse().unwrap(),
                    except: vec!["10.244.2.0/24".parse().unwrap()],
                },
                l4: L4::Any,
            }]),
            None,
        ),
        (
            "numbered port, protocol defaulted to TCP; a port range; a protocol alone",
            json!({"podSelector": {}, "ingress": [{"ports": [
                {"port": 80}, {"protocol": "UDP", "port": 1000, "endPort": 2000}, {"protocol": "SCTP"}]}]}),
            Some(vec![
                any(L4::Proto(Proto::Sctp)),
                any(L4::Ports(Proto::Tcp, 80, 80)),
                any(L4::Ports(Proto::Udp, 1000, 2000)),
            ]),
            None,
        ),
        (
            "named ingress port: the selected pod's number, by protocol",
            json!({"podSelector": {}, "ingress": [{"ports": [
                {"port": "http"}, {"protocol": "UDP", "port": "dns"}, {"protocol": "UDP", "port": "http"}, {"port": "nope"}]}]}),
            Some(vec![
                any(L4::Ports(Proto::Tcp, 8080, 8080)),
                any(L4::Ports(Proto::Udp, 53, 53)),
            ]),
            None,
        ),
        (
            "named egress port: each destination pod's number",
            json!({"podSelector": {}, "policyTypes": ["Egress"], "egress": [{
                "to": [{"namespaceSelector": {}}], "ports": [{"port": "http"}]}]}),
            None,
            Some(vec![
                Allow {
                    addrs: pods(&["10.244.1.2"]),
                    l4: L4::Ports(Proto::Tcp, 8080, 8080),
                },
                Allow {
                    addrs: pods(&["10.244.2.3"]),
                    l4: L4::Ports(Proto::Tcp, 9090, 9090),
                },
            ]),
        ),
        (
            "peers and ports of one rule: every pairing",
            json!({"podSelector": {}, "ingress": [{
                "from": [{"podSelector": {"matchLabels": {"app": "db"}}}, {"ipBlock": {"cidr": "192.168.0.0/16"}}],
                "ports": [{"port": 80}]}]}),
            Some(vec![
                Allow {
                    addrs: pods(&["10.244.1.3"]),
                    l4: L4::Ports(Proto::Tcp, 80, 80),
                },
                Allow {
                    addrs: Addrs::Block {
                        cidr: "192.168.0.0/16".parse().unwrap(),
                        except: vec![],
                    },
                    l4: L4::Ports(Proto::Tcp, 80, 80),
                },
            ]),
            None,
        ),
    ];
    for (what, spec, ingress, egress) in cases {
        let state = with_policy(cluster(), "a", spec);
        let got = desired(&state, "n1");
        let web = rules_of(&got, "web");
        let sorted = |v: Option<Vec<Allow>>| {
            v.map(|mut v| {
                v.sort();
                v
            })
        };
        assert_eq!(
            web.and_then(|w| w.ingress.clone()),
            sorted(ingress),
            "{what}: ingress"
        );
        assert_eq!(
            web.and_then(|w| w.egress.clone()),
            sorted(egress),
            "{what}: egress"
        );
    }
}

#[test]
fn only_the_nodes_pods_and_the_policys_namespace() {
    let state = with_policy(cluster(), "b", json!({"podSelector": {}}));
    // A policy of namespace b selects b's pods only, and n1 has none.
    assert!(desired(&state, "n1").is_empty());
    let n2 = desired(&state, "n2");
    assert_eq!(n2.len(), 1);
    assert_eq!(
        (n2[0].namespace.as_str(), n2[0].name.as_str()),
        ("b", "client")
    );
    assert_eq!(n2[0].ingress, Some(vec![]));
}

#[test]
fn rules_of_several_policies_add_up() {
    let state = with_policy(
        cluster(),
        "a",
        json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]}),
    );
    let state = with_policy(
        state,
        "a",
        json!({"podSelector": {"matchLabels": {"app": "web"}}, "ingress": [{"ports": [{"port": 443}]}]}),
    );
    let got = desired(&state, "n1");
    let ports: Vec<L4> = rules_of(&got, "web")
        .unwrap()
        .ingress
        .as_ref()
        .unwrap()
        .iter()
        .map(|a| a.l4)
        .collect();
    assert_eq!(
        ports,
        vec![
            L4::Ports(Proto::Tcp, 80, 80),
            L4::Ports(Proto::Tcp, 443, 443)
        ]
    );
    let db: Vec<L4> = rules_of(&got, "db")
        .unwrap()
        .ingress
        .as_ref()
        .unwrap()
        .iter()
        .map(|a| a.l4)
        .collect();
    assert_eq!(db, vec![L4::Ports(Proto::Tcp, 80, 80)]);
}

/// Each case: one allow → its nft rule (ingress: the peer is the source).
#[test]
fn rule_text() {
    let cases: Vec<(Allow, &str)> = vec![
        (Allow { addrs: Addrs::Any, l4: L4::Any }, "return"),
        (Allow { addrs: pods(&["10.244.1.2", "10.244.2.3"]), l4: L4::Any }, "ip saddr { 10.244.1.2, 10.244.2.3 } return"),
        (Allow { addrs: Addrs::Any, l4: L4::Proto(Proto::Udp) }, "meta l4proto udp return"),
        (Allow { addrs: Addrs::Any, l4: L4::Ports(Proto::Tcp, 80, 80) }, "meta l4proto tcp th dport 80 return"),
        (Allow { addrs: Addrs::Any, l4: L4::Ports(Proto::Sctp, 1000, 2000) }, "meta l4proto sctp th dport 1000-2000 return"),
        (
            Allow { addrs: Addrs::Block { cidr: "10.0.0.0/8".parse().unwrap(), except: vec!["10.1.0.0/16".parse().unwrap(), "10.2.0.0/16".parse().unwrap()] }, l4: L4::Ports(Proto::Tcp, 53, 53) },
            "ip saddr 10.0.0.0/8 ip saddr != { 10.1.0.0/16, 10.2.0.0/16 } meta l4proto tcp th dport 53 return",
        ),
        (Allow { addrs: Addrs::Block { cidr: "0.0.0.0/0".parse().unwrap(), except: vec![] }, l4: L4::Any }, "ip saddr 0.0.0.0/0 return"),
    ];
    for (allow, want) in cases {
        assert_eq!(
            rules(std::slice::from_ref(&allow), "saddr"),
            vec![want.to_string(), "drop".to_string()]
        );
    }
    // Egress names the destination.
    let a = Allow {
        addrs: pods(&["10.244.1.2"]),
        l4: L4::Any,
    };
    assert_eq!(rules(&[a], "daddr")[0], "ip daddr { 10.244.1.2 } return");
    // Nothing allowed: drop only.
    assert_eq!(rules(&[], "saddr"), vec!["drop".to_string()]);
}

#[test]
fn table_text() {
    let pods = vec![
        PodRules {
            namespace: "a".into(),
            name: "web".into(),
            ip: ip("10.244.1.2"),
            ingress: Some(vec![Allow {
                addrs: Addrs::Any,
                l4: L4::Ports(Proto::Tcp, 80, 80),
            }]),
            egress: None,
        },
        PodRules {
            namespace: "a".into(),
            name: "db".into(),
            ip: ip("10.244.1.3"),
            ingress: None,
            egress: Some(vec![]),
        },
    ];
    let want = "table ip bosun-np-n1 {
\tmap ingress-pods {
\t\ttype ipv4_addr : verdict
\t\telements = { 10.244.1.2 : jump ing-a/web }
\t}
\tmap egress-pods {
\t\ttype ipv4_addr : verdict
\t\telements = { 10.244.1.3 : jump egr-a/db }
\t}
\tchain forward {
\t\ttype filter hook forward priority 0; policy accept;
\t\tct state established,related accept
\t\tfib saddr type local accept
\t\tip daddr vmap @ingress-pods
\t\tip saddr vmap @egress-pods
\t}
\tchain ing-a/web {
\t\tmeta l4proto tcp th dport 80 return
\t\tdrop
\t}
\tchain egr-a/db {
\t\tdrop
\t}
}
";
    assert_eq!(render("bosun-np-n1", &pods), want);
    // No pod isolated: empty maps, nothing filtered.
    let empty = render("bosun-np-n1", &[]);
    assert!(!empty.contains("elements"), "{empty}");
    assert!(!empty.contains("drop"), "{empty}");
    // Replaced whole in one transaction.
    assert!(transaction("bosun-np-n1", &empty).starts_with(
        "add table ip bosun-np-n1\ndelete table ip bosun-np-n1\ntable ip bosun-np-n1 {"
    ));
}

#[test]
fn pods_policies_do_not_apply_to() {
    let pod = |v: serde_json::Value| PodInfo::from_pod(&serde_json::from_value(v).unwrap());
    let base = json!({
        "metadata": {"name": "p", "namespace": "a", "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i", "ports": [
            {"name": "http", "containerPort": 80}, {"name": "dns", "containerPort": 53, "protocol": "UDP"}, {"containerPort": 9}]}]},
        "status": {"phase": "Running", "podIP": "10.244.1.2"}
    });
    let got = pod(base.clone()).unwrap();
    assert_eq!(
        got.ports,
        vec![
            ("http".into(), Proto::Tcp, 80),
            ("dns".into(), Proto::Udp, 53)
        ]
    );
    assert_eq!(got.node, "n1");
    let mut v = base.clone();
    v["status"]["phase"] = json!("Succeeded");
    assert_eq!(pod(v), None, "finished");
    let mut v = base.clone();
    v["spec"]["hostNetwork"] = json!(true);
    assert_eq!(pod(v), None, "host network");
    let mut v = base;
    v["status"].as_object_mut().unwrap().remove("podIP");
    assert_eq!(pod(v), None, "no address yet");
}
