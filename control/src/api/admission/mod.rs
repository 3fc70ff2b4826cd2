//! Admission: the named steps a create or update passes, as
//! kube-apiserver's admission plugins. Mutating steps run after
//! defaulting and before validation and may change the object; validating
//! steps run after validation and before it is stored, and may refuse the
//! write or return warnings for the client (`Warning:` headers).
//!
//! - [`priority`]: Priority (a pod's `priorityClassName` resolved into
//!   its priority; one global default PriorityClass).
//! - [`pod_security`]: Pod Security Admission (namespace labels
//!   `pod-security.kubernetes.io/*`, `--pod-security-default`).

pub mod pod_security;
pub mod priority;

use serde_json::Value;

use super::error::ApiResult;
use super::{ApiRequest, ApiState};

/// Runs every mutating admission step on `obj`, the object about to be
/// validated (`old`: the stored one, on update).
pub(super) async fn mutate(
    state: &ApiState,
    req: &ApiRequest,
    obj: &mut Value,
    old: Option<&Value>,
) -> ApiResult<()> {
    priority::admit(state, req, obj, old).await
}

/// Runs every validating admission step on `obj`, the object about to be
/// stored (`old`: the stored one, on update); the warnings they return.
pub(super) async fn validate(
    state: &ApiState,
    req: &ApiRequest,
    obj: &Value,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    priority::validate(state, req, obj, old).await?;
    pod_security::admit(state, req, obj, old).await
}
