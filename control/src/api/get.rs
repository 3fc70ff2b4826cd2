//! `get`: one object, or a Table of it.

use axum::response::Response;
use http::StatusCode;

use super::custom::conversion;
use super::error::ApiResult;
use super::request::{load, respond};
use super::{ApiRequest, ApiState};

pub(super) async fn get(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let (_, obj) = load(state, req).await?;
    let obj = conversion::one_to_served(state, req.target.custom.as_ref(), obj).await?;
    Ok(respond(req, StatusCode::OK, obj, &[]))
}
