//! Object bookkeeping the API server owns: system metadata (uid,
//! timestamps, generation, resourceVersion), version conversion, and how
//! objects are encoded in the store.

use bosun::resources::ResourceInfo;
use rand::Rng;
use serde_json::{json, Map, Value};

use super::error::{ApiError, ApiResult};
use crate::store::KeyValue;

/// `generateName` plus five characters from Kubernetes' alphabet (no
/// vowels, no look-alike digits).
pub fn generate_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
}

pub fn metadata(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// The object's metadata map, created if missing.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    metadata(obj)?.get(field)?.as_str()
}

/// Decodes a stored object and stamps it with the revision it was written at.
pub fn from_store(kv: &KeyValue) -> ApiResult<Value> {
    let mut obj: Value = serde_json::from_slice(&kv.value)
        .map_err(|e| ApiError::internal(format!("corrupt object at {}: {e}", kv.key)))?;
    set_resource_version(&mut obj, kv.mod_revision);
    Ok(obj)
}

pub fn set_resource_version(obj: &mut Value, rev: u64) {
    metadata_mut(obj).insert("resourceVersion".into(), json!(rev.to_string()));
}

/// The bytes kept in the store: the object without its resourceVersion,
/// which the store's revision stands for.
pub fn to_store(obj: &Value) -> Vec<u8> {
    let mut obj = obj.clone();
    metadata_mut(&mut obj).remove("resourceVersion");
    serde_json::to_vec(&obj).expect("a JSON value serializes")
}

/// The resourceVersion a client sent, if any.
pub fn requested_revision(obj: &Value) -> ApiResult<Option<u64>> {
    match meta_str(obj, "resourceVersion") {
        None | Some("") => Ok(None),
        Some(rv) => rv.parse().map(Some).map_err(|_| {
            ApiError::bad_request(format!(
                "metadata.resourceVersion: Invalid value: {rv:?}: must be a number"
            ))
        }),
    }
}

/// Paths of the fields in `input` that the typed schema dropped: the
/// fields Kubernetes calls unknown.
pub fn unknown_fields(input: &Value, normalized: &Value) -> Vec<String> {
    fn walk(input: &Value, norm: &Value, path: &str, out: &mut Vec<String>) {
        match (input, norm) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in a {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    match b.get(k) {
                        Some(nv) => walk(v, nv, &p, out),
                        None if v.is_null() => {}
                        None => out.push(p),
                    }
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                for (i, (v, nv)) in a.iter().zip(b).enumerate() {
                    walk(v, nv, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(input, normalized, "", &mut out);
    out
}

/// Kubernetes' QoS class of a pod spec: Guaranteed when every container
/// has cpu and memory limits equal to its requests, BestEffort when none
/// sets any, Burstable otherwise.
pub fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        let requests = c.pointer("/resources/requests");
        let limits = c.pointer("/resources/limits");
        for r in ["cpu", "memory"] {
            let req = requests.and_then(|m| m.get(r));
            let lim = limits.and_then(|m| m.get(r));
            any |= req.is_some() || lim.is_some();
            // Kubernetes defaults a missing request to the limit.
            let effective_req = req.or(lim);
            if lim.is_none() || effective_req != lim {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// Converts an object as a client sent it for `res` into the storage
/// version. Only HorizontalPodAutoscaler has several versions: autoscaling/v1
/// objects become autoscaling/v2 ones; autoscaling/v2beta2 has v2's shape
/// and only changes its apiVersion.
pub fn to_storage_version(res: &ResourceInfo, mut obj: Value) -> Value {
    if res.kind == "HorizontalPodAutoscaler" && res.version == "v1" {
        obj = hpa_v1_to_v2(obj);
    }
    obj["apiVersion"] = json!(storage_api_version(res));
    obj["kind"] = json!(res.kind);
    obj
}

/// Converts a stored object into the version `res` serves.
pub fn from_storage_version(res: &ResourceInfo, mut obj: Value) -> Value {
    if res.kind == "HorizontalPodAutoscaler" && res.version == "v1" {
        obj = hpa_v2_to_v1(obj);
    }
    obj["apiVersion"] = json!(res.api_version());
    obj["kind"] = json!(res.kind);
    obj
}

fn storage_api_version(res: &ResourceInfo) -> String {
    if res.group.is_empty() {
        res.storage_version.to_string()
    } else {
        format!("{}/{}", res.group, res.storage_version)
    }
}

fn hpa_v1_to_v2(mut obj: Value) -> Value {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        if let Some(cpu) = spec.remove("targetCPUUtilizationPercentage") {
            spec.insert(
                "metrics".into(),
                json!([{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": cpu}}}]),
            );
        }
    }
    if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
        if let Some(cpu) = status.remove("currentCPUUtilizationPercentage") {
            status.insert(
                "currentMetrics".into(),
                json!([{"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": cpu}}}]),
            );
        }
    }
    obj
}

fn is_cpu_utilization(metric: &Value) -> bool {
    metric["type"] == "Resource" && metric.pointer("/resource/name") == Some(&json!("cpu"))
}

fn hpa_v2_to_v1(mut obj: Value) -> Value {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        let metrics = spec.remove("metrics");
        spec.remove("behavior");
        let cpu = metrics
            .as_ref()
            .and_then(Value::as_array)
            .and_then(|m| m.iter().find(|m| is_cpu_utilization(m)))
            .and_then(|m| m.pointer("/resource/target/averageUtilization").cloned());
        if let Some(cpu) = cpu {
            spec.insert("targetCPUUtilizationPercentage".into(), cpu);
        }
    }
    if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
        let metrics = status.remove("currentMetrics");
        status.remove("conditions");
        let cpu = metrics
            .as_ref()
            .and_then(Value::as_array)
            .and_then(|m| m.iter().find(|m| is_cpu_utilization(m)))
            .and_then(|m| m.pointer("/resource/current/averageUtilization").cloned());
        if let Some(cpu) = cpu {
            status.insert("currentCPUUtilizationPercentage".into(), cpu);
        }
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_name_their_paths() {
        let input = json!({"spec": {"replicas": 1, "replicass": 2,
            "template": {"spec": {"containers": [{"name": "a", "imagee": "x"}]}}}, "status": null});
        let norm = json!({"spec": {"replicas": 1,
            "template": {"spec": {"containers": [{"name": "a"}]}}}});
        assert_eq!(
            unknown_fields(&input, &norm),
            ["spec.replicass", "spec.template.spec.containers[0].imagee"]
        );
    }

    #[test]
    fn qos_classes() {
        assert_eq!(
            qos_class(&json!({"containers": [{"name": "a"}]})),
            "BestEffort"
        );
        let g = json!({"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]});
        assert_eq!(qos_class(&g), "Guaranteed");
        let b = json!({"containers": [{"resources": {"requests": {"cpu": "50m"}}}]});
        assert_eq!(qos_class(&b), "Burstable");
    }

    #[test]
    fn hpa_versions_round_trip() {
        let v1 =
            bosun::resources::by_path("autoscaling", "v1", "horizontalpodautoscalers").unwrap();
        let obj = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h"},
            "spec": {"maxReplicas": 10, "minReplicas": 1, "targetCPUUtilizationPercentage": 5,
                     "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}});
        let stored = to_storage_version(v1, obj.clone());
        assert_eq!(stored["apiVersion"], "autoscaling/v2");
        assert_eq!(
            stored.pointer("/spec/metrics/0/resource/target/averageUtilization"),
            Some(&json!(5))
        );
        assert_eq!(from_storage_version(v1, stored), obj);
    }

    #[test]
    fn generated_names_use_the_prefix() {
        let n = generate_name("web-");
        assert!(n.starts_with("web-") && n.len() == 9);
    }
}
