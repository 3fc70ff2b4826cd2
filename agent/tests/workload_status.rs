//! Workload statuses clients wait on, on real Docker with kubectl: a
//! StatefulSet's `status.availableReplicas` (served since Kubernetes
//! 1.22) reaches its replicas once every pod has been Ready for
//! `minReadySeconds`, so `kubectl wait
//! --for=jsonpath='{.status.availableReplicas}'=3 sts/x` returns.

mod cluster;

use std::io::Write;
use std::process::{Command, Stdio};

use chrono::{DateTime, Utc};
use cluster::{Cluster, BUSYBOX};
use serde_json::{json, Value};

const MIN_READY: i64 = 3;

/// Runs `cmd` with `input` on stdin; its stdout, failing the test with
/// its stderr and the logs if it fails.
fn run_with_stdin(c: &Cluster, mut cmd: Command, input: &str) -> String {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\ncontrol log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        c.control_log()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn kubectl_json(c: &Cluster, args: &[&str]) -> Value {
    let out = c
        .kubectl()
        .args(args)
        .args(["-o", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "kubectl {args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `kubectl wait --for=jsonpath=<expr> sts/x --timeout=<timeout>`,
/// failing the test with the set's status and the control plane's log.
fn kubectl_wait(c: &Cluster, expr: &str, timeout: &str) {
    let out = c
        .kubectl()
        .args(["wait", &format!("--for=jsonpath={expr}"), "sts/x"])
        .arg(format!("--timeout={timeout}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl wait {expr}: {}\n{}\nstatus: {}\ncontrol log tail:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        kubectl_json(c, &["get", "sts", "x"])["status"],
        c.control_log()
            .lines()
            .rev()
            .take(30)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_available_replicas_honour_min_ready_seconds() {
    let c = Cluster::start();
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let set = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "x", "namespace": "default"},
        "spec": {
            "serviceName": "x", "replicas": 3, "minReadySeconds": MIN_READY,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [
                    {"name": "c", "image": BUSYBOX, "command": ["sleep", "3600"]}]}}
        }
    });
    let mut apply = c.kubectl();
    apply.args(["apply", "-f", "-"]);
    run_with_stdin(&c, apply, &set.to_string());

    // Ready first (starting the pods may take long on a loaded machine),
    // then available within well under the controller's 60 s resync: the
    // set comes back by itself once minReadySeconds have passed.
    kubectl_wait(&c, "{.status.readyReplicas}=3", "180s");
    kubectl_wait(&c, "{.status.availableReplicas}=3", "45s");
    let waited = chrono::Utc::now();
    let status = kubectl_json(&c, &["get", "sts", "x"])["status"].clone();
    assert_eq!(status["readyReplicas"], 3, "{status}");
    assert_eq!(status["replicas"], 3, "{status}");

    // Available only once each pod had been Ready minReadySeconds (the
    // API's times are whole seconds: one second of slack).
    let pods = kubectl_json(&c, &["get", "pods", "-l", "app=x"]);
    let items = pods["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    for p in items {
        let ready = p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready" && c["status"] == "True")
            .unwrap_or_else(|| panic!("{} not Ready", p["metadata"]["name"]));
        let since: DateTime<Utc> = ready["lastTransitionTime"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            waited - since >= chrono::Duration::seconds(MIN_READY - 1),
            "{} counted available {:?} after it became Ready",
            p["metadata"]["name"],
            waited - since
        );
    }
}
