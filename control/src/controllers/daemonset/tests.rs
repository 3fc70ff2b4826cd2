//! The controller against the real API handlers on an in-memory store,
//! with a fake clock. No scheduler runs here: pods stay pinned to their
//! node by affinity, and are made Running and Ready by hand, as their
//! node would.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use bosun::owners::controller_of;

use super::placement::target_node;
use super::*;
use crate::toolkit::pods::is_ready;
use crate::toolkit::testing::{eventually, TestApi};

const WAIT: Duration = Duration::from_secs(10);

fn run(shared: &Arc<Shared>) {
    let controller = start(shared);
    shared.informers.start();
    tokio::spawn(controller);
}

/// A Ready node `name` with `labels` and `taints`.
async fn add_node(api: &TestApi, name: &str, labels: Value, taints: Value) {
    let _: Node = api
        .create(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints}}))
        .await;
    api.api::<Node>(None)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await
        .unwrap();
}

async fn patch_node(api: &TestApi, name: &str, patch: Value) {
    api.api::<Node>(None)
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

/// The seeds' fluentd-elasticsearch set (in `default`), with `extra` spec.
fn fluentd(extra_spec: Value, extra_pod_spec: Value) -> Value {
    let mut ds = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "fluentd-elasticsearch", "namespace": "default",
                     "labels": {"k8s-app": "fluentd-logging"}},
        "spec": {
            "selector": {"matchLabels": {"name": "fluentd-elasticsearch"}},
            "template": {"metadata": {"labels": {"name": "fluentd-elasticsearch"}},
                "spec": {
                    "tolerations": [{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}],
                    "containers": [{"name": "fluentd-elasticsearch", "image": "fluentd:1"}],
                    "terminationGracePeriodSeconds": 30}}
        }
    });
    if let Value::Object(extra) = extra_spec {
        for (k, v) in extra {
            ds["spec"][k] = v;
        }
    }
    if let Value::Object(extra) = extra_pod_spec {
        for (k, v) in extra {
            ds["spec"]["template"]["spec"][k] = v;
        }
    }
    ds
}

async fn live_pods(api: &TestApi) -> Vec<Pod> {
    let mut pods: Vec<Pod> = api
        .api::<Pod>(Some("default"))
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    pods.sort_by_key(|p| p.name_any());
    pods
}

/// How many live pods each node has.
async fn per_node(api: &TestApi) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for p in live_pods(api).await {
        *out.entry(target_node(&p).unwrap_or_default()).or_default() += 1;
    }
    out
}

fn one_each(nodes: &[&str]) -> BTreeMap<String, usize> {
    nodes.iter().map(|n| (n.to_string(), 1)).collect()
}

async fn wait_placement(api: &TestApi, nodes: &[&str]) {
    let want = one_each(nodes);
    eventually(&format!("one pod on each of {nodes:?}"), WAIT, || async {
        (per_node(api).await == want).then_some(())
    })
    .await;
}

async fn get_ds(api: &TestApi) -> DaemonSet {
    api.api::<DaemonSet>(Some("default"))
        .get("fluentd-elasticsearch")
        .await
        .unwrap()
}

async fn patch_ds(api: &TestApi, patch: Value) {
    api.api::<DaemonSet>(Some("default"))
        .patch(
            "fluentd-elasticsearch",
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
        .unwrap();
}

async fn set_image(api: &TestApi, image: &str) {
    patch_ds(
        api,
        json!({"spec": {"template": {"spec": {"containers": [
            {"name": "fluentd-elasticsearch", "image": image}]}}}}),
    )
    .await;
}

fn image_of(p: &Pod) -> String {
    p.spec.as_ref().unwrap().containers[0]
        .image
        .clone()
        .unwrap_or_default()
}

async fn ready_all(api: &TestApi) {
    for p in live_pods(api).await {
        if !is_ready(&p) {
            api.make_ready(&p.name_any(), api.clock.now()).await;
        }
    }
}

async fn wait_status(
    api: &TestApi,
    what: &str,
    check: impl Fn(&k8s_openapi::api::apps::v1::DaemonSetStatus) -> bool,
) -> k8s_openapi::api::apps::v1::DaemonSetStatus {
    eventually(what, WAIT, || async {
        let s = get_ds(api).await.status.unwrap_or_default();
        check(&s).then_some(s)
    })
    .await
}

#[tokio::test]
async fn one_pod_per_node_pinned_by_name_with_daemon_tolerations() {
    let api = TestApi::start().await;
    for n in ["n1", "n2", "n3"] {
        add_node(&api, n, json!({}), json!([])).await;
    }
    run(&api.shared());
    let _: DaemonSet = api.create(fluentd(json!({}), json!({}))).await;
    wait_placement(&api, &["n1", "n2", "n3"]).await;

    let ds = get_ds(&api).await;
    let pod = live_pods(&api).await.remove(0);
    let spec = pod.spec.as_ref().unwrap();
    assert!(spec.node_name.is_none(), "the scheduler binds it");
    assert_eq!(pod.labels()["name"], "fluentd-elasticsearch");
    assert_eq!(pod.labels()[GENERATION_LABEL], "1");
    assert_eq!(
        ds.annotations()[TEMPLATE_GENERATION_ANNOTATION],
        "1",
        "kept by the API server"
    );
    let tolerations: Vec<(String, String)> = spec
        .tolerations
        .iter()
        .flatten()
        .map(|t| {
            (
                t.key.clone().unwrap_or_default(),
                t.effect.clone().unwrap_or_default(),
            )
        })
        .collect();
    for (key, effect) in [
        ("node-role.kubernetes.io/master", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ] {
        assert!(
            tolerations.contains(&(key.to_string(), effect.to_string())),
            "{key}:{effect} in {tolerations:?}"
        );
    }
    assert!(!tolerations
        .iter()
        .any(|(k, _)| k == "node.kubernetes.io/network-unavailable"));

    // The revision: named and labelled as Kubernetes', the pods carry its hash.
    let revisions = api
        .api::<ControllerRevision>(Some("default"))
        .list(&ListParams::default().labels("name=fluentd-elasticsearch"))
        .await
        .unwrap()
        .items;
    assert_eq!(revisions.len(), 1);
    let hash = revisions[0].labels()[HASH_LABEL].clone();
    assert_eq!(
        revisions[0].name_any(),
        format!("fluentd-elasticsearch-{hash}")
    );
    assert_eq!(revisions[0].revision, Some(1));
    assert_eq!(pod.labels()[HASH_LABEL], hash);

    // A new node gets its pod; a removed node's pod goes.
    add_node(&api, "n4", json!({}), json!([])).await;
    wait_placement(&api, &["n1", "n2", "n3", "n4"]).await;
    api.api::<Node>(None)
        .delete("n2", &DeleteParams::default())
        .await
        .unwrap();
    wait_placement(&api, &["n1", "n3", "n4"]).await;
    // The same node back: its pod too.
    add_node(&api, "n2", json!({}), json!([])).await;
    wait_placement(&api, &["n1", "n2", "n3", "n4"]).await;

    // A cordoned node keeps its pod and, deleted, gets it back.
    patch_node(&api, "n1", json!({"spec": {"unschedulable": true}})).await;
    let on_n1 = live_pods(&api)
        .await
        .into_iter()
        .find(|p| target_node(p).as_deref() == Some("n1"))
        .unwrap();
    api.api::<Pod>(Some("default"))
        .delete(&on_n1.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    eventually("a new pod on the cordoned node", WAIT, || async {
        let pods = live_pods(&api).await;
        pods.iter()
            .any(|p| target_node(p).as_deref() == Some("n1") && p.name_any() != on_n1.name_any())
            .then_some(())
    })
    .await;
    wait_placement(&api, &["n1", "n2", "n3", "n4"]).await;
}

#[tokio::test]
async fn host_network_pods_also_tolerate_an_unavailable_network() {
    let api = TestApi::start().await;
    add_node(&api, "n1", json!({}), json!([])).await;
    run(&api.shared());
    let _: DaemonSet = api
        .create(fluentd(json!({}), json!({"hostNetwork": true})))
        .await;
    wait_placement(&api, &["n1"]).await;
    let pod = live_pods(&api).await.remove(0);
    assert!(pod
        .spec
        .unwrap()
        .tolerations
        .unwrap()
        .iter()
        .any(
            |t| t.key.as_deref() == Some("node.kubernetes.io/network-unavailable")
                && t.effect.as_deref() == Some("NoSchedule")
        ));
}

#[tokio::test]
async fn node_selector_affinity_and_taints_decide_the_nodes() {
    let api = TestApi::start().await;
    add_node(&api, "ssd-1", json!({"disk": "ssd"}), json!([])).await;
    add_node(&api, "hdd-1", json!({"disk": "hdd"}), json!([])).await;
    let no_schedule = json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]);
    add_node(&api, "ssd-db", json!({"disk": "ssd"}), no_schedule.clone()).await;
    run(&api.shared());
    let _: DaemonSet = api
        .create(fluentd(json!({}), json!({"nodeSelector": {"disk": "ssd"}})))
        .await;
    // The selector keeps it off hdd-1, the untolerated taint off ssd-db.
    wait_placement(&api, &["ssd-1"]).await;
    let status = wait_status(&api, "desired 1", |s| s.desired_number_scheduled == 1).await;
    assert_eq!(status.number_misscheduled, 0);

    // The taint lifted: ssd-db gets its pod.
    patch_node(&api, "ssd-db", json!({"spec": {"taints": null}})).await;
    wait_placement(&api, &["ssd-1", "ssd-db"]).await;

    // NoSchedule put back: the running pod stays (it is misscheduled now);
    // NoExecute evicts it.
    patch_node(&api, "ssd-db", json!({"spec": {"taints": no_schedule}})).await;
    wait_status(&api, "one misscheduled", |s| {
        s.number_misscheduled == 1 && s.desired_number_scheduled == 1
    })
    .await;
    assert_eq!(per_node(&api).await, one_each(&["ssd-1", "ssd-db"]));
    patch_node(
        &api,
        "ssd-db",
        json!({"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoExecute"}]}}),
    )
    .await;
    wait_placement(&api, &["ssd-1"]).await;

    // A node no longer matching the selector loses its pod.
    patch_node(
        &api,
        "ssd-1",
        json!({"metadata": {"labels": {"disk": "hdd"}}}),
    )
    .await;
    wait_placement(&api, &[]).await;

    // Required node affinity by name picks one node.
    patch_ds(
        &api,
        json!({"spec": {"template": {"spec": {"nodeSelector": null, "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["hdd-1"]}]}]}}}}}}}),
    )
    .await;
    wait_placement(&api, &["hdd-1"]).await;
}

#[tokio::test]
async fn extra_pods_on_a_node_are_deleted_keeping_the_oldest() {
    let api = TestApi::start().await;
    add_node(&api, "n1", json!({}), json!([])).await;
    // Two orphans pinned to n1, as if left by an earlier set.
    for name in ["old-a", "old-b"] {
        let _: Pod = api
            .create(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default",
                             "labels": {"name": "fluentd-elasticsearch"}},
                "spec": {"containers": [{"name": "c", "image": "fluentd:0"}],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}}}))
            .await;
    }
    run(&api.shared());
    // OnDelete: the orphans run another template, and a rolling update
    // would replace them.
    let ds: DaemonSet = api
        .create(fluentd(
            json!({"updateStrategy": {"type": "OnDelete"}}),
            json!({}),
        ))
        .await;
    wait_placement(&api, &["n1"]).await;
    let left = live_pods(&api).await;
    assert_eq!(
        left[0].name_any(),
        "old-a",
        "the oldest (then by name) stays"
    );
    assert_eq!(
        controller_of(&left[0].metadata).map(|r| r.uid.clone()),
        ds.uid(),
        "adopted"
    );
}

#[tokio::test]
async fn status_counts_nodes_pods_and_readiness() {
    let api = TestApi::start().await;
    for n in ["n1", "n2", "n3"] {
        add_node(&api, n, json!({}), json!([])).await;
    }
    run(&api.shared());
    let _: DaemonSet = api.create(fluentd(json!({}), json!({}))).await;
    wait_placement(&api, &["n1", "n2", "n3"]).await;
    let s = wait_status(&api, "3 scheduled", |s| s.current_number_scheduled == 3).await;
    assert_eq!(
        (
            s.desired_number_scheduled,
            s.number_ready,
            s.updated_number_scheduled,
            s.number_available,
            s.number_unavailable,
            s.observed_generation
        ),
        (3, 0, Some(3), Some(0), Some(3), Some(1))
    );
    let first = live_pods(&api).await.remove(0);
    api.make_ready(&first.name_any(), api.clock.now()).await;
    let s = wait_status(&api, "1 ready", |s| s.number_ready == 1).await;
    assert_eq!(
        (s.number_available, s.number_unavailable),
        (Some(1), Some(2))
    );
    ready_all(&api).await;
    let s = wait_status(&api, "3 available", |s| s.number_available == Some(3)).await;
    assert_eq!(s.number_unavailable, Some(0));
}

#[tokio::test]
async fn rolling_update_replaces_pods_and_undo_renumbers_the_old_revision() {
    let api = TestApi::start().await;
    for n in ["n1", "n2", "n3", "n4"] {
        add_node(&api, n, json!({}), json!([])).await;
    }
    run(&api.shared());
    let _: DaemonSet = api
        .create(fluentd(
            json!({"updateStrategy": {"type": "RollingUpdate",
                   "rollingUpdate": {"maxUnavailable": "50%"}}}),
            json!({}),
        ))
        .await;
    wait_placement(&api, &["n1", "n2", "n3", "n4"]).await;
    ready_all(&api).await;
    wait_status(&api, "4 available", |s| s.number_available == Some(4)).await;

    set_image(&api, "fluentd:2").await;
    // At most 2 of 4 nodes are without an available pod at any time: the
    // rollout goes on only as new pods become ready.
    eventually("every pod on fluentd:2", WAIT, || async {
        let pods = live_pods(&api).await;
        let available = pods.iter().filter(|p| is_ready(p)).count();
        assert!(available >= 2, "{available} available of 4");
        ready_all(&api).await;
        let pods = live_pods(&api).await;
        let done = |p: &Pod| image_of(p) == "fluentd:2" && is_ready(p);
        (pods.len() == 4 && pods.iter().all(done)).then_some(())
    })
    .await;
    let s = wait_status(&api, "4 updated and available", |s| {
        s.updated_number_scheduled == Some(4) && s.number_available == Some(4)
    })
    .await;
    assert_eq!(s.observed_generation, Some(2));
    let pod = live_pods(&api).await.remove(0);
    assert_eq!(pod.labels()[GENERATION_LABEL], "2");

    let revisions = api.api::<ControllerRevision>(Some("default"));
    let mut all = revisions.list(&ListParams::default()).await.unwrap().items;
    all.sort_by_key(|r| r.revision);
    assert_eq!(
        all.iter().map(|r| r.revision.unwrap()).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(pod.labels()[HASH_LABEL], all[1].labels()[HASH_LABEL]);
    // Undo as kubectl does it: the first revision's data, sent as a
    // strategic merge patch.
    let first = all[0].clone();
    api.api::<DaemonSet>(Some("default"))
        .patch(
            "fluentd-elasticsearch",
            &PatchParams::default(),
            &Patch::Strategic(first.data.0.clone()),
        )
        .await
        .unwrap();
    eventually("back on fluentd:1", WAIT, || async {
        ready_all(&api).await;
        let pods = live_pods(&api).await;
        let done = |p: &Pod| image_of(p) == "fluentd:1" && is_ready(p);
        (pods.len() == 4 && pods.iter().all(done)).then_some(())
    })
    .await;
    let back = revisions.get(&first.name_any()).await.unwrap();
    assert_eq!(
        back.revision,
        Some(3),
        "the old revision is the newest again"
    );
    assert_eq!(
        revisions
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );
}

#[tokio::test]
async fn on_delete_replaces_a_pod_only_when_it_is_deleted() {
    let api = TestApi::start().await;
    for n in ["n1", "n2"] {
        add_node(&api, n, json!({}), json!([])).await;
    }
    run(&api.shared());
    let _: DaemonSet = api
        .create(fluentd(
            json!({"updateStrategy": {"type": "OnDelete"}}),
            json!({}),
        ))
        .await;
    wait_placement(&api, &["n1", "n2"]).await;
    ready_all(&api).await;
    set_image(&api, "fluentd:2").await;
    // The new generation is observed, and nothing is updated.
    let s = wait_status(&api, "generation 2 observed", |s| {
        s.observed_generation == Some(2)
    })
    .await;
    assert_eq!(s.updated_number_scheduled, Some(0));
    let pods = live_pods(&api).await;
    assert!(pods.iter().all(|p| image_of(p) == "fluentd:1"));
    api.api::<Pod>(Some("default"))
        .delete(&pods[0].name_any(), &DeleteParams::default())
        .await
        .unwrap();
    let replaced_node = target_node(&pods[0]).unwrap();
    eventually("a fluentd:2 pod in its place", WAIT, || async {
        let now = live_pods(&api).await;
        let on_node: Vec<_> = now
            .iter()
            .filter(|p| target_node(p).as_deref() == Some(replaced_node.as_str()))
            .collect();
        (on_node.len() == 1 && image_of(on_node[0]) == "fluentd:2").then_some(())
    })
    .await;
    let other = live_pods(&api)
        .await
        .into_iter()
        .find(|p| target_node(p).as_deref() != Some(replaced_node.as_str()))
        .unwrap();
    assert_eq!(image_of(&other), "fluentd:1");
}

async fn fail_pod(api: &TestApi, name: &str) {
    api.api::<Pod>(Some("default"))
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Failed", "conditions": null}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_failed_pod_is_replaced_with_a_back_off_per_node() {
    let api = TestApi::start().await;
    add_node(&api, "n1", json!({}), json!([])).await;
    run(&api.shared());
    let _: DaemonSet = api.create(fluentd(json!({}), json!({}))).await;
    wait_placement(&api, &["n1"]).await;
    let first = live_pods(&api).await.remove(0).name_any();
    api.make_ready(&first, api.clock.now()).await;
    wait_status(&api, "1 ready", |s| s.number_ready == 1).await;

    // The first failure is replaced at once.
    fail_pod(&api, &first).await;
    let second = eventually("a replacement", WAIT, || async {
        let pods = live_pods(&api).await;
        (pods.len() == 1 && pods[0].name_any() != first).then(|| pods[0].name_any())
    })
    .await;
    api.make_ready(&second, api.clock.now()).await;
    wait_status(&api, "the replacement ready", |s| s.number_ready == 1).await;

    // Failing again within the back-off (the clock stands still): the
    // sync that counts it not ready leaves it in place.
    fail_pod(&api, &second).await;
    wait_status(&api, "0 ready", |s| s.number_ready == 0).await;
    let left: Vec<String> = live_pods(&api).await.iter().map(|p| p.name_any()).collect();
    assert_eq!(left, [second.as_str()], "left for its back-off");
    // Once the back-off is over, it goes too.
    api.clock.advance(Duration::from_secs(3));
    patch_ds(&api, json!({"metadata": {"labels": {"poke": "1"}}})).await;
    eventually("the second failure replaced", WAIT, || async {
        let pods = live_pods(&api).await;
        (pods.len() == 1 && pods[0].name_any() != second).then_some(())
    })
    .await;
}

/// A client that counts pod creations and, while `refuse` is set, answers
/// them as a quota would (as the ReplicaSet tests' one).
fn quota_client(
    inner: kube::Client,
    refuse: Arc<std::sync::atomic::AtomicBool>,
    attempts: Arc<std::sync::atomic::AtomicUsize>,
) -> kube::Client {
    use std::sync::atomic::Ordering;
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let (inner, refuse, attempts) = (inner.clone(), refuse.clone(), attempts.clone());
        async move {
            if req.method() == http::Method::POST && req.uri().path().ends_with("/pods") {
                attempts.fetch_add(1, Ordering::SeqCst);
                if refuse.load(Ordering::SeqCst) {
                    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "reason": "Forbidden", "code": 403,
                        "message": "pods is forbidden: exceeded quota: pods"});
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
    kube::Client::new(service, "default")
}

#[tokio::test]
async fn refused_creates_are_tried_in_slow_start_and_the_status_still_counts() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let api = TestApi::start().await;
    for i in 0..6 {
        add_node(&api, &format!("n{i}"), json!({}), json!([])).await;
    }
    let refuse = Arc::new(AtomicBool::new(true));
    let attempts = Arc::new(AtomicUsize::new(0));
    let client = quota_client(api.client.clone(), refuse.clone(), attempts.clone());
    run(&Shared::new(client, api.clock.clone()));
    let _: DaemonSet = api.create(fluentd(json!({}), json!({}))).await;

    // The failed sync still wrote the status: 6 wanted, none there.
    let s = wait_status(&api, "desired 6", |s| s.desired_number_scheduled == 6).await;
    assert_eq!(s.current_number_scheduled, 0);
    // The first failed sync tried one pod, not six.
    let so_far = attempts.load(Ordering::SeqCst);
    assert!((1..6).contains(&so_far), "{so_far} create attempts");
    let failed = eventually("a FailedCreate event", WAIT, || async {
        let events = api
            .api::<k8s_openapi::api::core::v1::Event>(Some("default"))
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        events
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("FailedCreate")
                    && e.involved_object.name.as_deref() == Some("fluentd-elasticsearch")
            })
            .and_then(|e| e.message)
    })
    .await;
    assert!(failed.contains("exceeded quota"), "{failed}");

    // The quota lifted: every node gets its pod.
    refuse.store(false, Ordering::SeqCst);
    eventually("6 pods", Duration::from_secs(30), || async {
        (per_node(&api).await.len() == 6).then_some(())
    })
    .await;
    wait_placement(&api, &["n0", "n1", "n2", "n3", "n4", "n5"]).await;
}

#[tokio::test]
async fn max_surge_starts_the_new_pod_before_the_old_one_goes() {
    let api = TestApi::start().await;
    for n in ["n1", "n2"] {
        add_node(&api, n, json!({}), json!([])).await;
    }
    run(&api.shared());
    let _: DaemonSet = api
        .create(fluentd(
            json!({"updateStrategy": {"type": "RollingUpdate",
                   "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}}),
            json!({}),
        ))
        .await;
    wait_placement(&api, &["n1", "n2"]).await;
    ready_all(&api).await;
    wait_status(&api, "2 available", |s| s.number_available == Some(2)).await;

    set_image(&api, "fluentd:2").await;
    // One node surges: its old pod keeps running next to the new one.
    let (node, new) = eventually("a surge pod", WAIT, || async {
        let pods = live_pods(&api).await;
        let new: Vec<&Pod> = pods.iter().filter(|p| image_of(p) == "fluentd:2").collect();
        (pods.len() == 3 && new.len() == 1)
            .then(|| (target_node(new[0]).unwrap(), new[0].name_any()))
    })
    .await;
    let on_node = |pods: &[Pod]| {
        pods.iter()
            .filter(|p| target_node(p).as_deref() == Some(node.as_str()))
            .count()
    };
    assert_eq!(
        on_node(&live_pods(&api).await),
        2,
        "old and new side by side"
    );
    // Not ready yet: the old pod stays. A spec change that is not a
    // template change proves a full pass ran since (observedGeneration is
    // raised only by a pass that acted).
    patch_ds(&api, json!({"spec": {"revisionHistoryLimit": 5}})).await;
    wait_status(&api, "generation 3 observed", |s| {
        s.observed_generation == Some(3)
    })
    .await;
    assert_eq!(live_pods(&api).await.len(), 3, "the old pod stays");
    // The new one ready: the old one goes, and the rollout carries on to
    // the end, never more than one extra pod.
    api.make_ready(&new, api.clock.now()).await;
    eventually("every pod on fluentd:2", WAIT, || async {
        let pods = live_pods(&api).await;
        assert!(pods.len() <= 3, "{} pods for 2 nodes", pods.len());
        ready_all(&api).await;
        let pods = live_pods(&api).await;
        let done = |p: &Pod| image_of(p) == "fluentd:2" && is_ready(p);
        (pods.len() == 2 && pods.iter().all(done)).then_some(())
    })
    .await;
    wait_placement(&api, &["n1", "n2"]).await;
}
