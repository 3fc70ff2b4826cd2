//! The scheduler on real Docker with two (then three) agents on one
//! Docker Engine: pods without a node are bound and run, spread over the
//! nodes; a nodeSelector pins a pod; a pod no node fits stays Pending with
//! the FailedScheduling message `bosun describe` shows, and is placed once
//! a fitting node appears.

mod cluster;

use std::collections::HashMap;
use std::time::Duration;

use cluster::{wait_for, Cluster, BUSYBOX};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(60);

fn sleeper(name: &str, spec_extra: Value) -> Pod {
    let mut spec = json!({
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": BUSYBOX, "command": ["sh", "-c", "sleep 3600"]}],
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "sched"}},
        "spec": spec,
    }))
    .unwrap()
}

async fn create(client: &Client, pod: Pod) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &pod).await.unwrap();
}

fn node_of(p: &Value) -> Option<String> {
    p["spec"]["nodeName"]
        .as_str()
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

fn running(p: &Value) -> bool {
    p["status"]["phase"] == "Running"
}

fn pod_scheduled(p: &Value) -> Option<(String, String, String)> {
    let c = p["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodScheduled")?;
    let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
    Some((s("status"), s("reason"), s("message")))
}

async fn label_node(client: &Client, node: &str, key: &str, value: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {key: value}}})),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_without_a_node_are_spread_over_two_agents_and_run() {
    let c = Cluster::start_nodes(2);
    let nodes = c.nodes();
    assert_eq!(nodes.len(), 2);
    assert_ne!(nodes[0], nodes[1]);
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;

    for i in 0..4 {
        create(&client, sleeper(&format!("web-{i}"), json!({}))).await;
    }
    let mut per_node: HashMap<String, usize> = HashMap::new();
    for i in 0..4 {
        let name = format!("web-{i}");
        let p = c
            .wait_pod(&client, &name, "scheduled and Running", UP, running)
            .await;
        let node = node_of(&p).expect("bound");
        assert_eq!(pod_scheduled(&p).unwrap().0, "True");
        // The pod's containers run on the agent of the node it was bound to.
        let ids = c.docker_ids_on(&node, &[&format!("io.bosun.pod.name={name}")]);
        assert_eq!(ids.len(), 2, "sandbox and app of {name} on {node}");
        *per_node.entry(node).or_default() += 1;
    }
    assert_eq!(
        per_node.get(&nodes[0]),
        Some(&2),
        "4 pods over 2 equal nodes: {per_node:?}"
    );
    assert_eq!(per_node.get(&nodes[1]), Some(&2), "{per_node:?}");

    // A nodeSelector pins a pod to the one node that has the label.
    label_node(&client, &nodes[1], "disktype", "ssd").await;
    for i in 0..3 {
        create(
            &client,
            sleeper(
                &format!("ssd-{i}"),
                json!({"nodeSelector": {"disktype": "ssd"}}),
            ),
        )
        .await;
    }
    for i in 0..3 {
        let name = format!("ssd-{i}");
        let p = c.wait_pod(&client, &name, "Running", UP, running).await;
        assert_eq!(node_of(&p).as_deref(), Some(nodes[1].as_str()));
        assert_eq!(
            c.docker_ids_on(&nodes[1], &[&format!("io.bosun.pod.name={name}")])
                .len(),
            2
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unschedulable_pod_waits_with_failed_scheduling_then_fits_a_new_node() {
    let mut c = Cluster::start_nodes(2);
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;

    // More cpu than any node has.
    create(
        &client,
        sleeper(
            "huge",
            json!({"containers": [{"name": "app", "image": BUSYBOX,
                "command": ["sh", "-c", "sleep 3600"],
                "resources": {"requests": {"cpu": "1000"}}}]}),
        ),
    )
    .await;
    let want = "0/2 nodes are available: 2 Insufficient cpu.";
    let p = c
        .wait_pod(&client, "huge", "PodScheduled=False", UP, |p| {
            pod_scheduled(p).is_some_and(|s| s.0 == "False")
        })
        .await;
    assert_eq!(p["status"]["phase"], "Pending");
    assert_eq!(node_of(&p), None);
    assert_eq!(
        pod_scheduled(&p).unwrap(),
        ("False".into(), "Unschedulable".into(), want.into())
    );
    let describe = wait_for(
        "describe to show FailedScheduling",
        Duration::from_secs(20),
        || {
            let out = c
                .bosun()
                .args(["describe", "pod", "huge"])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.contains("FailedScheduling").then_some(text)
        },
    );
    assert!(describe.contains(want), "{describe}");
    assert!(describe.contains("default-scheduler"), "{describe}");
    assert!(describe.contains("Warning"), "{describe}");

    // A pod for nodes labelled tier=gold: none is, yet.
    create(
        &client,
        sleeper("gold", json!({"nodeSelector": {"tier": "gold"}})),
    )
    .await;
    let p = c
        .wait_pod(&client, "gold", "PodScheduled=False", UP, |p| {
            pod_scheduled(p).is_some_and(|s| s.0 == "False")
        })
        .await;
    assert_eq!(
        pod_scheduled(&p).unwrap().2,
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    );

    // A third agent joins and is labelled: the waiting pod lands there
    // without anyone touching it.
    let third = c.add_agent();
    c.wait_nodes_ready(&client).await;
    let out = c
        .bosun()
        .args(["label", "node", &third, "tier=gold"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bosun label node: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = c
        .wait_pod(
            &client,
            "gold",
            "scheduled on the new node and Running",
            UP,
            running,
        )
        .await;
    assert_eq!(node_of(&p).as_deref(), Some(third.as_str()));
    assert_eq!(pod_scheduled(&p).unwrap().0, "True");
    assert_eq!(
        c.docker_ids_on(&third, &["io.bosun.pod.name=gold"]).len(),
        2,
        "the pod runs on the third agent\n{}",
        cluster::tail(&c.node_log(2), 30)
    );
    // The huge pod still waits, now counting three nodes.
    let p = c
        .wait_pod(&client, "huge", "the message counting 3 nodes", UP, |p| {
            pod_scheduled(p).is_some_and(|s| s.2.starts_with("0/3"))
        })
        .await;
    assert_eq!(
        pod_scheduled(&p).unwrap().2,
        "0/3 nodes are available: 3 Insufficient cpu."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_node_takes_the_waiting_pod_when_one_goes() {
    let c = Cluster::start_with(&["--max-pods", "2"]);
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    for name in ["a", "b"] {
        create(&client, sleeper(name, json!({}))).await;
        c.wait_pod(&client, name, "Running", UP, running).await;
    }
    create(&client, sleeper("c", json!({}))).await;
    let p = c
        .wait_pod(&client, "c", "PodScheduled=False", UP, |p| {
            pod_scheduled(p).is_some_and(|s| s.0 == "False")
        })
        .await;
    assert_eq!(
        pod_scheduled(&p).unwrap().2,
        "0/1 nodes are available: 1 Too many pods."
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.delete("a", &Default::default()).await.unwrap();
    let p = c
        .wait_pod(
            &client,
            "c",
            "scheduled once a pod went, and Running",
            UP,
            running,
        )
        .await;
    assert_eq!(node_of(&p).as_deref(), Some(c.node.as_str()));
}
