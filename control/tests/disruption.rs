//! PodDisruptionBudgets at the API: validated with upstream's field
//! errors, their status kept by the disruption controller, and the
//! eviction subresource answering as kube-apiserver's EvictionREST: 201
//! while a disruption is allowed (spending it and recording the pod in
//! `disruptedPods`), 429 TooManyRequests with a DisruptionBudget cause
//! when none is, 500 when two budgets select the pod.

mod common;

use std::time::{Duration, Instant};

use common::{raw, ControlPlane};
use kube::Client;
use serde_json::{json, Value};

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const PODS: &str = "/api/v1/namespaces/default/pods";
const PDBS: &str = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";

async fn post(client: &Client, path: &str, body: Value) -> (u16, Value) {
    raw(
        client,
        "POST",
        path,
        JSON,
        serde_json::to_vec(&body).unwrap(),
    )
    .await
}

async fn get(client: &Client, path: &str) -> Value {
    let (code, v) = raw(client, "GET", path, JSON, Vec::new()).await;
    assert_eq!(code, 200, "{path}: {v}");
    v
}

/// Polls the budget until `check` holds (the controller works in the
/// background), generously.
async fn budget_until(
    client: &Client,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pdb = get(client, &format!("{PDBS}/{name}")).await;
        if check(&pdb) {
            return pdb;
        }
        assert!(Instant::now() < deadline, "{what}: {pdb}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn eviction(name: &str) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "Eviction",
           "metadata": {"name": name, "namespace": "default"}})
}

async fn evict(client: &Client, name: &str) -> (u16, Value) {
    post(client, &format!("{PODS}/{name}/eviction"), eviction(name)).await
}

/// A pod bound to `n1`, Running and Ready as an agent would report it.
async fn ready_pod(client: &Client, name: &str) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "a", "image": "x:1"}]}});
    let (code, body) = post(client, PODS, pod).await;
    assert_eq!(code, 201, "{body}");
    let status = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}});
    let (code, body) = raw(
        client,
        "PATCH",
        &format!("{PODS}/{name}/status"),
        MERGE,
        serde_json::to_vec(&status).unwrap(),
    )
    .await;
    assert_eq!(code, 200, "{body}");
}

#[tokio::test]
async fn evictions_honour_the_budget_and_get_429_when_it_is_spent() {
    let cp = ControlPlane::start();
    // The 429 below is the answer under test: kube-rs would retry it.
    let client = cp.client_no_retry().await;
    let (code, body) = post(
        &client,
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");

    // Bad budgets are refused with upstream's field errors.
    let both = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "bad"},
        "spec": {"minAvailable": 1, "maxUnavailable": "10%",
                 "selector": {"matchLabels": {"app": "web"}}}});
    let (code, body) = post(&client, PDBS, both).await;
    assert_eq!(code, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("minAvailable and maxUnavailable cannot be both set"),
        "{body}"
    );
    assert_eq!(body["details"]["causes"][0]["field"], "spec", "{body}");
    let bad = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "bad"},
        "spec": {"minAvailable": "150%", "unhealthyPodEvictionPolicy": "Sometimes"}});
    let (code, body) = post(&client, PDBS, bad).await;
    assert_eq!(code, 422, "{body}");
    let fields: Vec<&str> = body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        ["spec.minAvailable", "spec.unhealthyPodEvictionPolicy"],
        "{body}"
    );
    assert!(body["message"].as_str().unwrap().contains(
        "spec.unhealthyPodEvictionPolicy: Unsupported value: \"Sometimes\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\""
    ), "{body}");

    for name in ["p0", "p1", "p2"] {
        ready_pod(&client, name).await;
    }
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}});
    let (code, body) = post(&client, PDBS, pdb).await;
    assert_eq!(code, 201, "{body}");

    // The controller counts 3 healthy pods of 3, 2 needed: 1 disruption.
    let pdb = budget_until(&client, "web", "one disruption allowed", |p| {
        p["status"]["disruptionsAllowed"] == 1
    })
    .await;
    let status = &pdb["status"];
    assert_eq!(
        (
            &status["currentHealthy"],
            &status["desiredHealthy"],
            &status["expectedPods"],
            &status["observedGeneration"]
        ),
        (&json!(3), &json!(2), &json!(3), &json!(1)),
        "{pdb}"
    );
    let cond = &status["conditions"][0];
    assert_eq!(
        (&cond["type"], &cond["status"], &cond["reason"]),
        (
            &json!("DisruptionAllowed"),
            &json!("True"),
            &json!("SufficientPods")
        ),
        "{pdb}"
    );

    // The first eviction spends it and is recorded.
    let (code, body) = evict(&client, "p0").await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"], "Success", "{body}");
    let pdb = get(&client, &format!("{PDBS}/web")).await;
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0, "{pdb}");
    assert!(pdb["status"]["disruptedPods"]["p0"].is_string(), "{pdb}");
    let p0 = get(&client, &format!("{PODS}/p0")).await;
    assert!(p0["metadata"]["deletionTimestamp"].is_string(), "{p0}");

    // The controller sees p0 going: 2 healthy, none to spare.
    budget_until(&client, "web", "two healthy", |p| {
        p["status"]["currentHealthy"] == 2 && p["status"]["disruptionsAllowed"] == 0
    })
    .await;
    let (code, body) = evict(&client, "p1").await;
    assert_eq!(code, 429, "{body}");
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests", "code": 429,
            "details": {"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}]}})
    );
    let p1 = get(&client, &format!("{PODS}/p1")).await;
    assert!(p1["metadata"]["deletionTimestamp"].is_null(), "{p1}");

    // A second budget over the same pods: the eviction subresource
    // supports one.
    let (code, body) = post(
        &client,
        PDBS,
        json!({"apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget", "metadata": {"name": "web-too"},
        "spec": {"maxUnavailable": 1, "selector": {}}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = evict(&client, "p1").await;
    assert_eq!(code, 500, "{body}");
    assert_eq!(body["reason"], "InternalError", "{body}");
    assert!(body["message"].as_str().unwrap().contains(
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    ), "{body}");

    // kubectl's table: NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE.
    let req = http::Request::get(PDBS)
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .unwrap();
    let table: Value = serde_json::from_str(&client.request_text(req).await.unwrap()).unwrap();
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Name",
            "Min Available",
            "Max Unavailable",
            "Allowed Disruptions",
            "Age"
        ]
    );
    assert_eq!(
        table["rows"][0]["cells"].as_array().unwrap()[0..4],
        [json!("web"), json!("2"), json!("N/A"), json!(0)]
    );
    assert_eq!(
        table["rows"][1]["cells"].as_array().unwrap()[0..3],
        [json!("web-too"), json!("N/A"), json!("1")]
    );
}
