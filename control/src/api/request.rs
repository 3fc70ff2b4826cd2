//! What every verb does with a request: which object it names, loading
//! it, decoding what the client sent (JSON or YAML, checked against the
//! typed schema), and answering with an object or a Table of it.

use axum::response::Response;
use bosun::validation;
use http::{HeaderValue, StatusCode};
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use super::object::{self, from_storage_version, meta_str, to_storage_version};
use super::strategy;
use super::table::{self, IncludeObject};
use super::{json_response, ApiRequest, ApiState};
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

pub(super) fn key_of(req: &ApiRequest) -> String {
    req.target.res.storage_key(namespace_of(req), name_of(req))
}

pub(super) async fn load(state: &ApiState, req: &ApiRequest) -> ApiResult<(KeyValue, Value)> {
    let res = req.target.res;
    let name = name_of(req);
    let kv = state
        .store
        .get(&key_of(req))
        .await
        .map_err(|e| ApiError::from_store(e, res, name))?
        .ok_or_else(|| ApiError::not_found(res, name))?;
    let obj = object::from_store(&kv)?;
    Ok((kv, obj))
}

/// An object in the version the request speaks, or a Table of it.
pub(super) fn respond(
    req: &ApiRequest,
    code: StatusCode,
    stored: Value,
    warnings: &[String],
) -> Response {
    let res = req.target.res;
    let obj = from_storage_version(res, stored);
    let mut response = if table::wants_table(&req.headers) {
        let rv = meta_str(&obj, "resourceVersion").unwrap_or("").to_string();
        json_response(
            code,
            &table::table(
                res,
                &[obj],
                &rv,
                IncludeObject::parse(req.param("includeObject")),
            ),
        )
    } else {
        json_response(code, &obj)
    };
    for w in warnings {
        let text = format!("299 - \"{}\"", w.replace('"', "'"));
        if let Ok(v) = HeaderValue::from_str(&text) {
            response.headers_mut().append("Warning", v);
        }
    }
    response
}

pub(super) fn content_type(req: &ApiRequest) -> &str {
    req.headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim())
        .unwrap_or("application/json")
}

pub(super) fn decode_body(req: &ApiRequest) -> ApiResult<Value> {
    let ct = content_type(req);
    let value: Value = match ct {
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            serde_yaml::from_slice(&req.body).map_err(|e| {
                ApiError::bad_request(format!("error decoding YAML request body: {e}"))
            })?
        }
        "application/json" | "" | "*/*" => serde_json::from_slice(&req.body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        other => return Err(ApiError::unsupported_media_type(other)),
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok(value)
}

/// Checks apiVersion and kind, decodes against the typed schema (dropping
/// or refusing unknown fields per `fieldValidation`), and converts to the
/// storage version. Returns the object and any warnings for the client.
pub(super) fn prepare_input(req: &ApiRequest, mut input: Value) -> ApiResult<(Value, Vec<String>)> {
    let res = req.target.res;
    let expected = res.api_version();
    match input.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => input["apiVersion"] = json!(expected),
        Some(v) if v == expected => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({expected})"
            )))
        }
    }
    match input.get("kind").and_then(Value::as_str) {
        None | Some("") => input["kind"] = json!(res.kind),
        Some(k) if k == res.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                res.kind
            )))
        }
    }
    let mut normalized =
        validation::normalize(res, input.clone()).map_err(ApiError::bad_request)?;
    bosun::quantity::canonicalize_quantities(&mut normalized);
    strategy::for_kind(res.kind).normalize(&input, &mut normalized);
    let unknown: Vec<String> = object::unknown_fields(&input, &normalized)
        .into_iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    let mut warnings = Vec::new();
    if !unknown.is_empty() {
        match req.param("fieldValidation") {
            Some("Strict") => {
                return Err(ApiError::bad_request(format!(
                    "strict decoding error: {}",
                    unknown.join(", ")
                )))
            }
            Some("Ignore") => {}
            _ => warnings = unknown,
        }
    }
    Ok((to_storage_version(res, normalized), warnings))
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
    object::set_resource_version(&mut last, rev);
    Ok(last)
}
