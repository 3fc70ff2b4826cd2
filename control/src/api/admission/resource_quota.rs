//! ResourceQuota admission, as upstream's `ResourceQuota` plugin
//! (`apiserver/pkg/admission/plugin/resourcequota`): a create in a
//! namespace with quotas is charged to every quota whose scopes match
//! it, against `status.hard` (filled in by the quota controller). A
//! quota the object would exceed refuses it (403, `exceeded quota: NAME,
//! requested: pods=1, used: pods=2, limited: pods=2`); a pod that does not
//! name a request or limit a quota constrains is refused (`failed quota:
//! NAME: must specify limits.cpu for: app`); a quota whose usage the
//! controller has not computed yet refuses too (`status unknown for
//! quota`). The charge is written to `status.used` at the quota's
//! revision, so of two creates racing for the last unit only one wins;
//! the other retries against the new usage. The quota controller
//! recomputes usage from what exists, which frees what deletions leave.

use std::collections::BTreeSet;

use bosun::quota::{self, Usage};
use bosun::resources::ResourceInfo;
use serde_json::Value;

use crate::api::error::{ApiError, ApiResult};
use crate::api::object::{self, meta_str};
use crate::api::request::{dry_run, MAX_ATTEMPTS};
use crate::api::{ApiRequest, ApiState};
use crate::store::{KeyValue, StoreError};

/// The resources a pod's quota evaluator answers for beyond what the pod
/// uses: a quota on them constrains every pod.
fn pod_matches(resource: &str) -> bool {
    matches!(
        resource,
        "pods" | "count/pods" | "cpu" | "memory" | "ephemeral-storage"
    ) || resource.starts_with("requests.")
        || resource.starts_with("limits.")
}

/// What one quota would be charged; None when it does not constrain the object.
struct Charge {
    kv: KeyValue,
    quota: Value,
    requested: Usage,
}

/// Checks one quota; the charge, or the refusal's words.
fn evaluate(
    quota_obj: &Value,
    res: &ResourceInfo,
    obj: &Value,
    usage: &Usage,
) -> Result<Option<Usage>, String> {
    if !quota::quota_matches(quota_obj, res, obj) {
        return Ok(None);
    }
    let qname = meta_str(quota_obj, "name").unwrap_or("");
    let hard = quota::from_resource_list(quota_obj.pointer("/status/hard").unwrap_or(&Value::Null));
    let is_pod = res.group.is_empty() && res.kind == "Pod";
    let constrained: BTreeSet<String> = hard
        .keys()
        .filter(|k| usage.contains_key(*k) || (is_pod && pod_matches(k)))
        .cloned()
        .collect();
    if constrained.is_empty() {
        return Ok(None);
    }
    if is_pod {
        if let Some(why) = quota::pod_constraints(obj, &constrained) {
            return Err(format!("failed quota: {qname}: {why}"));
        }
    }
    let used = quota::from_resource_list(quota_obj.pointer("/status/used").unwrap_or(&Value::Null));
    let unknown: Vec<&str> = constrained
        .iter()
        .filter(|k| !used.contains_key(*k))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "status unknown for quota: {qname}, resource: {}",
            unknown.join(", ")
        ));
    }
    let requested: Usage = usage
        .iter()
        .filter(|(k, _)| constrained.contains(*k))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    let exceeded: BTreeSet<&String> = requested
        .iter()
        .filter(|(k, v)| used[*k] + **v > hard[*k])
        .map(|(k, _)| k)
        .collect();
    if !exceeded.is_empty() {
        let mask = |u: &Usage| -> Usage {
            u.iter()
                .filter(|(k, _)| exceeded.contains(k))
                .map(|(k, v)| (k.clone(), *v))
                .collect()
        };
        return Err(format!(
            "exceeded quota: {qname}, requested: {}, used: {}, limited: {}",
            quota::pretty(&mask(&requested)),
            quota::pretty(&mask(&used)),
            quota::pretty(&mask(&hard)),
        ));
    }
    Ok(Some(requested))
}

/// Charges the create of `obj` to the quotas of its namespace, or refuses it.
pub async fn admit(
    state: &ApiState,
    req: &ApiRequest,
    obj: &Value,
    old: Option<&Value>,
) -> ApiResult<()> {
    let res = req.target.res;
    if old.is_some() || !res.namespaced || req.target.subresource.is_some() {
        return Ok(());
    }
    let Some(ns) = meta_str(obj, "namespace") else {
        return Ok(());
    };
    let name = meta_str(obj, "name").unwrap_or("");
    let quotas_res = bosun::resources::by_name("resourcequotas").expect("served");
    let prefix = format!("{}{ns}/", quotas_res.storage_prefix());
    let usage = quota::usage(res, obj);
    'attempt: for _ in 0..MAX_ATTEMPTS {
        let (kvs, _) = state
            .store
            .list(&prefix)
            .await
            .map_err(|e| ApiError::from_store(e, quotas_res, ""))?;
        let mut charges = Vec::new();
        for kv in kvs {
            let quota_obj = object::from_store(&kv)?;
            match evaluate(&quota_obj, res, obj, &usage) {
                Ok(None) => {}
                Ok(Some(requested)) => charges.push(Charge {
                    kv,
                    quota: quota_obj,
                    requested,
                }),
                Err(why) => return Err(ApiError::forbidden_object(res, name, &why)),
            }
        }
        if dry_run(req) {
            return Ok(());
        }
        for Charge {
            kv,
            mut quota,
            requested,
        } in charges
        {
            let mut used =
                quota::from_resource_list(quota.pointer("/status/used").unwrap_or(&Value::Null));
            for (k, v) in &requested {
                *used.entry(k.clone()).or_default() += v;
            }
            quota["status"]["used"] = quota::to_resource_list(&used, None);
            match state
                .store
                .update(&kv.key, kv.mod_revision, object::to_store(&quota))
                .await
            {
                Ok(_) => {}
                Err(StoreError::Conflict { .. }) => continue 'attempt,
                Err(e) => return Err(ApiError::from_store(e, quotas_res, "")),
            }
        }
        return Ok(());
    }
    Err(ApiError::forbidden_object(
        res,
        name,
        "too many concurrent writes to the namespace's resource quotas, try again",
    ))
}

#[cfg(test)]
#[path = "resource_quota_tests.rs"]
mod tests;
