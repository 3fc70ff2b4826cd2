//! Upstream's RuntimeClass admission cases (`admission_test.go`): through
//! the API, and the toleration merge on its own.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::*;
use crate::toolkit::testing::TestApi;

fn pod(name: &str, spec_extra: Value) -> Pod {
    let mut spec = json!({"containers": [{"name": "c", "image": "i"}]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), spec_extra.as_object()) {
        s.extend(e.clone());
    }
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec}))
    .unwrap()
}

fn refusal<T: std::fmt::Debug>(r: kube::Result<T>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn pods_get_their_runtime_class_overhead_and_scheduling() {
    let api = TestApi::start().await;
    let pods: Api<Pod> = api.api(Some("default"));
    let classes: Api<RuntimeClass> = api.api(None);
    let pp = PostParams::default();
    let class: RuntimeClass = serde_json::from_value(json!({
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": "sandboxed"}, "handler": "runsc",
        "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
        "scheduling": {"nodeSelector": {"sandbox": "gvisor"},
            "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}]}}))
    .unwrap();
    classes.create(&pp, &class).await.unwrap();

    let p = pods
        .create(
            &pp,
            &pod(
                "in-class",
                json!({"runtimeClassName": "sandboxed", "nodeSelector": {"disk": "ssd"},
                    "tolerations": [{"key": "sandbox", "operator": "Equal", "value": "x",
                        "effect": "NoSchedule"}]}),
            ),
        )
        .await
        .unwrap();
    let spec = serde_json::to_value(p.spec.unwrap()).unwrap();
    assert_eq!(spec["overhead"], json!({"cpu": "250m", "memory": "120Mi"}));
    assert_eq!(
        spec["nodeSelector"],
        json!({"disk": "ssd", "sandbox": "gvisor"})
    );
    // The class's Exists toleration covers the pod's Equal one (the
    // others are DefaultTolerationSeconds').
    let sandbox: Vec<&Value> = spec["tolerations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["key"] == "sandbox")
        .collect();
    assert_eq!(
        sandbox,
        [&json!({"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"})]
    );

    // The same overhead, written differently, is accepted.
    pods.create(
        &pp,
        &pod(
            "same",
            json!({"runtimeClassName": "sandboxed",
                "overhead": {"cpu": "0.25", "memory": "120Mi"}}),
        ),
    )
    .await
    .unwrap();

    for (name, extra, why) in [
        (
            "missing",
            json!({"runtimeClassName": "nope"}),
            "pod rejected: RuntimeClass \"nope\" not found",
        ),
        (
            "other-overhead",
            json!({"runtimeClassName": "sandboxed", "overhead": {"cpu": "1"}}),
            OVERHEAD_MISMATCH,
        ),
        (
            "no-class-overhead",
            json!({"overhead": {"cpu": "1"}}),
            "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead",
        ),
        (
            "conflict",
            json!({"runtimeClassName": "sandboxed", "nodeSelector": {"sandbox": "kata"}}),
            "conflict: runtimeClass.scheduling.nodeSelector[\"sandbox\"] = gvisor; pod.spec.nodeSelector[\"sandbox\"] = kata",
        ),
    ] {
        assert_eq!(
            refusal(pods.create(&pp, &pod(name, extra)).await),
            (403, format!("pods \"{name}\" is forbidden: {why}")),
            "{name}"
        );
    }
}

#[test]
fn tolerations_merge_as_upstreams_merge_tolerations() {
    let exists_all = json!({"operator": "Exists"});
    let equal = json!({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"});
    let other = json!({"key": "j", "operator": "Exists"});
    let limited = json!({"key": "k", "operator": "Exists", "effect": "NoExecute",
        "tolerationSeconds": 10});
    let longer = json!({"key": "k", "operator": "Exists", "effect": "NoExecute",
        "tolerationSeconds": 20});
    assert_eq!(
        merge_tolerations(std::slice::from_ref(&equal), std::slice::from_ref(&other)),
        vec![equal.clone(), other.clone()]
    );
    assert_eq!(
        merge_tolerations(
            &[equal.clone(), other.clone()],
            std::slice::from_ref(&exists_all)
        ),
        vec![exists_all.clone()]
    );
    assert_eq!(
        merge_tolerations(std::slice::from_ref(&equal), std::slice::from_ref(&equal)),
        vec![equal.clone()]
    );
    // A shorter tolerationSeconds does not cover a longer one.
    assert_eq!(
        merge_tolerations(
            std::slice::from_ref(&limited),
            std::slice::from_ref(&longer)
        ),
        vec![longer]
    );
}
