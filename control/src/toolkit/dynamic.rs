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
