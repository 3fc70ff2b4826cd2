//! One sync of a claim (the PV controller's `syncClaim`).
//!
//! An unbound claim binds to the volume [`crate::toolkit::volumes::best_match`] picks,
//! both ways and in Kubernetes' order (the volume's claimRef, the
//! volume's phase, the claim's volumeName, the claim's phase, capacity
//! and access modes), so a sync cut short anywhere is finished by the
//! next. A claim of a WaitForFirstConsumer class waits for the scheduler
//! to pick its pod's node; with no volume to bind, a local-path class
//! provisions one. A bound claim whose volume is gone is `Lost`.

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use serde_json::json;

use bosun::events::EventType;

use super::{
    protection, provisioner, reference, Context, Error, ANN_BETA_STORAGE_PROVISIONER,
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER,
    LOCAL_PATH_PROVISIONER,
};
use crate::toolkit::volumes::{best_match, claim_class};

/// A write that lost a race (the object changed or went) is no failure:
/// the watch brings the object as it now is and the next sync.
pub(super) fn raced(r: kube::Result<()>) -> Result<(), Error> {
    match r {
        Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => Ok(()),
        other => other.map_err(Error::from),
    }
}

fn phase(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or("")
}

/// The node the scheduler picked for the claim's first pod.
pub fn selected_node(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim
        .metadata
        .annotations
        .as_ref()?
        .get(ANN_SELECTED_NODE)
        .map(String::as_str)
        .filter(|n| !n.is_empty())
}

pub async fn sync(claim: &PersistentVolumeClaim, ctx: &Context) -> Result<(), Error> {
    if claim.metadata.deletion_timestamp.is_some() {
        return protection::release_claim(claim, ctx).await;
    }
    let name = volume_name(claim).to_string();
    if name.is_empty() {
        sync_unbound(claim, ctx).await
    } else {
        sync_bound(claim, &name, ctx).await
    }
}

/// The node of a pod using `claim` that was placed without the scheduler
/// (`spec.nodeName` set by its author), which therefore never selects a
/// node for the claim: its node is the claim's.
fn placed_consumer(claim: &PersistentVolumeClaim, ctx: &Context) -> Option<String> {
    let name = claim.metadata.name.as_deref()?;
    ctx.pods
        .state()
        .iter()
        .filter(|p| p.metadata.namespace == claim.metadata.namespace)
        .filter(|p| super::claims_of(p).iter().any(|c| c.name == name))
        .find_map(|p| p.spec.as_ref()?.node_name.clone().filter(|n| !n.is_empty()))
}

async fn sync_unbound(claim: &PersistentVolumeClaim, ctx: &Context) -> Result<(), Error> {
    let class_name = claim_class(claim);
    let class = (!class_name.is_empty())
        .then(|| ctx.class(&class_name))
        .flatten();
    let wait_for_consumer = class
        .as_ref()
        .is_some_and(|c| c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"));
    let placed_pod_node = placed_consumer(claim, ctx);
    let node = selected_node(claim).or(placed_pod_node.as_deref());
    if wait_for_consumer && node.is_none() {
        if phase(claim) != "Pending" {
            set_claim_phase(claim, "Pending", ctx).await?;
        }
        ctx.recorder.record(
            &reference(claim),
            EventType::Normal,
            "WaitForFirstConsumer",
            "waiting for first consumer to be created before binding",
        );
        return Ok(());
    }
    let node_obj = node.and_then(|n| ctx.node(n));
    let volumes = ctx.volumes.state();
    if let Some(pv) = best_match(
        claim,
        volumes.iter().map(|v| v.as_ref()),
        node_obj.as_deref(),
    ) {
        return bind(claim, pv, ctx).await;
    }
    match class {
        Some(class) => {
            annotate_provisioner(claim, &class.provisioner, ctx).await?;
            if class.provisioner == LOCAL_PATH_PROVISIONER {
                provisioner::provision(claim, &class, node, ctx).await
            } else {
                ctx.recorder.record(
                    &reference(claim),
                    EventType::Normal,
                    "ExternalProvisioning",
                    format!(
                        "Waiting for a volume to be created either by the external provisioner '{}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.",
                        class.provisioner
                    ),
                );
                Ok(())
            }
        }
        None => {
            let msg = if class_name.is_empty() {
                "no persistent volumes available for this claim and no storage class is set"
                    .to_string()
            } else {
                format!("storageclass.storage.k8s.io \"{class_name}\" not found")
            };
            let reason = if class_name.is_empty() {
                "FailedBinding"
            } else {
                "ProvisioningFailed"
            };
            ctx.recorder
                .record(&reference(claim), EventType::Warning, reason, msg);
            Ok(())
        }
    }
}

/// A claim with a volumeName: finish the binding, or mark it Lost.
async fn sync_bound(claim: &PersistentVolumeClaim, name: &str, ctx: &Context) -> Result<(), Error> {
    let Some(pv) = ctx.volumes.get(&ObjectRef::new(name)) else {
        // The cache may lag a volume created a moment ago.
        let live = Api::<PersistentVolume>::all(ctx.client.clone())
            .get_opt(name)
            .await?;
        return match live {
            Some(pv) => bind(claim, &pv, ctx).await,
            None => lost(
                claim,
                ctx,
                "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
            )
            .await,
        };
    };
    let claim_ref = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    match claim_ref {
        None => bind(claim, &pv, ctx).await,
        Some(_) if crate::toolkit::volumes::is_pre_bound_to(&pv, claim) => {
            bind(claim, &pv, ctx).await
        }
        Some(_) => {
            let completed = claim.annotations().contains_key(ANN_BIND_COMPLETED);
            if completed {
                lost(
                    claim,
                    ctx,
                    "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
                )
                .await
            } else {
                ctx.recorder.record(
                    &reference(claim),
                    EventType::Warning,
                    "FailedBinding",
                    format!("volume \"{name}\" already bound to a different claim."),
                );
                Ok(())
            }
        }
    }
}

async fn lost(claim: &PersistentVolumeClaim, ctx: &Context, msg: &str) -> Result<(), Error> {
    if phase(claim) == "Lost" {
        return Ok(());
    }
    ctx.recorder
        .record(&reference(claim), EventType::Warning, "ClaimLost", msg);
    set_claim_phase(claim, "Lost", ctx).await
}

async fn set_claim_phase(
    claim: &PersistentVolumeClaim,
    phase: &str,
    ctx: &Context,
) -> Result<(), Error> {
    let api: Api<PersistentVolumeClaim> =
        Api::namespaced(ctx.client.clone(), &claim.namespace().unwrap_or_default());
    raced(
        api.patch_status(
            &claim.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase}})),
        )
        .await
        .map(|_| ()),
    )
}

/// `volume.kubernetes.io/storage-provisioner` (and its beta twin), as the
/// binder sets them on claims a provisioner is to serve.
async fn annotate_provisioner(
    claim: &PersistentVolumeClaim,
    provisioner: &str,
    ctx: &Context,
) -> Result<(), Error> {
    if claim
        .annotations()
        .get(ANN_STORAGE_PROVISIONER)
        .map(String::as_str)
        == Some(provisioner)
    {
        return Ok(());
    }
    let api: Api<PersistentVolumeClaim> =
        Api::namespaced(ctx.client.clone(), &claim.namespace().unwrap_or_default());
    raced(
        api.patch(
            &claim.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {
                "resourceVersion": claim.metadata.resource_version,
                "annotations": {
                    ANN_STORAGE_PROVISIONER: provisioner,
                    ANN_BETA_STORAGE_PROVISIONER: provisioner,
                }
            }})),
        )
        .await
        .map(|_| ()),
    )
}

/// Binds `claim` and `pv` both ways; each step only if not done yet.
pub async fn bind(
    claim: &PersistentVolumeClaim,
    pv: &PersistentVolume,
    ctx: &Context,
) -> Result<(), Error> {
    let ns = claim.namespace().unwrap_or_default();
    let pv_name = pv.name_any();
    let volumes: Api<PersistentVolume> = Api::all(ctx.client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);

    // 1. The volume's claimRef (with the claim's uid).
    let mut pv = pv.clone();
    let ref_done = pv
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .is_some_and(|r| r.uid.is_some() && crate::toolkit::volumes::is_pre_bound_to(&pv, claim));
    if !ref_done {
        let spec = pv.spec.get_or_insert_with(Default::default);
        if spec.claim_ref.is_none() {
            pv.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
        }
        spec.claim_ref = Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("PersistentVolumeClaim".into()),
            namespace: Some(ns.clone()),
            name: claim.metadata.name.clone(),
            uid: claim.metadata.uid.clone(),
            resource_version: claim.metadata.resource_version.clone(),
            ..Default::default()
        });
        match volumes.replace(&pv_name, &PostParams::default(), &pv).await {
            Ok(updated) => pv = updated,
            Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
    // 2. The volume's phase.
    if pv.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
        raced(
            volumes
                .patch_status(
                    &pv_name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"phase": "Bound"}})),
                )
                .await
                .map(|_| ()),
        )?;
    }
    // 3. The claim's volumeName and annotations.
    let mut claim = claim.clone();
    let anns = claim.annotations();
    if volume_name(&claim) != pv_name || !anns.contains_key(ANN_BIND_COMPLETED) {
        let by_us = volume_name(&claim).is_empty();
        claim.spec.get_or_insert_with(Default::default).volume_name = Some(pv_name.clone());
        let anns = claim
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        anns.insert(ANN_BIND_COMPLETED.into(), "yes".into());
        if by_us {
            anns.insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
        }
        match claims
            .replace(&claim.name_any(), &PostParams::default(), &claim)
            .await
        {
            Ok(updated) => claim = updated,
            Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
    // 4. The claim's phase, capacity and access modes: the volume's.
    let vs = pv.spec.clone().unwrap_or_default();
    let status = claim.status.clone().unwrap_or_default();
    let done = status.phase.as_deref() == Some("Bound")
        && status.capacity == vs.capacity
        && status.access_modes == vs.access_modes;
    if !done {
        raced(
            claims
                .patch_status(
                    &claim.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {
                        "phase": "Bound",
                        "capacity": vs.capacity,
                        "accessModes": vs.access_modes,
                    }})),
                )
                .await
                .map(|_| ()),
        )?;
        tracing::info!(claim = %format!("{ns}/{}", claim.name_any()), volume = %pv_name, "bound");
    }
    Ok(())
}
