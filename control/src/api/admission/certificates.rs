//! CertificateSigningRequests' admission, as kube-apiserver's
//! certificates plugins and the CSR strategy's PrepareForCreate:
//!
//! - on create, `spec.username`, `uid`, `groups` and `extra` are the
//!   requesting user's (what the client sent is dropped);
//! - CertificateSubjectRestriction: a request to the
//!   `kubernetes.io/kube-apiserver-client` signer may not ask for the
//!   `system:masters` group;
//! - CertificateApproval: an `approval` write needs `approve` on the
//!   `signers` resource named by the signer (or `<domain>/*`);
//! - CertificateSigning: a `status` write that changes the certificate
//!   needs `sign` on the signer likewise;
//! - which subresource may change what (`approval` the Approved/Denied
//!   conditions, `status` the certificate).

use bosun::validation::certificates::{parse_request, request_bytes, validate_status_update};
use serde_json::{json, Value};

use crate::api::error::{ApiError, ApiResult};
use crate::api::object::meta_str;
use crate::api::{ApiRequest, ApiState};
use crate::auth::{self, Attributes};

const GROUP: &str = "certificates.k8s.io";
pub const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";

fn is_csr(req: &ApiRequest) -> bool {
    req.target.res.group == GROUP && req.target.res.kind == "CertificateSigningRequest"
}

fn forbidden(req: &ApiRequest, obj: &Value, why: &str) -> ApiError {
    ApiError::forbidden(format!(
        "{} \"{}\" is forbidden: {why}",
        req.target.res.plural_group(),
        meta_str(obj, "name").unwrap_or_default()
    ))
}

fn signer_name(obj: &Value) -> &str {
    obj.pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Mutating: a new request carries its requester's identity.
pub fn admit(req: &ApiRequest, obj: &mut Value, old: Option<&Value>) {
    if !is_csr(req) || old.is_some() {
        return;
    }
    let user = req.who.user_info();
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for k in ["username", "uid", "groups", "extra"] {
        spec.remove(k);
    }
    spec.insert("username".into(), json!(user.name));
    if !user.uid.is_empty() {
        spec.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        spec.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        spec.insert("extra".into(), json!(user.extra));
    }
}

/// Whether the requester may `verb` (approve, sign) for `signer`: on
/// the signer's own name, else on `<domain>/*` (IsAuthorizedForSignerName).
async fn authorized_for_signer(
    state: &ApiState,
    req: &ApiRequest,
    verb: &str,
    signer: &str,
) -> bool {
    let wildcard = signer
        .split_once('/')
        .map(|(domain, _)| format!("{domain}/*"));
    for name in std::iter::once(signer.to_string()).chain(wildcard) {
        let attrs = Attributes {
            user: req.who.user(),
            verb,
            group: GROUP,
            resource: "signers",
            subresource: None,
            namespace: None,
            name: Some(&name),
            created_name: None,
        };
        if auth::authorize(
            state.store.as_ref(),
            &state.rbac,
            &state.node_graph,
            &req.who,
            &attrs,
        )
        .await
        .is_ok()
        {
            return true;
        }
    }
    false
}

/// Validating: the subject restriction on create; on update, who may
/// approve or sign, and what each subresource may change.
pub async fn validate(
    state: &ApiState,
    req: &ApiRequest,
    obj: &Value,
    old: Option<&Value>,
) -> ApiResult<()> {
    if !is_csr(req) {
        return Ok(());
    }
    let signer = signer_name(obj);
    let Some(old) = old else {
        if signer == KUBE_APISERVER_CLIENT {
            let asks_masters = request_bytes(obj)
                .and_then(|pem| parse_request(&pem).ok())
                .is_some_and(|r| r.organizations.iter().any(|o| o == "system:masters"));
            if asks_masters {
                return Err(forbidden(
                    req,
                    obj,
                    "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed",
                ));
            }
        }
        return Ok(());
    };
    let sub = req.target.subresource.as_deref();
    let errors = validate_status_update(obj, old, sub);
    if !errors.is_empty() {
        let name = meta_str(obj, "name").unwrap_or_default();
        return Err(ApiError::invalid(req.target.res, name, &errors));
    }
    match sub {
        Some("approval") if !authorized_for_signer(state, req, "approve", signer).await => {
            Err(forbidden(
                req,
                obj,
                &format!("user not permitted to approve requests with signerName {signer:?}"),
            ))
        }
        Some("status")
            if obj.pointer("/status/certificate") != old.pointer("/status/certificate")
                && !authorized_for_signer(state, req, "sign", signer).await =>
        {
            Err(forbidden(
                req,
                obj,
                &format!("user not permitted to sign requests with signerName {signer:?}"),
            ))
        }
        _ => Ok(()),
    }
}
