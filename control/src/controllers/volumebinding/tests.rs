//! The binder against the real API handlers on an in-memory store: which
//! volume a claim gets, both halves of a binding, what happens to a volume
//! whose claim goes, local-path provisioning for the scheduler's node, the
//! default class, and the protection finalizers.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use super::*;
use crate::toolkit::testing::{eventually, TestApi};

const WAIT: Duration = Duration::from_secs(10);

async fn running() -> TestApi {
    let api = TestApi::start().await;
    let shared = api.shared();
    let controller = start(&shared);
    shared.informers.start();
    tokio::spawn(controller);
    api
}

/// A hostPath volume of `size` with `edit` applied.
async fn volume(api: &TestApi, name: &str, size: &str, edit: impl FnOnce(&mut Value)) {
    let mut v = json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 "hostPath": {"path": format!("/tmp/{name}")}},
    });
    edit(&mut v);
    let _: PersistentVolume = api.create(v).await;
}

/// A claim for `size` with no class (`""`), with `edit` applied.
async fn claim(api: &TestApi, name: &str, size: &str, edit: impl FnOnce(&mut Value)) {
    let mut v = json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "resources": {"requests": {"storage": size}}},
    });
    edit(&mut v);
    let _: PersistentVolumeClaim = api.create(v).await;
}

async fn get_claim(api: &TestApi, name: &str) -> Option<PersistentVolumeClaim> {
    api.api::<PersistentVolumeClaim>(Some("default"))
        .get_opt(name)
        .await
        .unwrap()
}

async fn get_volume(api: &TestApi, name: &str) -> Option<PersistentVolume> {
    api.api::<PersistentVolume>(None)
        .get_opt(name)
        .await
        .unwrap()
}

/// Waits for claim `name` to be Bound; returns its volume's name.
async fn bound_volume(api: &TestApi, name: &str) -> String {
    eventually(&format!("claim {name} bound"), WAIT, || async {
        let c = get_claim(api, name).await?;
        (c.status.as_ref()?.phase.as_deref() == Some("Bound"))
            .then(|| c.spec?.volume_name)
            .flatten()
    })
    .await
}

fn pv_phase(pv: &PersistentVolume) -> &str {
    pv.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

#[tokio::test]
async fn a_claim_binds_both_ways_to_the_smallest_volume_that_fits() {
    let api = running().await;
    volume(&api, "big", "5Gi", |_| {}).await;
    volume(&api, "small", "1Gi", |_| {}).await;
    volume(&api, "tiny", "500Mi", |_| {}).await;
    volume(&api, "medium", "2Gi", |_| {}).await;
    claim(&api, "data", "1Gi", |_| {}).await;
    assert_eq!(bound_volume(&api, "data").await, "small");

    let c = get_claim(&api, "data").await.unwrap();
    let anns = c.annotations();
    assert_eq!(
        anns.get(ANN_BIND_COMPLETED).map(String::as_str),
        Some("yes")
    );
    assert_eq!(
        anns.get(ANN_BOUND_BY_CONTROLLER).map(String::as_str),
        Some("yes")
    );
    let status = c.status.clone().unwrap();
    assert_eq!(status.capacity.unwrap()["storage"].0, "1Gi");
    assert_eq!(
        status.access_modes.unwrap(),
        vec!["ReadWriteOnce".to_string()]
    );
    let pv = eventually("the volume Bound", WAIT, || async {
        get_volume(&api, "small")
            .await
            .filter(|pv| pv_phase(pv) == "Bound")
    })
    .await;
    let r = pv.spec.as_ref().unwrap().claim_ref.clone().unwrap();
    assert_eq!(
        (r.namespace.as_deref(), r.name.as_deref(), r.uid.as_ref()),
        (Some("default"), Some("data"), c.metadata.uid.as_ref())
    );
    assert_eq!(
        pv.annotations()
            .get(ANN_BOUND_BY_CONTROLLER)
            .map(String::as_str),
        Some("yes")
    );
    for other in ["big", "tiny", "medium"] {
        let pv = get_volume(&api, other).await.unwrap();
        assert_eq!(pv_phase(&pv), "Available", "{other}");
        assert!(pv.spec.unwrap().claim_ref.is_none(), "{other}");
    }
    // A second claim of the same size gets the next smallest fit.
    claim(&api, "more", "1Gi", |_| {}).await;
    assert_eq!(bound_volume(&api, "more").await, "medium");
}

#[tokio::test]
async fn access_modes_classes_and_selectors_must_match() {
    let api = running().await;
    volume(&api, "rwo", "1Gi", |_| {}).await;
    volume(&api, "rwx", "10Gi", |v| {
        v["spec"]["accessModes"] = json!(["ReadWriteOnce", "ReadWriteMany"])
    })
    .await;
    volume(&api, "fast", "1Gi", |v| {
        v["spec"]["storageClassName"] = json!("fast")
    })
    .await;
    volume(&api, "gold", "3Gi", |v| {
        v["metadata"]["labels"] = json!({"tier": "gold"})
    })
    .await;
    volume(&api, "block", "1Gi", |v| {
        v["spec"]["volumeMode"] = json!("Block")
    })
    .await;

    claim(&api, "shared", "1Gi", |c| {
        c["spec"]["accessModes"] = json!(["ReadWriteMany"])
    })
    .await;
    assert_eq!(bound_volume(&api, "shared").await, "rwx");
    claim(&api, "quick", "1Gi", |c| {
        c["spec"]["storageClassName"] = json!("fast")
    })
    .await;
    assert_eq!(bound_volume(&api, "quick").await, "fast");
    claim(&api, "precious", "1Gi", |c| {
        c["spec"]["selector"] = json!({"matchLabels": {"tier": "gold"}})
    })
    .await;
    assert_eq!(bound_volume(&api, "precious").await, "gold");
    claim(&api, "raw", "1Gi", |c| {
        c["spec"]["volumeMode"] = json!("Block")
    })
    .await;
    assert_eq!(bound_volume(&api, "raw").await, "block");
    claim(&api, "plain", "1Gi", |_| {}).await;
    assert_eq!(bound_volume(&api, "plain").await, "rwo");

    // Nothing left that fits: the claim waits, Pending, and says why.
    claim(&api, "late", "1Gi", |_| {}).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let late = get_claim(&api, "late").await.unwrap();
    assert_eq!(late.status.unwrap().phase.as_deref(), Some("Pending"));
    assert!(late.spec.unwrap().volume_name.is_none());
}

#[tokio::test]
async fn a_volume_whose_claim_goes_is_released_or_deleted_by_its_policy() {
    let api = running().await;
    volume(&api, "kept", "1Gi", |_| {}).await;
    claim(&api, "a", "1Gi", |_| {}).await;
    assert_eq!(bound_volume(&api, "a").await, "kept");
    api.api::<PersistentVolumeClaim>(Some("default"))
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the claim gone", WAIT, || async {
        get_claim(&api, "a").await.is_none().then_some(())
    })
    .await;
    let pv = eventually("the Retain volume Released", WAIT, || async {
        get_volume(&api, "kept")
            .await
            .filter(|pv| pv_phase(pv) == "Released")
    })
    .await;
    // Released keeps its claimRef: a new claim does not get it.
    assert!(pv.spec.unwrap().claim_ref.is_some());
    claim(&api, "b", "1Gi", |_| {}).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(get_claim(&api, "b")
        .await
        .unwrap()
        .spec
        .unwrap()
        .volume_name
        .is_none());

    volume(&api, "scratch", "1Gi", |v| {
        v["spec"]["persistentVolumeReclaimPolicy"] = json!("Delete")
    })
    .await;
    assert_eq!(bound_volume(&api, "b").await, "scratch");
    api.api::<PersistentVolumeClaim>(Some("default"))
        .delete("b", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Delete volume deleted by the binder", WAIT, || async {
        get_volume(&api, "scratch").await.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_bound_volume_is_deleted_only_after_its_claim() {
    let api = running().await;
    volume(&api, "held", "1Gi", |_| {}).await;
    claim(&api, "c", "1Gi", |_| {}).await;
    assert_eq!(bound_volume(&api, "c").await, "held");
    api.api::<PersistentVolume>(None)
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pv = get_volume(&api, "held").await.expect("kept while bound");
    assert!(pv.metadata.deletion_timestamp.is_some());
    assert_eq!(pv.finalizers(), &[PV_PROTECTION.to_string()]);
    api.api::<PersistentVolumeClaim>(Some("default"))
        .delete("c", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the volume gone after its claim", WAIT, || async {
        get_volume(&api, "held").await.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn claims_without_a_class_get_the_default_one() {
    let api = running().await;
    claim(&api, "defaulted", "1Gi", |c| {
        c["spec"]
            .as_object_mut()
            .unwrap()
            .remove("storageClassName");
    })
    .await;
    let c = get_claim(&api, "defaulted").await.unwrap();
    assert_eq!(
        c.spec.as_ref().unwrap().storage_class_name.as_deref(),
        Some(crate::server::LOCAL_PATH_CLASS)
    );
    assert!(c.finalizers().iter().any(|f| f == PVC_PROTECTION));
    // "" asks for no class, and is kept.
    claim(&api, "classless", "1Gi", |_| {}).await;
    let c = get_claim(&api, "classless").await.unwrap();
    assert_eq!(c.spec.unwrap().storage_class_name.as_deref(), Some(""));
    // Without a default class, nothing is filled in.
    api.api::<k8s_openapi::api::storage::v1::StorageClass>(None)
        .patch(
            crate::server::LOCAL_PATH_CLASS,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "storageclass.kubernetes.io/is-default-class": "false"}}})),
        )
        .await
        .unwrap();
    claim(&api, "unclassed", "1Gi", |c| {
        c["spec"]
            .as_object_mut()
            .unwrap()
            .remove("storageClassName");
    })
    .await;
    let c = get_claim(&api, "unclassed").await.unwrap();
    assert_eq!(c.spec.unwrap().storage_class_name, None);
}

#[tokio::test]
async fn local_path_claims_wait_for_their_pods_node_then_get_a_volume_there() {
    let api = running().await;
    let _: Node = api
        .create(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"},
                         "annotations": {DATA_DIR_ANNOTATION: "/var/lib/bosun-agent"}}}))
        .await;
    // A static volume of no class is not for a local-path claim.
    volume(&api, "static", "1Gi", |_| {}).await;
    claim(&api, "www-web-0", "1Gi", |c| {
        c["spec"]
            .as_object_mut()
            .unwrap()
            .remove("storageClassName");
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c = get_claim(&api, "www-web-0").await.unwrap();
    assert_eq!(c.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));
    assert!(c.spec.as_ref().unwrap().volume_name.is_none());
    assert_eq!(
        Api::<PersistentVolume>::all(api.client.clone())
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len(),
        1,
        "nothing provisioned before a node is picked"
    );

    // The scheduler picks n1.
    api.api::<PersistentVolumeClaim>(Some("default"))
        .patch(
            "www-web-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {ANN_SELECTED_NODE: "n1"}}})),
        )
        .await
        .unwrap();
    let name = bound_volume(&api, "www-web-0").await;
    let uid = c.metadata.uid.clone().unwrap();
    assert_eq!(name, format!("pvc-{uid}"));
    let pv = get_volume(&api, &name).await.unwrap();
    let spec = pv.spec.clone().unwrap();
    assert_eq!(
        spec.host_path.unwrap().path,
        format!("/var/lib/bosun-agent/local-path/pvc-{uid}_default_www-web-0")
    );
    assert_eq!(spec.storage_class_name.as_deref(), Some("local-path"));
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    assert_eq!(spec.capacity.unwrap()["storage"].0, "1Gi");
    let term = &spec
        .node_affinity
        .unwrap()
        .required
        .unwrap()
        .node_selector_terms[0];
    let expr = &term.match_expressions.as_ref().unwrap()[0];
    assert_eq!(
        (expr.key.as_str(), expr.values.clone().unwrap()),
        ("kubernetes.io/hostname", vec!["n1".to_string()])
    );
    assert_eq!(
        pv.annotations().get(ANN_PROVISIONED_BY).map(String::as_str),
        Some(LOCAL_PATH_PROVISIONER)
    );
    assert!(pv.finalizers().iter().any(|f| f == CLEANUP_FINALIZER));
    let c = get_claim(&api, "www-web-0").await.unwrap();
    assert_eq!(
        c.annotations()
            .get(ANN_STORAGE_PROVISIONER)
            .map(String::as_str),
        Some(LOCAL_PATH_PROVISIONER)
    );

    // The claim goes: the volume (Delete) is deleted and waits for its
    // node's agent to remove the directory and the cleanup finalizer.
    api.api::<PersistentVolumeClaim>(Some("default"))
        .delete("www-web-0", &DeleteParams::default())
        .await
        .unwrap();
    // pv-protection goes once the binder sees the volume released; the
    // cleanup finalizer stays for the agent.
    eventually(
        "the volume being deleted, held by cleanup alone",
        WAIT,
        || async {
            get_volume(&api, &name).await.filter(|pv| {
                pv.metadata.deletion_timestamp.is_some()
                    && pv.finalizers() == [CLEANUP_FINALIZER.to_string()]
            })
        },
    )
    .await;
    assert!(
        get_volume(&api, &name).await.is_some(),
        "the volume waits for its agent"
    );
}

#[tokio::test]
async fn a_claim_in_use_is_deleted_only_after_its_pods() {
    let api = running().await;
    volume(&api, "pv1", "1Gi", |_| {}).await;
    claim(&api, "data", "1Gi", |_| {}).await;
    bound_volume(&api, "data").await;
    let _: Pod = api
        .create(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "user", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}],
                     "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}}))
        .await;
    api.api::<PersistentVolumeClaim>(Some("default"))
        .delete("data", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let c = get_claim(&api, "data")
        .await
        .expect("kept while a pod uses it");
    assert!(c.metadata.deletion_timestamp.is_some());
    assert_eq!(c.finalizers(), &[PVC_PROTECTION.to_string()]);

    api.api::<Pod>(Some("default"))
        .delete("user", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually("the claim gone after its pod", WAIT, || async {
        get_claim(&api, "data").await.is_none().then_some(())
    })
    .await;
    eventually("its volume Released", WAIT, || async {
        get_volume(&api, "pv1")
            .await
            .filter(|pv| pv_phase(pv) == "Released")
    })
    .await;
}

#[tokio::test]
async fn a_pod_placed_by_hand_gives_its_local_path_claim_its_node() {
    let api = running().await;
    let _: Node = api
        .create(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n2", "labels": {"kubernetes.io/hostname": "n2"},
                         "annotations": {DATA_DIR_ANNOTATION: "/data"}}}))
        .await;
    claim(&api, "www", "1Gi", |c| {
        c["spec"]
            .as_object_mut()
            .unwrap()
            .remove("storageClassName");
    })
    .await;
    let _: Pod = api
        .create(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "pinned", "namespace": "default"},
            "spec": {"nodeName": "n2", "containers": [{"name": "c", "image": "i"}],
                     "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "www"}}]}}))
        .await;
    let name = bound_volume(&api, "www").await;
    let pv = get_volume(&api, &name).await.unwrap();
    assert!(pv
        .spec
        .unwrap()
        .host_path
        .unwrap()
        .path
        .starts_with("/data/local-path/pvc-"));
}
