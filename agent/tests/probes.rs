//! Probes and lifecycle hooks on real Docker, end to end: the seed's
//! liveness example, readiness over HTTP, a startup probe, postStart and
//! preStop hooks, checked through the API the way a user would.

mod cluster;

use std::time::{Duration, Instant};

use cluster::{Cluster, BUSYBOX};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use kube::Client;
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(30);

fn pod(name: &str, containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"test": "probes"}},
        "spec": {"terminationGracePeriodSeconds": 2, "containers": containers}})
}

fn phase(p: &Value) -> &str {
    p["status"]["phase"].as_str().unwrap_or("")
}

fn condition(p: &Value, kind: &str) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == kind && c["status"] == "True")
    })
}

fn container(p: &Value) -> &Value {
    &p["status"]["containerStatuses"][0]
}

fn running(p: &Value) -> bool {
    container(p)["state"]["running"].is_object()
}

/// The events recorded on pod `name`, as (reason, message), once `check`
/// holds for them.
async fn events_until(
    client: &Client,
    name: &str,
    what: &str,
    check: impl Fn(&[(String, String)]) -> bool,
) -> Vec<(String, String)> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let params = ListParams::default().fields(&format!("involvedObject.name={name}"));
    let start = Instant::now();
    loop {
        let events: Vec<(String, String)> = api
            .list(&params)
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
            .collect();
        if check(&events) {
            return events;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for events on {name}: {what}; got {events:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The seed's liveness example (exec `cat /tmp/healthy`), with shorter
/// sleeps and periods: the probe fails once the file is gone, the
/// container is killed and restarted, the pod stays Running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_liveness_probe_restarts_the_container() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(
        &client,
        pod(
            "liveness-exec",
            json!([{
                "name": "liveness",
                "image": BUSYBOX,
                "args": ["/bin/sh", "-c",
                         "touch /tmp/healthy; sleep 4; rm -rf /tmp/healthy; sleep 600"],
                "livenessProbe": {
                    "exec": {"command": ["cat", "/tmp/healthy"]},
                    "initialDelaySeconds": 2,
                    "periodSeconds": 1
                }
            }]),
        ),
    )
    .await;
    let p = c
        .wait_pod(&client, "liveness-exec", "Running", UP, |p| {
            phase(p) == "Running" && running(p)
        })
        .await;
    assert_eq!(container(&p)["restartCount"], 0);
    let p = c
        .wait_pod(&client, "liveness-exec", "one restart", UP, |p| {
            container(p)["restartCount"] == 1 && running(p)
        })
        .await;
    assert_eq!(phase(&p), "Running");
    assert_eq!(container(&p)["lastState"]["terminated"]["exitCode"], 137);
    let events = events_until(&client, "liveness-exec", "Unhealthy and Killing", |es| {
        es.iter().any(|(r, _)| r == "Killing")
    })
    .await;
    assert!(
        events.iter().any(|(r, m)| r == "Unhealthy"
            && m.starts_with("Liveness probe failed: ")
            && m.contains("/tmp/healthy")),
        "{events:#?}"
    );
    assert!(
        events.iter().any(|(r, m)| r == "Killing"
            && m == "Container liveness failed liveness probe, will be restarted"),
        "{events:#?}"
    );
}

/// Readiness over HTTP on a named port flips Ready both ways and never
/// restarts anything; a passing tcpSocket liveness probe leaves it be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_http_get_flips_ready_both_ways() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(
        &client,
        pod(
            "web",
            json!([{
                "name": "web",
                "image": "bosun.local/web:1",
                "ports": [{"name": "http", "containerPort": 80}],
                "readinessProbe": {
                    "httpGet": {"path": "/ready", "port": "http"},
                    "periodSeconds": 1,
                    "failureThreshold": 1
                },
                "livenessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 1}
            }]),
        ),
    )
    .await;
    let p = c
        .wait_pod(&client, "web", "Running", UP, |p| {
            phase(p) == "Running" && running(p)
        })
        .await;
    assert!(!condition(&p, "Ready"), "/ready does not exist yet");
    // Still not ready a few probes later.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let p = c.wait_pod(&client, "web", "the pod", UP, |_| true).await;
    assert!(!condition(&p, "Ready") && !condition(&p, "ContainersReady"));
    assert_eq!(container(&p)["ready"], false);

    c.exec("web", "web", &["touch", "/www/ready"]);
    let p = c
        .wait_pod(&client, "web", "Ready", UP, |p| condition(p, "Ready"))
        .await;
    assert!(condition(&p, "ContainersReady"));
    assert_eq!(container(&p)["ready"], true);

    c.exec("web", "web", &["rm", "/www/ready"]);
    let p = c
        .wait_pod(&client, "web", "not Ready", UP, |p| !condition(p, "Ready"))
        .await;
    assert_eq!(container(&p)["ready"], false);
    assert_eq!(container(&p)["restartCount"], 0);
    assert_eq!(phase(&p), "Running");
    events_until(&client, "web", "a failed readiness probe", |es| {
        es.iter().any(|(r, m)| {
            r == "Unhealthy"
                && m == "Readiness probe failed: HTTP probe failed with statuscode: 404"
        })
    })
    .await;
}

/// Until the startup probe passes the container is neither started nor
/// ready, and its readiness probe does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_probe_delays_readiness() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(
        &client,
        pod(
            "slow-start",
            json!([{
                "name": "app",
                "image": BUSYBOX,
                "command": ["sh", "-c", "sleep 600"],
                "startupProbe": {
                    "exec": {"command": ["test", "-f", "/tmp/started"]},
                    "periodSeconds": 1,
                    "failureThreshold": 60
                },
                "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1}
            }]),
        ),
    )
    .await;
    c.wait_pod(&client, "slow-start", "Running", UP, |p| {
        phase(p) == "Running" && running(p)
    })
    .await;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let p = c
            .wait_pod(&client, "slow-start", "the pod", UP, |_| true)
            .await;
        assert_eq!(container(&p)["started"], false, "{:#}", p["status"]);
        assert_eq!(container(&p)["ready"], false);
        assert!(!condition(&p, "Ready"));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    c.exec("slow-start", "app", &["touch", "/tmp/started"]);
    let p = c
        .wait_pod(&client, "slow-start", "started and Ready", UP, |p| {
            container(p)["started"] == true && condition(p, "Ready")
        })
        .await;
    assert_eq!(container(&p)["restartCount"], 0);
}

/// postStart runs once the container has started; preStop runs before
/// the stop signal: the app's SIGTERM trap writes after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_start_and_pre_stop_hooks() {
    let c = Cluster::start();
    let client = c.client().await;
    let hooks = c.dir.path().join("hooks");
    let mut spec = pod(
        "hooks",
        json!([{
            "name": "app",
            "image": BUSYBOX,
            "command": ["sh", "-c",
                        "trap 'echo sigterm >> /hooks/log; exit 0' TERM; sleep 600 & wait"],
            "volumeMounts": [{"name": "hooks", "mountPath": "/hooks"}],
            "lifecycle": {
                "postStart": {"exec": {"command": ["sh", "-c", "echo poststart > /hooks/poststart"]}},
                "preStop": {"exec": {"command": ["sh", "-c", "echo prestop >> /hooks/log; sleep 1"]}}
            }
        }]),
    );
    spec["spec"]["terminationGracePeriodSeconds"] = json!(10);
    spec["spec"]["volumes"] = json!([{"name": "hooks",
        "hostPath": {"path": hooks.to_string_lossy(), "type": "DirectoryOrCreate"}}]);
    c.create_pod(&client, spec).await;
    c.wait_pod(&client, "hooks", "Running", UP, |p| {
        phase(p) == "Running" && running(p)
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(hooks.join("poststart")).unwrap(),
        "poststart\n",
        "postStart ran before the container counted as running"
    );

    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let started = Instant::now();
    api.delete("hooks", &DeleteParams::default()).await.unwrap();
    while api.get_opt("hooks").await.unwrap().is_some() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the pod is never gone"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        std::fs::read_to_string(hooks.join("log")).unwrap(),
        "prestop\nsigterm\n"
    );
    // The trap ended the container well before the grace period was up.
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
}

/// A tcpSocket liveness probe on a port nothing listens on fails, and the
/// container is killed and restarted, with the kubelet's wording.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_tcp_socket_probe_restarts_the_container() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(
        &client,
        pod(
            "liveness-tcp",
            json!([{
                "name": "app",
                "image": BUSYBOX,
                "command": ["sleep", "600"],
                "livenessProbe": {
                    "tcpSocket": {"port": 8081},
                    "periodSeconds": 1,
                    "failureThreshold": 2
                }
            }]),
        ),
    )
    .await;
    let p = c
        .wait_pod(&client, "liveness-tcp", "one restart", UP, |p| {
            container(p)["restartCount"] == 1
        })
        .await;
    assert_eq!(phase(&p), "Running");
    assert_eq!(container(&p)["lastState"]["terminated"]["exitCode"], 137);
    let events = events_until(&client, "liveness-tcp", "Unhealthy and Killing", |es| {
        es.iter().any(|(r, _)| r == "Killing")
    })
    .await;
    assert!(
        events.iter().any(|(r, m)| r == "Unhealthy"
            && m.starts_with("Liveness probe failed: dial tcp ")
            && m.contains(":8081")
            && m.contains("connection refused")),
        "{events:#?}"
    );
    assert!(
        events.iter().any(|(r, m)| r == "Killing"
            && m == "Container app failed liveness probe, will be restarted"),
        "{events:#?}"
    );
}

fn time_of(v: &Value) -> chrono::DateTime<chrono::Utc> {
    v.as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&chrono::Utc))
        .unwrap_or_else(|| panic!("a timestamp: {v}"))
}

/// A container that keeps crashing waits in CrashLoopBackOff, and the
/// waits follow the kubelet's back-off: the first restart at once, then the
/// base doubling up to the cap (here 1 s doubling to 4 s; the agent's
/// defaults are Kubernetes' 10 s and 5 min, unit-tested in pod/backoff.rs).
/// Every run is seen through a watch of the pod, by its container id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashing_container_backs_off_doubling_to_the_cap() {
    use futures::StreamExt;
    use kube::runtime::watcher;
    use std::collections::BTreeMap;

    // The harness starts agents with --backoff-base 1.
    let c = Cluster::start_with(&["--backoff-max", "4"]);
    let client = c.client().await;
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut changes = watcher(
        api.clone(),
        watcher::Config::default().fields("metadata.name=crasher"),
    )
    .boxed();
    c.create_pod(
        &client,
        pod(
            "crasher",
            json!([{"name": "app", "image": BUSYBOX, "command": ["sh", "-c", "exit 3"]}]),
        ),
    )
    .await;
    // Each run the status showed as terminated: id -> (started, finished, exit code).
    type Run = (
        chrono::DateTime<chrono::Utc>,
        chrono::DateTime<chrono::Utc>,
        i64,
    );
    let mut runs: BTreeMap<String, Run> = BTreeMap::new();
    let mut back_off_message = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while runs.len() < 7 {
        let event = tokio::time::timeout_at(deadline, changes.next())
            .await
            .unwrap_or_else(|_| panic!("runs seen in time: {runs:#?}"))
            .expect("the pod watch went on")
            .expect("no watch error");
        let (watcher::Event::Apply(p) | watcher::Event::InitApply(p)) = event else {
            continue;
        };
        let p = serde_json::to_value(p).unwrap();
        let cs = container(&p);
        if cs["state"]["waiting"]["reason"] == "CrashLoopBackOff" {
            back_off_message = cs["state"]["waiting"]["message"].as_str().map(String::from);
        }
        for t in [&cs["state"]["terminated"], &cs["lastState"]["terminated"]] {
            if let Some(id) = t["containerID"].as_str() {
                runs.insert(
                    id.to_string(),
                    (
                        time_of(&t["startedAt"]),
                        time_of(&t["finishedAt"]),
                        t["exitCode"].as_i64().unwrap_or(-1),
                    ),
                );
            }
        }
    }
    let message = back_off_message.expect("the container showed CrashLoopBackOff");
    assert!(
        message.starts_with("back-off ") && message.contains("restarting failed container=app"),
        "{message}"
    );
    let mut runs: Vec<Run> = runs.into_values().collect();
    runs.sort_by_key(|r| r.0);
    assert!(
        runs.iter().all(|r| r.2 == 3),
        "every run exited 3: {runs:?}"
    );
    // Restart n waited: 0 for the first, then min(2^(n-2), 4) s.
    // Timestamps have whole seconds, so within a second and a half.
    let waits: Vec<f64> = runs
        .windows(2)
        .map(|w| (w[1].0 - w[0].1).num_milliseconds() as f64 / 1000.0)
        .collect();
    for (i, wait) in waits.iter().enumerate() {
        let n = i as i32 + 1;
        let want = if n == 1 {
            0.0
        } else {
            2f64.powi(n - 2).min(4.0)
        };
        assert!(
            (wait - want).abs() <= 1.5,
            "restart {n} waited {wait} s, want about {want} s: {waits:?}"
        );
    }
    api.delete("crasher", &DeleteParams::default())
        .await
        .unwrap();
}
