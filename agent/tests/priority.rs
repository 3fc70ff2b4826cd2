//! PriorityClasses and preemption on real Docker, through kubectl: the
//! system classes are there from the start and cannot be deleted; a pod
//! naming an unknown class is refused; pods get their class's priority;
//! on a full node (`--max-pods 2`) a pod with `preemptionPolicy: Never`
//! waits, and a high-priority pod preempts one low-priority pod (the
//! victim gets a DisruptionTarget condition and a Preempted event, the
//! preemptor `status.nominatedNodeName`) and runs once the victim is gone.

mod cluster;

use std::io::Write;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster::{Cluster, BUSYBOX};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(90);

/// Runs kubectl with `stdin` as its input; (success, stdout, stderr).
fn kubectl_in(c: &Cluster, args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = c
        .kubectl()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl starts");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(stdin.as_bytes())
        .expect("writing kubectl's stdin");
    let out = child.wait_with_output().expect("kubectl runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn kubectl(c: &Cluster, args: &[&str]) -> (bool, String, String) {
    let out = cluster::run(c.kubectl().args(args));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn kubectl_ok(c: &Cluster, args: &[&str]) -> String {
    let (ok, out, err) = kubectl(c, args);
    assert!(ok, "kubectl {args:?} failed: {err}");
    out
}

fn pod_yaml(name: &str, class: &str) -> String {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "priorityClassName": class,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": BUSYBOX, "command": ["sh", "-c", "sleep 3600"]}],
        },
    })
    .to_string()
}

fn running(p: &Value) -> bool {
    p["status"]["phase"] == "Running"
}

fn unschedulable(p: &Value) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "PodScheduled" && c["status"] == "False")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_priority_pod_preempts_a_low_priority_one_on_a_full_node() {
    let c = Cluster::start_with(&["--max-pods", "2"]);
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;

    // The system classes, in kubectl's columns.
    let table = kubectl_ok(&c, &["get", "priorityclasses"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    );
    let row = |name: &str| -> Vec<String> {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in:\n{table}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let node_critical = row("system-node-critical");
    assert_eq!(node_critical[1..3], ["2000001000", "false"]);
    assert_eq!(node_critical[4], "PreemptLowerPriority");
    assert_eq!(row("system-cluster-critical")[1], "2000000000");
    let (ok, _, err) = kubectl(&c, &["delete", "priorityclass", "system-node-critical"]);
    assert!(!ok);
    assert!(
        err.contains("priorityclasses.scheduling.k8s.io \"system-node-critical\" is forbidden: this is a system priority class and cannot be deleted"),
        "{err}"
    );

    for (name, value, policy) in [
        ("low", 10, "PreemptLowerPriority"),
        ("high", 1000, "PreemptLowerPriority"),
        ("polite", 1000, "Never"),
    ] {
        let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "preemptionPolicy": policy});
        let (ok, _, err) = kubectl_in(&c, &["apply", "-f", "-"], &class.to_string());
        assert!(ok, "{err}");
    }
    let described = kubectl_ok(&c, &["describe", "priorityclass", "polite"]);
    assert!(described.contains("1000"), "{described}");
    assert!(described.contains("Never"), "{described}");

    // An unknown class is refused with upstream's words.
    let (ok, _, err) = kubectl_in(&c, &["create", "-f", "-"], &pod_yaml("lost", "nope"));
    assert!(!ok);
    assert!(
        err.contains("pods \"lost\" is forbidden: no PriorityClass with name nope was found"),
        "{err}"
    );

    // Two low-priority pods fill the node.
    for name in ["low-a", "low-b"] {
        let (ok, _, err) = kubectl_in(&c, &["create", "-f", "-"], &pod_yaml(name, "low"));
        assert!(ok, "{err}");
        let p = c.wait_pod(&client, name, "Running", UP, running).await;
        assert_eq!(p["spec"]["priority"], 10);
        assert_eq!(p["spec"]["preemptionPolicy"], "PreemptLowerPriority");
    }

    // Watch the low pods from here on: the victim's last states.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let seen: Arc<Mutex<Vec<Pod>>> = Arc::default();
    let recorder = seen.clone();
    let watch = tokio::spawn({
        let pods = pods.clone();
        async move {
            let mut stream = std::pin::pin!(watcher(pods, watcher::Config::default()));
            while let Some(event) = stream.next().await {
                if let Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) = event {
                    recorder.lock().unwrap().push(p);
                }
            }
        }
    });

    // A pod that may not preempt waits.
    let (ok, _, err) = kubectl_in(&c, &["create", "-f", "-"], &pod_yaml("polite", "polite"));
    assert!(ok, "{err}");
    let p = c
        .wait_pod(&client, "polite", "PodScheduled=False", UP, unschedulable)
        .await;
    assert_eq!(p["spec"]["priority"], 1000);
    assert_eq!(p["spec"]["preemptionPolicy"], "Never");

    // A pod that may preempts one low pod and runs.
    let (ok, _, err) = kubectl_in(&c, &["create", "-f", "-"], &pod_yaml("high", "high"));
    assert!(ok, "{err}");
    let high = c
        .wait_pod(&client, "high", "Running after preempting", UP, running)
        .await;
    assert_eq!(high["spec"]["nodeName"], c.node.as_str());
    assert_eq!(high["status"]["nominatedNodeName"], c.node.as_str());
    let uid = high["metadata"]["uid"].as_str().unwrap().to_string();

    // Exactly one low pod went; the other still runs.
    let mut left = Vec::new();
    for name in ["low-a", "low-b"] {
        if let Some(p) = pods.get_opt(name).await.unwrap() {
            if p.metadata.deletion_timestamp.is_none() {
                left.push(name);
            }
        }
    }
    assert_eq!(left.len(), 1, "one low pod preempted, not both: {left:?}");
    let victim = if left == ["low-a"] { "low-b" } else { "low-a" };

    // The victim was marked as upstream marks it before it went.
    let marked = seen.lock().unwrap().iter().any(|p| {
        p.metadata.name.as_deref() == Some(victim)
            && p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c.type_ == "DisruptionTarget"
                            && c.status == "True"
                            && c.reason.as_deref() == Some("PreemptionByScheduler")
                    })
                })
    });
    watch.abort();
    assert!(marked, "{victim} had no DisruptionTarget condition");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let want = format!("Preempted by pod {uid} on node {}", c.node);
    c.poll("the Preempted event on the victim", UP, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.involved_object.name.as_deref() == Some(victim)
                    && e.reason.as_deref() == Some("Preempted")
                    && e.message.as_deref() == Some(want.as_str())
            })
            .then_some(())
    })
    .await;

    // The polite pod is still waiting: it preempted no one.
    let polite = pods.get("polite").await.unwrap();
    assert!(polite.spec.as_ref().unwrap().node_name.is_none());
}
