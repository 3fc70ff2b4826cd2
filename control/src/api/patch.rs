//! `patch`: JSON patch, merge patch and strategic merge patch, applied to
//! the object in the version the client speaks and written through the
//! update path; a resourceVersion or uid the patch sets is a precondition.
//! An apply patch (server-side apply) merges the applied configuration by
//! field ownership instead (see `bosun::fieldmanager`), and creates the
//! object if it is missing.

use axum::response::Response;
use bosun::fieldmanager::managed::{self as fields, APPLY};
use bosun::patch;
use bosun::time::now_rfc3339;
use serde_json::{json, Value};

use super::create::create_object;
use super::decode::{content_type, prepare_input};
use super::error::{ApiError, ApiResult};
use super::managed::{self, APPLY_MEDIA_TYPES};
use super::object::{from_storage_version, meta_str, metadata_mut, requested_revision};
use super::request::load;
use super::request::name_of;
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
                APPLY_MEDIA_TYPES[0],
                APPLY_MEDIA_TYPES[1],
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
    managed::check_force(req)?;
    if managed::is_apply(req) {
        return apply(state, req).await;
    }
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

/// The applied configuration: YAML (JSON is YAML too), an object naming
/// its apiVersion and kind, and the object of the URL.
fn parse_apply(req: &ApiRequest) -> ApiResult<Value> {
    let mut config = super::decode::decode_yaml(req, "error decoding YAML")?;
    // Field ownership compares values as Kubernetes' typed decode leaves
    // them: `[]byte` values canonical, however the manifest wrapped them.
    bosun::validation::bytes::canonicalize(req.target.res, &mut config)
        .map_err(ApiError::bad_request)?;
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "the apply patch must be an object with apiVersion, kind and metadata",
        ));
    }
    for field in ["apiVersion", "kind"] {
        if config
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(ApiError::bad_request(format!(
                "{field} must be set in an apply patch"
            )));
        }
    }
    let url_name = name_of(req);
    match meta_str(&config, "name") {
        Some(n) if n != url_name => Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({url_name})"
        ))),
        _ => Ok(config),
    }
}

/// Server-side apply: `PATCH` with `application/apply-patch+yaml`.
async fn apply(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let who = managed::actor(req, managed::manager_of(req)?, APPLY);
    let force = req.flag("force");
    let scope = managed::scope_of(req);
    let config = parse_apply(req)?;
    let res = req.target.res;
    match load(state, req).await {
        Err(e) if e.code == 404 && req.target.subresource.is_none() => {
            let applied =
                fields::apply(&json!({}), &[], &config, &who, scope, force, &now_rfc3339())
                    .map_err(|c| managed::conflict_error(&c))?;
            let mut obj = applied.object;
            metadata_mut(&mut obj).insert("name".into(), json!(name_of(req)));
            let (mut obj, warnings) = prepare_input(req, obj)?;
            managed::set_entries(&mut obj, &applied.entries);
            return create_object(state, req, obj, warnings).await;
        }
        Err(e) => return Err(e),
        Ok(_) => {}
    }
    let precondition = requested_revision(&config)?;
    read_modify_write(state, req, |current| {
        let view = from_storage_version(res, current.clone());
        let entries = managed::entries_of(current);
        let applied = fields::apply(&view, &entries, &config, &who, scope, force, &now_rfc3339())
            .map_err(|c| managed::conflict_error(&c))?;
        let (mut next, warnings) = prepare_input(req, applied.object)?;
        managed::set_entries(&mut next, &applied.entries);
        Ok((next, precondition, warnings))
    })
    .await
}
