//! `/metrics` of the control plane over real HTTPS, read with a
//! Prometheus text parser: the apiserver's request counts and watches, the
//! store's operation latency, the scheduler's attempts and queue, the
//! controllers' reconciles and pods by node and phase.

mod common;

use std::time::{Duration, Instant};

use common::{raw, ControlPlane};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams, WatchParams};
use kube::Client;
use prometheus_parse::{LineInfo, Scrape, Value};
use serde_json::json;

/// Reads `/metrics` and parses it; every line must be a comment or a
/// sample the parser reads (it skips what it cannot read, so that is
/// checked here), and the text ends as OpenMetrics says.
async fn scrape(client: &Client) -> Scrape {
    let req = http::Request::get("/metrics")
        .body(kube::client::Body::empty())
        .unwrap();
    let res = client.send(req).await.expect("GET /metrics");
    assert_eq!(res.status(), 200);
    let content_type = res.headers()[http::header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let bytes = res.into_body().collect_bytes().await.unwrap();
    parse(std::str::from_utf8(&bytes).unwrap())
}

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

/// The value of the sample `name` whose labels include `labels`: a
/// counter or gauge's value, a histogram's observation count.
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

/// Scrapes until `check` holds for `what`, with a deadline.
async fn until(client: &Client, what: &str, check: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = scrape(client).await;
        if check(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "bosun.local/busybox"}]},
    }))
    .unwrap()
}

#[tokio::test]
async fn metrics_need_the_token() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    // The client's own token: allowed.
    scrape(&client).await;
    // No token: 401 as a Status, like every other authenticated path.
    let mut config = cp.config().await;
    config.auth_info = Default::default();
    let anonymous = Client::try_from(config).unwrap();
    let (code, body) = raw(&anonymous, "GET", "/metrics", "text/plain", vec![]).await;
    assert_eq!(code, 401, "{body}");
    assert_eq!(body["reason"], "Unauthorized", "{body}");
}

#[tokio::test]
async fn requests_watches_store_scheduler_and_controllers_are_counted() {
    // Every loop runs here, the scheduler and controllers included.
    let cp = ControlPlane::start_with(&["--controllers=*"]);
    let client = cp.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    let before = scrape(&client).await;
    let create = [
        ("verb", "POST"),
        ("resource", "pods"),
        ("scope", "namespace"),
        ("code", "201"),
    ];
    let created_before = value(&before, "apiserver_request_total", &create).unwrap_or(0.0);
    pods.create(&PostParams::default(), &pod("one"))
        .await
        .unwrap();
    let invalid = pods.create(&PostParams::default(), &pod("one")).await;
    assert!(invalid.is_err(), "a second pod of the same name");

    let s = scrape(&client).await;
    assert_eq!(
        value(&s, "apiserver_request_total", &create),
        Some(created_before + 1.0)
    );
    let conflict = [("verb", "POST"), ("resource", "pods"), ("code", "409")];
    assert_eq!(value(&s, "apiserver_request_total", &conflict), Some(1.0));
    let timed = [("verb", "POST"), ("resource", "pods"), ("version", "v1")];
    assert!(value(&s, "apiserver_request_duration_seconds", &timed).unwrap() >= 2.0);
    let store_create = [("operation", "create"), ("kind", "Pod")];
    assert!(value(&s, "bosun_store_operation_duration_seconds", &store_create).unwrap() >= 1.0);

    // An open watch is a long-running request until it is closed.
    let watch = [
        ("verb", "WATCH"),
        ("resource", "pods"),
        ("scope", "namespace"),
    ];
    let watching = |s: &Scrape| value(s, "apiserver_longrunning_requests", &watch).unwrap_or(0.0);
    let watchers =
        |s: &Scrape| value(s, "apiserver_registered_watchers", &[("kind", "Pod")]).unwrap_or(0.0);
    let open = watching(&s);
    let registered = watchers(&s);
    let mut stream = pods
        .watch(&WatchParams::default().timeout(290), "0")
        .await
        .unwrap()
        .boxed();
    stream.next().await.expect("the pod's ADDED event").unwrap();
    let s = scrape(&client).await;
    assert_eq!(watching(&s), open + 1.0);
    assert_eq!(watchers(&s), registered + 1.0);
    drop(stream);
    until(&client, "the closed watch to be let go", |s| {
        watching(s) == open && watchers(s) == registered
    })
    .await;

    // No node: the scheduler tries, parks the pod and counts both.
    let s = until(&client, "an unschedulable attempt", |s| {
        let parked = value(s, "scheduler_pending_pods", &[("queue", "unschedulable")]);
        value(
            s,
            "scheduler_schedule_attempts_total",
            &[("result", "unschedulable")],
        )
        .is_some_and(|n| n >= 1.0)
            && parked.is_some_and(|n| n >= 1.0)
    })
    .await;
    let attempt = [
        ("result", "unschedulable"),
        ("profile", "default-scheduler"),
    ];
    assert!(
        value(
            &s,
            "scheduler_scheduling_attempt_duration_seconds",
            &attempt
        )
        .unwrap()
            >= 1.0
    );
    assert!(value(&s, "workqueue_adds_total", &[("name", "scheduler")]).unwrap() >= 1.0);

    // A Deployment: the deployment and replicaset controllers reconcile
    // and their pods are counted, pending on no node.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "app", "image": "bosun.local/busybox"}]}}},
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let pending = [("node", ""), ("phase", "Pending")];
    let s = until(&client, "the ReplicaSet's pods", |s| {
        value(s, "bosun_pods_by_phase", &pending) == Some(3.0)
    })
    .await;
    for controller in ["deployment", "replicaset"] {
        let ok = [("controller", controller), ("result", "success")];
        assert!(
            value(&s, "controller_runtime_reconcile_total", &ok).unwrap() >= 1.0,
            "{controller}"
        );
        let timed = [("controller", controller)];
        assert!(value(&s, "controller_runtime_reconcile_time_seconds", &timed).unwrap() >= 1.0);
        assert_eq!(
            value(&s, "controller_runtime_active_workers", &timed),
            Some(0.0)
        );
    }
    // The controllers' own requests are the apiserver's too.
    let rs_create = [
        ("verb", "POST"),
        ("resource", "replicasets"),
        ("code", "201"),
    ];
    assert_eq!(value(&s, "apiserver_request_total", &rs_create), Some(1.0));
}

#[test]
fn the_parser_rejects_what_is_not_the_format() {
    let broken = "# TYPE up gauge\nup{job=\"x\"} one\n# EOF";
    assert!(std::panic::catch_unwind(|| parse(broken)).is_err());
    let unterminated = "# TYPE up gauge\nup 1\n";
    assert!(std::panic::catch_unwind(|| parse(unterminated)).is_err());
    let good = parse("# TYPE up gauge\nup{job=\"x\"} 1\n# EOF");
    assert_eq!(value(&good, "up", &[("job", "x")]), Some(1.0));
}
