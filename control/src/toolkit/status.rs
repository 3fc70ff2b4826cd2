//! Writing a controller's status onto the object it computed it from.

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::api_errors::is_status;

/// Merge-patches `status` (null fields removed) onto `obj`'s status
/// subresource. With `over_version`, only over the version of `obj` the
/// status was computed from: a sync on a stale cache then gets a 409
/// instead of erasing what a newer sync wrote. An object that is gone is
/// not an error.
pub async fn patch_status<K>(
    client: &Client,
    obj: &K,
    status: Value,
    over_version: bool,
) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), &obj.namespace().unwrap_or_default());
    let mut patch = json!({ "status": status });
    if over_version {
        patch["metadata"] = json!({ "resourceVersion": obj.meta().resource_version });
    }
    match api
        .patch_status(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        Err(e) if is_status(&e, 404) => Ok(()),
        other => other.map(drop),
    }
}
