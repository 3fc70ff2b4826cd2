//! `list`: the objects a request's selectors match, with paging
//! (`limit`/`continue`), as a List or a Table.

use axum::response::Response;
use http::StatusCode;
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use super::filter::Filter;
use super::object::{self, from_storage_version, meta_str};
use super::request::namespace_of;
use super::table::{self, IncludeObject};
use super::{json_response, object_response, ApiRequest, ApiState};

fn list_prefix(req: &ApiRequest) -> String {
    let res = req.target.res;
    match namespace_of(req) {
        Some(ns) if res.namespaced => format!("{}{ns}/", res.storage_prefix()),
        _ => res.storage_prefix(),
    }
}

/// The objects under the request's prefix that its selectors match, in
/// the version the request speaks, and the revision of the snapshot.
pub(super) async fn list_matching(
    state: &ApiState,
    req: &ApiRequest,
) -> ApiResult<(Vec<Value>, u64)> {
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

pub(super) async fn list(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
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
    Ok(object_response(
        &req.headers,
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", res.kind),
            "apiVersion": res.api_version(),
            "metadata": list_meta,
            "items": items,
        }),
    ))
}
