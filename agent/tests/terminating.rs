//! A pod being deleted on real Docker, as clients written against kind
//! watch it: with `kubectl delete pod --grace-period=10`, a container
//! that ignores SIGTERM (busybox `sleep` as PID 1) keeps the pod Ready
//! while it still runs (a terminating endpoint may serve), and once it is
//! killed the agent writes the pod's terminal status (the container
//! terminated with exit code 137, Ready and ContainersReady False, phase
//! Failed) before the pod object goes. `kubectl wait
//! --for=condition=Ready=false` returns, and a watch sees that status
//! before the DELETED event.

mod cluster;

use std::io::Read;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use cluster::{Cluster, BUSYBOX};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, WatchEvent, WatchParams};
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(90);
const GRACE: u64 = 10;

fn condition<'a>(p: &'a Value, kind: &str) -> Option<&'a str> {
    p["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)?["status"]
        .as_str()
}

/// A child process killed (by pid) and reaped when the test ends, also
/// on failure.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One watch event of the pod, with when it arrived.
struct Seen {
    at: Instant,
    kind: &'static str,
    pod: Value,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_pod_reports_ready_false_and_exit_codes_before_it_goes() {
    let c = Cluster::start();
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "slow", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": BUSYBOX, "command": ["sleep", "3600"]}]}});
    c.create_pod(&client, pod).await;
    let ready = c
        .wait_pod(&client, "slow", "Running and Ready", UP, |p| {
            p["status"]["phase"] == "Running" && condition(p, "Ready") == Some("True")
        })
        .await;

    // Watch the pod from the version seen Ready, and have kubectl wait
    // for Ready=False, both before the delete.
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let version = ready["metadata"]["resourceVersion"].as_str().unwrap();
    let params = WatchParams::default()
        .fields("metadata.name=slow")
        .timeout(290);
    let mut stream = api.watch(&params, version).await.unwrap().boxed();
    let waiter = Reaped(
        c.kubectl()
            .args(["wait", "--for=condition=Ready=false", "pod/slow"])
            .args(["--timeout=120s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl wait"),
    );
    // kubectl wait starts before the delete; the grace period (the
    // container ignores SIGTERM) leaves it time to be watching when the
    // terminal status comes.
    let deleted_at = Instant::now();
    let out = c
        .kubectl()
        .args(["delete", "pod", "slow", "--wait=false"])
        .arg(format!("--grace-period={GRACE}"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");

    let mut seen: Vec<Seen> = Vec::new();
    let deadline = Duration::from_secs(GRACE) + UP;
    loop {
        let next = tokio::time::timeout(Duration::from_secs(5), stream.try_next()).await;
        let event = match next {
            Ok(Ok(Some(e))) => e,
            Ok(Ok(None)) => panic!("the watch ended before the pod was deleted"),
            Ok(Err(e)) => panic!("watch: {e}"),
            Err(_) => {
                assert!(
                    deleted_at.elapsed() < deadline,
                    "the pod was not deleted within {deadline:?}\nagent log tail:\n{}",
                    c.agent_log()
                );
                continue;
            }
        };
        let (kind, p) = match event {
            WatchEvent::Added(p) => ("ADDED", p),
            WatchEvent::Modified(p) => ("MODIFIED", p),
            WatchEvent::Deleted(p) => ("DELETED", p),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("watch error: {e:?}"),
        };
        seen.push(Seen {
            at: Instant::now(),
            kind,
            pod: serde_json::to_value(&p).unwrap(),
        });
        if kind == "DELETED" {
            break;
        }
    }

    let summary: Vec<String> = seen
        .iter()
        .map(|s| {
            format!(
                "{} phase={} ready={:?} state={}",
                s.kind,
                s.pod["status"]["phase"],
                condition(&s.pod, "Ready"),
                s.pod["status"]["containerStatuses"][0]["state"]
            )
        })
        .collect();
    // kubectl wait saw Ready=False (it fails if the pod goes first).
    let mut waiter = waiter;
    let start = Instant::now();
    let status = loop {
        if let Some(s) = waiter.0.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > UP {
            let _ = waiter.0.kill();
            let mut out = String::new();
            let _ = waiter.0.stdout.take().unwrap().read_to_string(&mut out);
            let _ = waiter.0.stderr.take().unwrap().read_to_string(&mut out);
            panic!("kubectl wait did not return once the pod was gone: {out}\n{summary:#?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    waiter
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    waiter
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        status.success() && stdout.contains("pod/slow condition met"),
        "kubectl wait --for=condition=Ready=false: {status}\n{stdout}\n{stderr}\n{summary:#?}"
    );

    // While the container still runs the pod stays Ready: the first
    // change is the deletion mark, with the status as it was.
    let marked = seen
        .iter()
        .find(|s| !s.pod["metadata"]["deletionTimestamp"].is_null())
        .expect("the deletion mark");
    assert_eq!(
        condition(&marked.pod, "Ready"),
        Some("True"),
        "{summary:#?}"
    );
    // Before DELETED, a change with the terminal status.
    let before_deleted = &seen[..seen.len() - 1];
    let terminal = before_deleted
        .iter()
        .find(|s| !s.pod["status"]["containerStatuses"][0]["state"]["terminated"].is_null())
        .unwrap_or_else(|| panic!("no terminated container state before DELETED: {summary:#?}"));
    let p = &terminal.pod;
    let t = &p["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(t["exitCode"], 137, "{summary:#?}");
    assert_eq!(t["reason"], "Error", "{summary:#?}");
    assert!(t["finishedAt"].is_string(), "{summary:#?}");
    assert_eq!(p["status"]["containerStatuses"][0]["ready"], false);
    assert_eq!(condition(p, "Ready"), Some("False"), "{summary:#?}");
    assert_eq!(condition(p, "ContainersReady"), Some("False"));
    assert_eq!(p["status"]["phase"], "Failed", "{summary:#?}");
    // The container ignored SIGTERM: it was killed at the end of the
    // grace period, not before.
    let after = terminal.at - deleted_at;
    assert!(
        after >= Duration::from_secs(GRACE - 2),
        "terminal status {after:?} after the delete, grace {GRACE} s"
    );
}
