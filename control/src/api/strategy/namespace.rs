//! Namespaces: one starts Active; deleting one deletes everything in it,
//! then the namespace (`default`, `kube-system` and `kube-public` cannot be
//! deleted).

use async_trait::async_trait;
use axum::response::Response;
use bosun::resources::RESOURCES;
use http::StatusCode;
use serde_json::{json, Value};

use super::Strategy;
use crate::api::error::{ApiError, ApiResult};
use crate::api::request::{dry_run, load, name_of, respond, store_delete, MAX_ATTEMPTS};
use crate::api::{ApiRequest, ApiState};
use crate::store::StoreError;

pub struct NamespaceStrategy;

#[async_trait]
impl Strategy for NamespaceStrategy {
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"phase": "Active"}))
    }

    async fn delete(&self, state: &ApiState, req: &ApiRequest) -> Option<ApiResult<Response>> {
        Some(delete_namespace(state, req).await)
    }
}

async fn delete_namespace(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let res = req.target.res;
    let name = name_of(req).to_string();
    if matches!(name.as_str(), "default" | "kube-system" | "kube-public") {
        return Err(ApiError::forbidden(format!(
            "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
        )));
    }
    let (_, _) = load(state, req).await?;
    if dry_run(req) {
        let (_, current) = load(state, req).await?;
        return Ok(respond(req, StatusCode::OK, current, &[]));
    }
    for r in RESOURCES
        .iter()
        .filter(|r| r.namespaced && r.is_storage_version())
    {
        let prefix = format!("{}{name}/", r.storage_prefix());
        let (kvs, _) = state
            .store
            .list(&prefix)
            .await
            .map_err(|e| ApiError::from_store(e, r, ""))?;
        for kv in kvs {
            match state.store.delete(&kv.key, kv.mod_revision).await {
                Ok(_) | Err(StoreError::NotFound(_)) | Err(StoreError::Conflict { .. }) => {}
                Err(e) => return Err(ApiError::from_store(e, r, "")),
            }
        }
    }
    for _ in 0..MAX_ATTEMPTS {
        let (kv, current) = load(state, req).await?;
        match store_delete(state, &kv, current).await {
            Ok(gone) => return Ok(respond(req, StatusCode::OK, gone, &[])),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(ApiError::from_store(e, res, &name)),
        }
    }
    Err(ApiError::modified(res, &name))
}
