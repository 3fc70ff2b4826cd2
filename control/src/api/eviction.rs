//! `POST .../pods/{name}/eviction`: deletes a pod on behalf of a
//! disruption (kubectl drain), as kube-apiserver's `EvictionREST`. bosun
//! has no PodDisruptionBudgets yet, so every eviction is allowed and is a
//! delete with the Eviction's `deleteOptions`; the answer is a Status
//! with code 201.

use axum::response::Response;
use http::StatusCode;
use serde_json::json;

use super::decode::decode_body;
use super::delete::{delete_options_from, delete_with};
use super::error::{ApiError, ApiResult};
use super::object::meta_str;
use super::request::name_of;
use super::{object_response, ApiRequest, ApiState};

pub(super) async fn evict(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let eviction = decode_body(req)?;
    let name = name_of(req);
    if let Some(n) = meta_str(&eviction, "name").filter(|n| !n.is_empty()) {
        if n != name {
            return Err(ApiError::bad_request(format!(
                "name in URL does not match name in Eviction object: {name} vs. {n}"
            )));
        }
    }
    let options = eviction
        .get("deleteOptions")
        .filter(|o| o.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let opts = delete_options_from(req, &options)?;
    delete_with(state, req, &opts).await?;
    Ok(object_response(
        &req.headers,
        StatusCode::CREATED,
        &bosun::serving::success_status(201),
    ))
}
