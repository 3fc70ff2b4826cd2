//! The controller against the real API handlers on an in-memory store,
//! with a fake clock; the tests play the agent (status, Lease) and call
//! one monitor pass at a time.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{json, Value};

use super::*;
use crate::toolkit::testing::{eventually, TestApi};

const WAIT: Duration = Duration::from_secs(10);

async fn setup() -> (TestApi, Arc<Context>) {
    let api = TestApi::start().await;
    let shared = api.shared();
    let ctx = Arc::new(Context::new(&shared, NodeLifecycleOptions::default()));
    shared.informers.start();
    (api, ctx)
}

/// The agent's report: Ready True with a heartbeat at the fake now.
async fn post_ready(api: &TestApi, node: &str) {
    let now = api.clock.now().to_rfc3339();
    api.api::<Node>(None)
        .patch_status(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady",
                "lastHeartbeatTime": now, "lastTransitionTime": now}]}})),
        )
        .await
        .unwrap();
}

async fn renew_lease(api: &TestApi, node: &str) {
    let leases = api.api::<Lease>(Some(LEASE_NS));
    let now = api
        .clock
        .now()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let spec = json!({"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now});
    if leases.get_opt(node).await.unwrap().is_none() {
        api.create::<Lease>(
            json!({"metadata": {"name": node, "namespace": LEASE_NS}, "spec": spec}),
        )
        .await;
    } else {
        leases
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": spec})),
            )
            .await
            .unwrap();
    }
}

const LEASE_NS: &str = bosun::well_known::NODE_LEASE_NAMESPACE;

async fn node(api: &TestApi, name: &str) -> Value {
    serde_json::to_value(api.api::<Node>(None).get(name).await.unwrap()).unwrap()
}

fn ready_of(node: &Value) -> String {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .map(|c| c["status"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

fn taint_keys(node: &Value) -> Vec<String> {
    let mut keys: Vec<String> = node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            format!(
                "{}:{}",
                t["key"].as_str().unwrap(),
                t["effect"].as_str().unwrap()
            )
        })
        .collect();
    keys.sort();
    keys
}

/// Runs monitor passes until the cache has caught up with `check`.
async fn pass_until(api: &TestApi, ctx: &Context, what: &str, check: impl Fn(&Value) -> bool) {
    eventually(what, WAIT, || async {
        monitor(ctx).await;
        let n = node(api, "n1").await;
        check(&n).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_silent_node_becomes_unknown_is_tainted_and_its_pods_unready() {
    let (api, ctx) = setup().await;
    api.create::<Node>(json!({"metadata": {"name": "n1"}}))
        .await;
    post_ready(&api, "n1").await;
    renew_lease(&api, "n1").await;
    api.create::<Pod>(json!({"metadata": {"name": "p", "namespace": "default"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}}))
        .await;
    api.make_ready("p", api.clock.now()).await;
    pass_until(&api, &ctx, "n1 seen Ready", |n| ready_of(n) == "True").await;

    // Lease renewals alone keep the node alive past the grace period.
    for _ in 0..3 {
        api.clock.advance(Duration::from_secs(30));
        renew_lease(&api, "n1").await;
        let renewed = api.clock.now();
        eventually("the lease renewal cached", WAIT, || async {
            let lease = ctx.leases.get(&ObjectRef::new("n1").within(LEASE_NS))?;
            let t = lease.spec.as_ref()?.renew_time.as_ref()?.0;
            (t.as_second() == renewed.timestamp()).then_some(())
        })
        .await;
        monitor(&ctx).await;
        assert_eq!(ready_of(&node(&api, "n1").await), "True");
    }
    assert!(taint_keys(&node(&api, "n1").await).is_empty());

    // 40 s is the grace: at 40 s it is still Ready, past it Unknown.
    api.clock.advance(Duration::from_secs(40));
    monitor(&ctx).await;
    assert_eq!(ready_of(&node(&api, "n1").await), "True");
    api.clock.advance(Duration::from_secs(1));
    pass_until(&api, &ctx, "n1 Unknown and tainted", |n| {
        ready_of(n) == "Unknown" && taint_keys(n).len() == 2
    })
    .await;
    let n = node(&api, "n1").await;
    let ready = n["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap();
    assert_eq!(ready["reason"], "NodeStatusUnknown");
    assert_eq!(ready["message"], "Kubelet stopped posting node status.");
    assert_eq!(
        taint_keys(&n),
        [
            "node.kubernetes.io/unreachable:NoExecute",
            "node.kubernetes.io/unreachable:NoSchedule"
        ]
    );
    let no_execute = n["spec"]["taints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["effect"] == "NoExecute")
        .unwrap();
    assert_eq!(
        no_execute["timeAdded"].as_str().unwrap(),
        api.clock
            .now()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );

    // Its pod is no longer Ready, and events say why.
    eventually("the pod marked not ready", WAIT, || async {
        monitor(&ctx).await;
        let pod = api.api::<Pod>(Some("default")).get("p").await.unwrap();
        let ready = pod
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Ready")?;
        (ready.status == "False").then_some(())
    })
    .await;
    eventually("NodeNotReady events", WAIT, || async {
        let events = api
            .api::<Event>(Some("default"))
            .list(&ListParams::default())
            .await
            .unwrap();
        let reasons: Vec<_> = events
            .items
            .iter()
            .filter_map(|e| e.reason.clone())
            .collect();
        (reasons.iter().filter(|r| *r == "NodeNotReady").count() >= 2).then_some(())
    })
    .await;

    // The agent comes back: Ready again, the taints go.
    post_ready(&api, "n1").await;
    pass_until(&api, &ctx, "n1 Ready and untainted", |n| {
        ready_of(n) == "True" && taint_keys(n).is_empty()
    })
    .await;
}

#[tokio::test]
async fn an_agent_reporting_not_ready_gets_not_ready_taints() {
    let (api, ctx) = setup().await;
    api.create::<Node>(json!({"metadata": {"name": "n1"}}))
        .await;
    let now = api.clock.now().to_rfc3339();
    api.api::<Node>(None)
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{
                "type": "Ready", "status": "False", "reason": "KubeletNotReady",
                "message": "container runtime is down",
                "lastHeartbeatTime": now, "lastTransitionTime": now}]}})),
        )
        .await
        .unwrap();
    pass_until(&api, &ctx, "not-ready taints", |n| {
        taint_keys(n)
            == [
                "node.kubernetes.io/not-ready:NoExecute",
                "node.kubernetes.io/not-ready:NoSchedule",
            ]
    })
    .await;
}

#[tokio::test]
async fn cordoning_adds_the_unschedulable_taint_and_leaves_other_taints_alone() {
    let (api, ctx) = setup().await;
    api.create::<Node>(json!({"metadata": {"name": "n1"},
        "spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}}))
        .await;
    post_ready(&api, "n1").await;
    let nodes = api.api::<Node>(None);
    let cordon = |on: bool| {
        let nodes = nodes.clone();
        async move {
            nodes
                .patch(
                    "n1",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"unschedulable": on}})),
                )
                .await
                .unwrap();
        }
    };
    cordon(true).await;
    pass_until(&api, &ctx, "unschedulable taint", |n| {
        taint_keys(n)
            == [
                "dedicated:NoSchedule",
                "node.kubernetes.io/unschedulable:NoSchedule",
            ]
    })
    .await;
    cordon(false).await;
    pass_until(&api, &ctx, "unschedulable taint gone", |n| {
        taint_keys(n) == ["dedicated:NoSchedule"]
    })
    .await;
}

#[test]
fn taints_follow_conditions_and_keep_their_time() {
    let t0 = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .to_utc();
    let node = |ready: &str, taints: Value| -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n"},
            "spec": {"taints": taints},
            "status": {"conditions": [
                {"type": "Ready", "status": ready},
                {"type": "MemoryPressure", "status": "True"}]}}))
        .unwrap()
    };
    let out = taints::desired_taints(&node("False", json!([])), t0).unwrap();
    let keys: Vec<_> = out
        .iter()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    assert_eq!(
        keys,
        [
            "node.kubernetes.io/not-ready:NoSchedule",
            "node.kubernetes.io/not-ready:NoExecute",
            "node.kubernetes.io/memory-pressure:NoSchedule"
        ]
    );
    // Already right: nothing to write; the NoExecute time is kept.
    let current = serde_json::to_value(&out).unwrap();
    let later = t0 + chrono::Duration::seconds(60);
    assert_eq!(
        taints::desired_taints(&node("False", current.clone()), later),
        None
    );
    // Unknown swaps not-ready for unreachable.
    let out = taints::desired_taints(&node("Unknown", current), later).unwrap();
    let keys: Vec<_> = out
        .iter()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    assert_eq!(
        keys,
        [
            "node.kubernetes.io/memory-pressure:NoSchedule",
            "node.kubernetes.io/unreachable:NoSchedule",
            "node.kubernetes.io/unreachable:NoExecute"
        ]
    );
}
