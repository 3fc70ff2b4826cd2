//! `update` (PUT) and the write path every change shares: merge what the
//! client sent onto the stored object (system metadata stays, status moves
//! only through `/status`, generation counts spec changes), validate, and
//! compare-and-swap it into the store, retrying a lost race on fresh data
//! unless the client gave a precondition.

use axum::response::Response;
use bosun::resources::ResourceInfo;
use bosun::{defaults, validation};
use http::StatusCode;
use serde_json::{json, Value};

use super::custom::conversion;
use super::decode::{decode_body, prepare_input};
use super::error::{ApiError, ApiResult};
use super::managed;
use super::object::{self, meta_str, metadata_mut, requested_revision};
use super::request::{
    dry_run, load, name_of, namespace_of, respond, store_delete, store_update, MAX_ATTEMPTS,
};
use super::{admission, storage_resource, strategy, ApiRequest, ApiState};
use crate::store::{KeyValue, StoreError};

/// Which part of the object a write may change.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    /// Everything but status (for kinds with a status subresource) and
    /// the system metadata.
    Main,
    /// Only status.
    Status,
    /// Only `spec.finalizers` (a namespace's `finalize` subresource).
    Finalize,
    /// Only `status.conditions` (a CertificateSigningRequest's `approval`).
    Approval,
    /// Only `spec.ephemeralContainers` (a pod's `ephemeralcontainers`
    /// subresource, as upstream's `dropNonEphemeralContainerUpdates`).
    EphemeralContainers,
}

pub(super) fn part_of(req: &ApiRequest) -> Part {
    match req.target.subresource.as_deref() {
        Some("status") => Part::Status,
        Some("finalize") => Part::Finalize,
        Some("approval") => Part::Approval,
        Some("ephemeralcontainers") => Part::EphemeralContainers,
        _ => Part::Main,
    }
}

/// The object a write produces from the stored one and what the client
/// sent: system metadata stays, generation counts spec changes, status
/// moves only through the status subresource.
pub(super) fn merge_write(
    res: &'static ResourceInfo,
    current: &Value,
    new: Value,
    part: Part,
) -> Value {
    if part == Part::Status {
        let mut out = current.clone();
        match new.get("status") {
            Some(s) => out["status"] = s.clone(),
            None => {
                out.as_object_mut().expect("object").remove("status");
            }
        }
        strategy::for_res(res).prepare_for_subresource_update("status", current, &mut out);
        return out;
    }
    if part == Part::Approval {
        let mut out = current.clone();
        out["status"]["conditions"] = new
            .pointer("/status/conditions")
            .cloned()
            .unwrap_or_else(|| json!([]));
        strategy::for_res(res).prepare_for_subresource_update("approval", current, &mut out);
        return out;
    }
    if part == Part::Finalize {
        let mut out = current.clone();
        out["spec"]["finalizers"] = new
            .pointer("/spec/finalizers")
            .cloned()
            .unwrap_or_else(|| json!([]));
        return out;
    }
    if part == Part::EphemeralContainers {
        let mut out = current.clone();
        match new.pointer("/spec/ephemeralContainers") {
            Some(list) if !list.is_null() => out["spec"]["ephemeralContainers"] = list.clone(),
            _ => {
                if let Some(spec) = out.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.remove("ephemeralContainers");
                }
            }
        }
        defaults::apply_defaults(super::storage_resource(res), &mut out);
        return out;
    }
    let mut out = new;
    let no_metadata = serde_json::Map::new();
    let cur_md = object::metadata(current).unwrap_or(&no_metadata);
    {
        let md = metadata_mut(&mut out);
        for system in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "namespace",
            "generation",
        ] {
            match cur_md.get(system) {
                Some(v) => md.insert(system.into(), v.clone()),
                None => md.remove(system),
            };
        }
        // managedFields stay as sent: the field manager reads them (see
        // `managed::record_update`) and keeps the stored ones if none came.
        md.remove("selfLink");
    }
    if res.has_subresource("status") {
        match current.get("status") {
            Some(s) => out["status"] = s.clone(),
            None => {
                out.as_object_mut().expect("object").remove("status");
            }
        }
    }
    // Defaulted before the specs are compared, as upstream decodes (and so
    // defaults) a patched object before PrepareForUpdate counts its
    // generation: a patch that drops a defaulted field (kubectl's
    // `$retainKeys` on a Deployment strategy naming no `type`) changes
    // nothing.
    defaults::apply_defaults(super::storage_resource(res), &mut out);
    strategy::for_res(res).prepare_for_update(current, &mut out);
    if super::custom::serve::new_generation(res, current, &out) {
        let generation = cur_md
            .get("generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        metadata_mut(&mut out).insert("generation".into(), json!(generation + 1));
    }
    out
}

pub(super) fn without_revision(obj: &Value) -> Value {
    let mut o = obj.clone();
    metadata_mut(&mut o).remove("resourceVersion");
    o
}

pub(super) fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) enum Written {
    /// The new object, at its new revision.
    Stored(Value),
    /// Nothing changed; the current object.
    Unchanged(Value),
    /// The write removed the last finalizer of an object being deleted:
    /// it is gone.
    Deleted(Value),
}

/// Validates and admits `next` against `current` (admission's warnings
/// go to `warnings`) and writes it if it is still at `kv.mod_revision`.
pub(super) async fn commit_write(
    state: &ApiState,
    req: &ApiRequest,
    kv: &KeyValue,
    current: &Value,
    mut next: Value,
    part: Part,
    warnings: &mut Vec<String>,
) -> ApiResult<Result<Written, StoreError>> {
    let res = req.target.res;
    let sres = storage_resource(res);
    let name = name_of(req);
    if part == Part::Main {
        defaults::apply_defaults(sres, &mut next);
        warnings.extend(admission::mutate(state, req, &mut next, Some(current)).await?);
    } else {
        // Subresource writes (`pods/status`) reach webhooks whose rules
        // name them, not bosun's own mutating steps.
        warnings.extend(admission::webhook::mutate(state, req, &mut next, Some(current)).await?);
    }
    let mut errors = if part == Part::EphemeralContainers {
        validation::validate_ephemeral_containers_update(&next, current)
    } else {
        validation::validate(sres, &next, Some(current))
    };
    if let Some(v) = &req.target.custom {
        let mut unknown = Vec::new();
        errors.extend(super::custom::schema::admit(
            v,
            &mut next,
            Some(current),
            &mut unknown,
        ));
        warnings.extend(super::decode::unknown_fields(req, &unknown)?);
    }
    errors.extend(super::strategy::for_res(res).validate(&state.options, &next, Some(current)));
    if !errors.is_empty() {
        return Err(ApiError::invalid(res, name, &errors));
    }
    if part == Part::Main && next != *current {
        super::authn::no_escalation(state, req, &next).await?;
    }
    admission::node_restriction::admit_write(state, req, name, Some(current), &next).await?;
    if !managed::is_apply(req) {
        managed::record_update(req, current, &mut next)?;
    }
    warnings.extend(admission::validate(state, req, &next, Some(current)).await?);
    if object::same_but_revision(&next, current) {
        return Ok(Ok(Written::Unchanged(current.clone())));
    }
    if dry_run(req) {
        return Ok(Ok(Written::Stored(next)));
    }
    // As the apiserver's shouldDeleteDuringUpdate: a graceful deletion
    // still running (a pod's grace period) is ended by its own delete, not
    // by a write (the kubelet writes the terminal status first).
    let grace_left = current
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|g| g > 0);
    let deleting = meta_str(&next, "deletionTimestamp").is_some() && !grace_left;
    let held = strategy::for_res(res).blocks_deletion(&next);
    if deleting && finalizers(&next).is_empty() && !held {
        return Ok(store_delete(state, kv, next).await.map(Written::Deleted));
    }
    match conversion::to_stored(state, req.target.custom.as_ref(), &next).await? {
        None => Ok(store_update(state, kv, next).await.map(Written::Stored)),
        Some(stored) => Ok(store_update(state, kv, stored).await.map(|stored| {
            let rev = meta_str(&stored, "resourceVersion").and_then(|r| r.parse().ok());
            object::set_resource_version(&mut next, rev.unwrap_or_default());
            Written::Stored(next)
        })),
    }
}

pub(super) fn written_response(
    req: &ApiRequest,
    written: Written,
    warnings: &[String],
) -> Response {
    match written {
        Written::Stored(o) | Written::Unchanged(o) | Written::Deleted(o) => {
            respond(req, StatusCode::OK, o, warnings)
        }
    }
}

/// Runs a read-modify-write until it lands. `make` builds the new object
/// from the current one; a client precondition (resourceVersion in what
/// it sent) that no longer holds is a 409, otherwise a lost race is
/// retried on fresh data.
pub(super) async fn read_modify_write<F>(
    state: &ApiState,
    req: &ApiRequest,
    mut make: F,
) -> ApiResult<Response>
where
    F: FnMut(&Value) -> ApiResult<(Value, Option<u64>, Vec<String>)>,
{
    let res = req.target.res;
    let name = name_of(req);
    for _ in 0..MAX_ATTEMPTS {
        let (kv, current) = load(state, req).await?;
        // With a conversion webhook the write is admitted in its own
        // version and converted when stored (commit_write).
        let current = conversion::one_to_served(state, req.target.custom.as_ref(), current).await?;
        let (mut next, precondition, mut warnings) = make(&current)?;
        conversion::keep_request_version(req.target.custom.as_ref(), &mut next);
        if let Some(rv) = precondition {
            if rv != kv.mod_revision {
                return Err(ApiError::modified(res, name));
            }
        }
        // A uid in what the client sent is a precondition too: the write
        // must not land on another object that took the same name.
        if let (Some(given), Some(stored)) = (meta_str(&next, "uid"), meta_str(&current, "uid")) {
            if !given.is_empty() && given != stored {
                return Err(ApiError::conflict(
                    res,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {given}, UID in object meta: {stored}"
                    ),
                ));
            }
        }
        // An apply has worked out the ownership already.
        let applied = managed::is_apply(req)
            .then(|| next.pointer("/metadata/managedFields").cloned())
            .flatten();
        let mut next = merge_write(res, &current, next, part_of(req));
        if let Some(entries) = applied {
            metadata_mut(&mut next).insert("managedFields".into(), entries);
        }
        let part = part_of(req);
        match commit_write(state, req, &kv, &current, next, part, &mut warnings).await? {
            Ok(written) => return Ok(written_response(req, written, &warnings)),
            Err(StoreError::Conflict { .. }) if precondition.is_none() => continue,
            Err(e) => return Err(ApiError::from_store(e, res, name)),
        }
    }
    Err(ApiError::modified(res, name))
}

pub(super) async fn update(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let (new, warnings) = prepare_input(req, decode_body(req)?)?;
    let url_name = name_of(req);
    match meta_str(&new, "name") {
        Some(n) if n == url_name => {}
        Some(n) => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({url_name})"
            )))
        }
        None => {
            return Err(ApiError::bad_request(
                "metadata.name: Required value: name is required",
            ))
        }
    }
    if let (Some(ns), Some(given)) = (namespace_of(req), meta_str(&new, "namespace")) {
        if !given.is_empty() && given != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    let precondition = requested_revision(&new)?;
    read_modify_write(state, req, |_| {
        Ok((new.clone(), precondition, warnings.clone()))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_counts_spec_changes_only() {
        let deploy = bosun::resources::by_name("deploy").unwrap();
        let mut current = json!({"metadata": {"name": "d", "generation": 3, "uid": "u"},
            "spec": {"replicas": 1}, "status": {"replicas": 1}});
        // Stored objects are defaulted.
        defaults::apply_defaults(deploy, &mut current);
        let relabeled = json!({"metadata": {"name": "d", "labels": {"a": "b"}},
            "spec": {"replicas": 1}, "status": {"replicas": 9}});
        let out = merge_write(deploy, &current, relabeled, Part::Main);
        assert_eq!(out["metadata"]["generation"], 3);
        assert_eq!(out["metadata"]["uid"], "u");
        assert_eq!(
            out["status"]["replicas"], 1,
            "status moves only through /status"
        );
        // A write leaving out what defaulting fills in (kubectl's
        // `$retainKeys` patch drops the strategy's `type`) changes no spec.
        let mut sparse = current.clone();
        sparse["spec"]["strategy"]
            .as_object_mut()
            .unwrap()
            .remove("type");
        let out = merge_write(deploy, &current, sparse, Part::Main);
        assert_eq!(out["metadata"]["generation"], 3);
        let scaled = json!({"metadata": {"name": "d"}, "spec": {"replicas": 2}});
        let out = merge_write(deploy, &current, scaled, Part::Main);
        assert_eq!(out["metadata"]["generation"], 4);
        let status =
            json!({"metadata": {"name": "x"}, "spec": {"replicas": 7}, "status": {"replicas": 2}});
        let out = merge_write(deploy, &current, status, Part::Status);
        assert_eq!(out["spec"]["replicas"], 1);
        assert_eq!(out["status"]["replicas"], 2);
    }
}
