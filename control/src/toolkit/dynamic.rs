//! A kube client's API for any served resource, by its entry in
//! `bosun::resources` (for the controllers that work across kinds: the
//! garbage collector, the namespace controller).

use kube::api::{Api, ApiResource, DynamicObject};
use kube::Client;

use bosun::resources::ResourceInfo;

/// kube's description of `res`.
pub fn api_resource(res: &ResourceInfo) -> ApiResource {
    ApiResource {
        group: res.group.into(),
        version: res.version.into(),
        api_version: res.api_version(),
        kind: res.kind.into(),
        plural: res.plural.into(),
    }
}

/// `res` in `namespace` (all namespaces when None or cluster-scoped).
pub fn dynamic_api(
    client: &Client,
    res: &ResourceInfo,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let ar = api_resource(res);
    match namespace {
        Some(ns) if res.namespaced => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    }
}

/// The custom resources the API serves now, one entry per resource (its
/// storage version when that is served, else its first served version),
/// from the established CRDs: what the controllers that work across kinds
/// find by discovery upstream.
pub async fn custom_resources(client: &Client) -> kube::Result<Vec<&'static ResourceInfo>> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let list = api.list(&kube::api::ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter_map(|crd| {
            let crd = serde_json::to_value(crd).ok()?;
            let versions = crate::api::custom::served_versions(&crd);
            versions
                .iter()
                .find(|v| v.res.is_storage_version())
                .or(versions.first())
                .map(|v| v.res)
        })
        .collect())
}
