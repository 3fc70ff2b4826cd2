//! The local-path provisioner: for a claim of a class whose provisioner is
//! [`LOCAL_PATH_PROVISIONER`], once the scheduler has picked the node of
//! its first pod (`volume.kubernetes.io/selected-node`), a hostPath volume
//! `pvc-<claim uid>` in `<node data dir>/local-path/pvc-<uid>_<ns>_<name>`
//! (`DirectoryOrCreate`: the agent makes the directory when it first
//! mounts it), pinned to the node by node affinity, with the class's
//! reclaim policy, pre-bound to the claim (the binder then binds it), as
//! rancher's local-path provisioner and external-provisioner do.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, PostParams};
use kube::ResourceExt;
use serde_json::json;

use bosun::events::EventType;
use bosun::well_known::HOSTNAME_LABEL;

use super::{
    reference, Context, Error, ANN_PROVISIONED_BY, CLEANUP_FINALIZER, DATA_DIR_ANNOTATION,
    LOCAL_PATH_PROVISIONER,
};

/// The name of the volume provisioned for `claim`.
pub fn volume_name(claim: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or_default())
}

/// The volume for `claim` on `node`, whose data dir is `data_dir`.
pub fn volume_for(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: &str,
    data_dir: &str,
) -> PersistentVolume {
    let name = volume_name(claim);
    let ns = claim.namespace().unwrap_or_default();
    let spec = claim.spec.clone().unwrap_or_default();
    let request = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_else(|| "0".into());
    let path = format!(
        "{}/local-path/{name}_{ns}_{}",
        data_dir.trim_end_matches('/'),
        claim.name_any()
    );
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": name,
            "annotations": {ANN_PROVISIONED_BY: LOCAL_PATH_PROVISIONER},
            "finalizers": [CLEANUP_FINALIZER],
        },
        "spec": {
            "capacity": {"storage": request},
            "accessModes": spec.access_modes.unwrap_or_else(|| vec!["ReadWriteOnce".into()]),
            "storageClassName": class.name_any(),
            "persistentVolumeReclaimPolicy": class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into()),
            "volumeMode": spec.volume_mode.unwrap_or_else(|| "Filesystem".into()),
            "hostPath": {"path": path, "type": "DirectoryOrCreate"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}
            ]}]}},
            "claimRef": {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": ns, "name": claim.name_any(), "uid": claim.metadata.uid,
            },
        },
    }))
    .expect("a valid PersistentVolume")
}

/// Provisions a volume for `claim` on `node` (the selected node), or says
/// in an event why it cannot.
pub async fn provision(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: Option<&str>,
    ctx: &Context,
) -> Result<(), Error> {
    let failed = |msg: String| {
        ctx.recorder.record(
            &reference(claim),
            EventType::Warning,
            "ProvisioningFailed",
            msg,
        );
    };
    let Some(node) = node else {
        failed(format!(
            "{LOCAL_PATH_PROVISIONER} provisions only for a known node: set volumeBindingMode WaitForFirstConsumer on StorageClass {:?}",
            class.name_any()
        ));
        return Ok(());
    };
    let data_dir = ctx
        .node(node)
        .and_then(|n| n.annotations().get(DATA_DIR_ANNOTATION).cloned());
    let Some(data_dir) = data_dir.filter(|d| d.starts_with('/')) else {
        failed(format!(
            "node {node:?} does not report its data dir (annotation {DATA_DIR_ANNOTATION})"
        ));
        return Ok(());
    };
    let pv = volume_for(claim, class, node, &data_dir);
    let api: Api<PersistentVolume> = Api::all(ctx.client.clone());
    match api.create(&PostParams::default(), &pv).await {
        Ok(_) => {
            ctx.recorder.record(
                &reference(claim),
                EventType::Normal,
                "ProvisioningSucceeded",
                format!(
                    "Successfully provisioned volume {} on node {node}",
                    pv.name_any()
                ),
            );
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => {
            failed(format!("creating volume {}: {e}", pv.name_any()));
            Err(e.into())
        }
    }
}
