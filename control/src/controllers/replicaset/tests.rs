//! The controller against the real API handlers on an in-memory store,
//! with a fake clock.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};

use super::*;
use crate::toolkit::testing::{eventually, TestApi};
use crate::toolkit::{from_chrono, Clock, Shared};

const WAIT: Duration = Duration::from_secs(10);

/// Starts the controller on `shared` (its caches and its loop).
fn run(shared: &Arc<Shared>) {
    let controller = start(shared);
    shared.informers.start();
    tokio::spawn(controller);
}

fn replica_set(name: &str, replicas: i32, extra_spec: Value) -> Value {
    let mut rs = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas,
                 "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name},
                                           "annotations": {"note": "from the template"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    });
    if let Value::Object(extra) = extra_spec {
        for (k, v) in extra {
            rs["spec"][k] = v;
        }
    }
    rs
}

fn orphan(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "default", "labels": labels},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

async fn pods(api: &TestApi) -> Vec<Pod> {
    api.api::<Pod>(Some("default"))
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

/// Pods that are not terminating.
async fn live_pods(api: &TestApi) -> Vec<Pod> {
    pods(api)
        .await
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

fn owned_by(p: &Pod, rs: &ReplicaSet) -> bool {
    p.owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && Some(&r.uid) == rs.metadata.uid.as_ref())
}

async fn owned_pods(api: &TestApi, rs: &ReplicaSet) -> Vec<Pod> {
    live_pods(api)
        .await
        .into_iter()
        .filter(|p| owned_by(p, rs))
        .collect()
}

async fn get_rs(api: &TestApi, name: &str) -> ReplicaSet {
    api.api::<ReplicaSet>(Some("default"))
        .get(name)
        .await
        .unwrap()
}

async fn wait_owned(api: &TestApi, rs: &ReplicaSet, n: usize) -> Vec<Pod> {
    eventually(&format!("{n} pods of the set"), WAIT, || async {
        let owned = owned_pods(api, rs).await;
        (owned.len() == n).then_some(owned)
    })
    .await
}

async fn scale(api: &TestApi, name: &str, replicas: i32) {
    api.api::<ReplicaSet>(Some("default"))
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
}

/// Events about `object` with `reason`, with their messages.
async fn events(api: &TestApi, object: &str, reason: &str) -> Vec<String> {
    api.api::<Event>(Some("default"))
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(object))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.message)
        .collect()
}

#[tokio::test]
async fn creates_exactly_the_replicas_from_the_template() {
    let api = TestApi::start().await;
    run(&api.shared());
    let rs: ReplicaSet = api.create(replica_set("web", 3, json!({}))).await;
    let owned = wait_owned(&api, &rs, 3).await;
    for p in &owned {
        assert!(p.name_any().starts_with("web-"), "{}", p.name_any());
        assert_eq!(p.metadata.generate_name.as_deref(), Some("web-"));
        assert_eq!(p.labels().get("app").map(String::as_str), Some("web"));
        assert_eq!(
            p.annotations().get("note").map(String::as_str),
            Some("from the template")
        );
        let r = &p.owner_references()[0];
        assert_eq!(
            (r.api_version.as_str(), r.kind.as_str(), r.name.as_str()),
            ("apps/v1", "ReplicaSet", "web")
        );
        assert_eq!(r.controller, Some(true));
        assert_eq!(r.block_owner_deletion, Some(true));
    }
    // Once its status counts 3 pods, the set is settled: still 3.
    eventually("status.replicas 3", WAIT, || async {
        (get_rs(&api, "web").await.status?.replicas == 3).then_some(())
    })
    .await;
    assert_eq!(pods(&api).await.len(), 3);
    let mut created = eventually("3 SuccessfulCreate events", WAIT, || async {
        let e = events(&api, "web", "SuccessfulCreate").await;
        (e.len() == 3).then_some(e)
    })
    .await;
    created.sort();
    let mut expected: Vec<String> = owned
        .iter()
        .map(|p| format!("Created pod: {}", p.name_any()))
        .collect();
    expected.sort();
    assert_eq!(created, expected);
}

#[tokio::test]
async fn replicas_default_to_one() {
    let api = TestApi::start().await;
    run(&api.shared());
    let mut manifest = replica_set("one", 1, json!({}));
    manifest["spec"].as_object_mut().unwrap().remove("replicas");
    let rs: ReplicaSet = api.create(manifest).await;
    wait_owned(&api, &rs, 1).await;
}

#[tokio::test]
async fn scales_up_and_down() {
    let api = TestApi::start().await;
    run(&api.shared());
    let rs: ReplicaSet = api.create(replica_set("web", 2, json!({}))).await;
    wait_owned(&api, &rs, 2).await;
    scale(&api, "web", 5).await;
    wait_owned(&api, &rs, 5).await;
    scale(&api, "web", 1).await;
    let left = wait_owned(&api, &rs, 1).await;
    let deleted = eventually("4 SuccessfulDelete events", WAIT, || async {
        let e = events(&api, "web", "SuccessfulDelete").await;
        (e.len() == 4).then_some(e)
    })
    .await;
    let survivor = format!("Deleted pod: {}", left[0].name_any());
    assert!(!deleted.contains(&survivor), "{deleted:?}");
    scale(&api, "web", 0).await;
    wait_owned(&api, &rs, 0).await;
}

#[tokio::test]
async fn scale_down_deletes_not_ready_pods_first() {
    let api = TestApi::start().await;
    run(&api.shared());
    let rs: ReplicaSet = api.create(replica_set("web", 3, json!({}))).await;
    let owned = wait_owned(&api, &rs, 3).await;
    let now = api.clock.now();
    let (ready_a, ready_b) = (owned[0].name_any(), owned[2].name_any());
    api.make_ready(&ready_a, now).await;
    api.make_ready(&ready_b, now).await;
    eventually("2 ready replicas", WAIT, || async {
        (get_rs(&api, "web").await.status?.ready_replicas == Some(2)).then_some(())
    })
    .await;
    scale(&api, "web", 2).await;
    let left = wait_owned(&api, &rs, 2).await;
    let mut names: Vec<String> = left.iter().map(|p| p.name_any()).collect();
    names.sort();
    let mut expected = vec![ready_a, ready_b];
    expected.sort();
    assert_eq!(names, expected);
}

/// A client that counts pod creations and, while `refuse` is set, answers
/// them as a quota would.
fn quota_client(inner: Client, refuse: Arc<AtomicBool>, attempts: Arc<AtomicUsize>) -> Client {
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        let refuse = refuse.clone();
        let attempts = attempts.clone();
        async move {
            let creates_pod =
                req.method() == http::Method::POST && req.uri().path().ends_with("/pods");
            if creates_pod {
                attempts.fetch_add(1, Ordering::SeqCst);
                if refuse.load(Ordering::SeqCst) {
                    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "reason": "Forbidden", "code": 403,
                        "message": "pods \"web-x\" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=0, limited: pods=0"});
                    return Ok::<_, kube::Error>(
                        http::Response::builder()
                            .status(403)
                            .header("content-type", "application/json")
                            .body(kube::client::Body::from(
                                serde_json::to_vec(&status).unwrap(),
                            ))
                            .unwrap(),
                    );
                }
            }
            inner.send(req).await
        }
    });
    Client::new(service, "default")
}

#[tokio::test]
async fn refused_creates_do_not_flood_the_api_and_set_replica_failure() {
    let api = TestApi::start().await;
    let refuse = Arc::new(AtomicBool::new(true));
    let attempts = Arc::new(AtomicUsize::new(0));
    let client = quota_client(api.client.clone(), refuse.clone(), attempts.clone());
    run(&Shared::new(client, api.clock.clone()));
    let _rs: ReplicaSet = api.create(replica_set("web", 10, json!({}))).await;

    let condition = eventually("the ReplicaFailure condition", WAIT, || async {
        let rs = get_rs(&api, "web").await;
        rs.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_.as_deref() == Some("ReplicaFailure"))
    })
    .await;
    // The first sync tried one pod, not ten. (Ten attempts one at a time
    // would take ten syncs with back-off in between: seconds.)
    let so_far = attempts.load(Ordering::SeqCst);
    assert!(
        (1..10).contains(&so_far),
        "{so_far} create attempts by the first failed sync"
    );
    assert_eq!(condition.status.as_deref(), Some("True"));
    assert_eq!(condition.reason.as_deref(), Some("FailedCreate"));
    assert!(
        condition
            .message
            .as_deref()
            .unwrap_or("")
            .contains("exceeded quota"),
        "{condition:?}"
    );
    let failed = eventually("a FailedCreate event", WAIT, || async {
        let e = events(&api, "web", "FailedCreate").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert!(
        failed[0].starts_with("Error creating: pods \"web-x\" is forbidden: exceeded quota"),
        "{failed:?}"
    );
    assert!(pods(&api).await.is_empty());

    // The quota is lifted: the retries fill the set and clear the condition.
    refuse.store(false, Ordering::SeqCst);
    eventually(
        "10 pods and no ReplicaFailure",
        Duration::from_secs(30),
        || async {
            let rs = get_rs(&api, "web").await;
            let status = rs.status?;
            let failing = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_.as_deref() == Some("ReplicaFailure"));
            (status.replicas == 10 && !failing).then_some(())
        },
    )
    .await;
    assert_eq!(pods(&api).await.len(), 10);
}

#[tokio::test]
async fn adopts_a_matching_orphan_instead_of_creating() {
    let api = TestApi::start().await;
    run(&api.shared());
    let _: Pod = api.create(orphan("stray", json!({"app": "web"}))).await;
    let _: Pod = api.create(orphan("unrelated", json!({"app": "db"}))).await;
    let rs: ReplicaSet = api.create(replica_set("web", 1, json!({}))).await;
    let owned = wait_owned(&api, &rs, 1).await;
    assert_eq!(owned[0].name_any(), "stray");
    eventually("status.replicas 1", WAIT, || async {
        (get_rs(&api, "web").await.status?.replicas == 1).then_some(())
    })
    .await;
    let all = pods(&api).await;
    assert_eq!(all.len(), 2, "no pod was created: {all:?}");
    let unrelated = all.iter().find(|p| p.name_any() == "unrelated").unwrap();
    assert!(unrelated.owner_references().is_empty());

    // An orphan that appears later is adopted too, and the surplus goes:
    // only an adopted pod is the set's to delete.
    let _: Pod = api.create(orphan("late", json!({"app": "web"}))).await;
    let deleted = eventually("the surplus pod deleted", WAIT, || async {
        let e = events(&api, "web", "SuccessfulDelete").await;
        (e.len() == 1).then_some(e)
    })
    .await;
    let owned = wait_owned(&api, &rs, 1).await;
    let gone = if owned[0].name_any() == "stray" {
        "late"
    } else {
        "stray"
    };
    assert_eq!(deleted, [format!("Deleted pod: {gone}")]);
}

#[tokio::test]
async fn releases_a_relabelled_pod_and_replaces_it() {
    let api = TestApi::start().await;
    run(&api.shared());
    let rs: ReplicaSet = api.create(replica_set("web", 1, json!({}))).await;
    let first = wait_owned(&api, &rs, 1).await.remove(0);
    api.api::<Pod>(Some("default"))
        .patch(
            &first.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
        )
        .await
        .unwrap();
    let replacement = eventually("a replacement", WAIT, || async {
        let owned = owned_pods(&api, &rs).await;
        (owned.len() == 1 && owned[0].name_any() != first.name_any()).then(|| owned[0].clone())
    })
    .await;
    let released = api
        .api::<Pod>(Some("default"))
        .get(&first.name_any())
        .await
        .unwrap();
    assert!(
        released.owner_references().is_empty(),
        "{:?}",
        released.owner_references()
    );
    assert!(released.metadata.deletion_timestamp.is_none());
    assert_ne!(replacement.name_any(), first.name_any());
}

#[tokio::test]
async fn leaves_pods_of_another_controller_alone() {
    let api = TestApi::start().await;
    run(&api.shared());
    let mut foreign = orphan("foreign", json!({"app": "web"}));
    foreign["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
        "kind": "ReplicaSet", "name": "someone-else", "uid": "0000-foreign", "controller": true}]);
    let _: Pod = api.create(foreign).await;
    let rs: ReplicaSet = api.create(replica_set("web", 1, json!({}))).await;
    let owned = wait_owned(&api, &rs, 1).await;
    assert_ne!(owned[0].name_any(), "foreign");
    scale(&api, "web", 0).await;
    wait_owned(&api, &rs, 0).await;
    let foreign = api
        .api::<Pod>(Some("default"))
        .get("foreign")
        .await
        .unwrap();
    assert!(foreign.metadata.deletion_timestamp.is_none());
    assert_eq!(foreign.owner_references()[0].uid, "0000-foreign");
}

#[tokio::test]
async fn status_counts_ready_and_available_after_min_ready_seconds() {
    let api = TestApi::start().await;
    run(&api.shared());
    // The orphan lacks the template's "tier" label: not fully labeled.
    let _: Pod = api.create(orphan("stray", json!({"app": "web"}))).await;
    let mut manifest = replica_set("web", 2, json!({"minReadySeconds": 1}));
    manifest["spec"]["template"]["metadata"]["labels"]["tier"] = json!("front");
    let rs: ReplicaSet = api.create(manifest).await;
    let owned = wait_owned(&api, &rs, 2).await;
    let status = eventually("replicas 2 and fullyLabeledReplicas 1", WAIT, || async {
        let s = get_rs(&api, "web").await.status?;
        (s.replicas == 2 && s.fully_labeled_replicas == Some(1)).then_some(s)
    })
    .await;
    assert_eq!(status.observed_generation, rs.metadata.generation);
    assert_eq!(status.ready_replicas.unwrap_or(0), 0);

    let now = api.clock.now();
    for p in &owned {
        api.make_ready(&p.name_any(), now).await;
    }
    let s = eventually("2 ready replicas", WAIT, || async {
        let s = get_rs(&api, "web").await.status?;
        (s.ready_replicas == Some(2)).then_some(s)
    })
    .await;
    assert_eq!(s.available_replicas, Some(0), "not ready for 1s yet");

    // Time passes; no object changes. The controller comes back by itself.
    api.clock.advance(Duration::from_secs(2));
    eventually("2 available replicas", WAIT, || async {
        let s = get_rs(&api, "web").await.status?;
        (s.available_replicas == Some(2)).then_some(())
    })
    .await;

    // A new generation is observed.
    api.api::<ReplicaSet>(Some("default"))
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minReadySeconds": 5}})),
        )
        .await
        .unwrap();
    let generation = get_rs(&api, "web").await.metadata.generation;
    assert!(generation > rs.metadata.generation);
    eventually("the new generation observed", WAIT, || async {
        let s = get_rs(&api, "web").await.status?;
        (s.observed_generation == generation).then_some(())
    })
    .await;
}

#[tokio::test]
async fn no_second_batch_before_the_cache_has_seen_the_first() {
    let api = TestApi::start().await;
    // The caches are never started: they stay empty, as a cache that has
    // not caught up with the creates yet.
    let shared = api.shared();
    let ctx = Arc::new(Context::new(&shared));
    let rs: ReplicaSet = api.create(replica_set("web", 3, json!({}))).await;
    let rs = Arc::new(rs);
    sync(rs.clone(), ctx.clone()).await.unwrap();
    assert_eq!(pods(&api).await.len(), 3);
    // The cache shows no pods; without expectations this would create 3 more.
    sync(rs.clone(), ctx.clone()).await.unwrap();
    sync(rs.clone(), ctx.clone()).await.unwrap();
    assert_eq!(pods(&api).await.len(), 3);

    // A fresh controller on a cache that has caught up does nothing more.
    let shared = api.shared();
    let ctx = Arc::new(Context::new(&shared));
    shared.informers.start();
    shared.informers.wait_ready().await;
    eventually("3 pods in the cache", WAIT, || async {
        (ctx.pods.store().state().len() == 3).then_some(())
    })
    .await;
    sync(rs.clone(), ctx.clone()).await.unwrap();
    assert_eq!(pods(&api).await.len(), 3);
}

#[tokio::test]
async fn a_set_being_deleted_neither_creates_nor_adopts() {
    let api = TestApi::start().await;
    let shared = api.shared();
    let ctx = Arc::new(Context::new(&shared));
    shared.informers.start();
    shared.informers.wait_ready().await;
    let _: Pod = api.create(orphan("stray", json!({"app": "web"}))).await;
    let mut rs: ReplicaSet = api.create(replica_set("web", 3, json!({}))).await;
    eventually("the orphan in the cache", WAIT, || async {
        (ctx.pods.store().state().len() == 1).then_some(())
    })
    .await;
    rs.metadata.deletion_timestamp = Some(from_chrono(api.clock.now()));
    sync(Arc::new(rs), ctx).await.unwrap();
    let all = pods(&api).await;
    assert_eq!(all.len(), 1);
    assert!(all[0].owner_references().is_empty());
}
