//! `patch`: JSON patch, merge patch and strategic merge patch, applied to
//! the object in the version the client speaks and written through the
//! update path; a resourceVersion or uid the patch sets is a precondition.

use axum::response::Response;
use bosun::patch;
use serde_json::Value;

use super::decode::{content_type, prepare_input};
use super::error::{ApiError, ApiResult};
use super::object::{from_storage_version, meta_str, requested_revision};
use super::update::read_modify_write;
use super::{ApiRequest, ApiState};

#[derive(Clone, Copy)]
pub(super) enum PatchType {
    Json,
    Merge,
    Strategic,
}

pub(super) fn patch_type(req: &ApiRequest) -> ApiResult<PatchType> {
    match content_type(req) {
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
        other => Err(ApiError::unsupported_media_type(
            other,
            &[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
            ],
        )),
    }
}

pub(super) fn apply_patch(kind: PatchType, target: &Value, patch_doc: &Value) -> ApiResult<Value> {
    let out = match kind {
        PatchType::Json => patch::apply_json_patch(target, patch_doc),
        PatchType::Merge => patch::apply_merge_patch(target, patch_doc),
        PatchType::Strategic => patch::apply_strategic_merge_patch(target, patch_doc),
    };
    out.map_err(|e| ApiError {
        code: 422,
        reason: "Invalid",
        message: format!("the patch could not be applied: {e}"),
        details: None,
    })
}

pub(super) fn parse_patch(req: &ApiRequest) -> ApiResult<(PatchType, Value)> {
    let kind = patch_type(req)?;
    let doc: Value = serde_json::from_slice(&req.body)
        .map_err(|e| ApiError::bad_request(format!("the patch is not valid JSON: {e}")))?;
    Ok((kind, doc))
}

pub(super) async fn patch(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let (kind, doc) = parse_patch(req)?;
    let res = req.target.res;
    read_modify_write(state, req, |current| {
        let view = from_storage_version(res, current.clone());
        let patched = apply_patch(kind, &view, &doc)?;
        // A resourceVersion the patch itself sets is a precondition.
        let precondition =
            if meta_str(&patched, "resourceVersion") != meta_str(&view, "resourceVersion") {
                requested_revision(&patched)?
            } else {
                None
            };
        let (next, warnings) = prepare_input(req, patched)?;
        if meta_str(&next, "name") != meta_str(current, "name") {
            return Err(ApiError::bad_request(
                "metadata.name cannot be changed by a patch",
            ));
        }
        Ok((next, precondition, warnings))
    })
    .await
}
