//! The `kubernetes.io/pvc-protection` and `kubernetes.io/pv-protection`
//! finalizers' controllers: a claim being deleted keeps its finalizer while
//! a pod that has not finished uses it; a volume being deleted keeps its
//! own while it is Bound. The API server adds both on create.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::{claims_of, Context, Error, PVC_PROTECTION, PV_PROTECTION};

fn is_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

/// Whether `pod` uses `claim` and may still run.
fn uses(pod: &Pod, claim: &PersistentVolumeClaim) -> bool {
    !is_finished(pod)
        && pod.namespace() == claim.namespace()
        && claims_of(pod)
            .iter()
            .any(|c| Some(c.name.as_str()) == claim.metadata.name.as_deref())
}

/// Whether a pod uses `claim`: the cache first, then (when the cache says
/// no, as Kubernetes' controller does) a live list, since the cache may
/// not have a pod created a moment ago.
async fn in_use(claim: &PersistentVolumeClaim, ctx: &Context) -> Result<bool, Error> {
    if ctx.pods.state().iter().any(|p| uses(p, claim)) {
        return Ok(true);
    }
    let ns = claim.namespace().unwrap_or_default();
    let live = Api::<Pod>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default())
        .await?;
    Ok(live.items.iter().any(|p| uses(p, claim)))
}

/// Removes `finalizer` from `obj` if it is still the object and list seen.
pub async fn remove_finalizer<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let seen = obj.meta().finalizers.clone().unwrap_or_default();
    if !seen.iter().any(|f| f == finalizer) {
        return Ok(());
    }
    let kept: Vec<&String> = seen.iter().filter(|f| *f != finalizer).collect();
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/uid", "value": obj.meta().uid},
        {"op": "test", "path": "/metadata/finalizers", "value": seen},
        {"op": "replace", "path": "/metadata/finalizers", "value": kept},
    ]))
    .expect("a valid JSON patch");
    match api
        .patch(
            obj.meta().name.as_deref().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        // Gone, or changed since: the watch brings the next look.
        Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409 | 422) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// A claim being deleted: its finalizer goes once no pod uses it.
pub async fn release_claim(claim: &PersistentVolumeClaim, ctx: &Context) -> Result<(), Error> {
    let has = claim.finalizers().iter().any(|f| f == PVC_PROTECTION);
    if !has || in_use(claim, ctx).await? {
        return Ok(());
    }
    let ns = claim.namespace().unwrap_or_default();
    tracing::info!(claim = %format!("{ns}/{}", claim.name_any()), "no pod uses the claim; removing {PVC_PROTECTION}");
    let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);
    remove_finalizer(&api, claim, PVC_PROTECTION).await
}

/// A volume being deleted that is not bound (any more) loses its finalizer.
pub async fn release_volume(pv: &PersistentVolume, ctx: &Context) -> Result<(), Error> {
    let api: Api<PersistentVolume> = Api::all(ctx.client.clone());
    remove_finalizer(&api, pv, PV_PROTECTION).await
}
