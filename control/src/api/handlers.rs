//! The verbs: create, get, list, update, patch, delete (and their `status`
//! and `scale` forms). Every write goes through the store's
//! compare-and-swap; a rejected request writes nothing.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use bosun::resources::{ResourceInfo, RESOURCES};
use bosun::{defaults, patch, validation};
use http::{HeaderValue, Method, StatusCode};
use serde_json::{json, Value};

use super::allocate;
use super::error::{ApiError, ApiResult};
use super::filter::Filter;
use super::object::{
    self, from_storage_version, meta_str, metadata_mut, now_rfc3339, requested_revision,
    to_storage_version,
};
use super::table::{self, IncludeObject};
use super::{json_response, storage_resource, watch, ApiRequest, ApiState};
use crate::store::{KeyValue, StoreError};

/// How often a read-modify-write without a client precondition is retried
/// when another writer got in between.
const MAX_ATTEMPTS: usize = 8;

pub async fn handle(state: &Arc<ApiState>, req: ApiRequest) -> ApiResult<Response> {
    let t = &req.target;
    if let Some(sub) = &t.subresource {
        let known = t.res.has_subresource(sub);
        if !known {
            return Err(ApiError::not_found_path(&format!(
                "{}/{}",
                t.res.plural, sub
            )));
        }
    }
    let sub = t.subresource.as_deref();
    match (&req.method, t.name.is_some(), sub) {
        (&Method::GET, false, None) => {
            if req.flag("watch") {
                watch::serve(state, &req).await
            } else {
                list(state, &req).await
            }
        }
        (&Method::POST, false, None) => create(state, &req).await,
        (&Method::DELETE, false, None) => delete_collection(state, &req).await,
        (&Method::POST, true, Some("binding")) => super::binding::bind(state, &req).await,
        (_, true, Some("binding")) => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource (pods/binding)",
        )),
        (&Method::GET, true, Some("scale")) => get_scale(state, &req).await,
        (&Method::PUT | &Method::PATCH, true, Some("scale")) => write_scale(state, &req).await,
        (&Method::GET, true, _) => get(state, &req).await,
        (&Method::PUT, true, _) => update(state, &req).await,
        (&Method::PATCH, true, _) => patch(state, &req).await,
        (&Method::DELETE, true, None) => delete(state, &req).await,
        _ => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({} {})",
            req.method, t.res.plural
        ))),
    }
}

// ---------------------------------------------------------------------------
// Reading

fn namespace_of(req: &ApiRequest) -> Option<&str> {
    req.target.namespace.as_deref()
}

fn name_of(req: &ApiRequest) -> &str {
    req.target.name.as_deref().unwrap_or("")
}

fn key_of(req: &ApiRequest) -> String {
    req.target.res.storage_key(namespace_of(req), name_of(req))
}

async fn load(state: &ApiState, req: &ApiRequest) -> ApiResult<(KeyValue, Value)> {
    let res = req.target.res;
    let name = name_of(req);
    let kv = state
        .store
        .get(&key_of(req))
        .await
        .map_err(|e| ApiError::from_store(e, res, name))?
        .ok_or_else(|| ApiError::not_found(res, name))?;
    let obj = object::from_store(&kv)?;
    Ok((kv, obj))
}

/// An object in the version the request speaks, or a Table of it.
fn respond(req: &ApiRequest, code: StatusCode, stored: Value, warnings: &[String]) -> Response {
    let res = req.target.res;
    let obj = from_storage_version(res, stored);
    let mut response = if table::wants_table(&req.headers) {
        let rv = meta_str(&obj, "resourceVersion").unwrap_or("").to_string();
        json_response(
            code,
            &table::table(
                res,
                &[obj],
                &rv,
                IncludeObject::parse(req.param("includeObject")),
            ),
        )
    } else {
        json_response(code, &obj)
    };
    for w in warnings {
        let text = format!("299 - \"{}\"", w.replace('"', "'"));
        if let Ok(v) = HeaderValue::from_str(&text) {
            response.headers_mut().append("Warning", v);
        }
    }
    response
}

async fn get(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let (_, obj) = load(state, req).await?;
    Ok(respond(req, StatusCode::OK, obj, &[]))
}

fn list_prefix(req: &ApiRequest) -> String {
    let res = req.target.res;
    match namespace_of(req) {
        Some(ns) if res.namespaced => format!("{}{ns}/", res.storage_prefix()),
        _ => res.storage_prefix(),
    }
}

/// The objects under the request's prefix that its selectors match, in
/// the version the request speaks, and the revision of the snapshot.
pub async fn list_matching(state: &ApiState, req: &ApiRequest) -> ApiResult<(Vec<Value>, u64)> {
    let res = req.target.res;
    let filter = Filter::parse(res, req.param("labelSelector"), req.param("fieldSelector"))?;
    let (kvs, rev) = state
        .store
        .list(&list_prefix(req))
        .await
        .map_err(|e| ApiError::from_store(e, res, ""))?;
    let mut items = Vec::with_capacity(kvs.len());
    for kv in &kvs {
        let obj = from_storage_version(res, object::from_store(kv)?);
        if filter.matches(&obj) {
            items.push(obj);
        }
    }
    Ok((items, rev))
}

async fn list(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let res = req.target.res;
    let (mut items, rev) = list_matching(state, req).await?;
    // Paging: `continue` is the name of the last object returned.
    if let Some(token) = req.param("continue").filter(|t| !t.is_empty()) {
        let after = token.to_string();
        items.retain(|o| {
            let key = format!(
                "{}/{}",
                meta_str(o, "namespace").unwrap_or(""),
                meta_str(o, "name").unwrap_or("")
            );
            key > after
        });
    }
    let mut list_meta = json!({"resourceVersion": rev.to_string()});
    if let Some(limit) = req.param("limit").and_then(|l| l.parse::<usize>().ok()) {
        if limit > 0 && items.len() > limit {
            let remaining = items.len() - limit;
            items.truncate(limit);
            let last = items.last().expect("limit > 0");
            list_meta["continue"] = json!(format!(
                "{}/{}",
                meta_str(last, "namespace").unwrap_or(""),
                meta_str(last, "name").unwrap_or("")
            ));
            list_meta["remainingItemCount"] = json!(remaining);
        }
    }
    if table::wants_table(&req.headers) {
        let mut t = table::table(
            res,
            &items,
            &rev.to_string(),
            IncludeObject::parse(req.param("includeObject")),
        );
        t["metadata"] = list_meta;
        return Ok(json_response(StatusCode::OK, &t));
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", res.kind),
            "apiVersion": res.api_version(),
            "metadata": list_meta,
            "items": items,
        }),
    ))
}

// ---------------------------------------------------------------------------
// Decoding what clients send

fn content_type(req: &ApiRequest) -> &str {
    req.headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim())
        .unwrap_or("application/json")
}

pub(super) fn decode_body(req: &ApiRequest) -> ApiResult<Value> {
    let ct = content_type(req);
    let value: Value = match ct {
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            serde_yaml::from_slice(&req.body).map_err(|e| {
                ApiError::bad_request(format!("error decoding YAML request body: {e}"))
            })?
        }
        "application/json" | "" | "*/*" => serde_json::from_slice(&req.body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        other => return Err(ApiError::unsupported_media_type(other)),
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok(value)
}

/// Checks apiVersion and kind, decodes against the typed schema (dropping
/// or refusing unknown fields per `fieldValidation`), and converts to the
/// storage version. Returns the object and any warnings for the client.
fn prepare_input(req: &ApiRequest, mut input: Value) -> ApiResult<(Value, Vec<String>)> {
    let res = req.target.res;
    let expected = res.api_version();
    match input.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => input["apiVersion"] = json!(expected),
        Some(v) if v == expected => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({expected})"
            )))
        }
    }
    match input.get("kind").and_then(Value::as_str) {
        None | Some("") => input["kind"] = json!(res.kind),
        Some(k) if k == res.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                res.kind
            )))
        }
    }
    let mut normalized =
        validation::normalize(res, input.clone()).map_err(ApiError::bad_request)?;
    bosun::quantity::canonicalize_quantities(&mut normalized);
    if res.kind == "StatefulSet" {
        // k8s-openapi writes apiVersion and kind into every embedded claim
        // template; keep only what the client sent.
        let sent = input.pointer("/spec/volumeClaimTemplates").cloned();
        if let Some(templates) = normalized
            .pointer_mut("/spec/volumeClaimTemplates")
            .and_then(Value::as_array_mut)
        {
            for (i, t) in templates.iter_mut().enumerate() {
                let given = sent.as_ref().and_then(|s| s.get(i));
                for key in ["apiVersion", "kind"] {
                    if given.and_then(|g| g.get(key)).is_none() {
                        t.as_object_mut().map(|o| o.remove(key));
                    }
                }
            }
        }
    }
    let unknown: Vec<String> = object::unknown_fields(&input, &normalized)
        .into_iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    let mut warnings = Vec::new();
    if !unknown.is_empty() {
        match req.param("fieldValidation") {
            Some("Strict") => {
                return Err(ApiError::bad_request(format!(
                    "strict decoding error: {}",
                    unknown.join(", ")
                )))
            }
            Some("Ignore") => {}
            _ => warnings = unknown,
        }
    }
    Ok((to_storage_version(res, normalized), warnings))
}

fn dry_run(req: &ApiRequest) -> bool {
    req.param("dryRun") == Some("All")
}

// ---------------------------------------------------------------------------
// Create

/// The status an object starts with: status is the controllers' and the
/// agents' to write, so what the client sent is dropped.
fn initial_status(res: &ResourceInfo, obj: &Value) -> Option<Value> {
    match res.kind {
        "Pod" => Some(json!({
            "phase": "Pending",
            "qosClass": object::qos_class(obj.get("spec").unwrap_or(&Value::Null)),
        })),
        "Namespace" => Some(json!({"phase": "Active"})),
        "PersistentVolume" => Some(json!({"phase": "Available"})),
        "PersistentVolumeClaim" => Some(json!({"phase": "Pending"})),
        _ => None,
    }
}

async fn check_namespace(state: &ApiState, res: &ResourceInfo, ns: Option<&str>) -> ApiResult<()> {
    if !res.namespaced {
        return Ok(());
    }
    let ns = ns.ok_or_else(|| {
        ApiError::bad_request("the request must name a namespace for a namespaced resource")
    })?;
    let namespaces = bosun::resources::by_name("namespaces").expect("served");
    let found = state
        .store
        .get(&namespaces.storage_key(None, ns))
        .await
        .map_err(|e| ApiError::from_store(e, namespaces, ns))?;
    match found {
        None => Err(ApiError::namespace_not_found(ns)),
        Some(kv) => {
            let obj = object::from_store(&kv)?;
            if meta_str(&obj, "deletionTimestamp").is_some() {
                return Err(ApiError::forbidden(format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                )));
            }
            Ok(())
        }
    }
}

async fn create(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let res = req.target.res;
    let sres = storage_resource(res);
    let (mut obj, warnings) = prepare_input(req, decode_body(req)?)?;
    let ns = namespace_of(req).map(str::to_string);
    {
        let md = metadata_mut(&mut obj);
        if res.namespaced {
            match (md.get("namespace").and_then(Value::as_str), ns.as_deref()) {
                (Some(given), Some(url)) if !given.is_empty() && given != url => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {}
            }
            if let Some(ns) = &ns {
                md.insert("namespace".into(), json!(ns));
            }
        } else {
            md.remove("namespace");
        }
        if md
            .get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|rv| !rv.is_empty())
        {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let name_empty = md
            .get("name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if name_empty {
            if let Some(prefix) = md.get("generateName").and_then(Value::as_str) {
                if !prefix.is_empty() {
                    let name = object::generate_name(prefix);
                    md.insert("name".into(), json!(name));
                }
            }
        }
        md.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        md.insert("creationTimestamp".into(), json!(now_rfc3339()));
        md.insert("generation".into(), json!(1));
        for system in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ] {
            md.remove(system);
        }
    }
    if res.has_subresource("status") {
        match initial_status(res, &obj) {
            Some(s) => obj["status"] = s,
            None => {
                obj.as_object_mut().expect("object").remove("status");
            }
        }
    }
    defaults::apply_defaults(sres, &mut obj);
    let name = meta_str(&obj, "name").unwrap_or("").to_string();
    if res.kind == "Job" {
        allocate::job_selector(&mut obj);
    }
    let mut errors = validation::validate(sres, &obj, None);
    if errors.is_empty() && res.kind == "Service" {
        let services = state
            .store
            .list(&res.storage_prefix())
            .await
            .map_err(|e| ApiError::from_store(e, res, &name))?
            .0
            .iter()
            .map(object::from_store)
            .collect::<ApiResult<Vec<_>>>()?;
        let (ips, ports) = allocate::held_by(&services);
        if let Err(e) = allocate::service(&mut obj, &ips, &ports) {
            errors.push(e);
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::invalid(res, &name, &errors));
    }
    check_namespace(state, res, ns.as_deref()).await?;
    if dry_run(req) {
        return Ok(respond(req, StatusCode::CREATED, obj, &warnings));
    }
    let key = res.storage_key(ns.as_deref(), &name);
    let rev = state
        .store
        .create(&key, object::to_store(&obj))
        .await
        .map_err(|e| ApiError::from_store(e, res, &name))?;
    object::set_resource_version(&mut obj, rev);
    Ok(respond(req, StatusCode::CREATED, obj, &warnings))
}

// ---------------------------------------------------------------------------
// Update and patch

/// Which part of the object a write may change.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Everything but status (for kinds with a status subresource) and
    /// the system metadata.
    Main,
    /// Only status.
    Status,
}

fn part_of(req: &ApiRequest) -> Part {
    match req.target.subresource.as_deref() {
        Some("status") => Part::Status,
        _ => Part::Main,
    }
}

/// The object a write produces from the stored one and what the client
/// sent: system metadata stays, generation counts spec changes, status
/// moves only through the status subresource.
fn merge_write(res: &ResourceInfo, current: &Value, new: Value, part: Part) -> Value {
    if part == Part::Status {
        let mut out = current.clone();
        match new.get("status") {
            Some(s) => out["status"] = s.clone(),
            None => {
                out.as_object_mut().expect("object").remove("status");
            }
        }
        return out;
    }
    let mut out = new;
    let cur_md = object::metadata(current).cloned().unwrap_or_default();
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
        md.remove("managedFields");
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
    if res.kind == "Service" {
        // An update that leaves the cluster IP out keeps the one allocated.
        for field in ["clusterIP", "clusterIPs"] {
            let given = out.pointer(&format!("/spec/{field}"));
            if given.is_none_or(|v| v == "" || v == &json!([])) {
                if let (Some(old), Some(spec)) = (
                    current.pointer(&format!("/spec/{field}")),
                    out.get_mut("spec").and_then(Value::as_object_mut),
                ) {
                    spec.insert(field.into(), old.clone());
                }
            }
        }
    }
    if out.get("spec") != current.get("spec") {
        let generation = cur_md
            .get("generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        metadata_mut(&mut out).insert("generation".into(), json!(generation + 1));
    }
    out
}

fn without_revision(obj: &Value) -> Value {
    let mut o = obj.clone();
    metadata_mut(&mut o).remove("resourceVersion");
    o
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

enum Written {
    /// The new object, at its new revision.
    Stored(Value),
    /// Nothing changed; the current object.
    Unchanged(Value),
    /// The write removed the last finalizer of an object being deleted:
    /// it is gone.
    Deleted(Value),
}

/// Validates `next` against `current` and writes it if it is still at
/// `kv.mod_revision`.
async fn commit_write(
    state: &ApiState,
    req: &ApiRequest,
    kv: &KeyValue,
    current: &Value,
    mut next: Value,
    part: Part,
) -> ApiResult<Result<Written, StoreError>> {
    let res = req.target.res;
    let sres = storage_resource(res);
    let name = name_of(req);
    if part == Part::Main {
        defaults::apply_defaults(sres, &mut next);
    }
    let errors = validation::validate(sres, &next, Some(current));
    if !errors.is_empty() {
        return Err(ApiError::invalid(res, name, &errors));
    }
    if without_revision(&next) == without_revision(current) {
        return Ok(Ok(Written::Unchanged(current.clone())));
    }
    if dry_run(req) {
        return Ok(Ok(Written::Stored(next)));
    }
    let deleting = meta_str(&next, "deletionTimestamp").is_some();
    if deleting && finalizers(&next).is_empty() {
        return Ok(state
            .store
            .delete(&kv.key, kv.mod_revision)
            .await
            .map(|rev| {
                object::set_resource_version(&mut next, rev);
                Written::Deleted(next)
            }));
    }
    Ok(state
        .store
        .update(&kv.key, kv.mod_revision, object::to_store(&next))
        .await
        .map(|rev| {
            object::set_resource_version(&mut next, rev);
            Written::Stored(next)
        }))
}

fn written_response(req: &ApiRequest, written: Written, warnings: &[String]) -> Response {
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
async fn read_modify_write<F>(
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
        let (next, precondition, warnings) = make(&current)?;
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
        let next = merge_write(res, &current, next, part_of(req));
        match commit_write(state, req, &kv, &current, next, part_of(req)).await? {
            Ok(written) => return Ok(written_response(req, written, &warnings)),
            Err(StoreError::Conflict { .. }) if precondition.is_none() => continue,
            Err(e) => return Err(ApiError::from_store(e, res, name)),
        }
    }
    Err(ApiError::modified(res, name))
}

async fn update(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
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

#[derive(Clone, Copy)]
enum PatchType {
    Json,
    Merge,
    Strategic,
}

fn patch_type(req: &ApiRequest) -> ApiResult<PatchType> {
    match content_type(req) {
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

fn apply_patch(kind: PatchType, target: &Value, patch_doc: &Value) -> ApiResult<Value> {
    let out = match kind {
        PatchType::Json => patch::apply_json_patch(target, patch_doc),
        PatchType::Merge => patch::apply_merge_patch(target, patch_doc),
        PatchType::Strategic => patch::apply_strategic_merge_patch(target, patch_doc),
    };
    out.map_err(|e| ApiError {
        code: 422,
        reason: "Invalid",
        message: format!("the patch could not be applied: {e}"),
        details: None,
    })
}

fn parse_patch(req: &ApiRequest) -> ApiResult<(PatchType, Value)> {
    let kind = patch_type(req)?;
    let doc: Value = serde_json::from_slice(&req.body)
        .map_err(|e| ApiError::bad_request(format!("the patch is not valid JSON: {e}")))?;
    Ok((kind, doc))
}

async fn patch(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let (kind, doc) = parse_patch(req)?;
    let res = req.target.res;
    read_modify_write(state, req, |current| {
        let view = from_storage_version(res, current.clone());
        let patched = apply_patch(kind, &view, &doc)?;
        // A resourceVersion the patch itself sets is a precondition.
        let precondition =
            if meta_str(&patched, "resourceVersion") != meta_str(&view, "resourceVersion") {
                requested_revision(&patched)?
            } else {
                None
            };
        let (next, warnings) = prepare_input(req, patched)?;
        if meta_str(&next, "name") != meta_str(current, "name") {
            return Err(ApiError::bad_request(
                "metadata.name cannot be changed by a patch",
            ));
        }
        Ok((next, precondition, warnings))
    })
    .await
}

// ---------------------------------------------------------------------------
// Scale

/// `spec.selector` as the string form a Scale carries (`app=nginx,tier in (fe)`).
fn selector_string(selector: Option<&Value>) -> String {
    let Some(sel) = selector else {
        return String::new();
    };
    let mut parts = Vec::new();
    if let Some(labels) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in labels {
            parts.push(format!("{k}={}", v.as_str().unwrap_or("")));
        }
    }
    if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
        for e in exprs {
            let key = e["key"].as_str().unwrap_or("");
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            parts.push(match e["operator"].as_str().unwrap_or("") {
                "In" => format!("{key} in ({})", values.join(",")),
                "NotIn" => format!("{key} notin ({})", values.join(",")),
                "Exists" => key.to_string(),
                _ => format!("!{key}"),
            });
        }
    }
    parts.join(",")
}

fn scale_of(obj: &Value) -> Value {
    let md = object::metadata(obj).cloned().unwrap_or_default();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": md.get("name"),
            "namespace": md.get("namespace"),
            "uid": md.get("uid"),
            "resourceVersion": md.get("resourceVersion"),
            "creationTimestamp": md.get("creationTimestamp"),
        },
        "spec": {"replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(0))},
        "status": {
            "replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector_string(obj.pointer("/spec/selector")),
        },
    })
}

async fn get_scale(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let (_, obj) = load(state, req).await?;
    Ok(json_response(StatusCode::OK, &scale_of(&obj)))
}

async fn write_scale(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let res = req.target.res;
    let name = name_of(req).to_string();
    let patch_doc = if req.method == Method::PATCH {
        Some(parse_patch(req)?)
    } else {
        None
    };
    let body = if patch_doc.is_none() {
        Some(decode_body(req)?)
    } else {
        None
    };
    for _ in 0..MAX_ATTEMPTS {
        let (kv, current) = load(state, req).await?;
        let scale = scale_of(&current);
        let wanted = match (&patch_doc, &body) {
            (Some((kind, doc)), _) => apply_patch(*kind, &scale, doc)?,
            (None, Some(b)) => b.clone(),
            _ => unreachable!("either a patch or a body"),
        };
        let precondition = requested_revision(&wanted)?;
        if precondition.is_some_and(|rv| rv != kv.mod_revision) {
            return Err(ApiError::modified(res, &name));
        }
        let replicas = wanted
            .pointer("/spec/replicas")
            .cloned()
            .unwrap_or(json!(0));
        if replicas.as_i64().is_none_or(|r| r < 0) {
            return Err(ApiError {
                code: 422,
                reason: "Invalid",
                message: format!(
                    "Scale.autoscaling \"{name}\" is invalid: spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"
                ),
                details: None,
            });
        }
        let mut next = current.clone();
        next["spec"]["replicas"] = replicas;
        let next = merge_write(res, &current, next, Part::Main);
        match commit_write(state, req, &kv, &current, next, Part::Main).await? {
            Ok(Written::Stored(o) | Written::Unchanged(o) | Written::Deleted(o)) => {
                return Ok(json_response(StatusCode::OK, &scale_of(&o)))
            }
            Err(StoreError::Conflict { .. }) if precondition.is_none() => continue,
            Err(e) => return Err(ApiError::from_store(e, res, &name)),
        }
    }
    Err(ApiError::modified(res, &name))
}

// ---------------------------------------------------------------------------
// Delete

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Propagation {
    Background,
    Foreground,
    Orphan,
}

struct DeleteOptions {
    grace_period: Option<i64>,
    propagation: Propagation,
    uid: Option<String>,
    resource_version: Option<String>,
}

fn delete_options(req: &ApiRequest) -> ApiResult<DeleteOptions> {
    let body: Value = if req.body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(&req.body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
    };
    let grace_period = match req.param("gracePeriodSeconds") {
        Some(g) => Some(g.parse::<i64>().map_err(|_| {
            ApiError::bad_request(format!("gracePeriodSeconds: Invalid value: {g:?}"))
        })?),
        None => body["gracePeriodSeconds"].as_i64(),
    };
    let policy = req
        .param("propagationPolicy")
        .map(str::to_string)
        .or_else(|| body["propagationPolicy"].as_str().map(str::to_string));
    let orphan = req.param("orphanDependents") == Some("true")
        || body["orphanDependents"].as_bool() == Some(true);
    let propagation = match policy.as_deref() {
        Some("Foreground") => Propagation::Foreground,
        Some("Orphan") => Propagation::Orphan,
        Some("Background") => Propagation::Background,
        None if orphan => Propagation::Orphan,
        None => Propagation::Background,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
            )))
        }
    };
    Ok(DeleteOptions {
        grace_period,
        propagation,
        uid: body
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string),
        resource_version: body
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

/// The grace period a pod gets: only a pod that a node runs needs time
/// to stop; an unbound or finished pod goes at once.
fn pod_grace(obj: &Value, requested: Option<i64>) -> i64 {
    let bound = obj
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let finished = matches!(
        obj.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded") | Some("Failed")
    );
    if !bound || finished {
        return 0;
    }
    requested
        .or_else(|| {
            obj.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(30)
        .max(0)
}

async fn delete(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let res = req.target.res;
    let name = name_of(req).to_string();
    if res.kind == "Namespace" {
        return delete_namespace(state, req).await;
    }
    let opts = delete_options(req)?;
    for _ in 0..MAX_ATTEMPTS {
        let (kv, current) = load(state, req).await?;
        delete_preconditions(res, &name, &current, &opts)?;
        match delete_once(state, req, &kv, current, &opts).await? {
            Ok(obj) => return Ok(respond(req, StatusCode::OK, obj, &[])),
            Err(StoreError::Conflict { .. }) => continue,
            Err(StoreError::NotFound(_)) => return Err(ApiError::not_found(res, &name)),
            Err(e) => return Err(ApiError::from_store(e, res, &name)),
        }
    }
    Err(ApiError::modified(res, &name))
}

fn delete_preconditions(
    res: &ResourceInfo,
    name: &str,
    current: &Value,
    opts: &DeleteOptions,
) -> ApiResult<()> {
    if let Some(uid) = &opts.uid {
        let actual = meta_str(current, "uid").unwrap_or("");
        if uid != actual {
            return Err(ApiError::conflict(
                res,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            ));
        }
    }
    if let Some(rv) = &opts.resource_version {
        let actual = meta_str(current, "resourceVersion").unwrap_or("");
        if rv != actual {
            return Err(ApiError::conflict(
                res,
                name,
                &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual}"),
            ));
        }
    }
    Ok(())
}

/// One attempt at deleting the object at `kv`: either it goes now, or it
/// is marked with a deletionTimestamp (a grace period to honour, or
/// finalizers to run) and whoever owns those finishes the job.
async fn delete_once(
    state: &ApiState,
    req: &ApiRequest,
    kv: &KeyValue,
    current: Value,
    opts: &DeleteOptions,
) -> ApiResult<Result<Value, StoreError>> {
    let res = req.target.res;
    let mut fins = finalizers(&current);
    match opts.propagation {
        Propagation::Foreground if !fins.iter().any(|f| f == "foregroundDeletion") => {
            fins.push("foregroundDeletion".into())
        }
        Propagation::Orphan if !fins.iter().any(|f| f == "orphan") => fins.push("orphan".into()),
        _ => {}
    }
    let grace = if res.kind == "Pod" {
        pod_grace(&current, opts.grace_period)
    } else {
        0
    };
    let already = meta_str(&current, "deletionTimestamp").is_some();
    if fins.is_empty() && grace == 0 {
        if dry_run(req) {
            return Ok(Ok(current));
        }
        return Ok(state
            .store
            .delete(&kv.key, kv.mod_revision)
            .await
            .map(|rev| {
                let mut gone = current;
                object::set_resource_version(&mut gone, rev);
                gone
            }));
    }
    let mut next = current.clone();
    {
        let md = metadata_mut(&mut next);
        let current_grace = md.get("deletionGracePeriodSeconds").and_then(Value::as_i64);
        // A later delete may shorten the grace period, never lengthen it.
        if !already || current_grace.is_some_and(|g| grace < g) {
            let at = chrono::Utc::now() + chrono::Duration::seconds(grace);
            md.insert(
                "deletionTimestamp".into(),
                json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            );
            md.insert("deletionGracePeriodSeconds".into(), json!(grace));
        }
        md.insert("finalizers".into(), json!(fins));
    }
    if without_revision(&next) == without_revision(&current) || dry_run(req) {
        return Ok(Ok(next));
    }
    Ok(state
        .store
        .update(&kv.key, kv.mod_revision, object::to_store(&next))
        .await
        .map(|rev| {
            object::set_resource_version(&mut next, rev);
            next
        }))
}

/// Deleting a namespace deletes everything in it, then the namespace.
/// `default` and `kube-system` cannot be deleted.
async fn delete_namespace(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let res = req.target.res;
    let name = name_of(req).to_string();
    if matches!(name.as_str(), "default" | "kube-system" | "kube-public") {
        return Err(ApiError::forbidden(format!(
            "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
        )));
    }
    let (_, _) = load(state, req).await?;
    if dry_run(req) {
        let (_, current) = load(state, req).await?;
        return Ok(respond(req, StatusCode::OK, current, &[]));
    }
    for r in RESOURCES
        .iter()
        .filter(|r| r.namespaced && r.is_storage_version())
    {
        let prefix = format!("{}{name}/", r.storage_prefix());
        let (kvs, _) = state
            .store
            .list(&prefix)
            .await
            .map_err(|e| ApiError::from_store(e, r, ""))?;
        for kv in kvs {
            match state.store.delete(&kv.key, kv.mod_revision).await {
                Ok(_) | Err(StoreError::NotFound(_)) | Err(StoreError::Conflict { .. }) => {}
                Err(e) => return Err(ApiError::from_store(e, r, "")),
            }
        }
    }
    for _ in 0..MAX_ATTEMPTS {
        let (kv, current) = load(state, req).await?;
        match state.store.delete(&kv.key, kv.mod_revision).await {
            Ok(rev) => {
                let mut gone = current;
                object::set_resource_version(&mut gone, rev);
                return Ok(respond(req, StatusCode::OK, gone, &[]));
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(ApiError::from_store(e, res, &name)),
        }
    }
    Err(ApiError::modified(res, &name))
}

async fn delete_collection(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let res = req.target.res;
    let opts = delete_options(req)?;
    let (items, _) = list_matching(state, req).await?;
    let mut deleted = Vec::new();
    for item in items {
        let name = meta_str(&item, "name").unwrap_or("").to_string();
        let ns = meta_str(&item, "namespace").map(str::to_string);
        let key = res.storage_key(ns.as_deref(), &name);
        let Some(kv) = state
            .store
            .get(&key)
            .await
            .map_err(|e| ApiError::from_store(e, res, &name))?
        else {
            continue;
        };
        let current = object::from_store(&kv)?;
        let item_req = ApiRequest {
            method: Method::DELETE,
            target: super::Target {
                res,
                namespace: ns,
                name: Some(name.clone()),
                subresource: None,
            },
            query: req.query.clone(),
            headers: req.headers.clone(),
            body: req.body.clone(),
        };
        match delete_once(state, &item_req, &kv, current, &opts).await? {
            Ok(obj) => deleted.push(from_storage_version(res, obj)),
            Err(StoreError::NotFound(_) | StoreError::Conflict { .. }) => {}
            Err(e) => return Err(ApiError::from_store(e, res, &name)),
        }
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", res.kind),
            "apiVersion": res.api_version(),
            "metadata": {"resourceVersion": state.store.current_revision().to_string()},
            "items": deleted,
        }),
    )
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_print_like_kubectl() {
        let sel = json!({"matchLabels": {"app": "nginx"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe", "be"]},
                                 {"key": "canary", "operator": "DoesNotExist"}]});
        assert_eq!(
            selector_string(Some(&sel)),
            "app=nginx,tier in (fe,be),!canary"
        );
    }

    #[test]
    fn generation_counts_spec_changes_only() {
        let deploy = bosun::resources::by_name("deploy").unwrap();
        let current = json!({"metadata": {"name": "d", "generation": 3, "uid": "u"},
            "spec": {"replicas": 1}, "status": {"replicas": 1}});
        let relabeled = json!({"metadata": {"name": "d", "labels": {"a": "b"}},
            "spec": {"replicas": 1}, "status": {"replicas": 9}});
        let out = merge_write(deploy, &current, relabeled, Part::Main);
        assert_eq!(out["metadata"]["generation"], 3);
        assert_eq!(out["metadata"]["uid"], "u");
        assert_eq!(
            out["status"]["replicas"], 1,
            "status moves only through /status"
        );
        let scaled = json!({"metadata": {"name": "d"}, "spec": {"replicas": 2}});
        let out = merge_write(deploy, &current, scaled, Part::Main);
        assert_eq!(out["metadata"]["generation"], 4);
        let status =
            json!({"metadata": {"name": "x"}, "spec": {"replicas": 7}, "status": {"replicas": 2}});
        let out = merge_write(deploy, &current, status, Part::Status);
        assert_eq!(out["spec"]["replicas"], 1);
        assert_eq!(out["status"]["replicas"], 2);
    }

    #[test]
    fn only_running_pods_get_a_grace_period() {
        let unbound = json!({"spec": {}});
        assert_eq!(pod_grace(&unbound, Some(30)), 0);
        let bound = json!({"spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 5},
            "status": {"phase": "Running"}});
        assert_eq!(pod_grace(&bound, None), 5);
        assert_eq!(pod_grace(&bound, Some(0)), 0);
        let done = json!({"spec": {"nodeName": "n1"}, "status": {"phase": "Succeeded"}});
        assert_eq!(pod_grace(&done, None), 0);
    }
}
