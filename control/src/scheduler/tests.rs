//! Unit tests: every filter and score on hand-built nodes, the exact
//! FailedScheduling message, and the loop against the in-memory API.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{json, Value};

use super::filters::{filter, Reason};
use super::message::fit_error;
use super::nodeinfo::{pod_requests, snapshot, NodeInfo, Resources};
use super::scores;
use crate::toolkit::testing::{eventually, TestApi};

fn node_value(name: &str, cpu: &str, memory: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    })
}

/// A Ready node with 2 cpus and 4Gi, changed by `edit`.
fn node_with(name: &str, edit: impl FnOnce(&mut Value)) -> NodeInfo {
    let mut v = node_value(name, "2", "4Gi");
    edit(&mut v);
    NodeInfo::new(Arc::new(serde_json::from_value(v).unwrap()))
}

fn node(name: &str) -> NodeInfo {
    node_with(name, |_| {})
}

fn pod(spec: Value) -> Pod {
    let mut spec = spec;
    if spec.get("containers").is_none() {
        spec["containers"] = json!([{"name": "c", "image": "i"}]);
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
        "spec": spec,
    }))
    .unwrap()
}

fn requesting(cpu: &str, memory: &str) -> Pod {
    pod(json!({"containers": [{"name": "c", "image": "i",
        "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}))
}

fn fits(p: &Pod, n: &NodeInfo) -> bool {
    filter(p, n).is_empty()
}

#[test]
fn not_ready_nodes_are_tainted_not_ready() {
    let p = pod(json!({}));
    assert!(fits(&p, &node("a")));
    let down = node_with("a", |v| {
        v["status"]["conditions"][0]["status"] = json!("False")
    });
    assert_eq!(
        filter(&p, &down),
        vec![Reason::UntoleratedTaint {
            key: "node.kubernetes.io/not-ready".into(),
            value: String::new()
        }]
    );
    let unknown = node_with("a", |v| {
        v["status"]["conditions"][0]["status"] = json!("Unknown")
    });
    assert_eq!(
        filter(&p, &unknown)[0].to_string(),
        "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"
    );
    let silent = node_with("a", |v| v["status"]["conditions"] = json!([]));
    assert!(!fits(&p, &silent));
    // A pod that tolerates it (a DaemonSet's) still goes there.
    let tolerant = pod(json!({"tolerations": [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}]}));
    assert!(fits(&tolerant, &down));
}

#[test]
fn cordoned_nodes_take_no_pods() {
    let cordoned = node_with("a", |v| v["spec"]["unschedulable"] = json!(true));
    let p = pod(json!({}));
    assert_eq!(filter(&p, &cordoned), vec![Reason::Unschedulable]);
    assert_eq!(
        Reason::Unschedulable.to_string(),
        "node(s) were unschedulable"
    );
    let tolerant = pod(json!({"tolerations": [
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}));
    assert!(fits(&tolerant, &cordoned));
}

#[test]
fn node_selector_needs_every_label() {
    let gpu = node_with("a", |v| {
        v["metadata"]["labels"]["disktype"] = json!("ssd");
        v["metadata"]["labels"]["zone"] = json!("z1");
    });
    assert!(fits(
        &pod(json!({"nodeSelector": {"disktype": "ssd"}})),
        &gpu
    ));
    assert!(fits(
        &pod(json!({"nodeSelector": {"disktype": "ssd", "zone": "z1"}})),
        &gpu
    ));
    let wrong = pod(json!({"nodeSelector": {"disktype": "ssd", "zone": "z2"}}));
    assert_eq!(filter(&wrong, &gpu), vec![Reason::NodeAffinity]);
    assert_eq!(
        Reason::NodeAffinity.to_string(),
        "node(s) didn't match Pod's node affinity/selector"
    );
    assert!(!fits(
        &pod(json!({"nodeSelector": {"disktype": "ssd"}})),
        &node("b")
    ));
}

fn required(terms: Value) -> Pod {
    pod(json!({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}))
}

fn expr(key: &str, op: &str, values: &[&str]) -> Value {
    if values.is_empty() {
        json!({"key": key, "operator": op})
    } else {
        json!({"key": key, "operator": op, "values": values})
    }
}

#[test]
fn required_node_affinity_operators() {
    let n = node_with("node-1", |v| {
        v["metadata"]["labels"]["zone"] = json!("z1");
        v["metadata"]["labels"]["cores"] = json!("8");
    });
    let one = |e: Value| required(json!([{"matchExpressions": [e]}]));
    let cases = [
        (expr("zone", "In", &["z1", "z2"]), true),
        (expr("zone", "In", &["z2"]), false),
        (expr("zone", "NotIn", &["z2"]), true),
        (expr("zone", "NotIn", &["z1"]), false),
        (expr("absent", "NotIn", &["x"]), true),
        (expr("zone", "Exists", &[]), true),
        (expr("absent", "Exists", &[]), false),
        (expr("absent", "DoesNotExist", &[]), true),
        (expr("zone", "DoesNotExist", &[]), false),
        (expr("cores", "Gt", &["4"]), true),
        (expr("cores", "Gt", &["8"]), false),
        (expr("cores", "Lt", &["16"]), true),
        (expr("cores", "Lt", &["8"]), false),
        (expr("zone", "Gt", &["1"]), false),
        (expr("absent", "Lt", &["1"]), false),
    ];
    for (e, want) in cases {
        assert_eq!(fits(&one(e.clone()), &n), want, "{e}");
    }
    // Expressions of a term are ANDed.
    let both = required(json!([{"matchExpressions": [
        expr("zone", "In", &["z1"]), expr("cores", "Gt", &["10"])]}]));
    assert!(!fits(&both, &n));
    // Terms are ORed.
    let either = required(json!([
        {"matchExpressions": [expr("zone", "In", &["z9"])]},
        {"matchExpressions": [expr("cores", "Gt", &["2"])]}]));
    assert!(fits(&either, &n));
    // matchFields on metadata.name.
    let by_name = |op: &str, names: &[&str]| {
        required(json!([{"matchFields": [expr("metadata.name", op, names)]}]))
    };
    assert!(fits(&by_name("In", &["node-1"]), &n));
    assert!(!fits(&by_name("In", &["node-2"]), &n));
    assert!(fits(&by_name("NotIn", &["node-2"]), &n));
    assert!(!fits(&by_name("NotIn", &["node-1"]), &n));
    // An empty term matches nothing.
    assert!(!fits(&required(json!([{}])), &n));
    // nodeSelector and affinity must both hold.
    let mut p = one(expr("zone", "In", &["z1"]));
    p.spec.as_mut().unwrap().node_selector = Some([("zone".to_string(), "z2".to_string())].into());
    assert_eq!(filter(&p, &n), vec![Reason::NodeAffinity]);
}

#[test]
fn taints_need_tolerations() {
    let tainted =
        node_with(
            "a",
            |v| {
                v["spec"]["taints"] =
                    json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
            },
        );
    let plain = pod(json!({}));
    let reasons = filter(&plain, &tainted);
    assert_eq!(
        reasons[0].to_string(),
        "node(s) had untolerated taint {dedicated: gpu}"
    );
    let tol = |t: Value| pod(json!({"tolerations": [t]}));
    assert!(fits(
        &tol(
            json!({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"})
        ),
        &tainted
    ));
    assert!(fits(
        &tol(json!({"key": "dedicated", "value": "gpu"})),
        &tainted
    ));
    assert!(fits(
        &tol(json!({"key": "dedicated", "operator": "Exists"})),
        &tainted
    ));
    assert!(fits(&tol(json!({"operator": "Exists"})), &tainted));
    assert!(!fits(
        &tol(json!({"key": "dedicated", "value": "cpu"})),
        &tainted
    ));
    assert!(!fits(
        &tol(json!({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"})),
        &tainted
    ));
    // NoExecute filters too.
    let evicting = node_with("a", |v| {
        v["spec"]["taints"] = json!([{"key": "maintenance", "effect": "NoExecute"}])
    });
    assert_eq!(
        filter(&plain, &evicting)[0].to_string(),
        "node(s) had untolerated taint {maintenance: }"
    );
    assert!(fits(
        &tol(json!({"key": "maintenance", "operator": "Exists", "effect": "NoExecute"})),
        &evicting
    ));
    // PreferNoSchedule does not filter.
    let prefer = node_with("a", |v| {
        v["spec"]["taints"] = json!([{"key": "spot", "effect": "PreferNoSchedule"}])
    });
    assert!(fits(&plain, &prefer));
}

#[test]
fn requests_against_allocatable() {
    let n = node("a");
    assert!(fits(&requesting("2", "4Gi"), &n));
    assert_eq!(
        filter(&requesting("2001m", "1Gi"), &n),
        vec![Reason::InsufficientCpu]
    );
    assert_eq!(
        filter(&requesting("3", "5Gi"), &n),
        vec![Reason::InsufficientCpu, Reason::InsufficientMemory]
    );
    // Pods already on the node take their share; finished pods do not.
    let mut busy = requesting("1500m", "1Gi");
    busy.metadata.uid = Some("other".into());
    let mut done = requesting("2", "1Gi");
    done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
    let infos = snapshot([n.node.clone()], [(&busy, "a"), (&done, "a")]);
    assert_eq!(infos[0].pods, 1);
    assert!(fits(&requesting("500m", "1Gi"), &infos[0]));
    assert_eq!(
        filter(&requesting("501m", "1Gi"), &infos[0]),
        vec![Reason::InsufficientCpu]
    );
    // Pod count.
    let full = node_with("a", |v| v["status"]["allocatable"]["pods"] = json!("1"));
    let infos = snapshot([full.node.clone()], [(&busy, "a")]);
    assert_eq!(
        filter(&pod(json!({})), &infos[0]),
        vec![Reason::TooManyPods]
    );
    assert_eq!(Reason::TooManyPods.to_string(), "Too many pods");
}

#[test]
fn pod_requests_add_containers_and_take_the_largest_init() {
    let spec = |v: Value| pod(v).spec.unwrap();
    let c = |cpu: &str, mem: &str| json!({"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": mem}}});
    let s = spec(
        json!({"containers": [c("100m", "100Mi"), c("200m", "50Mi")],
        "initContainers": [c("250m", "10Mi"), c("50m", "500Mi")]}),
    );
    assert_eq!(
        pod_requests(&s, false),
        Resources {
            milli_cpu: 300,
            memory: 500 * 1024 * 1024
        }
    );
    // Limits stand for missing requests; sidecars add to the containers.
    let mut sidecar = c("100m", "0");
    sidecar["restartPolicy"] = json!("Always");
    let s = spec(json!({"containers": [
        {"name": "c", "image": "i", "resources": {"limits": {"cpu": "1"}}}],
        "initContainers": [sidecar]}));
    assert_eq!(pod_requests(&s, false).milli_cpu, 1100);
    // Scoring counts defaults for unset requests.
    let s = spec(json!({}));
    assert!(pod_requests(&s, false).is_zero());
    assert_eq!(
        pod_requests(&s, true),
        Resources {
            milli_cpu: 100,
            memory: 200 * 1024 * 1024
        }
    );
}

#[test]
fn host_ports_conflict() {
    let with_port = |port: i64, ip: Option<&str>, proto: &str| {
        let mut p = json!({"containerPort": 80, "hostPort": port, "protocol": proto});
        if let Some(ip) = ip {
            p["hostIP"] = json!(ip);
        }
        let mut pod = pod(json!({"containers": [{"name": "c", "image": "i", "ports": [p]}]}));
        pod.metadata.uid = Some(format!("{port}-{ip:?}-{proto}"));
        pod
    };
    let n = node("a");
    let on = |p: &Pod| snapshot([n.node.clone()], [(p, "a")]).remove(0);
    let taken = on(&with_port(8080, None, "TCP"));
    assert_eq!(
        filter(&with_port(8080, None, "TCP"), &taken),
        vec![Reason::HostPorts]
    );
    assert_eq!(
        Reason::HostPorts.to_string(),
        "node(s) didn't have free ports for the requested pod ports"
    );
    assert!(fits(&with_port(8081, None, "TCP"), &taken));
    assert!(fits(&with_port(8080, None, "UDP"), &taken));
    assert!(!fits(&with_port(8080, Some("10.0.0.1"), "TCP"), &taken));
    let specific = on(&with_port(8080, Some("10.0.0.1"), "TCP"));
    assert!(fits(&with_port(8080, Some("10.0.0.2"), "TCP"), &specific));
    assert!(!fits(&with_port(8080, Some("10.0.0.1"), "TCP"), &specific));
}

#[test]
fn fit_error_reads_like_kubernetes() {
    let taint = Reason::UntoleratedTaint {
        key: "dedicated".into(),
        value: "gpu".into(),
    };
    let msg = fit_error(
        3,
        &[
            vec![taint],
            vec![Reason::InsufficientCpu],
            vec![Reason::InsufficientCpu],
        ],
    );
    assert_eq!(
        msg,
        "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu."
    );
    let msg = fit_error(
        4,
        &[
            vec![Reason::Unschedulable],
            vec![Reason::NodeAffinity],
            vec![Reason::InsufficientCpu, Reason::InsufficientMemory],
            vec![Reason::TooManyPods, Reason::InsufficientMemory],
        ],
    );
    assert_eq!(
        msg,
        "0/4 nodes are available: 1 Insufficient cpu, 1 Too many pods, 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) were unschedulable, 2 Insufficient memory."
    );
    assert_eq!(fit_error(0, &[]), "no nodes available to schedule pods");
}

fn owned(owner_uid: &str, n: usize) -> Pod {
    let mut p = pod(json!({}));
    p.metadata.uid = Some(format!("{owner_uid}-{n}"));
    p.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
        "uid": owner_uid, "controller": true}))
    .unwrap()]);
    p
}

#[test]
fn scores_spread_one_owners_pods() {
    let (a, b, c) = (node("a"), node("b"), node("c"));
    let existing = [
        owned("rs1", 1),
        owned("rs1", 2),
        owned("rs1", 3),
        owned("other", 1),
    ];
    let infos = snapshot(
        [a.node.clone(), b.node.clone(), c.node.clone()],
        [
            (&existing[0], "a"),
            (&existing[1], "a"),
            (&existing[2], "b"),
            (&existing[3], "c"),
        ],
    );
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let incoming = owned("rs1", 9);
    assert_eq!(scores::spread(&incoming, &refs), vec![0, 50, 100]);
    // c wins overall although it runs another owner's pod.
    let total = scores::score(&incoming, &refs);
    assert_eq!(scores::pick(&total), Some(2), "{total:?}");
    // Without an owner, spreading does not prefer any node.
    assert_eq!(scores::spread(&pod(json!({})), &refs), vec![100, 100, 100]);
}

#[test]
fn scores_prefer_the_least_allocated_node() {
    let a = node("a");
    let big = node_with("b", |v| v["status"]["allocatable"]["cpu"] = json!("8"));
    let busy = requesting("1", "2Gi");
    let infos = snapshot([a.node.clone(), big.node.clone()], [(&busy, "b")]);
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let incoming = requesting("1", "1Gi");
    // a: cpu (2-1)/2 = 50, mem (4-1)/4 = 75 -> 62; b: cpu (8-2)/8 = 75, mem (4-3)/4 = 25 -> 50
    assert_eq!(scores::least_allocated(&incoming, refs[0]), 62);
    assert_eq!(scores::least_allocated(&incoming, refs[1]), 50);
    assert_eq!(scores::pick(&scores::score(&incoming, &refs)), Some(0));
}

#[test]
fn scores_preferred_affinity_and_prefer_no_schedule() {
    let ssd = node_with("a", |v| v["metadata"]["labels"]["disk"] = json!("ssd"));
    let spot = node_with("b", |v| {
        v["spec"]["taints"] = json!([{"key": "spot", "effect": "PreferNoSchedule"}])
    });
    let plain = node("c");
    let infos = [&ssd, &spot, &plain];
    let p = pod(
        json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [expr("disk", "In", &["ssd"])]}},
        {"weight": 5, "preference": {"matchFields": [expr("metadata.name", "In", &["c"])]}}]}}}),
    );
    assert_eq!(
        scores::preferred_node_affinity(&p, &infos),
        vec![100, 0, 50]
    );
    assert_eq!(scores::prefer_no_schedule(&p, &infos), vec![100, 0, 100]);
    assert_eq!(scores::pick(&scores::score(&p, &infos)), Some(0));
    let tolerant = pod(json!({"tolerations": [{"key": "spot", "operator": "Exists"}]}));
    assert_eq!(
        scores::prefer_no_schedule(&tolerant, &infos),
        vec![100, 100, 100]
    );
}

#[test]
fn ties_are_broken_at_random() {
    let mut seen = [0; 3];
    for _ in 0..300 {
        seen[scores::pick(&[5, 7, 7]).unwrap()] += 1;
    }
    assert_eq!(seen[0], 0);
    assert!(seen[1] > 50 && seen[2] > 50, "{seen:?}");
    assert_eq!(scores::pick(&[]), None);
}

// ---------------------------------------------------------------------------
// The loop against the in-memory API

async fn add_node(api: &TestApi, name: &str, cpu: &str, edit: impl FnOnce(&mut Value)) {
    let mut v = node_value(name, cpu, "4Gi");
    edit(&mut v);
    let status = v["status"].clone();
    let _: Node = api.create(v.clone()).await;
    api.api::<Node>(None)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .unwrap();
}

async fn create_pod(api: &TestApi, name: &str, spec: Value, owner: Option<&str>) -> Pod {
    let mut spec = spec;
    if spec.get("containers").is_none() {
        spec["containers"] = json!([{"name": "c", "image": "i"}]);
    }
    let mut md = json!({"name": name, "namespace": "default"});
    if let Some(uid) = owner {
        md["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "name": "web", "uid": uid, "controller": true}]);
    }
    api.create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}))
        .await
}

fn start_scheduler(api: &TestApi) {
    let shared = api.shared();
    let fut = super::start(&shared);
    shared.informers.start();
    tokio::spawn(fut);
}

fn node_of(p: &Pod) -> Option<String> {
    p.spec.as_ref()?.node_name.clone().filter(|n| !n.is_empty())
}

fn scheduled_condition(p: &Pod) -> Option<(String, String, String)> {
    let c = p
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")?;
    Some((
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

async fn wait_bound(api: &TestApi, name: &str) -> Pod {
    let pods = api.api::<Pod>(Some("default"));
    eventually(
        &format!("pod {name} bound"),
        Duration::from_secs(10),
        || async { pods.get(name).await.ok().filter(|p| node_of(p).is_some()) },
    )
    .await
}

#[tokio::test]
async fn binds_pods_and_sets_pod_scheduled() {
    let api = TestApi::start().await;
    add_node(&api, "n1", "2", |_| {}).await;
    start_scheduler(&api);
    create_pod(&api, "web", json!({}), None).await;
    let p = wait_bound(&api, "web").await;
    assert_eq!(node_of(&p).as_deref(), Some("n1"));
    assert_eq!(scheduled_condition(&p).unwrap().0, "True");
    // Pods for another scheduler, or already bound, are left alone.
    create_pod(
        &api,
        "other",
        json!({"schedulerName": "my-scheduler"}),
        None,
    )
    .await;
    add_node(&api, "n2", "2", |_| {}).await;
    create_pod(&api, "pinned", json!({"nodeName": "n2"}), None).await;
    create_pod(&api, "after", json!({}), None).await;
    wait_bound(&api, "after").await;
    let pods = api.api::<Pod>(Some("default"));
    assert_eq!(node_of(&pods.get("other").await.unwrap()), None);
    assert_eq!(
        node_of(&pods.get("pinned").await.unwrap()).as_deref(),
        Some("n2")
    );
    // A Scheduled event names the node.
    let events = api.api::<Event>(Some("default"));
    let scheduled = eventually("the Scheduled event", Duration::from_secs(5), || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("Scheduled")
                    && e.involved_object.name.as_deref() == Some("web")
            })
    })
    .await;
    assert_eq!(
        scheduled.message.as_deref(),
        Some("Successfully assigned default/web to n1")
    );
}

#[tokio::test]
async fn a_burst_of_one_owners_pods_spreads_evenly() {
    let api = TestApi::start().await;
    for n in ["n1", "n2", "n3"] {
        add_node(&api, n, "4", |_| {}).await;
    }
    start_scheduler(&api);
    for i in 0..30 {
        create_pod(&api, &format!("web-{i}"), json!({}), Some("rs-uid")).await;
    }
    let pods = api.api::<Pod>(Some("default"));
    let placed = eventually("30 pods bound", Duration::from_secs(20), || async {
        let list = pods.list(&ListParams::default()).await.unwrap().items;
        let nodes: Vec<String> = list.iter().filter_map(node_of).collect();
        (nodes.len() == 30).then_some(nodes)
    })
    .await;
    let mut per_node: HashMap<String, usize> = HashMap::new();
    for n in placed {
        *per_node.entry(n).or_default() += 1;
    }
    assert_eq!(per_node.len(), 3, "{per_node:?}");
    assert!(per_node.values().all(|&c| c == 10), "{per_node:?}");
}

#[tokio::test]
async fn unschedulable_pod_gets_condition_and_event_then_fits_a_new_node() {
    let api = TestApi::start().await;
    add_node(
        &api,
        "n1",
        "2",
        |v| {
            v["spec"]["taints"] =
                json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
        },
    )
    .await;
    add_node(&api, "n2", "2", |_| {}).await;
    add_node(&api, "n3", "2", |_| {}).await;
    start_scheduler(&api);
    create_pod(
        &api,
        "big",
        json!({"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "3"}}}]}),
        None,
    )
    .await;
    let want = "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu.";
    let pods = api.api::<Pod>(Some("default"));
    let cond = eventually("PodScheduled=False", Duration::from_secs(10), || async {
        pods.get("big")
            .await
            .ok()
            .and_then(|p| scheduled_condition(&p))
            .filter(|c| c.0 == "False")
    })
    .await;
    assert_eq!(cond, ("False".into(), "Unschedulable".into(), want.into()));
    let events = api.api::<Event>(Some("default"));
    let event = eventually(
        "the FailedScheduling event",
        Duration::from_secs(5),
        || async {
            events
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("FailedScheduling"))
        },
    )
    .await;
    assert_eq!(event.message.as_deref(), Some(want));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(
        event.source.and_then(|s| s.component).as_deref(),
        Some("default-scheduler")
    );
    assert_eq!(event.involved_object.name.as_deref(), Some("big"));
    assert_eq!(node_of(&pods.get("big").await.unwrap()), None);

    // A node big enough appears: the pod is retried at once (long before
    // its back-off would retry it).
    add_node(&api, "n4", "4", |_| {}).await;
    let p = eventually(
        "the pod bound to the new node",
        Duration::from_secs(3),
        || async { pods.get("big").await.ok().filter(|p| node_of(p).is_some()) },
    )
    .await;
    assert_eq!(node_of(&p).as_deref(), Some("n4"));
    assert_eq!(scheduled_condition(&p).unwrap().0, "True");
}

#[tokio::test]
async fn a_label_change_makes_a_parked_pod_fit() {
    let api = TestApi::start().await;
    add_node(&api, "n1", "2", |_| {}).await;
    start_scheduler(&api);
    create_pod(
        &api,
        "picky",
        json!({"nodeSelector": {"disk": "ssd"}}),
        None,
    )
    .await;
    let pods = api.api::<Pod>(Some("default"));
    let cond = eventually("PodScheduled=False", Duration::from_secs(10), || async {
        pods.get("picky")
            .await
            .ok()
            .and_then(|p| scheduled_condition(&p))
    })
    .await;
    assert_eq!(
        cond.2,
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    );
    api.api::<Node>(None)
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"disk": "ssd"}}})),
        )
        .await
        .unwrap();
    let p = eventually(
        "the pod bound after the label change",
        Duration::from_secs(3),
        || async {
            pods.get("picky")
                .await
                .ok()
                .filter(|p| node_of(p).is_some())
        },
    )
    .await;
    assert_eq!(node_of(&p).as_deref(), Some("n1"));
}

#[tokio::test]
async fn no_nodes_at_all() {
    let api = TestApi::start().await;
    start_scheduler(&api);
    create_pod(&api, "lonely", json!({}), None).await;
    let pods = api.api::<Pod>(Some("default"));
    let cond = eventually("PodScheduled=False", Duration::from_secs(10), || async {
        pods.get("lonely")
            .await
            .ok()
            .and_then(|p| scheduled_condition(&p))
    })
    .await;
    assert_eq!(cond.2, "no nodes available to schedule pods");
    add_node(&api, "n1", "1", |_| {}).await;
    wait_bound(&api, "lonely").await;
}

#[tokio::test]
async fn freed_room_is_used_when_a_pod_goes() {
    let api = TestApi::start().await;
    add_node(&api, "n1", "1", |_| {}).await;
    start_scheduler(&api);
    let one_cpu = json!({"containers": [{"name": "c", "image": "i",
        "resources": {"requests": {"cpu": "1"}}}]});
    create_pod(&api, "first", one_cpu.clone(), None).await;
    wait_bound(&api, "first").await;
    create_pod(&api, "second", one_cpu, None).await;
    let pods = api.api::<Pod>(Some("default"));
    let cond = eventually("PodScheduled=False", Duration::from_secs(10), || async {
        pods.get("second")
            .await
            .ok()
            .and_then(|p| scheduled_condition(&p))
    })
    .await;
    assert_eq!(cond.2, "0/1 nodes are available: 1 Insufficient cpu.");
    // The first pod finishes: its cpu is free again.
    pods.patch_status(
        "first",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .unwrap();
    let p = eventually("the second pod bound", Duration::from_secs(3), || async {
        pods.get("second")
            .await
            .ok()
            .filter(|p| node_of(p).is_some())
    })
    .await;
    assert_eq!(node_of(&p).as_deref(), Some("n1"));
}

#[tokio::test]
async fn binding_twice_is_a_conflict() {
    let api = TestApi::start().await;
    create_pod(&api, "web", json!({}), None).await;
    let pods = api.api::<Pod>(Some("default"));
    let binding = |node: &str| {
        json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": "web"}, "target": {"kind": "Node", "name": node}})
    };
    let _: Value = pods
        .create_subresource("binding", "web", &Default::default(), &binding("n1"))
        .await
        .unwrap();
    let err = pods
        .create_subresource::<_, Value>("binding", "web", &Default::default(), &binding("n2"))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert!(
                s.message.contains("already assigned to node \"n1\""),
                "{}",
                s.message
            );
        }
        other => panic!("{other}"),
    }
    let p = pods.get("web").await.unwrap();
    assert_eq!(node_of(&p).as_deref(), Some("n1"));
    assert_eq!(scheduled_condition(&p).unwrap().0, "True");
}

// ---------------------------------------------------------------------------
// VolumeBinding

mod volume_binding {
    use super::*;
    use crate::scheduler::volumes::{filter as volume_filter, prefilter, Storage};
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use k8s_openapi::api::storage::v1::StorageClass;

    fn claim(
        name: &str,
        class: &str,
        volume: Option<&str>,
        edit: impl FnOnce(&mut Value),
    ) -> Arc<PersistentVolumeClaim> {
        let mut v = json!({"metadata": {"name": name, "namespace": "default"},
            "spec": {"storageClassName": class, "volumeName": volume,
                     "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        edit(&mut v);
        Arc::new(serde_json::from_value(v).unwrap())
    }

    fn pinned_volume(name: &str, node: &str) -> Arc<PersistentVolume> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name},
                "spec": {"capacity": {"storage": "1Gi"}, "hostPath": {"path": "/d"}, "accessModes": ["ReadWriteOnce"],
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}}))
            .unwrap(),
        )
    }

    fn class(name: &str, mode: &str) -> Arc<StorageClass> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name}, "provisioner": "p",
                "volumeBindingMode": mode}))
            .unwrap(),
        )
    }

    fn using(claims: &[&str]) -> Pod {
        let volumes: Vec<Value> = claims
            .iter()
            .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
            .collect();
        pod(json!({"volumes": volumes}))
    }

    fn storage(
        claims: Vec<Arc<PersistentVolumeClaim>>,
        volumes: Vec<Arc<PersistentVolume>>,
    ) -> Storage {
        Storage {
            claims,
            volumes,
            classes: vec![
                class("local-path", "WaitForFirstConsumer"),
                class("now", "Immediate"),
            ],
        }
    }

    #[test]
    fn a_missing_or_leaving_claim_keeps_the_pod_waiting() {
        let s = storage(vec![], vec![]);
        assert_eq!(
            prefilter(&using(&["data"]), &s).unwrap_err(),
            "persistentvolumeclaim \"data\" not found"
        );
        let s = storage(
            vec![claim("data", "", None, |c| {
                c["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z")
            })],
            vec![],
        );
        assert_eq!(
            prefilter(&using(&["data"]), &s).unwrap_err(),
            "persistentvolumeclaim \"data\" is being deleted"
        );
        // A claim in another namespace is not the pod's.
        let s = storage(
            vec![claim("data", "", None, |c| {
                c["metadata"]["namespace"] = json!("other")
            })],
            vec![],
        );
        assert!(prefilter(&using(&["data"]), &s).is_err());
    }

    #[test]
    fn unbound_immediate_claims_keep_the_pod_waiting() {
        for class in ["", "now", "no-such-class"] {
            let s = storage(vec![claim("data", class, None, |_| {})], vec![]);
            assert_eq!(
                prefilter(&using(&["data"]), &s).unwrap_err(),
                "pod has unbound immediate PersistentVolumeClaims",
                "class {class:?}"
            );
        }
        assert_eq!(
            super::super::message::prefilter_error(
                2,
                "pod has unbound immediate PersistentVolumeClaims"
            ),
            "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."
        );
    }

    #[test]
    fn unbound_wait_for_first_consumer_claims_are_to_learn_their_node() {
        let s = storage(vec![claim("www", "local-path", None, |_| {})], vec![]);
        let v = prefilter(&using(&["www"]), &s).unwrap();
        assert_eq!(
            v.to_select,
            vec![("default".to_string(), "www".to_string())]
        );
        assert!(v.bound.is_empty());
        assert_eq!(volume_filter(&v, &node("a").node), None);
    }

    #[test]
    fn bound_volumes_pin_the_pod_to_their_nodes() {
        let s = storage(
            vec![claim("www", "local-path", Some("pv-a"), |_| {})],
            vec![pinned_volume("pv-a", "a")],
        );
        let v = prefilter(&using(&["www"]), &s).unwrap();
        assert!(v.to_select.is_empty());
        assert_eq!(volume_filter(&v, &node("a").node), None);
        assert_eq!(
            volume_filter(&v, &node("b").node),
            Some(Reason::VolumeNodeAffinityConflict)
        );
        assert_eq!(
            fit_error(1, &[vec![Reason::VolumeNodeAffinityConflict]]),
            "0/1 nodes are available: 1 node(s) had volume node affinity conflict."
        );
        // A bound claim whose volume is gone cannot be placed.
        let s = storage(vec![claim("www", "", Some("gone"), |_| {})], vec![]);
        assert_eq!(
            prefilter(&using(&["www"]), &s).unwrap_err(),
            "persistentvolume \"gone\" not found"
        );
    }

    #[tokio::test]
    async fn the_scheduler_selects_the_node_for_delayed_claims_and_honours_pinned_volumes() {
        let api = TestApi::start().await;
        add_node(&api, "n1", "2", |_| {}).await;
        start_scheduler(&api);
        let claims = api.api::<PersistentVolumeClaim>(Some("default"));
        // A local-path (WaitForFirstConsumer) claim: the pod goes, and the
        // claim learns where.
        let _: PersistentVolumeClaim = api
            .create(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "www", "namespace": "default"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
            .await;
        create_pod(
            &api,
            "web-0",
            json!({"volumes": [
            {"name": "www", "persistentVolumeClaim": {"claimName": "www"}}]}),
            None,
        )
        .await;
        let p = wait_bound(&api, "web-0").await;
        assert_eq!(node_of(&p).as_deref(), Some("n1"));
        let c = claims.get("www").await.unwrap();
        assert_eq!(
            c.metadata
                .annotations
                .unwrap()
                .get("volume.kubernetes.io/selected-node")
                .map(String::as_str),
            Some("n1")
        );

        // A claim bound to a volume pinned to n2: unschedulable until n2 comes.
        let _: PersistentVolume = api
            .create({
                let mut v = serde_json::to_value(pinned_volume("pv-n2", "n2").as_ref()).unwrap();
                v["apiVersion"] = json!("v1");
                v["kind"] = json!("PersistentVolume");
                v
            })
            .await;
        let _: PersistentVolumeClaim = api
            .create(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "pinned", "namespace": "default"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                         "volumeName": "pv-n2", "resources": {"requests": {"storage": "1Gi"}}}}))
            .await;
        create_pod(
            &api,
            "stuck",
            json!({"volumes": [
            {"name": "d", "persistentVolumeClaim": {"claimName": "pinned"}}]}),
            None,
        )
        .await;
        let pods = api.api::<Pod>(Some("default"));
        let msg = eventually("stuck unschedulable", Duration::from_secs(10), || async {
            let p = pods.get("stuck").await.ok()?;
            scheduled_condition(&p)
                .filter(|c| c.0 == "False")
                .map(|c| c.2)
        })
        .await;
        assert_eq!(
            msg,
            "0/1 nodes are available: 1 node(s) had volume node affinity conflict."
        );
        add_node(&api, "n2", "2", |_| {}).await;
        let p = wait_bound(&api, "stuck").await;
        assert_eq!(node_of(&p).as_deref(), Some("n2"));
    }
}
