//! The quota controller with admission, against the real API handlers on
//! an in-memory store.

use std::time::Duration;

use kube::api::DeleteParams;
use serde_json::json;

use super::*;
use crate::toolkit::testing::{eventually, TestApi};

const WAIT: Duration = Duration::from_secs(20);

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
           "spec": {"containers": [{"name": "app", "image": "busybox:1.36",
               "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}})
}

async fn used(api: &TestApi, key: &str) -> Option<String> {
    let q = api
        .api::<ResourceQuota>(Some("default"))
        .get("q")
        .await
        .ok()?;
    Some(q.status?.used?.get(key)?.0.clone())
}

#[tokio::test]
async fn a_full_quota_refuses_and_a_deletion_frees_it() {
    let api = TestApi::start().await;
    let shared = api.shared();
    tokio::spawn(start(&shared));
    shared.informers.start();
    let _: ResourceQuota = api
        .create(json!({"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "q", "namespace": "default"},
            "spec": {"hard": {"pods": "2", "requests.cpu": "1"}}}))
        .await;
    eventually("status.used computed", WAIT, || async {
        (used(&api, "pods").await.as_deref() == Some("0")).then_some(())
    })
    .await;
    let pods: Api<Pod> = api.api(Some("default"));
    for name in ["a", "b"] {
        let p: Pod = serde_json::from_value(pod(name)).unwrap();
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    let third: Pod = serde_json::from_value(pod("c")).unwrap();
    let err = pods
        .create(&PostParams::default(), &third)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 403);
            assert_eq!(
                s.message,
                "pods \"c\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"
            );
        }
        other => panic!("{other}"),
    }
    assert_eq!(used(&api, "requests.cpu").await.as_deref(), Some("200m"));
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    eventually("the deletion frees a pod", WAIT, || async {
        (used(&api, "pods").await.as_deref() == Some("1")).then_some(())
    })
    .await;
    pods.create(&PostParams::default(), &third).await.unwrap();
    assert_eq!(used(&api, "pods").await.as_deref(), Some("2"));
}

#[test]
fn quota_names_map_to_the_resources_they_count() {
    for (name, want) in [
        ("pods", Some("pods")),
        ("requests.cpu", Some("pods")),
        ("limits.memory", Some("pods")),
        ("cpu", Some("pods")),
        ("services.nodeports", Some("services")),
        ("requests.storage", Some("persistentvolumeclaims")),
        ("configmaps", Some("configmaps")),
        ("count/deployments.apps", Some("deployments")),
        ("count/nodes", None),
        ("count/nothing.example.com", None),
    ] {
        assert_eq!(counted_resource(name).map(|r| r.plural), want, "{name}");
    }
}

#[tokio::test]
async fn concurrent_creates_cannot_both_take_the_last_unit() {
    let api = TestApi::start().await;
    let shared = api.shared();
    tokio::spawn(start(&shared));
    shared.informers.start();
    let _: ResourceQuota = api
        .create(json!({"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "q", "namespace": "default"},
            "spec": {"hard": {"configmaps": "3"}}}))
        .await;
    // The namespace's own kube-root-ca.crt is not published here (no
    // publisher runs), so all three are free.
    eventually("status.used computed", WAIT, || async {
        (used(&api, "configmaps").await.as_deref() == Some("0")).then_some(())
    })
    .await;
    let cms: Api<ConfigMap> = api.api(Some("default"));
    let creates = (0..8).map(|i| {
        let cms = cms.clone();
        tokio::spawn(async move {
            let cm: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}})).unwrap();
            cms.create(&PostParams::default(), &cm).await
        })
    });
    let results = futures::future::join_all(creates).await;
    let created = results
        .iter()
        .filter(|r| r.as_ref().unwrap().is_ok())
        .count();
    assert_eq!(created, 3, "{results:?}");
    assert_eq!(used(&api, "configmaps").await.as_deref(), Some("3"));
}
