//! What an object costs against a ResourceQuota, as upstream's quota
//! evaluators (`pkg/quota/v1/evaluator/core`): the usage of pods
//! (requests and limits of their containers, `pods`), services
//! (`services.nodeports`, `services.loadbalancers`), claims
//! (`requests.storage`), the object counts of the core kinds and
//! `count/<resource>.<group>` for any kind; which pods a quota's scopes
//! select; and the words of upstream's refusals. Quantities are summed in
//! thousandths (millis), as `resource.Quantity` adds them exactly.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::quantity::{format_bytes, format_milli_cpu, parse_quantity};
use crate::resources::ResourceInfo;

/// Resource name → amount × 1000.
pub type Usage = BTreeMap<String, i128>;

/// The object counts whose legacy names predate `count/`.
const LEGACY_COUNTS: [(&str, &str); 7] = [
    ("pods", "pods"),
    ("services", "services"),
    ("replicationcontrollers", "replicationcontrollers"),
    ("resourcequotas", "resourcequotas"),
    ("secrets", "secrets"),
    ("configmaps", "configmaps"),
    ("persistentvolumeclaims", "persistentvolumeclaims"),
];

/// The resources a pod's containers must name when a quota constrains
/// them (upstream's `validationSet`).
const POD_VALIDATION_SET: [&str; 6] = [
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// Whether a quota on `name` counts whole objects (its values must be integers).
pub fn is_integer_resource(name: &str) -> bool {
    name.starts_with("count/")
        || LEGACY_COUNTS.iter().any(|(n, _)| *n == name)
        || name == "services.nodeports"
        || name == "services.loadbalancers"
}

/// `count/deployments.apps`, or `count/pods` for the core group.
pub fn count_name(res: &ResourceInfo) -> String {
    format!("count/{}", res.plural_group())
}

/// Parses a quantity to millis; an unparsable one is 0.
pub fn millis(q: &Value) -> i128 {
    q.as_str()
        .and_then(|s| parse_quantity(s).ok())
        .or_else(|| q.as_i64().and_then(|n| parse_quantity(&n.to_string()).ok()))
        .map_or(0, |q| q.millis())
}

/// An amount in millis as a quantity's text, canonical as upstream prints
/// it: `500m`, `2`, `128Mi`.
pub fn format(name: &str, millis: i128) -> String {
    let text = if millis % 1000 != 0 {
        format_milli_cpu(millis)
    } else if (name.contains("memory") || name.contains("storage")) && millis != 0 {
        format_bytes(millis / 1000)
    } else {
        (millis / 1000).to_string()
    };
    parse_quantity(&text).map_or(text, |q| q.canonical())
}

/// `ResourceList` JSON from a usage, restricted to `names` when given.
pub fn to_resource_list(usage: &Usage, names: Option<&BTreeSet<String>>) -> Value {
    let mut out = serde_json::Map::new();
    for (k, v) in usage {
        if names.is_none_or(|n| n.contains(k)) {
            out.insert(k.clone(), Value::String(format(k, *v)));
        }
    }
    Value::Object(out)
}

/// A `ResourceList` JSON read into millis.
pub fn from_resource_list(list: &Value) -> Usage {
    list.as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), millis(v))).collect())
        .unwrap_or_default()
}

/// Upstream's `prettyPrint`: `k=v` sorted by name, joined by `,`.
pub fn pretty(usage: &Usage) -> String {
    usage
        .iter()
        .map(|(k, v)| format!("{k}={}", format(k, *v)))
        .collect::<Vec<_>>()
        .join(",")
}

/// The usage of one container's requests and limits, as upstream's
/// `podComputeUsageHelper` (without `pods`).
fn container_usage(requests: &Value, limits: &Value) -> Usage {
    let mut u = Usage::new();
    for (k, v) in requests.as_object().into_iter().flatten() {
        let m = millis(v);
        if k == "cpu" || k == "memory" || k == "ephemeral-storage" {
            u.insert(k.clone(), m);
        }
        u.insert(format!("requests.{k}"), m);
    }
    for (k, v) in limits.as_object().into_iter().flatten() {
        u.insert(format!("limits.{k}"), millis(v));
    }
    u
}

fn add(into: &mut Usage, from: &Usage) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

fn containers<'a>(spec: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    spec.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn resources_of(c: &Value) -> Usage {
    let r = c.get("resources").unwrap_or(&Value::Null);
    container_usage(
        r.get("requests").unwrap_or(&Value::Null),
        r.get("limits").unwrap_or(&Value::Null),
    )
}

/// Whether a pod still counts (upstream's `QuotaV1Pod`): not Succeeded or
/// Failed, and not past its deletion grace period (`now_unix`: seconds).
pub fn pod_counts(pod: &Value, now_unix: i64) -> bool {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    if matches!(phase, Some("Succeeded") | Some("Failed")) {
        return false;
    }
    let deleted = pod
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    let grace = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    if let (Some(at), Some(grace)) = (deleted, grace) {
        if now_unix > at.timestamp() + grace {
            return false;
        }
    }
    true
}

/// A pod's usage: `pods`, `count/pods`, and the sum of its containers'
/// requests and limits, or its largest init container's where that is
/// more (upstream's `PodUsageFunc`), plus the pod overhead.
pub fn pod_usage(pod: &Value) -> Usage {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let mut sum = Usage::new();
    for c in containers(spec, "containers") {
        add(&mut sum, &resources_of(c));
    }
    for c in containers(spec, "initContainers") {
        for (k, v) in resources_of(c) {
            let e = sum.entry(k).or_default();
            *e = (*e).max(v);
        }
    }
    if let Some(overhead) = spec.get("overhead") {
        let o = container_usage(overhead, overhead);
        for (k, v) in o {
            if let Some(e) = sum.get_mut(&k) {
                *e += v;
            }
        }
    }
    sum.insert("pods".into(), 1000);
    sum.insert("count/pods".into(), 1000);
    sum
}

/// The usage of one object of `res`: its own evaluator's for pods,
/// services and claims, else the counts `count/<resource>` and its legacy
/// name.
pub fn usage(res: &ResourceInfo, obj: &Value) -> Usage {
    if res.group.is_empty() && res.kind == "Pod" {
        return pod_usage(obj);
    }
    let mut u = Usage::new();
    u.insert(count_name(res), 1000);
    if res.group.is_empty() {
        if let Some((legacy, _)) = LEGACY_COUNTS.iter().find(|(_, p)| *p == res.plural) {
            u.insert((*legacy).to_string(), 1000);
        }
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        match res.kind {
            "Service" => {
                let ty = spec
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("ClusterIP");
                let ports = spec
                    .get("ports")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let node_ports = match ty {
                    "NodePort" => ports,
                    "LoadBalancer"
                        if spec.get("allocateLoadBalancerNodePorts")
                            != Some(&Value::Bool(false)) =>
                    {
                        ports
                    }
                    _ => 0,
                };
                u.insert("services.nodeports".into(), node_ports as i128 * 1000);
                u.insert(
                    "services.loadbalancers".into(),
                    i128::from(ty == "LoadBalancer") * 1000,
                );
            }
            "PersistentVolumeClaim" => {
                if let Some(q) = spec.pointer("/resources/requests/storage") {
                    u.insert("requests.storage".into(), millis(q));
                }
            }
            _ => {}
        }
    }
    u
}

/// Whether the kind has an evaluator that knows its resources beyond counts.
fn matches_scopes_of(res: &ResourceInfo) -> bool {
    res.group.is_empty() && res.kind == "Pod"
}

/// Whether a pod is in one scope of a quota (upstream's `podMatchesScopeFunc`).
fn pod_in_scope(scope: &str, pod: &Value, selector: Option<&Value>) -> bool {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let terminating = spec
        .get("activeDeadlineSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|s| s >= 0);
    let best_effort = qos_best_effort(spec);
    match scope {
        "Terminating" => terminating,
        "NotTerminating" => !terminating,
        "BestEffort" => best_effort,
        "NotBestEffort" => !best_effort,
        "PriorityClass" => {
            let class = spec.get("priorityClassName").and_then(Value::as_str);
            match selector {
                None => class.is_some_and(|c| !c.is_empty()),
                Some(sel) => {
                    let op = sel.get("operator").and_then(Value::as_str).unwrap_or("");
                    let values: Vec<&str> = sel
                        .get("values")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    let class = class.filter(|c| !c.is_empty());
                    match op {
                        "In" => class.is_some_and(|c| values.contains(&c)),
                        "NotIn" => class.is_none_or(|c| !values.contains(&c)),
                        "Exists" => class.is_some(),
                        "DoesNotExist" => class.is_none(),
                        _ => false,
                    }
                }
            }
        }
        // CrossNamespacePodAffinity: pods naming other namespaces in affinity terms.
        _ => false,
    }
}

fn qos_best_effort(spec: &Value) -> bool {
    ["containers", "initContainers"]
        .iter()
        .flat_map(|k| containers(spec, k))
        .all(|c| {
            let r = c.get("resources").unwrap_or(&Value::Null);
            ["requests", "limits"].iter().all(|l| {
                r.get(l)
                    .and_then(Value::as_object)
                    .is_none_or(|m| !m.contains_key("cpu") && !m.contains_key("memory"))
            })
        })
}

/// Whether `quota` (JSON) applies to `obj` of `res`: every scope of
/// `spec.scopes` and `spec.scopeSelector` matches. A quota with scopes
/// tracks pods only.
pub fn quota_matches(quota: &Value, res: &ResourceInfo, obj: &Value) -> bool {
    let spec = quota.get("spec").unwrap_or(&Value::Null);
    let scopes: Vec<(&str, Option<&Value>)> = spec
        .get("scopes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| Some((s.as_str()?, None)))
        .chain(
            spec.pointer("/scopeSelector/matchExpressions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|e| Some((e.get("scopeName")?.as_str()?, Some(e)))),
        )
        .collect();
    if scopes.is_empty() {
        return true;
    }
    matches_scopes_of(res) && scopes.iter().all(|(s, sel)| pod_in_scope(s, obj, *sel))
}

/// The resources a quota with `scopes` may track: pod resources only.
pub fn scoped_resource_allowed(scope: &str, resource: &str) -> bool {
    let compute = resource == "pods"
        || resource == "count/pods"
        || POD_VALIDATION_SET.contains(&resource)
        || resource.starts_with("requests.")
        || resource.starts_with("limits.");
    match scope {
        "BestEffort" => resource == "pods" || resource == "count/pods",
        _ => compute,
    }
}

/// Upstream's pod `Constraints`: when a quota constrains cpu or memory,
/// every container must name them; the error after `must specify `.
pub fn pod_constraints(pod: &Value, constrained: &BTreeSet<String>) -> Option<String> {
    let required: BTreeSet<&str> = POD_VALIDATION_SET
        .iter()
        .copied()
        .filter(|r| constrained.contains(*r))
        .collect();
    if required.is_empty() {
        return None;
    }
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let mut missing: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for c in containers(spec, "containers").chain(containers(spec, "initContainers")) {
        let has = resources_of(c);
        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
        for r in &required {
            if !has.contains_key(*r) {
                missing.entry(r).or_default().insert(name.to_string());
            }
        }
    }
    if missing.is_empty() {
        return None;
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| {
            format!(
                "{r} for: {}",
                names.iter().cloned().collect::<Vec<_>>().join(",")
            )
        })
        .collect();
    Some(format!("must specify {}", parts.join("; ")))
}

#[cfg(test)]
mod tests;
