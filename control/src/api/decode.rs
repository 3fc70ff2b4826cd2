//! Decoding what clients send: JSON, YAML or Kubernetes protobuf (read into
//! the same JSON form, see [`super::protobuf`]) by Content-Type, checked
//! against the typed schema (unknown fields warned about or refused per
//! `fieldValidation`), normalized by the kind's strategy, converted to the
//! storage version.

use bosun::validation;
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use super::object::{self, to_storage_version};
use super::{protobuf, strategy, ApiRequest};

/// The media types a request body may be in.
pub(super) const BODY_MEDIA_TYPES: &[&str] =
    &["application/json", "application/yaml", protobuf::MEDIA_TYPE];

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
            decode_yaml(req, "error decoding YAML request body")?
        }
        "application/json" | "" | "*/*" => serde_json::from_slice(&req.body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        protobuf::MEDIA_TYPE => protobuf::decode_object(&req.body).map_err(|e| {
            ApiError::bad_request(format!("error decoding protobuf request body: {e}"))
        })?,
        other => return Err(ApiError::unsupported_media_type(other, BODY_MEDIA_TYPES)),
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok(value)
}

/// A YAML body as JSON, refused with 413 once its aliases expand past the
/// body limit (a JSON body could not be larger), before the rest of it is
/// allocated.
pub(super) fn decode_yaml(req: &ApiRequest, what: &str) -> ApiResult<Value> {
    bosun::yaml::from_slice_bounded(&req.body, req.body_limit).map_err(|e| match e {
        bosun::yaml::YamlError::TooLarge { .. } => {
            ApiError::decodes_too_large(format!("{what}: {e}"))
        }
        bosun::yaml::YamlError::Syntax(e) => ApiError::bad_request(format!("{what}: {e}")),
    })
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
    // apiVersion and kind are checked above, so only the typed decode is left.
    let mut normalized = validation::normalize_checked(res, &input)
        .map_err(ApiError::bad_request)?
        .unwrap_or_else(|| input.clone());
    // Custom resources are kept as sent (their schema, not a Go type,
    // says what they hold).
    if res.is_builtin() {
        bosun::quantity::canonicalize_quantities(&mut normalized);
    }
    strategy::for_res(res).normalize(&input, &mut normalized);
    let warnings = unknown_fields(req, &object::unknown_fields(&input, &normalized))?;
    Ok((to_storage_version(res, normalized), warnings))
}

/// Fields the write named that its kind does not have (`spec.foo`), per
/// the request's `fieldValidation`: refused with Strict, nothing with
/// Ignore, else warnings (returned) as upstream's default Warn.
pub(super) fn unknown_fields(req: &ApiRequest, fields: &[String]) -> ApiResult<Vec<String>> {
    let unknown: Vec<String> = fields
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    if unknown.is_empty() {
        return Ok(unknown);
    }
    match req.param("fieldValidation") {
        Some("Strict") => Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            unknown.join(", ")
        ))),
        Some("Ignore") => Ok(Vec::new()),
        _ => Ok(unknown),
    }
}
