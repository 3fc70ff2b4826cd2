//! `POST .../pods/{name}/eviction`: deletes a pod on behalf of a
//! disruption (kubectl drain), as kube-apiserver's `EvictionREST`, within
//! the PodDisruptionBudgets of its namespace: the decision is
//! [`bosun::disruption::eviction::decide`]; an allowed
//! eviction under a budget first spends one of its disruptions and
//! records the pod in its `disruptedPods` (a write over the version read,
//! retried on conflict), then deletes the pod with the Eviction's
//! `deleteOptions`. The answer is a Status with code 201, or 429
//! TooManyRequests naming the budget (clients wait and retry), or 500 when
//! more than one budget selects the pod.

use axum::response::Response;
use http::StatusCode;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{json, Value};

use super::decode::decode_body;
use super::delete::{delete_options_from, delete_with};
use super::error::{ApiError, ApiResult};
use super::object::{self, meta_str};
use super::request::{dry_run, load, name_of, store_update, MAX_ATTEMPTS};
use super::{object_response, ApiRequest, ApiState};
use crate::store::{KeyValue, StoreError};
use bosun::disruption::eviction::{
    decide, Verdict, DISRUPTION_BUDGET_CAUSE, MORE_THAN_ONE_BUDGET, VIOLATES_BUDGET,
};

fn pdb_resource() -> &'static bosun::resources::ResourceInfo {
    bosun::resources::by_path("policy", "v1", "poddisruptionbudgets")
        .expect("poddisruptionbudgets are served")
}

/// The stored budgets of `namespace`, each with its store entry.
async fn budgets(
    state: &ApiState,
    namespace: &str,
) -> ApiResult<Vec<(KeyValue, Value, PodDisruptionBudget)>> {
    let res = pdb_resource();
    let prefix = format!("{}{namespace}/", res.storage_prefix());
    let (kvs, _) = state
        .store
        .list(&prefix)
        .await
        .map_err(|e| ApiError::from_store(e, res, ""))?;
    let mut out = Vec::new();
    for kv in kvs {
        let obj = object::from_store(&kv)?;
        let typed: PodDisruptionBudget = serde_json::from_value(obj.clone())
            .map_err(|e| ApiError::internal(format!("stored PodDisruptionBudget: {e}")))?;
        out.push((kv, obj, typed));
    }
    Ok(out)
}

/// The 429 of an eviction a budget forbids (`createTooManyRequestsError`).
fn too_many_requests(cause: String) -> ApiError {
    ApiError {
        code: 429,
        reason: "TooManyRequests",
        message: VIOLATES_BUDGET.to_string(),
        details: Some(json!({"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]})),
    }
}

pub(super) async fn evict(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let eviction = decode_body(req)?;
    let name = name_of(req);
    if let Some(n) = meta_str(&eviction, "name").filter(|n| !n.is_empty()) {
        if n != name {
            return Err(ApiError::bad_request(format!(
                "name in URL does not match name in Eviction object: {name} vs. {n}"
            )));
        }
    }
    let options = eviction
        .get("deleteOptions")
        .filter(|o| o.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let caller_rv = options
        .pointer("/preconditions/resourceVersion")
        .is_some_and(|v| !v.is_null());
    for _ in 0..MAX_ATTEMPTS {
        let (_, pod_obj) = load(state, req).await?;
        let pod: Pod = serde_json::from_value(pod_obj.clone())
            .map_err(|e| ApiError::internal(format!("stored Pod: {e}")))?;
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let pdbs = budgets(state, &ns).await?;
        let typed: Vec<PodDisruptionBudget> = pdbs.iter().map(|(_, _, p)| p.clone()).collect();
        let mut options = options.clone();
        match decide(&pod, &typed, chrono::Utc::now()) {
            Verdict::Delete => {}
            Verdict::DeleteUnhealthy => {
                // Only this version of the pod: one that turned Ready
                // meanwhile is guarded by the budget again.
                if !caller_rv {
                    options["preconditions"]["resourceVersion"] =
                        json!(meta_str(&pod_obj, "resourceVersion").unwrap_or_default());
                }
            }
            Verdict::Decrement(next) => {
                let pdb_name = next.metadata.name.clone().unwrap_or_default();
                let Some((kv, stored, _)) = pdbs
                    .iter()
                    .find(|(_, _, p)| p.metadata.name.as_deref() == Some(pdb_name.as_str()))
                else {
                    continue;
                };
                if !dry_run(req) {
                    let mut written = stored.clone();
                    written["status"] = serde_json::to_value(&next.status)
                        .map_err(|e| ApiError::internal(e.to_string()))?;
                    match store_update(state, kv, written).await {
                        Ok(_) => {}
                        // An eviction or the controller wrote the budget
                        // since it was read: read it again.
                        Err(StoreError::Conflict { .. }) => continue,
                        Err(e) => return Err(ApiError::from_store(e, pdb_resource(), &pdb_name)),
                    }
                }
            }
            Verdict::TooManyRequests(cause) => return Err(too_many_requests(cause)),
            Verdict::Forbidden(why) => {
                let pdb_name = typed
                    .first()
                    .and_then(|p| p.metadata.name.clone())
                    .unwrap_or_default();
                return Err(ApiError::forbidden_object(pdb_resource(), &pdb_name, &why));
            }
            Verdict::MoreThanOneBudget => {
                let mut e =
                    ApiError::internal(format!("Internal error occurred: {MORE_THAN_ONE_BUDGET}"));
                e.details = Some(json!({"causes": [{"message": MORE_THAN_ONE_BUDGET}]}));
                return Err(e);
            }
        }
        let opts = delete_options_from(req, &options)?;
        match delete_with(state, req, &opts).await {
            Ok(_) => {}
            // The unready pod changed under the precondition bosun added:
            // decide again.
            Err(e)
                if e.code == 409
                    && !caller_rv
                    && options.pointer("/preconditions/resourceVersion").is_some() =>
            {
                continue
            }
            Err(e) => return Err(e),
        }
        return Ok(object_response(
            &req.headers,
            StatusCode::CREATED,
            &bosun::serving::success_status(201),
        ));
    }
    Err(ApiError::modified(req.target.res, name))
}
