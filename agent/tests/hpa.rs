//! The HorizontalPodAutoscaler on real Docker, end to end: the seed's
//! hpa-demo Deployment (requests cpu 50m, limits 500m) and
//! `bosun autoscale deployment hpa-demo --cpu-percent=5 --min=1 --max=5`.
//! A CPU-burning busybox loop in the first pod drives it up (1 → 4, the
//! scale-up cap of max(2 × current, 4), → 5) within a few sync periods; when the loop stops it
//! comes back to 1, but not before the (shortened) scale-down
//! stabilization window has passed. A Deployment without requests,
//! autoscaled by kubectl, reports ScalingActive=False
//! FailedGetResourceMetric and is never scaled.
//!
//! The control plane runs with a 2 s sync period and a 20 s scale-down
//! window, the agent reads metrics every second.

mod cluster;

use std::time::{Duration, Instant};

use cluster::{ok, Cluster};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use kube::Client;

const WINDOW: Duration = Duration::from_secs(20);

/// The Deployment of examples/hpa.yaml (the seed's, with the project's image).
fn seed_deployment() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/hpa.yaml");
    let all = std::fs::read_to_string(path).unwrap();
    let first = all.split("\n---").next().unwrap().to_string();
    assert!(first.contains("kind: Deployment") && first.contains("cpu: 50m"));
    first
}

const NO_REQUESTS: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: norequests
spec:
  selector:
    matchLabels:
      app: norequests
  template:
    metadata:
      labels:
        app: norequests
    spec:
      containers:
      - name: main
        image: bosun.local/busybox:1.35
        command: [\"sleep\", \"3600\"]
";

async fn replicas(client: &Client, name: &str) -> i32 {
    Api::<Deployment>::namespaced(client.clone(), "default")
        .get(name)
        .await
        .unwrap()
        .spec
        .replicas
        .unwrap_or(1)
}

async fn running_pods(client: &Client, app: &str) -> Vec<String> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.metadata.name.unwrap())
        .collect()
}

async fn rescales(client: &Client) -> Vec<String> {
    let mut events: Vec<Event> = Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("SuccessfulRescale"))
        .filter(|e| e.involved_object.name.as_deref() == Some("hpa-demo"))
        .collect();
    events.sort_by_key(|e| e.metadata.creation_timestamp.clone());
    events.into_iter().filter_map(|e| e.message).collect()
}

fn hpa_row(cluster: &Cluster, name: &str) -> Vec<String> {
    let out = ok(cluster.bosun().args(["get", "hpa", name]));
    let lines: Vec<&str> = out.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE"
        ],
        "{out}"
    );
    // TARGETS is `cpu: 12%/5%`: two words.
    lines[1].split_whitespace().map(String::from).collect()
}

#[tokio::test]
async fn hpa_demo_scales_up_under_load_and_back_down_after_the_window() {
    let cluster = Cluster::start_nodes_with_control(
        1,
        &["--metrics-interval", "1"],
        &[
            "--horizontal-pod-autoscaler-sync-period=2s",
            "--horizontal-pod-autoscaler-downscale-stabilization=20s",
        ],
    );
    let client = cluster.client().await;
    cluster.wait_nodes_ready(&client).await;
    let manifest = cluster.dir.path().join("hpa-demo.yaml");
    std::fs::write(&manifest, seed_deployment()).unwrap();
    ok(cluster.bosun().arg("apply").arg("-f").arg(&manifest));
    let no_requests = cluster.dir.path().join("norequests.yaml");
    std::fs::write(&no_requests, NO_REQUESTS).unwrap();
    ok(cluster.bosun().arg("apply").arg("-f").arg(&no_requests));
    let first = cluster
        .poll("hpa-demo's pod to run", Duration::from_secs(60), || async {
            running_pods(&client, "nginx").await.pop()
        })
        .await;

    let out = ok(cluster.bosun().args([
        "autoscale",
        "deployment",
        "hpa-demo",
        "--cpu-percent=5",
        "--min=1",
        "--max=5",
    ]));
    assert_eq!(
        out,
        "horizontalpodautoscaler.autoscaling/hpa-demo autoscaled\n"
    );
    let out = ok(cluster.kubectl().args([
        "autoscale",
        "deployment",
        "norequests",
        "--cpu-percent=50",
        "--max=3",
    ]));
    assert!(out.contains("norequests autoscaled"), "{out}");

    // Idle: a reading, 0% of the request, no change.
    cluster
        .poll(
            "hpa-demo to read its idle pod",
            Duration::from_secs(60),
            || async {
                let row = hpa_row(&cluster, "hpa-demo");
                (row[2] == "cpu:" && row[3].ends_with("%/5%") && !row[3].starts_with('<'))
                    .then_some(())
            },
        )
        .await;
    let row = hpa_row(&cluster, "hpa-demo");
    assert_eq!(row[1], "Deployment/hpa-demo");
    assert_eq!(row[4..7], ["1", "5", "1"]);
    assert_eq!(replicas(&client, "hpa-demo").await, 1);

    // Load: a busy loop in the first pod, up to its 500m limit (1000% of
    // the request, 200 × the target).
    cluster.exec(
        &first,
        "nginx",
        &[
            "sh",
            "-c",
            // setsid and no inherited stdio: the loop outlives the exec.
            "setsid sh -c 'echo $$ > /tmp/burn.pid; while :; do :; done' </dev/null >/dev/null 2>&1 &",
        ],
    );
    let started = Instant::now();
    let mut seen = vec![1];
    loop {
        let r = replicas(&client, "hpa-demo").await;
        if seen.last() != Some(&r) {
            seen.push(r);
        }
        if r == 5 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "hpa-demo did not reach 5 replicas: {seen:?}\n{}",
            cluster::tail(&cluster.control_log(), 30)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("scaled up to 5 in {:?}: {seen:?}", started.elapsed());
    // Without a behavior each step is capped at max(2 x current, 4): 1 -> 4 -> 5
    // with a busy loop far above the target.
    for step in seen.windows(2) {
        assert!(step[1] <= (2 * step[0]).max(4), "{seen:?}");
    }
    let events = rescales(&client).await;
    assert!(
        events[0].starts_with("New size: ")
            && events[0].ends_with(
                "; reason: cpu resource utilization (percentage of request) above target"
            ),
        "{events:?}\n{}",
        cluster
            .control_log()
            .lines()
            .filter(|l| l.contains("podautoscaler") || l.contains("rescaled"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let hpa = Api::<HorizontalPodAutoscaler>::namespaced(client.clone(), "default")
        .get("hpa-demo")
        .await
        .unwrap();
    let status = hpa.status.unwrap();
    assert!(status.last_scale_time.is_some());
    let limited = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "ScalingLimited")
        .unwrap();
    assert_eq!(limited.status, "True", "{limited:?}");
    assert_eq!(limited.reason.as_deref(), Some("TooManyReplicas"));

    // Stop the load: down to 1, after the 20 s window.
    cluster.exec(&first, "nginx", &["sh", "-c", "kill $(cat /tmp/burn.pid)"]);
    let stopped = Instant::now();
    cluster
        .poll(
            "hpa-demo back at 1 replica",
            Duration::from_secs(120),
            || async { (replicas(&client, "hpa-demo").await == 1).then_some(()) },
        )
        .await;
    let took = stopped.elapsed();
    eprintln!("scaled down to 1 {took:?} after the load stopped");
    assert!(
        took >= WINDOW - Duration::from_secs(3),
        "scaled down after {took:?}, inside the {WINDOW:?} stabilization window"
    );
    // The event is recorded after the scale write; wait for it.
    let down = "New size: 1; reason: All metrics below target";
    cluster
        .poll(
            &format!("the scale-down's SuccessfulRescale event {down:?}"),
            Duration::from_secs(10),
            || async {
                let events = rescales(&client).await;
                (events.last().map(String::as_str) == Some(down)).then_some(())
            },
        )
        .await;

    // The target without requests: the condition says so, nothing scales.
    let hpa = Api::<HorizontalPodAutoscaler>::namespaced(client.clone(), "default");
    let message = cluster
        .poll(
            "norequests' ScalingActive condition",
            Duration::from_secs(30),
            || async {
                let h = hpa.get("norequests").await.ok()?;
                let c = h
                    .status?
                    .conditions?
                    .into_iter()
                    .find(|c| c.type_ == "ScalingActive")?;
                (c.status == "False" && c.reason.as_deref() == Some("FailedGetResourceMetric"))
                    .then_some(c.message.unwrap_or_default())
            },
        )
        .await;
    assert!(
        message.contains("missing request for cpu in container main of Pod norequests-"),
        "{message}"
    );
    let row = hpa_row(&cluster, "norequests");
    assert_eq!(row[2..4], ["cpu:", "<unknown>/50%"]);
    assert_eq!(replicas(&client, "norequests").await, 1);
}
