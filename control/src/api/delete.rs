//! `delete` and `deletecollection`: an object goes at once, or is marked
//! with a deletionTimestamp while a grace period runs or finalizers
//! (`foregroundDeletion`, `orphan`, others') are pending; preconditions on
//! uid and resourceVersion; propagation policies as DeleteOptions give them.

use axum::response::Response;
use bosun::resources::ResourceInfo;
use http::{Method, StatusCode};
use serde_json::{json, Value};

use super::custom::conversion;
use super::decode::content_type;
use super::error::{ApiError, ApiResult};
use super::list::list_matching;
use super::object::{self, from_storage_version, meta_str, metadata_mut};
use super::request::{
    dry_run, list_as_requested, load, name_of, respond, store_delete, store_update, MAX_ATTEMPTS,
};
use super::update::{finalizers, without_revision};
use super::{encoded_response, protobuf, strategy, ApiRequest, ApiState};
use crate::store::{KeyValue, StoreError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Propagation {
    Background,
    Foreground,
    Orphan,
}

pub(super) struct DeleteOptions {
    grace_period: Option<i64>,
    propagation: Propagation,
    uid: Option<String>,
    resource_version: Option<String>,
}

fn delete_options(req: &ApiRequest) -> ApiResult<DeleteOptions> {
    let body: Value = if req.body.is_empty() {
        json!({})
    } else if content_type(req) == protobuf::MEDIA_TYPE {
        protobuf::decode_object(&req.body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
    } else {
        serde_json::from_slice(&req.body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
    };
    delete_options_from(req, &body)
}

/// The options of a delete from the query and a DeleteOptions `body`.
pub(super) fn delete_options_from(req: &ApiRequest, body: &Value) -> ApiResult<DeleteOptions> {
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

pub(super) async fn delete(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    if let Some(done) = strategy::for_res(req.target.res).delete(state, req).await {
        return done;
    }
    let opts = delete_options(req)?;
    let (obj, warnings) = delete_with(state, req, &opts).await?;
    let obj = conversion::one_to_served(state, req.target.custom.as_ref(), obj).await?;
    Ok(respond(req, StatusCode::OK, obj, &warnings))
}

/// Deletes the request's object with `opts`; returns what is left of it
/// (the object marked for deletion, or the last state of it) and the
/// admission webhooks' warnings.
pub(super) async fn delete_with(
    state: &ApiState,
    req: &ApiRequest,
    opts: &DeleteOptions,
) -> ApiResult<(Value, Vec<String>)> {
    let res = req.target.res;
    let name = name_of(req).to_string();
    for _ in 0..MAX_ATTEMPTS {
        let (kv, current) = load(state, req).await?;
        delete_preconditions(res, &name, &current, opts)?;
        let warnings = super::admission::on_delete(state, req, &current).await?;
        match delete_once(state, req, &kv, current, opts).await? {
            Ok(obj) => return Ok((obj, warnings)),
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
    let strategy = strategy::for_res(res);
    let grace = strategy.deletion_grace(&current, opts.grace_period);
    let already = meta_str(&current, "deletionTimestamp").is_some();
    if fins.is_empty() && grace == 0 && !strategy.blocks_deletion(&current) {
        if dry_run(req) {
            return Ok(Ok(current));
        }
        return Ok(store_delete(state, kv, current).await);
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
    strategy.mark_deleting(&mut next);
    if without_revision(&next) == without_revision(&current) || dry_run(req) {
        return Ok(Ok(next));
    }
    Ok(store_update(state, kv, next).await)
}

pub(super) async fn delete_collection(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
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
            who: req.who.clone(),
            method: Method::DELETE,
            target: super::Target {
                res,
                namespace: ns,
                name: Some(name.clone()),
                subresource: None,
                custom: req.target.custom.clone(),
            },
            query: req.query.clone(),
            headers: req.headers.clone(),
            output: req.output,
            body: req.body.clone(),
            body_limit: req.body_limit,
        };
        // Admission webhooks see each delete; a collection's answer has
        // no room for their warnings.
        super::admission::on_delete(state, &item_req, &current).await?;
        match delete_once(state, &item_req, &kv, current, &opts).await? {
            Ok(obj) => deleted.push(obj),
            Err(StoreError::NotFound(_) | StoreError::Conflict { .. }) => {}
            Err(e) => return Err(ApiError::from_store(e, res, &name)),
        }
    }
    let deleted: Vec<Value> = conversion::to_served(state, req.target.custom.as_ref(), deleted)
        .await?
        .into_iter()
        .map(|obj| from_storage_version(res, obj))
        .collect();
    let list = json!({
        "kind": format!("{}List", res.kind),
        "apiVersion": res.api_version(),
        "metadata": {"resourceVersion": state.store.current_revision().to_string()},
        "items": deleted,
    });
    let encoding = req.output.encoding;
    Ok(encoded_response(
        encoding,
        StatusCode::OK,
        &list_as_requested(req, list),
    ))
}
