//! `/metrics` of the agent and the control plane with a pod on real
//! Docker: a pod with a readiness probe and a container that keeps
//! crashing is scheduled, runs and turns Ready; both scrapes are read with
//! a Prometheus text parser. `kubectl get --raw /metrics` reads the
//! control plane's.

mod cluster;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster::{Cluster, BUSYBOX};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use kube::Client;
use prometheus_parse::{LineInfo, Scrape, Value};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const UP: Duration = Duration::from_secs(60);

fn parse(text: &str) -> Scrape {
    assert_eq!(text.lines().last(), Some("# EOF"), "{text}");
    for line in text.lines() {
        match LineInfo::parse(line) {
            LineInfo::Sample { value, .. } => {
                assert!(value.parse::<f64>().is_ok(), "not a number: {line}")
            }
            LineInfo::Doc { .. } | LineInfo::Type { .. } => {}
            _ => assert!(line.starts_with("# UNIT") || line == "# EOF", "{line}"),
        }
    }
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap()
}

/// A counter's or gauge's value, a histogram's count, of the sample
/// `name` whose labels include `labels`.
fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .find(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(buckets) => buckets
                .iter()
                .find(|b| b.less_than.is_infinite())
                .map_or(0.0, |b| b.count),
            Value::Summary(_) => panic!("{name} is a summary"),
        })
}

/// GET `path` from the node's agent at the address and port and with the
/// certificate its Node publishes, with `token`: the status code and body.
async fn agent_get(client: &Client, node: &str, path: &str, token: &str) -> (u16, String) {
    let node: Node = Api::all(client.clone()).get(node).await.unwrap();
    let status = node.status.unwrap();
    let ip = status.addresses.unwrap()[0].address.clone();
    let port = status
        .daemon_endpoints
        .unwrap()
        .kubelet_endpoint
        .unwrap()
        .port;
    let pem = node.metadata.annotations.unwrap()["bosun.io/serving-certificate"].clone();
    let der = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
    let config =
        bosun::serving::pinned_client_config(der.as_ref(), "not the agent's certificate").unwrap();
    let tcp = tokio::net::TcpStream::connect((ip.as_str(), port as u16))
        .await
        .unwrap();
    let name = ServerName::try_from("bosun-agent").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {ip}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response).await;
    let response = String::from_utf8(response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{head}"
    );
    (code, body.to_string())
}

async fn scrape_until(
    what: &str,
    mut get: impl AsyncFnMut() -> String,
    check: impl Fn(&Scrape) -> bool,
) -> Scrape {
    let deadline = Instant::now() + UP;
    loop {
        let s = parse(&get().await);
        if check(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test]
async fn agent_and_control_plane_metrics_follow_a_pod_to_ready() {
    let cluster = Cluster::start();
    let client = cluster.client().await;
    cluster.wait_nodes_ready(&client).await;
    let token = std::fs::read_to_string(cluster.dir.path().join("control/admin-token"))
        .unwrap()
        .trim()
        .to_string();

    // Without the token the agent refuses.
    let (code, _) = agent_get(&client, &cluster.node, "/metrics", "wrong").await;
    assert_eq!(code, 401);

    // Placed by the scheduler (no nodeName), with a readiness probe and a
    // container that exits at once and is restarted; that one's failing
    // probe keeps the pod from ever being Ready.
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "observed"},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [
            {"name": "web", "image": BUSYBOX, "command": ["sleep", "3600"],
             "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1}},
            {"name": "crash", "image": BUSYBOX, "command": ["sh", "-c", "exit 1"],
             "readinessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1}},
        ]},
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod).await.unwrap();
    cluster
        .wait_pod(
            &client,
            "observed",
            "the crashing container restarted",
            UP,
            |p| {
                p["status"]["containerStatuses"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().any(|c| c["restartCount"].as_i64() >= Some(1)))
            },
        )
        .await;

    let agent = async || {
        agent_get(&client, &cluster.node, "/metrics", &token)
            .await
            .1
    };
    let s = scrape_until("the agent's metrics of the pod", agent, |s| {
        value(
            s,
            "kube_pod_container_status_restarts_total",
            &[("pod", "observed"), ("container", "crash")],
        )
        .is_some_and(|n| n >= 1.0)
    })
    .await;
    let ok = [
        ("probe_type", "Readiness"),
        ("result", "successful"),
        ("container", "web"),
    ];
    assert!(value(&s, "prober_probe_total", &ok).unwrap() >= 1.0);
    assert!(value(&s, "kubelet_running_pods", &[]).unwrap() >= 1.0);
    let web = [
        ("namespace", "default"),
        ("pod", "observed"),
        ("container", "web"),
    ];
    assert_eq!(
        value(&s, "kube_pod_container_status_restarts_total", &web),
        Some(0.0)
    );
    assert_eq!(
        value(&s, "kubelet_pod_start_duration_seconds", &[]),
        Some(1.0)
    );
    // Images are built locally, so nothing was pulled; the family is there.
    assert_eq!(
        value(&s, "kubelet_image_pull_duration_seconds", &[]),
        Some(0.0)
    );

    // The crashing pod is never Ready: nothing to count yet.
    let ready_count = |s: &Scrape| value(s, "bosun_pod_start_to_ready_duration_seconds", &[]);
    let ready_sum = |s: &Scrape| value(s, "bosun_pod_start_to_ready_duration_seconds_sum", &[]);
    let (count_before, sum_before) = (ready_count(&s).unwrap(), ready_sum(&s).unwrap());
    assert_eq!(count_before, 0.0);

    // A pod of one probed container turns Ready.
    let ready: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "ready"},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [
            {"name": "web", "image": BUSYBOX, "command": ["sleep", "3600"],
             "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1}},
        ]},
    }))
    .unwrap();
    let started = Instant::now();
    pods.create(&PostParams::default(), &ready).await.unwrap();
    cluster
        .wait_pod(&client, "ready", "Ready", UP, |p| {
            p["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        })
        .await;
    let took = started.elapsed().as_secs_f64();
    let agent = async || {
        agent_get(&client, &cluster.node, "/metrics", &token)
            .await
            .1
    };
    let s = scrape_until("the Ready pod's start latency", agent, |s| {
        ready_count(s) == Some(count_before + 1.0)
    })
    .await;
    // Creation to Ready, in whole seconds of creationTimestamp: no more
    // than the test saw plus the second the timestamp rounds away.
    let sum = ready_sum(&s).unwrap() - sum_before;
    assert!(sum > 0.0 && sum <= took + 1.0, "{sum} vs {took}");
    assert_eq!(
        value(&s, "kubelet_pod_start_duration_seconds", &[]),
        Some(2.0)
    );

    // The control plane: both pods scheduled and running on the node.
    let control = async || {
        let out = cluster
            .kubectl()
            .args(["get", "--raw", "/metrics"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let node = cluster.node.as_str();
    let s = scrape_until("both pods running", control, |s| {
        value(
            s,
            "bosun_pods_by_phase",
            &[("node", node), ("phase", "Running")],
        ) == Some(2.0)
    })
    .await;
    let scheduled = [("result", "scheduled")];
    assert_eq!(
        value(&s, "scheduler_schedule_attempts_total", &scheduled),
        Some(2.0)
    );
    let status_writes = [
        ("verb", "PATCH"),
        ("resource", "pods"),
        ("subresource", "status"),
    ];
    assert!(value(&s, "apiserver_request_total", &status_writes).unwrap() >= 2.0);
    let bound = [
        ("verb", "POST"),
        ("subresource", "binding"),
        ("code", "201"),
    ];
    assert_eq!(value(&s, "apiserver_request_total", &bound), Some(2.0));
}
