//! RuntimeClasses on real Docker, through kubectl: kubectl's HANDLER
//! column; admission refuses a pod naming no class and fills a pod's
//! overhead and node selector from its class; a pod of a class whose
//! handler is `runc` runs with Docker's runtime `runc`; a pod of a class
//! naming a runtime Docker lacks stays Pending with the sandbox failure
//! (`FailedCreatePodSandBox`) in `kubectl describe`.

mod cluster;

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use cluster::{Cluster, BUSYBOX};
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(90);
/// A runtime no Docker engine has.
const NO_SUCH_RUNTIME: &str = "bosun-no-such-runtime";

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

fn kubectl_ok(c: &Cluster, args: &[&str]) -> String {
    let out = cluster::run(c.kubectl().args(args));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "kubectl {args:?} failed: {stderr}");
    stdout
}

fn apply(c: &Cluster, obj: &Value) {
    let (ok, _, err) = kubectl_in(c, &["apply", "-f", "-"], &obj.to_string());
    assert!(ok, "{err}");
}

fn pod(name: &str, class: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "runtimeClassName": class,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": BUSYBOX, "command": ["sh", "-c", "sleep 3600"]}],
        },
    })
}

/// Docker's runtime of each of the pod's containers (the sandbox's too).
fn docker_runtimes(c: &Cluster, pod: &str) -> Vec<String> {
    let ids = c.docker_ids(&[&format!("io.bosun.pod.name={pod}")]);
    assert!(!ids.is_empty(), "pod {pod} has containers");
    ids.iter()
        .map(|id| {
            cluster::ok(std::process::Command::new("docker").args([
                "inspect",
                "--format",
                "{{.HostConfig.Runtime}}",
                id,
            ]))
            .trim()
            .to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_run_with_their_runtime_class_handler() {
    let c = Cluster::start();
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let node_label = "kubernetes.io/hostname";

    apply(
        &c,
        &json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": "standard"}, "handler": "runc",
            "overhead": {"podFixed": {"cpu": "10m", "memory": "8Mi"}},
            "scheduling": {"nodeSelector": {node_label: c.node.as_str()}}}),
    );
    apply(
        &c,
        &json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": "missing"}, "handler": NO_SUCH_RUNTIME}),
    );
    let table = kubectl_ok(&c, &["get", "runtimeclasses"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "HANDLER", "AGE"], "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().take(2).eq(["standard", "runc"])),
        "{table}"
    );

    // A class that does not exist is refused in upstream's words.
    let (ok, _, err) = kubectl_in(&c, &["create", "-f", "-"], &pod("lost", "nope").to_string());
    assert!(!ok);
    assert!(
        err.contains("pods \"lost\" is forbidden: pod rejected: RuntimeClass \"nope\" not found"),
        "{err}"
    );

    // The runc class: admission copied its overhead and node selector;
    // the pod runs, every container with Docker's runtime runc.
    apply(&c, &pod("on-runc", "standard"));
    let p = c
        .wait_pod(&client, "on-runc", "Running", UP, |p| {
            p["status"]["phase"] == "Running"
        })
        .await;
    assert_eq!(
        p["spec"]["overhead"],
        json!({"cpu": "10m", "memory": "8Mi"})
    );
    assert_eq!(p["spec"]["nodeSelector"][node_label], c.node.as_str());
    let runtimes = docker_runtimes(&c, "on-runc");
    assert!(runtimes.iter().all(|r| r == "runc"), "{runtimes:?}");

    // A handler Docker lacks: the sandbox fails as the kubelet reports it.
    apply(&c, &pod("no-runtime", "missing"));
    let described = c
        .poll("FailedCreatePodSandBox in kubectl describe", UP, || async {
            let out = kubectl_ok(&c, &["describe", "pod", "no-runtime"]);
            out.contains("FailedCreatePodSandBox").then_some(out)
        })
        .await;
    assert!(
        described.contains("Failed to create pod sandbox:") && described.contains(NO_SUCH_RUNTIME),
        "{described}"
    );
    let p = c
        .wait_pod(
            &client,
            "no-runtime",
            "waiting in ContainerCreating",
            UP,
            |p| {
                p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                    == "ContainerCreating"
            },
        )
        .await;
    assert_eq!(p["status"]["phase"], "Pending");
    assert!(
        c.docker_ids(&["io.bosun.pod.name=no-runtime"]).is_empty(),
        "nothing of the pod was left in Docker"
    );

    for name in ["on-runc", "no-runtime"] {
        kubectl_ok(&c, &["delete", "pod", name, "--wait=true"]);
    }
}
