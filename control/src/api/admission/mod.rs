//! Validating admission: the named steps a create or update passes after
//! defaulting and validation and before it is stored, as kube-apiserver's
//! validating admission plugins. A step may refuse the write or return
//! warnings for the client (`Warning:` headers).
//!
//! - [`pod_security`]: Pod Security Admission (namespace labels
//!   `pod-security.kubernetes.io/*`, `--pod-security-default`).
//! - [`limit_ranger`]: LimitRanger, mutating (defaults from LimitRanges)
//!   and checking min/max ([`mutate`], before validation).
//! - [`resource_quota`]: ResourceQuota, last: charges a create to the
//!   namespace's quotas or refuses it.

pub mod limit_ranger;
pub mod pod_security;
pub mod resource_quota;

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
    let warnings = pod_security::admit(state, req, obj, old).await?;
    resource_quota::admit(state, req, obj, old).await?;
    Ok(warnings)
}

/// Runs every mutating admission step on `obj`, a new object after
/// defaulting and before validation, as kube-apiserver's mutating
/// admission plugins.
pub(super) async fn mutate(state: &ApiState, req: &ApiRequest, obj: &mut Value) -> ApiResult<()> {
    limit_ranger::admit(state, req, obj).await?;
    Ok(())
}
