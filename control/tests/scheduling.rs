//! The `binding` subresource and the scheduler as `bosun-control` serves
//! and runs them.

mod common;

use std::time::Duration;

use common::{raw, wait_for, ControlPlane};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{json, Value};

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
    }))
    .unwrap()
}

fn binding(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "annotations": {"bound-by": "test"}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
}

fn pod_scheduled(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .map(|c| c.status.clone())
}

#[tokio::test]
async fn binding_assigns_a_pod_once() {
    // The API tests' default: no scheduler racing the test's bindings.
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("web"))
        .await
        .unwrap();

    let path = "/api/v1/namespaces/default/pods/web/binding";
    let body = serde_json::to_vec(&binding("web", "n1")).unwrap();
    let (code, status) = raw(&client, "POST", path, "application/json", body.clone()).await;
    assert_eq!(code, 201, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["status"], "Success");

    let bound = pods.get("web").await.unwrap();
    let spec = bound.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("n1"));
    assert_eq!(pod_scheduled(&bound).as_deref(), Some("True"));
    assert_eq!(
        bound.metadata.annotations.as_ref().unwrap()["bound-by"],
        "test"
    );

    // A bound pod stays where it is.
    let again = serde_json::to_vec(&binding("web", "n2")).unwrap();
    let (code, status) = raw(&client, "POST", path, "application/json", again).await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["message"],
        "Operation cannot be fulfilled on pods/binding \"web\": pod web is already assigned to node \"n1\""
    );

    // kube-rs' subresource call, as a Rust scheduler would make it.
    pods.create(&PostParams::default(), &pod("api"))
        .await
        .unwrap();
    let _: Value = pods
        .create_subresource(
            "binding",
            "api",
            &PostParams::default(),
            &binding("api", "n2"),
        )
        .await
        .unwrap();
    let p = pods.get("api").await.unwrap();
    assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("n2"));

    // Only create is served; a target must be a named node.
    let (code, _) = raw(&client, "GET", path, "application/json", vec![]).await;
    assert_eq!(code, 405);
    pods.create(&PostParams::default(), &pod("bad"))
        .await
        .unwrap();
    let no_target =
        serde_json::to_vec(&json!({"metadata": {"name": "bad"}, "target": {}})).unwrap();
    let (code, status) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/pods/bad/binding",
        "application/json",
        no_target,
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert!(status["message"].as_str().unwrap().contains("target.name"));
    let (code, _) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/pods/missing/binding",
        "application/json",
        serde_json::to_vec(&binding("missing", "n1")).unwrap(),
    )
    .await;
    assert_eq!(code, 404);

    // Discovery lists it as kube-apiserver does.
    let (_, list) = raw(&client, "GET", "/api/v1", "application/json", vec![]).await;
    let entry = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods/binding")
        .cloned()
        .expect("pods/binding in discovery");
    assert_eq!(entry["kind"], "Binding");
    assert_eq!(entry["verbs"], json!(["create"]));
}

#[tokio::test]
async fn bosun_control_runs_the_scheduler() {
    let cp = ControlPlane::start_with(&["--controllers=*"]);
    let client = cp.client().await;
    common::ready_node(&client, "n1").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("web"))
        .await
        .unwrap();
    let rt = tokio::runtime::Handle::current();
    let bound = tokio::task::spawn_blocking(move || {
        wait_for(
            "the scheduler to bind the pod",
            Duration::from_secs(15),
            || {
                let p = rt.block_on(pods.get("web")).ok()?;
                p.spec.as_ref()?.node_name.clone()
            },
        )
    })
    .await
    .unwrap();
    assert_eq!(bound, "n1");
}
