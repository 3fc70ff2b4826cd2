//! `create`: a new object with the server's metadata (uid, creation time,
//! generation, a generated name), its kind's initial status, defaults and
//! allocations, validated, in a namespace that exists and is not going.

use axum::response::Response;
use bosun::resources::ResourceInfo;
use bosun::time::now_rfc3339;
use bosun::{defaults, validation};
use http::StatusCode;
use serde_json::{json, Value};

use super::custom::conversion;
use super::decode::{decode_body, prepare_input};
use super::error::{ApiError, ApiResult};
use super::managed;
use super::object::{self, meta_str, metadata_mut};
use super::request::{dry_run, namespace_of, respond};
use super::{admission, allocate, storage_resource, strategy, ApiRequest, ApiState};

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

pub(super) async fn create(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let (obj, warnings) = prepare_input(req, decode_body(req)?)?;
    create_object(state, req, obj, warnings).await
}

/// Creates `obj` (already decoded and in the storage version). Its
/// managedFields are recorded as this request's `Update`, unless the
/// request is an apply, which brings its own.
pub(super) async fn create_object(
    state: &ApiState,
    req: &ApiRequest,
    mut obj: Value,
    mut warnings: Vec<String>,
) -> ApiResult<Response> {
    let res = req.target.res;
    let sres = storage_resource(res);
    let ns = namespace_of(req).map(str::to_string);
    conversion::keep_request_version(req.target.custom.as_ref(), &mut obj);
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
            "selfLink",
        ] {
            md.remove(system);
        }
    }
    let strategy = strategy::for_res(res);
    if res.has_subresource("status") {
        match strategy.initial_status(&obj) {
            Some(s) => obj["status"] = s,
            None => {
                obj.as_object_mut().expect("object").remove("status");
            }
        }
    }
    defaults::apply_defaults(sres, &mut obj);
    let name = meta_str(&obj, "name").unwrap_or("").to_string();
    strategy.prepare_for_create(&state.options, &mut obj);
    warnings.extend(admission::mutate(state, req, &mut obj, None).await?);
    let mut errors = validation::validate(sres, &obj, None);
    if let Some(v) = &req.target.custom {
        let mut unknown = Vec::new();
        errors.extend(super::custom::schema::admit(
            v,
            &mut obj,
            None,
            &mut unknown,
        ));
        warnings.extend(super::decode::unknown_fields(req, &unknown)?);
    }
    errors.extend(strategy.validate(&state.options, &obj, None));
    if errors.is_empty() {
        errors = strategy.allocate(state, &mut obj).await?;
    }
    // What the allocation claimed goes again unless the object is stored.
    let unclaim = allocate::claims::Unclaim::new(
        &state.store,
        errors.is_empty() && res.group.is_empty() && res.plural == "services",
        &obj,
    );
    if !errors.is_empty() {
        return Err(ApiError::invalid(res, &name, &errors));
    }
    super::authn::no_escalation(state, req, &obj).await?;
    admission::node_restriction::admit_write(state, req, &name, None, &obj).await?;
    if !managed::is_apply(req) {
        managed::record_update(req, &json!({}), &mut obj)?;
    }
    check_namespace(state, res, ns.as_deref()).await?;
    warnings.extend(admission::validate(state, req, &obj, None).await?);
    if dry_run(req) {
        return Ok(respond(req, StatusCode::CREATED, obj, &warnings));
    }
    let key = res.storage_key(ns.as_deref(), &name);
    let stored = conversion::to_stored(state, req.target.custom.as_ref(), &obj).await?;
    let rev = state
        .store
        .create(&key, object::to_store(stored.as_ref().unwrap_or(&obj)))
        .await
        .map_err(|e| ApiError::from_store(e, res, &name))?;
    unclaim.disarm();
    object::set_resource_version(&mut obj, rev);
    Ok(respond(req, StatusCode::CREATED, obj, &warnings))
}
