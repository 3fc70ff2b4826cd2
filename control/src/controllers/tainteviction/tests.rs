//! The controller against the real API handlers on an in-memory store,
//! with a fake clock.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{json, Value};

use super::*;
use crate::toolkit::testing::{eventually, TestApi};

const WAIT: Duration = Duration::from_secs(10);

fn pod_with(tolerations: Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"nodeName": "n1", "tolerations": tolerations, "containers": []}}))
    .unwrap()
}

fn node_with(taints: Value) -> Node {
    serde_json::from_value(json!({"metadata": {"name": "n1"}, "spec": {"taints": taints}})).unwrap()
}

#[test]
fn decide_follows_kubernetes_toleration_rules() {
    let t0 = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .to_utc();
    let unreachable = json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
        "timeAdded": "2026-01-01T00:00:00Z"}]);
    let node = node_with(unreachable.clone());
    // No toleration: at once.
    assert_eq!(decide(&pod_with(json!([])), &node, t0), Decision::EvictNow);
    // NoSchedule taints never evict.
    let no_schedule = node_with(json!([{"key": "x", "effect": "NoSchedule"}]));
    assert_eq!(
        decide(&pod_with(json!([])), &no_schedule, t0),
        Decision::Keep
    );
    // tolerationSeconds counts from the taint's timeAdded.
    let for_300 = pod_with(
        json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
        "effect": "NoExecute", "tolerationSeconds": 300}]),
    );
    let at = t0 + chrono::Duration::seconds(300);
    assert_eq!(decide(&for_300, &node, t0), Decision::EvictAt(at));
    assert_eq!(
        decide(&for_300, &node, at - chrono::Duration::seconds(1)),
        Decision::EvictAt(at)
    );
    assert_eq!(decide(&for_300, &node, at), Decision::EvictNow);
    // Without tolerationSeconds: for good (a DaemonSet's pods).
    let forever = pod_with(
        json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
        "effect": "NoExecute"}]),
    );
    assert_eq!(decide(&forever, &node, at), Decision::Keep);
    // Every NoExecute taint must be tolerated.
    let two = node_with(json!([
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
        {"key": "other", "effect": "NoExecute"}]));
    assert_eq!(decide(&forever, &two, t0), Decision::EvictNow);
    // The shortest tolerationSeconds of those used wins; 0 or less: at once.
    let both = pod_with(json!([
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
        {"operator": "Exists", "tolerationSeconds": 600}]));
    assert_eq!(
        decide(&both, &two, t0),
        Decision::EvictAt(t0 + chrono::Duration::seconds(60))
    );
    let zero = pod_with(json!([{"operator": "Exists", "tolerationSeconds": 0}]));
    assert_eq!(decide(&zero, &node, t0), Decision::EvictNow);
}

async fn pod_state(api: &TestApi, name: &str) -> Option<Pod> {
    api.api::<Pod>(Some("default")).get_opt(name).await.unwrap()
}

fn deleting(pod: &Option<Pod>) -> bool {
    pod.as_ref()
        .is_some_and(|p| p.metadata.deletion_timestamp.is_some())
}

#[tokio::test]
async fn pods_leave_a_tainted_node_when_their_toleration_runs_out() {
    let api = TestApi::start().await;
    let shared = api.shared();
    tokio::spawn(start(&shared));
    shared.informers.start();
    let t0 = api.clock.now().to_rfc3339();
    api.create::<Node>(json!({"metadata": {"name": "n1"}}))
        .await;
    for (name, tolerations) in [
        ("none", json!([])),
        (
            "brief",
            json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
            "effect": "NoExecute", "tolerationSeconds": 1}]),
        ),
        (
            "forever",
            json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
            "effect": "NoExecute"}]),
        ),
    ] {
        api.create::<Pod>(json!({"metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "n1", "tolerations": tolerations,
                     "containers": [{"name": "c", "image": "busybox"}]}}))
            .await;
        // Running on its node: a delete gives it a grace period.
        api.make_ready(name, api.clock.now()).await;
    }
    // The API server's default tolerations (300 s) do not evict at once.
    assert!(!deleting(&pod_state(&api, "none").await));
    api.api::<Node>(None)
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"taints": [{"key": "node.kubernetes.io/unreachable",
                "effect": "NoExecute", "timeAdded": t0}]}}),
            ),
        )
        .await
        .unwrap();
    // "none" has only the server's 300 s default: kept for now. Take the
    // default away to see an untolerated taint evict at once.
    let none = pod_state(&api, "none").await.unwrap();
    let defaults = none.spec.unwrap().tolerations.unwrap();
    assert!(
        defaults.iter().all(|t| t.toleration_seconds == Some(300)),
        "{defaults:?}"
    );

    // "brief" goes once its second is up, with a DisruptionTarget
    // condition and an event.
    assert!(!deleting(&pod_state(&api, "brief").await));
    api.clock.advance(Duration::from_secs(2));
    eventually("brief evicted", WAIT, || async {
        deleting(&pod_state(&api, "brief").await).then_some(())
    })
    .await;
    let brief = pod_state(&api, "brief").await.unwrap();
    let condition = brief
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .unwrap();
    assert_eq!(condition.reason.as_deref(), Some("DeletionByTaintManager"));
    eventually("the eviction event", WAIT, || async {
        let events = api
            .api::<Event>(Some("default"))
            .list(&ListParams::default())
            .await
            .unwrap();
        events
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("TaintManagerEviction")
                    && e.message.as_deref() == Some("Marking for deletion Pod default/brief")
            })
            .then_some(())
    })
    .await;
    // 300 s later "none" goes too; "forever" stays.
    api.clock.advance(Duration::from_secs(300));
    api.api::<Node>(None)
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touch": "1"}}})),
        )
        .await
        .unwrap();
    eventually("none evicted", WAIT, || async {
        deleting(&pod_state(&api, "none").await).then_some(())
    })
    .await;
    assert!(!deleting(&pod_state(&api, "forever").await));
}
