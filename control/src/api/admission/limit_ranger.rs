//! LimitRanger, as upstream's admission plugin
//! (`plugin/pkg/admission/limitranger`): on a pod's create, the
//! `Container` items of the namespace's LimitRanges fill in the requests
//! and limits a container leaves out (`defaultRequest`, `default`; the
//! pod is annotated `kubernetes.io/limit-ranger`), then every item's
//! `min`, `max` and `maxLimitRequestRatio` are checked per container
//! (`Container`) or summed over the pod (`Pod`); a claim's
//! `requests.storage` against `PersistentVolumeClaim` items. A refusal is
//! 403 in upstream's words (`pods "x" is forbidden: minimum cpu usage per
//! Container is 100m, but request is 50m`).

use std::collections::BTreeMap;

use bosun::quantity::parse_quantity;
use serde_json::{json, Map, Value};

use crate::api::error::{ApiError, ApiResult};
use crate::api::object::{self, meta_str};
use crate::api::{ApiRequest, ApiState};

const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// Applies the namespace's LimitRanges to a pod or claim being created:
/// defaults in place, then the checks.
pub async fn admit(state: &ApiState, req: &ApiRequest, obj: &mut Value) -> ApiResult<()> {
    let res = req.target.res;
    if !res.group.is_empty()
        || !matches!(res.kind, "Pod" | "PersistentVolumeClaim")
        || req.target.subresource.is_some()
    {
        return Ok(());
    }
    let Some(ns) = meta_str(obj, "namespace").map(str::to_string) else {
        return Ok(());
    };
    let ranges_res = bosun::resources::by_name("limitranges").expect("served");
    let prefix = format!("{}{ns}/", ranges_res.storage_prefix());
    let (kvs, _) = state
        .store
        .list(&prefix)
        .await
        .map_err(|e| ApiError::from_store(e, ranges_res, ""))?;
    let name = meta_str(obj, "name").unwrap_or("").to_string();
    for kv in &kvs {
        let range = object::from_store(kv)?;
        let errs = if res.kind == "Pod" {
            limit_pod(&range, obj)
        } else {
            limit_claim(&range, obj)
        };
        if !errs.is_empty() {
            return Err(ApiError::forbidden_object(res, &name, &aggregate(&errs)));
        }
    }
    if res.kind == "Pod" && obj.get("status").is_some() {
        let qos = object::qos_class(obj.get("spec").unwrap_or(&Value::Null));
        obj["status"]["qosClass"] = json!(qos);
    }
    Ok(())
}

/// Go's `utilerrors.NewAggregate(errs).Error()`.
pub fn aggregate(errs: &[String]) -> String {
    match errs {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

fn items<'a>(range: &'a Value, ty: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    range
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |i| i.get("type").and_then(Value::as_str) == Some(ty))
}

fn list<'a>(v: &'a Value, key: &str) -> BTreeMap<&'a str, &'a str> {
    v.get(key)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
        .collect()
}

fn canonical(q: &str) -> String {
    parse_quantity(q).map_or_else(|_| q.to_string(), |p| p.canonical())
}

fn millis(q: Option<&str>) -> i128 {
    q.and_then(|q| parse_quantity(q).ok())
        .map_or(0, |p| p.millis())
}

/// Upstream's `mergePodResourceRequirements`: the Container items'
/// `defaultRequest` and `default` fill what each container leaves out.
pub fn apply_defaults(range: &Value, pod: &mut Value) {
    let mut requests = Map::new();
    let mut limits = Map::new();
    for item in items(range, "Container") {
        for (k, v) in list(item, "defaultRequest") {
            requests.insert(k.into(), json!(v));
        }
        for (k, v) in list(item, "default") {
            limits.insert(k.into(), json!(v));
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return;
    }
    let mut notes = Vec::new();
    let Some(containers) = pod
        .pointer_mut("/spec/containers")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in containers.iter_mut() {
        let name = c
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let Some(c) = c.as_object_mut() else { continue };
        let resources = c.entry("resources").or_insert_with(|| json!({}));
        let mut set = |key: &str, defaults: &Map<String, Value>| -> Vec<String> {
            let target = resources
                .as_object_mut()
                .expect("object")
                .entry(key)
                .or_insert_with(|| json!({}));
            let mut set = Vec::new();
            if let Some(target) = target.as_object_mut() {
                for (k, v) in defaults {
                    if !target.contains_key(k) {
                        target.insert(k.clone(), v.clone());
                        set.push(k.clone());
                    }
                }
            }
            set
        };
        let set_limits = set("limits", &limits);
        let set_requests = set("requests", &requests);
        if let Some(r) = resources.as_object_mut() {
            r.retain(|_, v| v.as_object().is_none_or(|m| !m.is_empty()));
        }
        if !set_requests.is_empty() {
            notes.push(format!(
                "{} request for container {name}",
                set_requests.join(", ")
            ));
        }
        if !set_limits.is_empty() {
            notes.push(format!(
                "{} limit for container {name}",
                set_limits.join(", ")
            ));
        }
    }
    if !notes.is_empty() {
        let md = object::metadata_mut(pod);
        let annotations = md.entry("annotations").or_insert_with(|| json!({}));
        annotations[ANNOTATION] = json!(format!("LimitRanger plugin set: {}", notes.join("; ")));
    }
}

/// Upstream's `minConstraint`.
fn min_constraint(
    ty: &str,
    name: &str,
    enforced: &str,
    requests: &BTreeMap<String, String>,
    limits: &BTreeMap<String, String>,
) -> Option<String> {
    let (req, lim) = (requests.get(name), limits.get(name));
    let e = millis(Some(enforced));
    let enforced = canonical(enforced);
    let Some(req) = req else {
        return Some(format!(
            "minimum {name} usage per {ty} is {enforced}.  No request is specified"
        ));
    };
    if millis(Some(req)) < e {
        return Some(format!(
            "minimum {name} usage per {ty} is {enforced}, but request is {}",
            canonical(req)
        ));
    }
    if let Some(lim) = lim.filter(|l| millis(Some(l)) < e) {
        return Some(format!(
            "minimum {name} usage per {ty} is {enforced}, but limit is {}",
            canonical(lim)
        ));
    }
    None
}

/// Upstream's `maxConstraint`.
fn max_constraint(
    ty: &str,
    name: &str,
    enforced: &str,
    requests: &BTreeMap<String, String>,
    limits: &BTreeMap<String, String>,
) -> Option<String> {
    let (req, lim) = (requests.get(name), limits.get(name));
    let e = millis(Some(enforced));
    let enforced = canonical(enforced);
    let Some(lim) = lim else {
        return Some(format!(
            "maximum {name} usage per {ty} is {enforced}.  No limit is specified"
        ));
    };
    if millis(Some(lim)) > e {
        return Some(format!(
            "maximum {name} usage per {ty} is {enforced}, but limit is {}",
            canonical(lim)
        ));
    }
    if let Some(req) = req.filter(|r| millis(Some(r)) > e) {
        return Some(format!(
            "maximum {name} usage per {ty} is {enforced}, but request is {}",
            canonical(req)
        ));
    }
    None
}

/// Upstream's `limitRequestRatioConstraint`.
fn ratio_constraint(
    ty: &str,
    name: &str,
    enforced: &str,
    requests: &BTreeMap<String, String>,
    limits: &BTreeMap<String, String>,
) -> Option<String> {
    let req = millis(requests.get(name).map(String::as_str));
    let lim = millis(limits.get(name).map(String::as_str));
    let max = millis(Some(enforced));
    let enforced = canonical(enforced);
    if req == 0 {
        return Some(format!("{name} max limit to request ratio per {ty} is {enforced}, but no request is specified or request is 0"));
    }
    if lim == 0 {
        return Some(format!("{name} max limit to request ratio per {ty} is {enforced}, but no limit is specified or limit is 0"));
    }
    let ratio = lim as f64 / req as f64;
    if ratio * 1000.0 > max as f64 {
        return Some(format!(
            "{name} max limit to request ratio per {ty} is {enforced}, but provided ratio is {ratio:.6}"
        ));
    }
    None
}

fn resources(c: &Value, key: &str) -> BTreeMap<String, String> {
    c.pointer(&format!("/resources/{key}"))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect()
}

fn check(
    item: &Value,
    ty: &str,
    requests: &BTreeMap<String, String>,
    limits: &BTreeMap<String, String>,
    errs: &mut Vec<String>,
) {
    for (k, v) in list(item, "min") {
        errs.extend(min_constraint(ty, k, v, requests, limits));
    }
    for (k, v) in list(item, "max") {
        errs.extend(max_constraint(ty, k, v, requests, limits));
    }
    for (k, v) in list(item, "maxLimitRequestRatio") {
        errs.extend(ratio_constraint(ty, k, v, requests, limits));
    }
}

/// Upstream's `PodLimitFunc`: defaults, then the checks; the errors.
pub fn limit_pod(range: &Value, pod: &mut Value) -> Vec<String> {
    apply_defaults(range, pod);
    let containers: Vec<&Value> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let mut errs = Vec::new();
    for item in items(range, "Container") {
        for c in &containers {
            check(
                item,
                "Container",
                &resources(c, "requests"),
                &resources(c, "limits"),
                &mut errs,
            );
        }
    }
    for item in items(range, "Pod") {
        let sum = |key: &str| {
            let lists: Vec<BTreeMap<String, String>> =
                containers.iter().map(|c| resources(c, key)).collect();
            let mut out = BTreeMap::new();
            let names: std::collections::BTreeSet<&String> =
                lists.iter().flat_map(|l| l.keys()).collect();
            for n in names {
                // A resource some container leaves out is left out of the sum.
                if lists.iter().all(|l| l.contains_key(n)) {
                    let total: i128 = lists
                        .iter()
                        .map(|l| millis(l.get(n).map(String::as_str)))
                        .sum();
                    out.insert(n.clone(), bosun::quota::format(n, total));
                }
            }
            out
        };
        check(item, "Pod", &sum("requests"), &sum("limits"), &mut errs);
    }
    errs
}

/// Upstream's `PersistentVolumeClaimValidateLimitFunc`: the claim's
/// requests against `min` and `max`.
pub fn limit_claim(range: &Value, claim: &Value) -> Vec<String> {
    let ty = "PersistentVolumeClaim";
    let requests = resources(claim.get("spec").unwrap_or(&Value::Null), "requests");
    let mut errs = Vec::new();
    for item in items(range, ty) {
        for (k, v) in list(item, "min") {
            errs.extend(min_constraint(ty, k, v, &requests, &BTreeMap::new()));
        }
        for (k, v) in list(item, "max") {
            let enforced = canonical(v);
            match requests.get(k) {
                None => errs.push(format!(
                    "maximum {k} usage per {ty} is {enforced}.  No request is specified"
                )),
                Some(r) if millis(Some(r)) > millis(Some(v)) => errs.push(format!(
                    "maximum {k} usage per {ty} is {enforced}, but request is {}",
                    canonical(r)
                )),
                Some(_) => {}
            }
        }
    }
    errs
}

#[cfg(test)]
#[path = "limit_ranger_tests.rs"]
mod tests;
