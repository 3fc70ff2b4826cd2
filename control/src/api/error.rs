//! API errors as Kubernetes answers them: a `v1` `Status` object with the
//! HTTP code, a machine-readable reason and details naming the object.

use axum::response::{IntoResponse, Response};
use bosun::resources::ResourceInfo;
use bosun::validation::FieldError;
use http::StatusCode;
use serde_json::{json, Value};

use crate::store::StoreError;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    fn object_details(res: &ResourceInfo, name: &str) -> Value {
        let mut d = json!({"name": name, "kind": res.plural});
        if !res.group.is_empty() {
            d["group"] = json!(res.group);
        }
        d
    }

    pub fn not_found(res: &ResourceInfo, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", res.plural_group()),
        )
        .with_details(Self::object_details(res, name))
    }

    pub fn namespace_not_found(ns: &str) -> Self {
        Self::new(404, "NotFound", format!("namespaces \"{ns}\" not found"))
            .with_details(json!({"name": ns, "kind": "namespaces"}))
    }

    pub fn already_exists(res: &ResourceInfo, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", res.plural_group()),
        )
        .with_details(Self::object_details(res, name))
    }

    pub fn conflict(res: &ResourceInfo, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                res.plural_group()
            ),
        )
        .with_details(Self::object_details(res, name))
    }

    pub fn modified(res: &ResourceInfo, name: &str) -> Self {
        Self::conflict(
            res,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 naming every bad field, as Kubernetes' `NewInvalid`.
    pub fn invalid(res: &ResourceInfo, name: &str, errors: &[FieldError]) -> Self {
        let messages: Vec<String> = errors.iter().map(FieldError::message).collect();
        let joined = if messages.len() == 1 {
            messages[0].clone()
        } else {
            format!("[{}]", messages.join(", "))
        };
        let kind_group = if res.group.is_empty() {
            res.kind.to_string()
        } else {
            format!("{}.{}", res.kind, res.group)
        };
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({"reason": e.reason(), "message": e.body(), "field": e.field}))
            .collect();
        let mut details = json!({"name": name, "kind": res.kind, "causes": causes});
        if !res.group.is_empty() {
            details["group"] = json!(res.group);
        }
        Self::new(
            422,
            "Invalid",
            format!("{kind_group} \"{name}\" is invalid: {joined}"),
        )
        .with_details(details)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// Admission's refusal of a write to `name` of `res`, as
    /// `admission.NewForbidden` words it.
    pub fn forbidden_object(res: &ResourceInfo, name: &str, why: &str) -> Self {
        Self::forbidden(format!("{} \"{name}\" is forbidden: {why}", res.plural))
    }

    pub fn not_found_path(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("the request body is larger than the limit of {limit} bytes"),
        )
    }

    /// A body that decodes to more than the limit (YAML aliases).
    pub fn decodes_too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    pub fn unsupported_media_type(content_type: &str, accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {} (got {content_type:?})",
                accepted.join(", ")
            ),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 503: what a request is for cannot be reached (a proxied pod or
    /// Service without an address).
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// 429: API Priority and Fairness refused the request; the client
    /// may try again after a second.
    pub fn too_many_requests() -> Self {
        Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        )
        .with_details(json!({"retryAfterSeconds": 1}))
    }

    /// 503: the server is stopping and takes no new long-running requests.
    pub fn shutting_down() -> Self {
        Self::new(503, "ServiceUnavailable", "the server is shutting down")
    }

    /// Maps a store failure on one object to what the client should see.
    pub fn from_store(err: StoreError, res: &ResourceInfo, name: &str) -> Self {
        match err {
            StoreError::AlreadyExists(_) => Self::already_exists(res, name),
            StoreError::NotFound(_) => Self::not_found(res, name),
            StoreError::Conflict { .. } => Self::modified(res, name),
            StoreError::Compacted { requested, oldest } => {
                Self::gone(format!("too old resource version: {requested} ({oldest})"))
            }
            StoreError::Closed => Self::shutting_down(),
            StoreError::Backend(e) => Self::internal(e),
        }
    }

    /// The `Status` object.
    pub fn status(&self) -> Value {
        let mut s = bosun::serving::failure_status(self.code, self.reason, &self.message);
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.status()).unwrap_or_default();
        let mut response = (
            code,
            [(http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
        if let Some(after) = self
            .details
            .as_ref()
            .and_then(|d| d["retryAfterSeconds"].as_i64())
        {
            if let Ok(v) = http::HeaderValue::from_str(&after.to_string()) {
                response.headers_mut().insert(http::header::RETRY_AFTER, v);
            }
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
