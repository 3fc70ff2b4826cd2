//! The `admission.k8s.io/v1` AdmissionReview a webhook is sent, and what
//! its answer means, as upstream's `request` package builds and checks
//! them: a review of another kind, another uid, a patch from a validating
//! webhook or a patch of a type other than JSONPatch are failed calls;
//! a refusal is upstream's `admission webhook "NAME" denied the request`.

use bosun::resources::ResourceInfo;
use serde_json::{json, Value};

use crate::api::error::ApiError;
use crate::api::ApiRequest;

/// What one call asks about.
pub struct Review<'a> {
    pub uid: &'a str,
    pub req: &'a ApiRequest,
    pub operation: &'a str,
    /// The resource (and version) the webhook's rules matched.
    pub matched: &'static ResourceInfo,
    pub subresource: &'a str,
    pub name: &'a str,
    pub namespace: &'a str,
    pub object: Option<&'a Value>,
    pub old_object: Option<&'a Value>,
    pub dry_run: bool,
}

fn gvk(res: &ResourceInfo) -> Value {
    json!({"group": res.group, "version": res.version, "kind": res.kind})
}

fn gvr(res: &ResourceInfo) -> Value {
    json!({"group": res.group, "version": res.version, "resource": res.plural})
}

/// The options of the request, as the verb's `*Options` object.
fn options(r: &Review<'_>) -> Value {
    let kind = match (r.operation, r.req.method.as_str()) {
        ("DELETE", _) => "DeleteOptions",
        (_, "PATCH") => "PatchOptions",
        ("CREATE", _) => "CreateOptions",
        _ => "UpdateOptions",
    };
    let mut o = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
    if r.dry_run {
        o["dryRun"] = json!(["All"]);
    }
    if let Some(m) = r.req.param("fieldManager") {
        o["fieldManager"] = json!(m);
    }
    if let Some(g) = r
        .req
        .param("gracePeriodSeconds")
        .and_then(|g| g.parse::<i64>().ok())
    {
        o["gracePeriodSeconds"] = json!(g);
    }
    if let Some(p) = r.req.param("propagationPolicy") {
        o["propagationPolicy"] = json!(p);
    }
    o
}

/// The AdmissionReview for `r`.
pub fn review(r: &Review<'_>) -> Value {
    let user = r.req.who.user_info();
    let mut user_info = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        user_info["uid"] = json!(user.uid);
    }
    if !user.extra.is_empty() {
        user_info["extra"] = json!(user.extra);
    }
    let requested = r.req.target.res;
    let mut request = json!({
        "uid": r.uid,
        "kind": gvk(r.matched),
        "resource": gvr(r.matched),
        "requestKind": gvk(requested),
        "requestResource": gvr(requested),
        "name": r.name,
        "operation": r.operation,
        "userInfo": user_info,
        "object": r.object.cloned().unwrap_or(Value::Null),
        "oldObject": r.old_object.cloned().unwrap_or(Value::Null),
        "dryRun": r.dry_run,
        "options": options(r),
    });
    if !r.subresource.is_empty() {
        request["subResource"] = json!(r.subresource);
        request["requestSubResource"] = json!(r.subresource);
    }
    if !r.namespace.is_empty() {
        request["namespace"] = json!(r.namespace);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// A webhook's answer, checked.
#[derive(Debug, PartialEq)]
pub struct Answer {
    pub allowed: bool,
    /// `response.status` (a refusal's code, reason and message).
    pub status: Option<Value>,
    /// The JSONPatch, decoded from base64.
    pub patch: Option<json_patch::Patch>,
    pub warnings: Vec<String>,
}

/// Checks `answer` as upstream's VerifyAdmissionResponse; an error is a
/// failed call (subject to the failure policy).
pub fn answer(uid: &str, mutating: bool, answer: &Value) -> Result<Answer, String> {
    let api_version = answer["apiVersion"].as_str().unwrap_or_default();
    let kind = answer["kind"].as_str().unwrap_or_default();
    if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
        return Err(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {api_version}, Kind={kind}"
        ));
    }
    let response = answer
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("webhook response was absent")?;
    let got = response["uid"].as_str().unwrap_or_default();
    if got != uid {
        return Err(format!("expected response.uid={uid:?}, got {got:?}"));
    }
    let patch_b64 = response["patch"].as_str().filter(|p| !p.is_empty());
    let patch_type = response["patchType"].as_str().filter(|p| !p.is_empty());
    if !mutating && (patch_b64.is_some() || patch_type.is_some()) {
        return Err("validating webhook may not return response.patch".into());
    }
    let patch = match (patch_b64, patch_type) {
        (None, None) => None,
        (Some(_), None) => {
            return Err("webhook returned response.patch but not response.patchType".into())
        }
        (None, Some(_)) => {
            return Err("webhook returned response.patchType but not response.patch".into())
        }
        (Some(_), Some(t)) if t != "JSONPatch" => {
            return Err(format!(
                "webhook returned invalid response.patchType of {t:?}"
            ))
        }
        (Some(b64), Some(_)) => {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| format!("decoding response.patch: {e}"))?;
            Some(
                serde_json::from_slice::<json_patch::Patch>(&bytes)
                    .map_err(|e| format!("decoding response.patch: {e}"))?,
            )
        }
    };
    Ok(Answer {
        allowed: response["allowed"].as_bool().unwrap_or(false),
        status: response.get("status").filter(|s| s.is_object()).cloned(),
        patch,
        warnings: response["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w.as_str().map(str::to_string))
            .collect(),
    })
}

/// The reasons of Kubernetes' StatusReason a webhook may give; any other
/// is passed on as no reason.
const REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

/// A refusal, as upstream's ToStatusErr: the webhook's code (400 when
/// under 400), reason and details; its message after `admission webhook
/// "NAME" denied the request`.
pub fn refusal(hook: &str, status: Option<&Value>) -> ApiError {
    let empty = Value::Null;
    let s = status.unwrap_or(&empty);
    let code = s["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let given_reason = s["reason"].as_str().unwrap_or_default();
    let reason = REASONS
        .iter()
        .find(|r| **r == given_reason)
        .copied()
        .unwrap_or("");
    let denied = format!("admission webhook {hook:?} denied the request");
    let message = match (s["message"].as_str(), given_reason) {
        (Some(m), _) if !m.is_empty() => format!("{denied}: {m}"),
        (_, r) if !r.is_empty() => format!("{denied}: {r}"),
        _ => format!("{denied} without explanation"),
    };
    ApiError {
        code,
        reason,
        message,
        details: s.get("details").filter(|d| d.is_object()).cloned(),
    }
}
