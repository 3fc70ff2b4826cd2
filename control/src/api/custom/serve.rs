//! What serving a custom resource changes in the generic verbs, as the
//! apiextensions-apiserver's `crdHandler` and its strategies do: which
//! requests are refused up front, which writes count as a new generation.

use bosun::resources::ResourceInfo;
use http::Method;
use serde_json::Value;

use super::CustomVersion;
use crate::api::error::{ApiError, ApiResult};
use crate::api::ApiRequest;

/// The patch types a custom resource takes (no strategic merge: there is
/// no Go type to read patch strategies from).
const PATCH_TYPES: &str =
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

fn content_type(req: &ApiRequest) -> &str {
    req.headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim())
        .unwrap_or("")
}

fn unsupported(accepted: &str) -> ApiError {
    ApiError {
        code: 415,
        reason: "UnsupportedMediaType",
        message: format!(
            "the body of the request was in an unknown format - accepted media types include: {accepted}"
        ),
        details: None,
    }
}

/// Refuses what custom resources do not serve: a strategic merge patch,
/// a protobuf body, a new object while the CRD is being deleted.
pub fn check(v: &CustomVersion, req: &ApiRequest) -> ApiResult<()> {
    let ct = content_type(req);
    if req.method == Method::PATCH && req.target.subresource.as_deref() != Some("scale") {
        if ct == "application/strategic-merge-patch+json" {
            return Err(unsupported(PATCH_TYPES));
        }
    } else if ct == crate::api::protobuf::MEDIA_TYPE {
        return Err(unsupported("application/json, application/yaml"));
    }
    if v.terminating && req.method == Method::POST && req.target.name.is_none() {
        return Err(ApiError::method_not_allowed(
            "create not allowed while custom resource definition is terminating",
        ));
    }
    Ok(())
}

/// Whether a write from `current` to `next` makes a new generation. A
/// built-in kind counts `spec` changes; a custom resource counts changes to
/// anything but metadata, and, with a status subresource, status.
pub fn new_generation(res: &ResourceInfo, current: &Value, next: &Value) -> bool {
    if res.is_builtin() {
        return next.get("spec") != current.get("spec");
    }
    let skip = |k: &str| k == "metadata" || (k == "status" && res.has_subresource("status"));
    let (Some(a), Some(b)) = (current.as_object(), next.as_object()) else {
        return current != next;
    };
    let pick = |m: &'_ serde_json::Map<String, Value>| {
        m.iter()
            .filter(|(k, _)| !skip(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<std::collections::BTreeMap<String, Value>>()
    };
    pick(a) != pick(b)
}
