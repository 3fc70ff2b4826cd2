//! The garbage collector against the real API handlers on an in-memory store.

use super::*;
use crate::toolkit::testing::{eventually, TestApi};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use std::time::Duration;

/// How long the tests wait for the collector.
const TEST_DEADLINE: Duration = Duration::from_secs(10);

async fn tree(api: &TestApi) -> (Deployment, ReplicaSet, Vec<Pod>) {
    let spec = json!({"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "c", "image": "i"}]}}});
    let d: Deployment = api
        .create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"}, "spec": spec}))
        .await;
    let owner = |kind: &str, name: &str, uid: &str| {
        json!([{"apiVersion": if kind == "Deployment" || kind == "ReplicaSet" {"apps/v1"} else {"v1"},
                "kind": kind, "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true}])
    };
    let rs: ReplicaSet = api
        .create(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-1", "namespace": "default",
                "ownerReferences": owner("Deployment", "web", d.metadata.uid.as_deref().unwrap())},
            "spec": spec}))
        .await;
    let mut pods = Vec::new();
    for i in 0..2 {
        pods.push(
            api.create::<Pod>(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("web-1-{i}"), "namespace": "default",
                    "labels": {"app": "web"},
                    "ownerReferences": owner("ReplicaSet", "web-1", rs.metadata.uid.as_deref().unwrap())},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}))
                .await,
        );
    }
    (d, rs, pods)
}

async fn count(api: &TestApi) -> (usize, usize, usize) {
    let lp = ListParams::default();
    let d = api
        .api::<Deployment>(Some("default"))
        .list(&lp)
        .await
        .unwrap()
        .items
        .len();
    let r = api
        .api::<ReplicaSet>(Some("default"))
        .list(&lp)
        .await
        .unwrap()
        .items
        .len();
    let p = api
        .api::<Pod>(Some("default"))
        .list(&lp)
        .await
        .unwrap()
        .items
        .len();
    (d, r, p)
}

fn start_gc(api: &TestApi) {
    tokio::spawn(GarbageCollector::new(api.client.clone()).run());
}

#[tokio::test]
async fn background_deletes_the_whole_tree() {
    let api = TestApi::start().await;
    tree(&api).await;
    start_gc(&api);
    api.api::<Deployment>(Some("default"))
        .delete("web", &DeleteParams::background())
        .await
        .unwrap();
    eventually("the set and its pods to go", TEST_DEADLINE, || async {
        (count(&api).await == (0, 0, 0)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn foreground_keeps_the_owner_until_dependents_are_gone() {
    let api = TestApi::start().await;
    let (_, rs, _) = tree(&api).await;
    // A finalizer of someone else's on one pod holds the tree up.
    api.api::<Pod>(Some("default"))
        .patch(
            "web-1-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold"]}})),
        )
        .await
        .unwrap();
    start_gc(&api);
    api.api::<Deployment>(Some("default"))
        .delete("web", &DeleteParams::foreground())
        .await
        .unwrap();
    eventually(
        "web-1-1 to go while the owners wait",
        TEST_DEADLINE,
        || async { (count(&api).await == (1, 1, 1)).then_some(()) },
    )
    .await;
    let d = api
        .api::<Deployment>(Some("default"))
        .get("web")
        .await
        .unwrap();
    assert!(d.metadata.deletion_timestamp.is_some());
    assert_eq!(d.metadata.finalizers, Some(vec![FOREGROUND.to_string()]));
    let rs_now = api
        .api::<ReplicaSet>(Some("default"))
        .get("web-1")
        .await
        .unwrap();
    assert_eq!(rs_now.metadata.uid, rs.metadata.uid);
    assert!(
        rs_now.metadata.deletion_timestamp.is_some(),
        "the set waits in foreground too"
    );
    api.api::<Pod>(Some("default"))
        .patch(
            "web-1-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    eventually("everything to go", TEST_DEADLINE, || async {
        (count(&api).await == (0, 0, 0)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn orphan_leaves_dependents_without_the_reference() {
    let api = TestApi::start().await;
    tree(&api).await;
    start_gc(&api);
    api.api::<Deployment>(Some("default"))
        .delete("web", &DeleteParams::orphan())
        .await
        .unwrap();
    eventually(
        "the deployment to go and the set to stay",
        TEST_DEADLINE,
        || async { (count(&api).await == (0, 1, 2)).then_some(()) },
    )
    .await;
    let rs = api
        .api::<ReplicaSet>(Some("default"))
        .get("web-1")
        .await
        .unwrap();
    assert!(rs.metadata.owner_references.unwrap_or_default().is_empty());
    // The pods still belong to the set.
    let pod = api
        .api::<Pod>(Some("default"))
        .get("web-1-0")
        .await
        .unwrap();
    assert_eq!(pod.metadata.owner_references.unwrap().len(), 1);
}

#[tokio::test]
async fn a_dependent_with_another_owner_only_loses_the_reference() {
    let api = TestApi::start().await;
    let (d, rs, _) = tree(&api).await;
    let both = json!({"metadata": {"ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": rs.metadata.uid, "controller": true},
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": d.metadata.uid},
    ]}});
    api.api::<Pod>(Some("default"))
        .patch("web-1-0", &PatchParams::default(), &Patch::Merge(both))
        .await
        .unwrap();
    start_gc(&api);
    api.api::<ReplicaSet>(Some("default"))
        .delete("web-1", &DeleteParams::background())
        .await
        .unwrap();
    let owners_of_kept = || async {
        let pod = api.api::<Pod>(Some("default")).get("web-1-0").await.ok()?;
        let owners: Vec<String> = pod
            .metadata
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .map(|o| o.kind)
            .collect();
        Some(owners)
    };
    eventually(
        "web-1-1 gone, web-1-0 kept by the deployment",
        TEST_DEADLINE,
        || async {
            let kept = owners_of_kept().await == Some(vec!["Deployment".to_string()]);
            (count(&api).await == (1, 0, 1) && kept).then_some(())
        },
    )
    .await;
    let owners = owners_of_kept().await.unwrap();
    assert_eq!(owners, vec!["Deployment".to_string()]);
}

#[tokio::test]
async fn dependents_of_owners_deleted_while_it_was_down_are_collected() {
    let api = TestApi::start().await;
    tree(&api).await;
    api.api::<Deployment>(Some("default"))
        .delete("web", &DeleteParams::background())
        .await
        .unwrap();
    start_gc(&api);
    eventually("the orphaned tree to go", TEST_DEADLINE, || async {
        (count(&api).await == (0, 0, 0)).then_some(())
    })
    .await;
}
