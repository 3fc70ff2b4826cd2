//! One sync of a volume (the PV controller's `syncVolume`): a volume
//! without a claimRef is Available; one whose claim is bound to it is
//! Bound; one whose claim is gone is Released and then reclaimed by its
//! policy: Retain keeps it (an administrator clears its claimRef to reuse
//! it), Delete deletes it (a provisioned volume's directory is removed by
//! its node's agent, see [`super::CLEANUP_FINALIZER`]).

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use serde_json::json;

use bosun::events::EventType;

use super::claims::raced;
use super::{protection, reference, Context, Error, ANN_BOUND_BY_CONTROLLER};

fn phase(pv: &PersistentVolume) -> &str {
    pv.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// Syncs the volume; one being deleted loses its `pv-protection`
/// finalizer once it is not bound.
pub async fn sync(pv: &PersistentVolume, ctx: &Context) -> Result<(), Error> {
    let bound = sync_phase(pv, ctx).await?;
    if pv.metadata.deletion_timestamp.is_some() && !bound {
        protection::release_volume(pv, ctx).await?;
    }
    Ok(())
}

/// Brings the volume's phase (and binding) up to date; whether it is
/// bound to a claim that exists.
async fn sync_phase(pv: &PersistentVolume, ctx: &Context) -> Result<bool, Error> {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.clone()) else {
        set_phase(pv, "Available", ctx).await?;
        return Ok(false);
    };
    let ns = r.namespace.clone().unwrap_or_else(|| "default".into());
    let name = r.name.clone().unwrap_or_default();
    let uid = r.uid.clone().filter(|u| !u.is_empty());
    let same = |c: &PersistentVolumeClaim| uid.is_none() || c.metadata.uid == uid;
    let mut claim = ctx
        .claims
        .get(&ObjectRef::new(&name).within(&ns))
        .map(|c| (*c).clone())
        .filter(same);
    if claim.is_none() && uid.is_some() {
        // The cache may lag a claim created a moment ago.
        claim = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), &ns)
            .get_opt(&name)
            .await?
            .filter(same);
    }
    let Some(claim) = claim else {
        if uid.is_none() {
            // Pre-bound by an administrator to a claim still to come.
            set_phase(pv, "Available", ctx).await?;
        } else {
            release(pv, ctx).await?;
        }
        return Ok(false);
    };
    let claim_volume = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or("");
    if claim_volume == pv.name_any() {
        set_phase(pv, "Bound", ctx).await?;
        Ok(true)
    } else if claim_volume.is_empty() {
        // The claim's own sync finishes the binding.
        Ok(true)
    } else if pv.annotations().contains_key(ANN_BOUND_BY_CONTROLLER) {
        // The claim went to another volume: ours is free again.
        unbind(pv, ctx).await?;
        Ok(false)
    } else {
        Ok(false)
    }
}

async fn set_phase(pv: &PersistentVolume, phase_now: &str, ctx: &Context) -> Result<(), Error> {
    if phase(pv) == phase_now {
        return Ok(());
    }
    let api: Api<PersistentVolume> = Api::all(ctx.client.clone());
    raced(
        api.patch_status(
            &pv.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase_now}})),
        )
        .await
        .map(|_| ()),
    )
}

async fn unbind(pv: &PersistentVolume, ctx: &Context) -> Result<(), Error> {
    let mut pv = pv.clone();
    if let Some(s) = pv.spec.as_mut() {
        s.claim_ref = None;
    }
    if let Some(a) = pv.metadata.annotations.as_mut() {
        a.remove(ANN_BOUND_BY_CONTROLLER);
    }
    let api: Api<PersistentVolume> = Api::all(ctx.client.clone());
    match api
        .replace(&pv.name_any(), &PostParams::default(), &pv)
        .await
    {
        Ok(updated) => set_phase(&updated, "Available", ctx).await,
        Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The claim is gone: Released, then the reclaim policy.
async fn release(pv: &PersistentVolume, ctx: &Context) -> Result<(), Error> {
    if phase(pv) != "Released" && phase(pv) != "Failed" {
        set_phase(pv, "Released", ctx).await?;
    }
    let policy = pv
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("Retain");
    if pv.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    match policy {
        "Delete" => {
            tracing::info!(volume = %pv.name_any(), "claim gone; deleting the volume (reclaim policy Delete)");
            let api: Api<PersistentVolume> = Api::all(ctx.client.clone());
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: pv.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..Default::default()
            };
            raced(api.delete(&pv.name_any(), &params).await.map(|_| ()))
        }
        "Recycle" => {
            if phase(pv) != "Failed" {
                ctx.recorder.record(
                    &reference(pv),
                    EventType::Warning,
                    "VolumeFailedRecycle",
                    "Recycle is deprecated and not supported by bosun; use Delete or Retain",
                );
                set_phase(pv, "Failed", ctx).await?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
