//! PodDisruptionBudgets on real Docker, two nodes: with `minAvailable: 2`
//! over a Deployment's 3 replicas, a drain evicts one pod at a time (the
//! others get 429 and are retried), each next eviction waiting until the
//! replacement runs Ready on the other node, and finishes, with bosun's
//! drain and with kubectl's. Two Ready pods are running at every moment.

mod cluster;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cluster::{ok, Cluster, BUSYBOX};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams, PostParams};
use kube::Client;
use serde_json::json;

const UP: Duration = Duration::from_secs(120);
const DRAIN: Duration = Duration::from_secs(300);
const VIOLATES: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

fn running_ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status.as_ref().is_some_and(|s| {
            s.phase.as_deref() == Some("Running")
                && s.conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

fn node_of(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

async fn web_pods(client: &Client) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
}

/// Waits until the 3 web pods run Ready on `node` and no other is left.
async fn all_on(c: &Cluster, client: &Client, node: &str) {
    c.poll(&format!("3 web pods ready on {node}"), UP, || async {
        let pods = web_pods(client).await;
        (pods.len() == 3 && pods.iter().all(|p| running_ready(p) && node_of(p) == node))
            .then_some(())
    })
    .await;
}

async fn allowed_disruptions(client: &Client) -> i32 {
    Api::<PodDisruptionBudget>::namespaced(client.clone(), "default")
        .get("web")
        .await
        .unwrap()
        .status
        .and_then(|s| s.disruptions_allowed)
        .unwrap_or(-1)
}

/// Runs a drain to its end, checking every few hundred milliseconds that
/// two web pods are Ready; returns its output and the fewest Ready seen.
async fn drain_watching(client: &Client, mut cmd: Command) -> (Output, usize) {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("drain starts");
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output().expect("drain output"));
    let started = Instant::now();
    let mut fewest = usize::MAX;
    while !waiter.is_finished() {
        let ready = web_pods(client)
            .await
            .iter()
            .filter(|p| running_ready(p))
            .count();
        fewest = fewest.min(ready);
        if started.elapsed() > DRAIN {
            // Ours, by pid: the drain hung.
            let _ = Command::new("kill").arg(pid.to_string()).status();
            panic!("drain did not finish in {DRAIN:?}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    (waiter.join().unwrap(), fewest)
}

#[tokio::test]
async fn drains_evict_one_pod_at_a_time_within_a_budget() {
    let c = Cluster::start_nodes(2);
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let (n0, n1) = (c.nodes()[0].clone(), c.nodes()[1].clone());

    // Three replicas, all on n1.
    ok(c.bosun().args(["cordon", &n0]));
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                   "spec": {"terminationGracePeriodSeconds": 1, "containers": [
                     {"name": "main", "image": BUSYBOX, "command": ["sleep", "3600"]}]}}}
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    all_on(&c, &client, &n1).await;
    ok(c.bosun().args(["uncordon", &n0]));

    // kubectl's generator makes the budget; the controller allows one
    // disruption of 3 healthy pods when 2 must stay.
    let out = ok(c.kubectl().args([
        "create",
        "poddisruptionbudget",
        "web",
        "--selector=app=web",
        "--min-available=2",
    ]));
    assert_eq!(out.trim(), "poddisruptionbudget.policy/web created");
    c.poll("the budget allowing one disruption", UP, || async {
        (allowed_disruptions(&client).await == 1).then_some(())
    })
    .await;
    let table = ok(c.kubectl().args(["get", "pdb", "web"]));
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        [
            "NAME",
            "MIN",
            "AVAILABLE",
            "MAX",
            "UNAVAILABLE",
            "ALLOWED",
            "DISRUPTIONS",
            "AGE"
        ],
        "{table}"
    );
    assert_eq!(lines[1][..4], ["web", "2", "N/A", "1"], "{table}");
    let described = ok(c.bosun().args(["describe", "pdb", "web"]));
    for (key, value) in [
        ("Min available:", "2"),
        ("Allowed disruptions:", "1"),
        ("Current:", "3"),
    ] {
        assert!(
            described
                .lines()
                .any(|l| l.trim_start().starts_with(key) && l.trim_end().ends_with(value)),
            "{key} {value} in\n{described}"
        );
    }

    // bosun drain: every pod ends up on n0, one eviction at a time.
    let mut drain = c.bosun();
    drain.args(["drain", &n1, "--timeout", "300s"]);
    let (out, fewest) = drain_watching(&client, drain).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        fewest >= 2,
        "only {fewest} web pods were Ready during the drain"
    );
    assert!(
        stderr.contains(&format!("(will retry after 5s): {VIOLATES}")),
        "{stdout}\n{stderr}\nfewest ready: {fewest}"
    );
    let evicted = stdout.lines().filter(|l| l.ends_with(" evicted")).count();
    assert_eq!(evicted, 3, "{stdout}");
    assert_eq!(
        stdout.lines().last(),
        Some(format!("node/{n1} drained").as_str())
    );
    all_on(&c, &client, &n0).await;

    // kubectl drain back the other way, the same dance.
    ok(c.bosun().args(["uncordon", &n1]));
    c.poll("the budget allowing one disruption again", UP, || async {
        (allowed_disruptions(&client).await == 1).then_some(())
    })
    .await;
    let mut drain = c.kubectl();
    drain.args(["drain", &n0, "--timeout=300s"]);
    let (out, fewest) = drain_watching(&client, drain).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        fewest >= 2,
        "only {fewest} web pods were Ready during kubectl drain"
    );
    assert!(stderr.contains(VIOLATES), "{stderr}");
    assert!(stdout.contains(&format!("node/{n0} drained")), "{stdout}");
    all_on(&c, &client, &n1).await;
}
