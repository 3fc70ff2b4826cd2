//! Validating admission: the named steps a create or update passes after
//! defaulting and validation and before it is stored, as kube-apiserver's
//! validating admission plugins. A step may refuse the write or return
//! warnings for the client (`Warning:` headers).
//!
//! - [`pod_security`]: Pod Security Admission (namespace labels
//!   `pod-security.kubernetes.io/*`, `--pod-security-default`).

pub mod pod_security;

use serde_json::Value;

use super::error::ApiResult;
use super::{ApiRequest, ApiState};

/// Runs every validating admission step on `obj`, the object about to be
/// stored (`old`: the stored one, on update); the warnings they return.
pub(super) async fn validate(
    state: &ApiState,
    req: &ApiRequest,
    obj: &Value,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    pod_security::admit(state, req, obj, old).await
}
