//! Pod GC against the real API handlers on an in-memory store.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::*;
use crate::toolkit::testing::{eventually, TestApi};

const WAIT: Duration = Duration::from_secs(10);

async fn pod_on(api: &TestApi, name: &str, node: &str) {
    api.create::<Pod>(json!({"metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}}))
        .await;
    api.make_ready(name, api.clock.now()).await;
}

async fn exists(api: &TestApi, name: &str) -> bool {
    api.api::<Pod>(Some("default"))
        .get_opt(name)
        .await
        .unwrap()
        .is_some()
}

#[tokio::test]
async fn the_pods_of_a_deleted_node_are_deleted_at_once() {
    let api = TestApi::start().await;
    let shared = api.shared();
    tokio::spawn(start(
        &shared,
        PodGcOptions {
            // Only the node deletion should set it off.
            period: Duration::from_secs(3600),
            ..Default::default()
        },
    ));
    shared.informers.start();
    for n in ["n1", "n2"] {
        api.create::<Node>(json!({"metadata": {"name": n}})).await;
    }
    pod_on(&api, "a", "n1").await;
    pod_on(&api, "b", "n2").await;
    api.api::<Node>(None)
        .delete("n1", &DeleteParams::default())
        .await
        .unwrap();
    // Running pods of a node get a grace period when deleted; pod GC
    // removes them outright.
    eventually("a gone", WAIT, || async {
        (!exists(&api, "a").await).then_some(())
    })
    .await;
    assert!(exists(&api, "b").await);
}

/// An API and a pod GC whose passes the test runs itself.
async fn passes_by_hand(options: PodGcOptions) -> (TestApi, Context) {
    let api = TestApi::start().await;
    let shared = api.shared();
    let period = Duration::from_secs(3600);
    let ctx = Context::new(&shared, PodGcOptions { period, ..options });
    shared.informers.start();
    (api, ctx)
}

#[tokio::test]
async fn a_pod_bound_to_a_node_never_seen_waits_out_the_quarantine() {
    let (api, ctx) = passes_by_hand(PodGcOptions {
        quarantine: Duration::from_millis(500),
        ..Default::default()
    })
    .await;
    // Bound by hand before its agent has registered the node.
    pod_on(&api, "early", "registering").await;
    eventually("the cache has the pod", WAIT, || async {
        (ctx.pods.state().len() == 1).then_some(())
    })
    .await;
    gc(&ctx).await;
    assert!(exists(&api, "early").await, "kept during the quarantine");
    tokio::time::sleep(Duration::from_millis(600)).await;
    gc(&ctx).await;
    assert!(!exists(&api, "early").await, "gone once quarantined");
}

#[tokio::test]
async fn finished_pods_over_the_threshold_go_oldest_first() {
    let (api, ctx) = passes_by_hand(PodGcOptions {
        terminated_threshold: 2,
        ..Default::default()
    })
    .await;
    api.create::<Node>(json!({"metadata": {"name": "n1"}}))
        .await;
    for name in ["old", "mid", "new", "running"] {
        pod_on(&api, name, "n1").await;
        if name != "running" {
            api.api::<Pod>(Some("default"))
                .patch_status(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
                )
                .await
                .unwrap();
        }
        // Creation times are whole seconds: keep them apart.
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    eventually("the cache has every finished pod", WAIT, || async {
        let finished = ctx.pods.state().iter().filter(|p| is_finished(p)).count();
        (finished == 3).then_some(())
    })
    .await;
    gc(&ctx).await;
    assert!(!exists(&api, "old").await);
    for name in ["mid", "new", "running"] {
        assert!(exists(&api, name).await, "{name}");
    }
}
