//! The controller against the real API handlers on an in-memory store,
//! with a fake clock; pods are made Running and Ready by hand, as their
//! node would.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use super::identity::{POD_NAME_LABEL, REVISION_LABEL};
use super::*;
use crate::toolkit::history::HASH_LABEL;
use crate::toolkit::testing::{eventually, TestApi};

const WAIT: Duration = Duration::from_secs(10);

fn run(shared: &Arc<Shared>) {
    let controller = start(shared);
    shared.informers.start();
    tokio::spawn(controller);
}

/// The seeds' `web` set: headless service `nginx`, a `www` claim template.
fn web(replicas: i32, extra_spec: Value) -> Value {
    let mut set = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "serviceName": "nginx", "replicas": replicas,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}},
                         "spec": {"containers": [{"name": "nginx", "image": "web:1",
                             "volumeMounts": [{"name": "www", "mountPath": "/www"}]}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "www"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}}}}]
        }
    });
    if let Value::Object(extra) = extra_spec {
        for (k, v) in extra {
            set["spec"][k] = v;
        }
    }
    set
}

async fn pod_names(api: &TestApi) -> Vec<String> {
    let mut names: Vec<String> = api
        .api::<Pod>(Some("default"))
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.name_any())
        .collect();
    names.sort();
    names
}

async fn wait_pods(api: &TestApi, want: &[&str]) {
    eventually(&format!("pods {want:?}"), WAIT, || async {
        (pod_names(api).await == want).then_some(())
    })
    .await;
}

async fn get_pod(api: &TestApi, name: &str) -> Pod {
    api.api::<Pod>(Some("default")).get(name).await.unwrap()
}

async fn get_set(api: &TestApi) -> StatefulSet {
    api.api::<StatefulSet>(Some("default"))
        .get("web")
        .await
        .unwrap()
}

async fn patch_set(api: &TestApi, patch: Value) {
    api.api::<StatefulSet>(Some("default"))
        .patch("web", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

/// Removes a terminating pod for good, as its agent does once it stopped.
async fn finish_deletion(api: &TestApi, name: &str) {
    api.api::<Pod>(Some("default"))
        .delete(name, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
}

/// Makes every live pod Running and Ready, one sync at a time, until
/// `want` exist.
async fn ready_in_order(api: &TestApi, want: &[&str]) {
    for (i, name) in want.iter().enumerate() {
        wait_pods(api, &want[..=i]).await;
        api.make_ready(name, api.clock.now()).await;
    }
}

#[tokio::test]
async fn ordered_ready_creates_each_pod_after_the_previous_is_ready() {
    let api = TestApi::start().await;
    run(&api.shared());
    let _: StatefulSet = api.create(web(3, json!({}))).await;

    wait_pods(&api, &["web-0"]).await;
    // web-0 is not ready: nothing more comes, however often the set syncs.
    patch_set(&api, json!({"metadata": {"labels": {"poke": "1"}}})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(pod_names(&api).await, ["web-0"]);

    ready_in_order(&api, &["web-0", "web-1", "web-2"]).await;
    let pod = get_pod(&api, "web-1").await;
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.hostname.as_deref(), Some("web-1"));
    assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
    assert_eq!(pod.labels()[POD_NAME_LABEL], "web-1");
    let claim = &spec.volumes.as_ref().unwrap()[0];
    assert_eq!(
        claim.persistent_volume_claim.as_ref().unwrap().claim_name,
        "www-web-1"
    );
    // Each pod's claim exists, labelled like the set.
    let claims = api.api::<PersistentVolumeClaim>(Some("default"));
    for n in 0..3 {
        let c = claims.get(&format!("www-web-{n}")).await.unwrap();
        assert_eq!(c.labels()["app"], "nginx");
    }
    let status = eventually("status with 3 ready", WAIT, || async {
        let s = get_set(&api).await.status.unwrap_or_default();
        (s.ready_replicas == Some(3)).then_some(s)
    })
    .await;
    assert_eq!(status.replicas, 3);
    assert_eq!(status.current_revision, status.update_revision);
    let revision = status.update_revision.unwrap();
    assert_eq!(
        get_pod(&api, "web-2").await.labels()[REVISION_LABEL],
        revision
    );
    let rev = api
        .api::<ControllerRevision>(Some("default"))
        .get(&revision)
        .await
        .unwrap();
    assert!(rev.labels().contains_key(HASH_LABEL));
    assert_eq!(rev.revision, Some(1));
}

#[tokio::test]
async fn parallel_creates_all_pods_at_once() {
    let api = TestApi::start().await;
    run(&api.shared());
    let _: StatefulSet = api
        .create(web(3, json!({"podManagementPolicy": "Parallel"})))
        .await;
    wait_pods(&api, &["web-0", "web-1", "web-2"]).await;
}

#[tokio::test]
async fn available_replicas_count_pods_ready_for_min_ready_seconds() {
    let api = TestApi::start().await;
    run(&api.shared());
    // Parallel: no pass waits for a pod, so nothing else brings the
    // controller back once the pods have been ready long enough.
    let set = web(
        3,
        json!({"podManagementPolicy": "Parallel", "minReadySeconds": 1}),
    );
    let _: StatefulSet = api.create(set).await;
    wait_pods(&api, &["web-0", "web-1", "web-2"]).await;
    let now = api.clock.now();
    for name in ["web-0", "web-1", "web-2"] {
        api.make_ready(name, now).await;
    }
    let s = eventually("3 ready replicas", WAIT, || async {
        let s = get_set(&api).await.status?;
        (s.ready_replicas == Some(3)).then_some(s)
    })
    .await;
    assert_eq!(s.available_replicas, Some(0), "not ready for 1 s yet");

    // Time passes; no object changes. The controller comes back by itself.
    api.clock.advance(Duration::from_secs(2));
    eventually("3 available replicas", WAIT, || async {
        let s = get_set(&api).await.status?;
        (s.available_replicas == Some(3)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn scale_down_removes_the_highest_ordinal_first_and_waits_for_it() {
    let api = TestApi::start().await;
    run(&api.shared());
    let _: StatefulSet = api.create(web(3, json!({}))).await;
    ready_in_order(&api, &["web-0", "web-1", "web-2"]).await;
    for n in ["web-1", "web-2"] {
        api.bind(n, "n1").await;
    }
    patch_set(&api, json!({"spec": {"replicas": 1}})).await;
    eventually("web-2 terminating", WAIT, || async {
        get_pod(&api, "web-2")
            .await
            .metadata
            .deletion_timestamp
            .map(|_| ())
    })
    .await;
    // web-1 stays while web-2 is still terminating.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(get_pod(&api, "web-1")
        .await
        .metadata
        .deletion_timestamp
        .is_none());
    finish_deletion(&api, "web-2").await;
    eventually("web-1 terminating", WAIT, || async {
        get_pod(&api, "web-1")
            .await
            .metadata
            .deletion_timestamp
            .map(|_| ())
    })
    .await;
    finish_deletion(&api, "web-1").await;
    wait_pods(&api, &["web-0"]).await;
    // The claims stay (whenScaled: Retain by default).
    let claims = api.api::<PersistentVolumeClaim>(Some("default"));
    assert!(claims.get_opt("www-web-2").await.unwrap().is_some());
}

#[tokio::test]
async fn a_deleted_pod_comes_back_with_its_identity_once_it_is_gone() {
    let api = TestApi::start().await;
    run(&api.shared());
    let _: StatefulSet = api.create(web(2, json!({}))).await;
    ready_in_order(&api, &["web-0", "web-1"]).await;
    api.bind("web-0", "n1").await;
    let old_uid = get_pod(&api, "web-0").await.uid();
    api.api::<Pod>(Some("default"))
        .delete("web-0", &DeleteParams::default())
        .await
        .unwrap();
    // While the old web-0 terminates, no second web-0 is made.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get_pod(&api, "web-0").await.uid(), old_uid);
    finish_deletion(&api, "web-0").await;
    let new = eventually("a new web-0", WAIT, || async {
        let p = api
            .api::<Pod>(Some("default"))
            .get_opt("web-0")
            .await
            .unwrap()?;
        (p.uid() != old_uid).then_some(p)
    })
    .await;
    let spec = new.spec.unwrap();
    assert_eq!(spec.hostname.as_deref(), Some("web-0"));
    assert_eq!(
        spec.volumes.unwrap()[0]
            .persistent_volume_claim
            .as_ref()
            .unwrap()
            .claim_name,
        "www-web-0"
    );
}

#[tokio::test]
async fn a_partitioned_rolling_update_changes_only_ordinals_at_or_above_it() {
    let api = TestApi::start().await;
    run(&api.shared());
    let _: StatefulSet = api
        .create(web(
            3,
            json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}}),
        ))
        .await;
    ready_in_order(&api, &["web-0", "web-1", "web-2"]).await;
    let first = eventually("the first revision", WAIT, || async {
        get_set(&api).await.status?.update_revision
    })
    .await;
    patch_set(
        &api,
        json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "web:2"}]}}}}),
    )
    .await;
    // web-2 is replaced by a pod of the new revision.
    let second = eventually("web-2 of a new revision", WAIT, || async {
        let p = api
            .api::<Pod>(Some("default"))
            .get_opt("web-2")
            .await
            .unwrap()?;
        let rev = p.labels().get(REVISION_LABEL)?.clone();
        (rev != first && p.metadata.deletion_timestamp.is_none()).then_some(rev)
    })
    .await;
    api.make_ready("web-2", api.clock.now()).await;
    let status = eventually("status after the partitioned update", WAIT, || async {
        let s = get_set(&api).await.status?;
        (s.updated_replicas == Some(1) && s.ready_replicas == Some(3)).then_some(s)
    })
    .await;
    assert_eq!(status.update_revision.as_deref(), Some(second.as_str()));
    assert_eq!(status.current_revision.as_deref(), Some(first.as_str()));
    for n in ["web-0", "web-1"] {
        assert_eq!(
            get_pod(&api, n).await.labels()[REVISION_LABEL],
            first,
            "{n}"
        );
    }
    let image = |p: Pod| p.spec.unwrap().containers[0].image.clone().unwrap();
    assert_eq!(image(get_pod(&api, "web-2").await), "web:2");
    assert_eq!(image(get_pod(&api, "web-1").await), "web:1");

    // Partition 0 rolls the rest, highest first.
    patch_set(
        &api,
        json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}),
    )
    .await;
    for n in ["web-1", "web-0"] {
        eventually(&format!("{n} updated"), WAIT, || async {
            let p = api.api::<Pod>(Some("default")).get_opt(n).await.unwrap()?;
            (p.labels().get(REVISION_LABEL) == Some(&second)).then_some(())
        })
        .await;
        api.make_ready(n, api.clock.now()).await;
    }
    let status = eventually("the update complete", WAIT, || async {
        let s = get_set(&api).await.status?;
        (s.current_revision.as_deref() == Some(second.as_str())).then_some(s)
    })
    .await;
    assert_eq!(status.current_replicas, Some(3));
}

#[tokio::test]
async fn on_delete_waits_for_the_user_and_a_rollback_reuses_the_old_revision() {
    let api = TestApi::start().await;
    run(&api.shared());
    let _: StatefulSet = api
        .create(web(1, json!({"updateStrategy": {"type": "OnDelete"}})))
        .await;
    ready_in_order(&api, &["web-0"]).await;
    let first = eventually("the first revision", WAIT, || async {
        get_set(&api).await.status?.update_revision
    })
    .await;
    let image = |v: &str| {
        json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": v,
            "volumeMounts": [{"name": "www", "mountPath": "/www"}]}]}}}})
    };
    patch_set(&api, image("web:2")).await;
    let second = eventually("a second revision", WAIT, || async {
        let r = get_set(&api).await.status?.update_revision?;
        (r != first).then_some(r)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        get_pod(&api, "web-0").await.labels()[REVISION_LABEL],
        first,
        "OnDelete leaves running pods alone"
    );
    // Back to the first template: its revision comes back as number 3.
    patch_set(&api, image("web:1")).await;
    eventually("the first revision again", WAIT, || async {
        let s = get_set(&api).await.status?;
        (s.update_revision.as_deref() == Some(first.as_str())).then_some(())
    })
    .await;
    let revisions = api.api::<ControllerRevision>(Some("default"));
    assert_eq!(revisions.get(&first).await.unwrap().revision, Some(3));
    assert_eq!(revisions.get(&second).await.unwrap().revision, Some(2));
}
