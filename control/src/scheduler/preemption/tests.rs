//! Victim selection, node choice and budgets, in tables of upstream's
//! default_preemption_test cases.
use std::sync::Arc;

use serde_json::{json, Value};

use super::*;

/// A Ready node with `cpu` millicores, 4Gi and room for `pods` pods,
/// carrying `pods_on`.
fn node(name: &str, milli_cpu: i64, max_pods: i64, pods_on: &[Pod]) -> NodeInfo {
    let v = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": format!("{milli_cpu}m"), "memory": "4Gi", "pods": max_pods.to_string()},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    });
    let mut info = NodeInfo::new(Arc::new(serde_json::from_value(v).unwrap()));
    for p in pods_on {
        info.add_pod(p);
    }
    info
}

/// A pod asking `milli_cpu`, of `priority`, started `started` seconds
/// after a fixed time (None: not started).
fn pod(name: &str, milli_cpu: i64, priority: i32, started: Option<i64>) -> Pod {
    let start = started.map(|s| {
        chrono::DateTime::from_timestamp(1_700_000_000 + s, 0)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    });
    let mut v = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"priority": priority, "containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": format!("{milli_cpu}m")}}}]},
        "status": {},
    });
    if let Some(s) = start {
        v["status"]["startTime"] = Value::String(s);
    }
    serde_json::from_value(v).unwrap()
}

fn names(pods: &[Pod]) -> Vec<&str> {
    pods.iter()
        .map(|p| p.metadata.name.as_deref().unwrap_or(""))
        .collect()
}

fn failures(preemptor: &Pod, infos: &[NodeInfo]) -> Vec<Vec<Reason>> {
    infos.iter().map(|i| filter(preemptor, i)).collect()
}

/// Picks the node and its victims as the scheduler does.
fn preempt_on(preemptor: &Pod, infos: &[NodeInfo]) -> Option<(String, Vec<String>)> {
    let f = failures(preemptor, infos);
    find_node(preemptor, infos, &f, &NoBudgets).map(|(i, v)| {
        let victims = names(&v.pods).iter().map(|s| s.to_string()).collect();
        (infos[i].name().to_string(), victims)
    })
}

// Upstream's TestSelectNodesForPreemption, in bosun's resources: which
// pods go on each node, the fewest needed, least important first.
#[test]
fn victims_are_the_fewest_lower_priority_pods() {
    type Case<'a> = (&'a str, Pod, Vec<NodeInfo>, Option<(&'a str, Vec<&'a str>)>);
    let cases: Vec<Case> = vec![
        (
            "a pod that fits with no preemption needs none (no candidates)",
            pod("p", 100, 100, None),
            vec![node("n1", 1000, 110, &[pod("a", 500, 0, Some(1))])],
            None,
        ),
        (
            "only lower priority pods are victims: equal priority stays",
            pod("p", 600, 100, None),
            vec![node("n1", 1000, 110, &[pod("a", 500, 100, Some(1))])],
            None,
        ),
        (
            "all lower priority pods removed still too small: no candidate",
            pod("p", 1500, 100, None),
            vec![node("n1", 1000, 110, &[pod("a", 500, 0, Some(1))])],
            None,
        ),
        (
            "the most important victims are reprieved first",
            pod("p", 400, 100, None),
            vec![node(
                "n1",
                1000,
                110,
                &[
                    pod("a", 600, 10, Some(1)),
                    pod("b", 200, 5, Some(1)),
                    pod("c", 200, 1, Some(1)),
                ],
            )],
            Some(("n1", vec!["b", "c"])),
        ),
        (
            "a higher priority pod is kept, the lower one that frees enough goes",
            pod("p", 500, 100, None),
            vec![node(
                "n1",
                1000,
                110,
                &[pod("a", 500, 50, Some(1)), pod("b", 500, 10, Some(1))],
            )],
            Some(("n1", vec!["b"])),
        ),
        (
            "pod count: one pod removed is enough",
            pod("p", 0, 100, None),
            vec![node(
                "n1",
                1000,
                2,
                &[pod("a", 0, 10, Some(1)), pod("b", 0, 5, Some(2))],
            )],
            Some(("n1", vec!["b"])),
        ),
        (
            "equal priorities: the later started victim goes",
            pod("p", 500, 100, None),
            vec![node(
                "n1",
                1000,
                110,
                &[pod("early", 500, 5, Some(1)), pod("late", 500, 5, Some(9))],
            )],
            Some(("n1", vec!["late"])),
        ),
    ];
    for (name, preemptor, infos, want) in cases {
        let got = preempt_on(&preemptor, &infos);
        let want = want.map(|(n, v)| {
            (
                n.to_string(),
                v.into_iter().map(str::to_string).collect::<Vec<_>>(),
            )
        });
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn unresolvable_nodes_are_not_candidates() {
    let preemptor = pod("p", 600, 100, None);
    let mut tainted = node("tainted", 1000, 110, &[pod("a", 500, 0, Some(1))]);
    let mut v = serde_json::to_value(tainted.node.as_ref()).unwrap();
    v["spec"] = json!({"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]});
    tainted = NodeInfo {
        node: Arc::new(serde_json::from_value(v).unwrap()),
        ..tainted
    };
    assert_eq!(preempt_on(&preemptor, &[tainted]), None);
}

// Upstream's TestPickOneNodeForPreemption.
#[test]
fn the_node_is_picked_by_upstreams_criteria() {
    type Case<'a> = (&'a str, Pod, Vec<NodeInfo>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "the node whose highest priority victim is lowest",
            pod("p", 1000, 100, None),
            vec![
                node("n1", 1000, 110, &[pod("a", 1000, 50, Some(1))]),
                node("n2", 1000, 110, &[pod("b", 1000, 10, Some(1))]),
                node("n3", 1000, 110, &[pod("c", 1000, 20, Some(1))]),
            ],
            "n2",
        ),
        (
            "same highest priority: the lowest sum of priorities",
            pod("p", 1000, 100, None),
            vec![
                node(
                    "n1",
                    1000,
                    110,
                    &[pod("a1", 500, 10, Some(1)), pod("a2", 500, 10, Some(1))],
                ),
                node(
                    "n2",
                    1000,
                    110,
                    &[pod("b1", 500, 10, Some(1)), pod("b2", 500, 5, Some(1))],
                ),
            ],
            "n2",
        ),
        (
            "sums of adjusted priorities: fewer negative-priority victims win",
            pod("p", 1000, 100, None),
            vec![
                node(
                    "n1",
                    1000,
                    110,
                    &[
                        pod("a1", 400, 10, Some(1)),
                        pod("a2", 300, -5, Some(1)),
                        pod("a3", 300, -5, Some(1)),
                    ],
                ),
                node(
                    "n2",
                    1000,
                    110,
                    &[pod("b1", 500, 10, Some(1)), pod("b2", 500, -5, Some(1))],
                ),
            ],
            "n2",
        ),
        (
            "same highest priority: fewer victims make a lower adjusted sum",
            pod("p", 1000, 100, None),
            vec![
                node(
                    "n1",
                    1000,
                    110,
                    &[
                        pod("a1", 400, 10, Some(1)),
                        pod("a2", 300, 0, Some(1)),
                        pod("a3", 300, 0, Some(1)),
                    ],
                ),
                node(
                    "n2",
                    1000,
                    110,
                    &[pod("b1", 500, 10, Some(1)), pod("b2", 500, 0, Some(1))],
                ),
            ],
            "n2",
        ),
        (
            "all else equal: the node whose highest priority victims started latest",
            pod("p", 1000, 100, None),
            vec![
                node(
                    "n1",
                    1000,
                    110,
                    &[pod("a1", 500, 10, Some(5)), pod("a2", 500, 0, Some(100))],
                ),
                node(
                    "n2",
                    1000,
                    110,
                    &[pod("b1", 500, 10, Some(20)), pod("b2", 500, 0, Some(1))],
                ),
                node(
                    "n3",
                    1000,
                    110,
                    &[pod("c1", 500, 10, Some(10)), pod("c2", 500, 0, Some(50))],
                ),
            ],
            "n2",
        ),
        (
            "a complete tie: the first",
            pod("p", 1000, 100, None),
            vec![
                node("n1", 1000, 110, &[pod("a", 1000, 10, Some(1))]),
                node("n2", 1000, 110, &[pod("b", 1000, 10, Some(1))]),
            ],
            "n1",
        ),
    ];
    for (name, preemptor, infos, want) in cases {
        let got = preempt_on(&preemptor, &infos).map(|(n, _)| n);
        assert_eq!(got.as_deref(), Some(want), "{name}");
    }
}

#[test]
fn fewer_budget_violations_come_first() {
    let with = |n: &str, v: usize| {
        (
            n.len(),
            Victims {
                pods: vec![pod(n, 0, 0, Some(1))],
                pdb_violations: v,
            },
        )
    };
    // The node with more violations loses even with lower victims.
    let mut a = with("a", 2);
    a.1.pods = vec![pod("a", 0, -10, Some(1))];
    let b = with("bb", 0);
    assert_eq!(pick_node(&[a, b]), Some(2));
    // A node needing no victims at all wins outright.
    let none = (
        7,
        Victims {
            pods: vec![],
            pdb_violations: 0,
        },
    );
    assert_eq!(pick_node(&[with("a", 0), none]), Some(7));
}

/// A budget protecting the named pods.
struct Protecting(&'static [&'static str]);

impl Budgets for Protecting {
    fn split_violating(&self, pods: Vec<Pod>) -> (Vec<Pod>, Vec<Pod>) {
        pods.into_iter()
            .partition(|p| self.0.contains(&p.metadata.name.as_deref().unwrap_or("")))
    }
}

#[test]
fn protected_victims_are_reprieved_first() {
    let on = node(
        "n1",
        1000,
        110,
        &[pod("a", 500, 1, Some(1)), pod("b", 500, 5, Some(1))],
    );
    let preemptor = pod("p", 500, 10, None);
    let plain = select_victims(&preemptor, &on, &NoBudgets).unwrap();
    assert_eq!(names(&plain.pods), ["a"]);
    let guarded = select_victims(&preemptor, &on, &Protecting(&["a"])).unwrap();
    assert_eq!(names(&guarded.pods), ["b"]);
    assert_eq!(guarded.pdb_violations, 0);
    let whole = pod("p", 1000, 10, None);
    let both = select_victims(&whole, &on, &Protecting(&["a"])).unwrap();
    assert_eq!(names(&both.pods), ["b", "a"]);
    assert_eq!(both.pdb_violations, 1);
}

fn labelled(name: &str, ns: &str, app: Option<&str>) -> Pod {
    let mut p = pod(name, 100, 1, Some(1));
    p.metadata.namespace = Some(ns.into());
    p.metadata.labels = app.map(|a| [("app".to_string(), a.to_string())].into());
    p
}

fn budget(ns: &str, selector: Value, allowed: i32, disrupted: &[&str]) -> PodDisruptionBudget {
    let disrupted: serde_json::Map<String, Value> = disrupted
        .iter()
        .map(|n| (n.to_string(), json!("2026-01-01T00:00:00Z")))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "b", "namespace": ns},
        "spec": {"selector": selector},
        "status": {"disruptionsAllowed": allowed, "disruptedPods": disrupted,
            "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0},
    }))
    .unwrap()
}

#[test]
fn budgets_protect_the_victims_past_their_allowance() {
    let web = json!({"matchLabels": {"app": "web"}});
    let split = |budgets: Vec<PodDisruptionBudget>, pods: Vec<Pod>| {
        let (v, r) = PdbBudgets(budgets).split_violating(pods);
        (
            names(&v).iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            names(&r).iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    };
    let three = || {
        vec![
            labelled("w1", "default", Some("web")),
            labelled("w2", "default", Some("web")),
            labelled("w3", "default", Some("web")),
        ]
    };
    // One disruption allowed: the first victim takes it, the others violate.
    assert_eq!(
        split(vec![budget("default", web.clone(), 1, &[])], three()),
        (vec!["w2".into(), "w3".into()], vec!["w1".into()])
    );
    // A pod already disrupted (being evicted) takes nothing.
    assert_eq!(
        split(vec![budget("default", web.clone(), 1, &["w1"])], three()),
        (vec!["w3".into()], vec!["w1".into(), "w2".into()])
    );
    // Another namespace, another app, no labels, an empty selector: not selected.
    let others = vec![
        labelled("x", "prod", Some("web")),
        labelled("y", "default", Some("db")),
        labelled("z", "default", None),
    ];
    assert_eq!(
        split(vec![budget("default", web.clone(), 0, &[])], others.clone()).0,
        Vec::<String>::new()
    );
    assert_eq!(
        split(vec![budget("default", json!({}), 0, &[])], three()).0,
        Vec::<String>::new()
    );
    // Reprieved first: with one allowed, a node's choice keeps w2 and w3.
    let on = node(
        "n1",
        300,
        110,
        &[
            labelled("w1", "default", Some("web")),
            labelled("w2", "default", Some("web")),
            labelled("w3", "default", Some("web")),
        ],
    );
    let preemptor = pod("p", 100, 10, None);
    let budgets = PdbBudgets(vec![budget("default", web, 1, &[])]);
    let victims = select_victims(&preemptor, &on, &budgets).unwrap();
    assert_eq!(victims.pods.len(), 1);
    assert_eq!(victims.pdb_violations, 0);
}

#[test]
fn who_may_preempt() {
    let on = node("n1", 1000, 110, &[pod("a", 500, 1, Some(1))]);
    let p = pod("p", 1000, 10, None);
    assert!(eligible(&p, std::slice::from_ref(&on)));
    let mut never = p.clone();
    never.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
    assert!(!eligible(&never, std::slice::from_ref(&on)));
    // Nominated to a node where a lower priority victim is still going.
    let mut nominated = p.clone();
    nominated.status.as_mut().unwrap().nominated_node_name = Some("n1".into());
    assert!(eligible(&nominated, std::slice::from_ref(&on)));
    let mut going = pod("a", 500, 1, Some(1));
    going.metadata.deletion_timestamp = Some(crate::toolkit::clock::from_chrono(Utc::now()));
    let leaving = node("n1", 1000, 110, &[going]);
    assert!(!eligible(&nominated, &[leaving]));
}
