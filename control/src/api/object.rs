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
/// which the store's revision stands for (serialized leaving it out, not
/// from a copy without it).
pub fn to_store(obj: &Value) -> Vec<u8> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        let mut obj = obj.clone();
        metadata_mut(&mut obj).remove("resourceVersion");
        return serde_json::to_vec(&obj).expect("a JSON value serializes");
    }
    serde_json::to_vec(&WithoutRevision(obj)).expect("a JSON value serializes")
}

/// Serializes an object as it is but for `metadata.resourceVersion`.
struct WithoutRevision<'a>(&'a Value);

/// Serializes a map as it is but for one key.
struct MapWithout<'a>(&'a Map<String, Value>, &'static str);

impl serde::Serialize for WithoutRevision<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Value::Object(top) = self.0 else {
            return self.0.serialize(s);
        };
        let mut map = s.serialize_map(Some(top.len()))?;
        for (k, v) in top {
            match v {
                Value::Object(md) if k == "metadata" => {
                    map.serialize_entry(k, &MapWithout(md, "resourceVersion"))?
                }
                _ => map.serialize_entry(k, v)?,
            }
        }
        map.end()
    }
}

impl serde::Serialize for MapWithout<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let len = self.0.len() - usize::from(self.0.contains_key(self.1));
        let mut map = s.serialize_map(Some(len))?;
        for (k, v) in self.0.iter().filter(|(k, _)| *k != self.1) {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// Whether two objects are the same but for `metadata.resourceVersion`
/// (compared in place, without copies; a missing metadata counts as an
/// empty one, as [`metadata_mut`] would make it).
pub fn same_but_revision(a: &Value, b: &Value) -> bool {
    let (Value::Object(a), Value::Object(b)) = (a, b) else {
        return a == b;
    };
    fn meta<'a>(
        o: &'a Map<String, Value>,
        empty: &'a Map<String, Value>,
    ) -> &'a Map<String, Value> {
        match o.get("metadata") {
            Some(Value::Object(m)) => m,
            _ => empty,
        }
    }
    let empty = Map::new();
    let not = |skip: &'static str| move |(k, _): &(&String, &Value)| *k != skip;
    meta(a, &empty)
        .iter()
        .filter(not("resourceVersion"))
        .eq(meta(b, &empty).iter().filter(not("resourceVersion")))
        && a.iter()
            .filter(not("metadata"))
            .eq(b.iter().filter(not("metadata")))
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
    // `path` grows and shrinks as the walk goes (no string per field).
    fn walk(input: &Value, norm: &Value, path: &mut String, out: &mut Vec<String>) {
        match (input, norm) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in a {
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                    match b.get(k) {
                        Some(nv) => walk(v, nv, path, out),
                        None if v.is_null() => {}
                        None => out.push(path.clone()),
                    }
                    path.truncate(len);
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                use std::fmt::Write;
                for (i, (v, nv)) in a.iter().zip(b).enumerate() {
                    let len = path.len();
                    let _ = write!(path, "[{i}]");
                    walk(v, nv, path, out);
                    path.truncate(len);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(input, normalized, &mut String::new(), &mut out);
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
    if let Some(stored) = res.shares_storage_of() {
        // events.k8s.io/v1 Events are kept as core v1 Events.
        obj = bosun::event_versions::events_v1_to_core(obj);
        obj["apiVersion"] = json!(stored.api_version());
        obj["kind"] = json!(stored.kind);
        return obj;
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
    if res.shares_storage_of().is_some() {
        obj = bosun::event_versions::core_to_events_v1(obj);
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
    fn stored_bytes_leave_out_the_resource_version_only() {
        let obj = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "resourceVersion": "7", "labels": {"resourceVersion": "x"}},
            "spec": {"resourceVersion": "kept"}});
        let stored: Value = serde_json::from_slice(&to_store(&obj)).unwrap();
        let mut expected = obj.clone();
        expected["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        assert_eq!(stored, expected);
        // Without metadata, an empty one is stored, as before.
        let bare: Value = serde_json::from_slice(&to_store(&json!({"kind": "Pod"}))).unwrap();
        assert_eq!(bare, json!({"kind": "Pod", "metadata": {}}));
    }

    #[test]
    fn sameness_ignores_the_resource_version_only() {
        let a = json!({"metadata": {"name": "p", "resourceVersion": "1"}, "spec": {"x": 1}});
        let b = json!({"metadata": {"name": "p", "resourceVersion": "2"}, "spec": {"x": 1}});
        let c = json!({"metadata": {"name": "p"}, "spec": {"x": 1}});
        assert!(same_but_revision(&a, &b));
        assert!(same_but_revision(&a, &c));
        assert!(same_but_revision(
            &json!({"spec": {}}),
            &json!({"metadata": {}, "spec": {}})
        ));
        let relabeled = json!({"metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"x": 1}});
        assert!(!same_but_revision(&a, &relabeled));
        let respec = json!({"metadata": {"name": "p", "resourceVersion": "1"}, "spec": {"x": 2}});
        assert!(!same_but_revision(&a, &respec));
        let more = json!({"metadata": {"name": "p"}, "spec": {"x": 1}, "status": {}});
        assert!(!same_but_revision(&a, &more));
        assert!(!same_but_revision(&more, &a));
    }

    #[test]
    fn generated_names_use_the_prefix() {
        let n = generate_name("web-");
        assert!(n.starts_with("web-") && n.len() == 9);
    }
}
