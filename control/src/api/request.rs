//! What every verb does with a request: which object it names, loading
//! and storing it, and answering with an object or a Table of it.

use axum::response::Response;
use bosun::resources::ResourceInfo;
use http::{HeaderValue, StatusCode};
use serde_json::Value;

use super::error::{ApiError, ApiResult};
use super::items;
use super::negotiate::Convert;
use super::object::{self, from_storage_version, meta_str};
use super::table::{self, IncludeObject};
use super::{encoded_response, json_response, ApiRequest, ApiState};
use crate::store::{KeyValue, StoreError};

/// How often a read-modify-write without a client precondition is retried
/// when another writer got in between.
pub(super) const MAX_ATTEMPTS: usize = 8;

pub(super) fn namespace_of(req: &ApiRequest) -> Option<&str> {
    req.target.namespace.as_deref()
}

pub(super) fn name_of(req: &ApiRequest) -> &str {
    req.target.name.as_deref().unwrap_or("")
}

/// Where the request's object is kept in the store (not the
/// `namespace/name` work-queue key of [`crate::toolkit::key_of`]).
fn storage_key(req: &ApiRequest) -> String {
    req.target.res.storage_key(namespace_of(req), name_of(req))
}

pub(super) async fn load(state: &ApiState, req: &ApiRequest) -> ApiResult<(KeyValue, Value)> {
    let res = req.target.res;
    let name = name_of(req);
    let kv = state
        .store
        .get(&storage_key(req))
        .await
        .map_err(|e| ApiError::from_store(e, res, name))?
        .ok_or_else(|| ApiError::not_found(res, name))?;
    let obj = object::from_store(&kv)?;
    Ok((kv, obj))
}

/// An object in the version the request speaks, or a Table of it, or its
/// metadata only, as the request's Accept header asks.
pub(super) fn respond(
    req: &ApiRequest,
    code: StatusCode,
    stored: Value,
    warnings: &[String],
) -> Response {
    let res = req.target.res;
    let obj = from_storage_version(res, stored);
    let mut response = match req.output.convert {
        Convert::Table => {
            let rv = meta_str(&obj, "resourceVersion").unwrap_or("").to_string();
            json_response(
                code,
                &table::table(
                    res,
                    req.target.custom.as_deref(),
                    &[obj],
                    &rv,
                    IncludeObject::parse(req.param("includeObject")),
                ),
            )
        }
        Convert::Metadata(version) => {
            encoded_response(req.output.encoding, code, &items::partial(&obj, version))
        }
        Convert::Object | Convert::MetadataList(_) => {
            encoded_response(req.output.encoding, code, &obj)
        }
    };
    for w in warnings {
        // A quoted-string, `"` and `\` escaped, as the apiserver's
        // `NewWarningHeader`; kubectl unquotes it.
        let text = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(v) = HeaderValue::from_str(&text) {
            response.headers_mut().append("Warning", v);
        }
    }
    response
}

/// A whole list as the request asks for it: itself, or its metadata-only
/// form (kube-apiserver's `asPartialObjectMetadataList`: each item's
/// `PartialObjectMetadata`, the list's metadata kept).
pub(super) fn list_as_requested(req: &ApiRequest, mut list: Value) -> Value {
    let Convert::MetadataList(version) = req.output.convert else {
        return list;
    };
    let items: Vec<Value> = list["items"]
        .as_array()
        .map(|items| items.iter().map(|o| items::partial(o, version)).collect())
        .unwrap_or_default();
    serde_json::json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": list["metadata"].take(),
        "items": items,
    })
}

pub(super) fn dry_run(req: &ApiRequest) -> bool {
    req.param("dryRun") == Some("All")
}

/// Writes `next` over the object at `kv` if it is still at that revision;
/// returns it with its new resourceVersion.
pub(super) async fn store_update(
    state: &ApiState,
    kv: &KeyValue,
    mut next: Value,
) -> Result<Value, StoreError> {
    let rev = state
        .store
        .update(&kv.key, kv.mod_revision, object::to_store(&next))
        .await?;
    object::set_resource_version(&mut next, rev);
    Ok(next)
}

/// Deletes the object at `kv` if it is still at that revision; returns
/// its last state with the deletion's resourceVersion.
pub(super) async fn store_delete(
    state: &ApiState,
    kv: &KeyValue,
    mut last: Value,
) -> Result<Value, StoreError> {
    let rev = state.store.delete(&kv.key, kv.mod_revision).await?;
    if kv.key.starts_with("/registry/services/") {
        // Its cluster IP and node ports are free again (the allocation
        // repair loop releases them if this does not).
        super::allocate::claims::release(state.store.as_ref(), &last).await;
    }
    object::set_resource_version(&mut last, rev);
    Ok(last)
}

/// Every stored object of a kind (all namespaces), for rules that must see
/// the others: allocations, defaults chosen among objects.
pub(super) async fn list_all(
    state: &ApiState,
    res: &'static ResourceInfo,
) -> ApiResult<Vec<Value>> {
    state
        .store
        .list(&res.storage_prefix())
        .await
        .map_err(|e| ApiError::from_store(e, res, ""))?
        .0
        .iter()
        .map(object::from_store)
        .collect()
}

/// The stored core (`v1`) object of `kind` named `name` in `ns`, if any,
/// for rules that look at another object (admission, token checks).
pub(super) async fn stored_core(
    state: &ApiState,
    kind: &str,
    ns: &str,
    name: &str,
) -> ApiResult<Option<Value>> {
    let res = bosun::resources::by_kind("v1", kind).expect("a served core kind");
    match state.store.get(&res.storage_key(Some(ns), name)).await {
        Ok(Some(kv)) => Ok(Some(object::from_store(&kv)?)),
        Ok(None) => Ok(None),
        Err(e) => Err(ApiError::from_store(e, res, name)),
    }
}
