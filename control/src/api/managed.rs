//! Field managers on the write path: who is writing (`fieldManager`, or the
//! User-Agent's product name as the apiserver defaults it), recording each
//! non-apply write in `metadata.managedFields` as an `Update`, and the
//! errors server-side apply answers with.

use bosun::fieldmanager::managed::{self, UPDATE};
use bosun::fieldmanager::{Actor, Conflict, Entry, Scope, MAX_MANAGER_LEN};
use bosun::time::now_rfc3339;
use serde_json::{json, Value};

use super::decode::content_type;
use super::error::{ApiError, ApiResult};
use super::object::metadata_mut;
use super::ApiRequest;

/// The apply patch media types.
pub(super) const APPLY_MEDIA_TYPES: [&str; 2] = [
    "application/apply-patch+yaml",
    "application/apply-patch+json",
];

pub(super) fn is_apply(req: &ApiRequest) -> bool {
    APPLY_MEDIA_TYPES.contains(&content_type(req))
}

fn options_invalid(field: &str, why: &str, kind: &str) -> ApiError {
    ApiError {
        code: 422,
        reason: "Invalid",
        message: format!("{kind}.meta.k8s.io \"\" is invalid: {field}: {why}"),
        details: Some(json!({"group": "meta.k8s.io", "kind": kind, "causes": [
            {"reason": "FieldValueInvalid", "message": why, "field": field}
        ]})),
    }
}

fn options_kind(req: &ApiRequest) -> &'static str {
    match req.method {
        http::Method::POST => "CreateOptions",
        http::Method::PUT => "UpdateOptions",
        _ => "PatchOptions",
    }
}

/// The field manager of a write: `fieldManager`, else the User-Agent up to
/// its first `/` (`kubectl/v1.32 ...` is "kubectl"). An apply must name one.
pub(super) fn manager_of(req: &ApiRequest) -> ApiResult<String> {
    let kind = options_kind(req);
    if let Some(m) = req.param("fieldManager").filter(|m| !m.is_empty()) {
        if m.len() > MAX_MANAGER_LEN {
            return Err(options_invalid(
                "fieldManager",
                &format!("Too long: may not be more than {MAX_MANAGER_LEN} bytes"),
                kind,
            ));
        }
        if m.chars().any(|c| c.is_control()) {
            return Err(options_invalid(
                "fieldManager",
                &format!("Invalid value: {m:?}: must only contain printable characters"),
                kind,
            ));
        }
        return Ok(m.to_string());
    }
    if is_apply(req) {
        return Err(options_invalid(
            "fieldManager",
            "Required value: is required for apply patch",
            kind,
        ));
    }
    let agent = req
        .headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    Ok(bosun::fieldmanager::manager_of_user_agent(agent).unwrap_or_else(|| "unknown".into()))
}

/// `force` belongs to apply only.
pub(super) fn check_force(req: &ApiRequest) -> ApiResult<()> {
    if req.param("force").is_some() && !is_apply(req) {
        return Err(options_invalid(
            "force",
            "Forbidden: may not be specified for non-apply patch",
            options_kind(req),
        ));
    }
    Ok(())
}

pub(super) fn scope_of(req: &ApiRequest) -> Scope {
    match req.target.subresource.as_deref() {
        Some("status") => Scope::Status,
        _ => Scope::Main {
            has_status: req.target.res.has_subresource("status"),
        },
    }
}

pub(super) fn actor(req: &ApiRequest, manager: String, operation: &'static str) -> Actor {
    Actor {
        manager,
        operation,
        api_version: req.target.res.api_version(),
        subresource: req.target.subresource.clone().unwrap_or_default(),
    }
}

pub(super) fn entries_of(obj: &Value) -> Vec<Entry> {
    managed::decode(obj.pointer("/metadata/managedFields")).unwrap_or_default()
}

pub(super) fn set_entries(obj: &mut Value, entries: &[Entry]) {
    let md = metadata_mut(obj);
    if entries.is_empty() {
        md.remove("managedFields");
    } else {
        md.insert("managedFields".into(), managed::encode(entries));
    }
}

/// The ownership a non-apply write starts from: what the client sent, if it
/// sent a valid non-empty list through the object itself (`[{}]` resets
/// it), else the stored one.
fn starting_entries(req: &ApiRequest, live: &Value, new: &Value) -> Vec<Entry> {
    if req.target.subresource.is_none() {
        if let Some(sent) = new.pointer("/metadata/managedFields") {
            if sent == &json!([{}]) {
                return Vec::new();
            }
            if let Ok(entries) = managed::decode(Some(sent)) {
                if !entries.is_empty() {
                    return entries;
                }
            }
        }
    }
    entries_of(live)
}

/// Records a write that is not an apply from `live` (an empty object for a
/// create) to `next`, in `next`'s managedFields.
pub(super) fn record_update(req: &ApiRequest, live: &Value, next: &mut Value) -> ApiResult<()> {
    let mut entries = starting_entries(req, live, next);
    let who = actor(req, manager_of(req)?, UPDATE);
    managed::record_update(
        &mut entries,
        &who,
        live,
        next,
        scope_of(req),
        &now_rfc3339(),
    );
    set_entries(next, &entries);
    Ok(())
}

/// The 409 an apply gets when it would change other managers' fields.
pub(super) fn conflict_error(conflicts: &[Conflict]) -> ApiError {
    let causes: Vec<Value> = conflicts
        .iter()
        .flat_map(|c| {
            c.paths.iter().map(move |p| {
                json!({"reason": "FieldManagerConflict", "message": c.cause(), "field": p})
            })
        })
        .collect();
    ApiError {
        code: 409,
        reason: "Conflict",
        message: managed::conflicts_message(conflicts),
        details: Some(json!({"causes": causes})),
    }
}
