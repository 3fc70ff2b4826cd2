//! Admission: the named steps a create or update passes, as
//! kube-apiserver's admission plugins, in upstream's order. Mutating steps
//! run after defaulting and before validation and may change the object;
//! validating steps run after validation and before it is stored, and may
//! refuse the write or return warnings for the client (`Warning:` headers).
//!
//! - [`limit_ranger`]: LimitRanger, mutating on create (defaults from
//!   LimitRanges) and checking min/max.
//! - [`priority`]: Priority (a pod's `priorityClassName` resolved into
//!   its priority; one global default PriorityClass).
//! - [`runtime_class`]: RuntimeClass (a pod's `runtimeClassName` must
//!   exist; its overhead and scheduling are copied into the pod).
//! - [`pod_security`]: Pod Security Admission (namespace labels
//!   `pod-security.kubernetes.io/*`, `--pod-security-default`).
//! - [`node_restriction`]: NodeRestriction, what a node may change in
//!   the objects the Node authorizer lets it write.
//! - [`webhook`]. MutatingAdmissionWebhook (last of the mutating steps)
//!   and ValidatingAdmissionWebhook (before ResourceQuota), calling the
//!   webhooks of the webhook configurations.
//! - [`policy`]: ValidatingAdmissionPolicy, just before
//!   ValidatingAdmissionWebhook: the CEL validations of the bound
//!   ValidatingAdmissionPolicies.
//! - [`certificates`]: the CSR requester's identity on create,
//!   CertificateSubjectRestriction, CertificateApproval, CertificateSigning.
//! - [`resource_quota`]: ResourceQuota, last: charges a create to the
//!   namespace's quotas or refuses it.

pub mod certificates;
pub mod limit_ranger;
pub mod node_restriction;
pub mod pod_security;
pub mod policy;
pub mod priority;
pub mod resource_quota;
pub mod runtime_class;
pub mod webhook;

use serde_json::Value;

use super::error::{ApiError, ApiResult};
use super::{ApiRequest, ApiState};

/// The stored Namespace `name` as JSON (None: there is none), for the
/// steps that match a namespace selector or show the namespace to CEL
/// (webhooks and ValidatingAdmissionPolicies; each reads it at most once
/// per request).
pub(super) async fn stored_namespace(state: &ApiState, name: &str) -> ApiResult<Option<Value>> {
    let namespaces = bosun::resources::by_name("namespaces").expect("served");
    let kv = state
        .store
        .get(&namespaces.storage_key(None, name))
        .await
        .map_err(|e| ApiError::from_store(e, namespaces, name))?;
    kv.map(|kv| super::object::from_store(&kv)).transpose()
}

/// Runs every mutating admission step on `obj`, the object about to be
/// validated (`old`: the stored one, on update); the warnings they return.
pub(super) async fn mutate(
    state: &ApiState,
    req: &ApiRequest,
    obj: &mut Value,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    // Containers cannot be added or resized by an update: LimitRanger
    // looks at creates only, as upstream's.
    if old.is_none() {
        limit_ranger::admit(state, req, obj).await?;
    }
    priority::admit(state, req, obj, old).await?;
    certificates::admit(req, obj, old);
    runtime_class::admit(state, req, obj, old).await?;
    webhook::mutate(state, req, obj, old).await
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
    certificates::validate(state, req, obj, old).await?;
    let mut warnings = pod_security::admit(state, req, obj, old).await?;
    runtime_class::validate(state, req, obj, old).await?;
    warnings.extend(policy::validate(state, req, Some(obj), old).await?);
    warnings.extend(webhook::validate(state, req, Some(obj), old).await?);
    resource_quota::admit(state, req, obj, old).await?;
    Ok(warnings)
}

/// A delete of `old`: the mutating webhooks, the policies, then the
/// validating webhooks; their warnings.
pub(super) async fn on_delete(
    state: &ApiState,
    req: &ApiRequest,
    old: &Value,
) -> ApiResult<Vec<String>> {
    let mut warnings = webhook::mutate_on_delete(state, req, old).await?;
    warnings.extend(policy::validate(state, req, None, Some(old)).await?);
    warnings.extend(webhook::validate(state, req, None, Some(old)).await?);
    Ok(warnings)
}
