//! The files of a `downwardAPI` volume (or projected source): the pod's
//! own metadata and its containers' resources, as the kubelet renders
//! them. Labels and annotations are one `key="value"` line each, sorted
//! (Go's `%q` quoting); a resource is the quantity divided by `divisor`,
//! rounded up; a limit the container does not set is the node's capacity.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, Pod, ResourceFieldSelector};
use serde_json::Value;

use bosun::quantity::parse_quantity;

/// The files `items` make of `pod`: path → (contents, mode).
pub fn files(
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    default_mode: u32,
) -> Result<BTreeMap<String, (Vec<u8>, u32)>, String> {
    let mut out = BTreeMap::new();
    for item in items {
        let value = match (&item.field_ref, &item.resource_field_ref) {
            (Some(f), _) => field(pod, &f.field_path)?,
            (None, Some(r)) => resource(pod, r)?,
            (None, None) => {
                return Err(format!(
                    "downwardAPI item {:?} has neither fieldRef nor resourceFieldRef",
                    item.path
                ))
            }
        };
        out.insert(
            item.path.clone(),
            (
                value.into_bytes(),
                item.mode.map_or(default_mode, |m| m as u32 & 0o777),
            ),
        );
    }
    Ok(out)
}

/// Go's `%q` of a string, as far as label and annotation values need it.
fn go_quote(s: &str) -> String {
    // JSON's escapes agree with Go's for quotes, backslashes and control
    // characters.
    Value::String(s.to_string()).to_string()
}

fn format_map(m: Option<&BTreeMap<String, String>>) -> String {
    m.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A metadata field a volume may show.
fn field(pod: &Pod, path: &str) -> Result<String, String> {
    let md = &pod.metadata;
    let unsupported = || format!("unsupported fieldPath in a downwardAPI volume: {path}");
    Ok(match path {
        "metadata.name" => md.name.clone().unwrap_or_default(),
        "metadata.namespace" => md.namespace.clone().unwrap_or_default(),
        "metadata.uid" => md.uid.clone().unwrap_or_default(),
        "metadata.labels" => format_map(md.labels.as_ref()),
        "metadata.annotations" => format_map(md.annotations.as_ref()),
        _ => {
            let (map, key) = path.split_once("['").ok_or_else(unsupported)?;
            let key = key.strip_suffix("']").ok_or_else(unsupported)?;
            let m = match map {
                "metadata.labels" => md.labels.as_ref(),
                "metadata.annotations" => md.annotations.as_ref(),
                _ => return Err(unsupported()),
            };
            m.and_then(|m| m.get(key)).cloned().unwrap_or_default()
        }
    })
}

/// The node's capacity for a resource a container sets no limit for.
fn node_capacity(resource: &str) -> Option<String> {
    match resource {
        "cpu" => std::thread::available_parallelism()
            .ok()
            .map(|n| n.get().to_string()),
        "memory" => std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
            let kib = m
                .lines()
                .find(|l| l.starts_with("MemTotal:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()?;
            Some(format!("{}", kib * 1024))
        }),
        _ => None,
    }
}

/// A container's resource, divided by the divisor and rounded up.
fn resource(pod: &Pod, r: &ResourceFieldSelector) -> Result<String, String> {
    let container = r.container_name.as_deref().unwrap_or_default();
    let c = pod
        .spec
        .iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .find(|c| c.name == container)
        .ok_or_else(|| format!("resourceFieldRef: no container named {container:?}"))?;
    let (kind, name) = r
        .resource
        .split_once('.')
        .ok_or_else(|| format!("unsupported resource {:?}", r.resource))?;
    let res = c.resources.as_ref();
    let set = match kind {
        "limits" => res.and_then(|r| r.limits.as_ref()),
        "requests" => res.and_then(|r| r.requests.as_ref()),
        _ => return Err(format!("unsupported resource {:?}", r.resource)),
    }
    .and_then(|m| m.get(name))
    .map(|q| q.0.clone());
    let quantity = match (set, kind) {
        (Some(q), _) => q,
        (None, "limits") => node_capacity(name).unwrap_or_else(|| "0".into()),
        (None, _) => "0".into(),
    };
    let divisor = r.divisor.as_ref().map_or("1", |d| d.0.as_str());
    let q = parse_quantity(&quantity).map_err(|e| format!("{}: {e:?}", r.resource))?;
    let d = parse_quantity(divisor).map_err(|e| format!("divisor {divisor:?}: {e:?}"))?;
    let d = d.millis();
    if d <= 0 {
        return Err(format!("divisor {divisor:?} must be positive"));
    }
    let m = q.millis();
    Ok(((m + d - 1) / d).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_and_resources_as_the_kubelet_writes_them() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "team", "uid": "u1",
                "labels": {"b": "2", "a": "say \"hi\""}},
            "spec": {"containers": [{"name": "c", "image": "x",
                "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}}}]},
        }))
        .unwrap();
        let items: Vec<DownwardAPIVolumeFile> = serde_json::from_value(serde_json::json!([
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
            {"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}, "mode": 0o600},
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "b", "fieldRef": {"fieldPath": "metadata.labels['b']"}},
            {"path": "cpu", "resourceFieldRef": {"containerName": "c", "resource": "limits.cpu", "divisor": "1m"}},
            {"path": "cores", "resourceFieldRef": {"containerName": "c", "resource": "limits.cpu"}},
            {"path": "mem", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}},
        ]))
        .unwrap();
        let got = files(&pod, &items, 0o644).unwrap();
        let text = |k: &str| String::from_utf8(got[k].0.clone()).unwrap();
        assert_eq!(text("name"), "web");
        assert_eq!(text("ns"), "team");
        assert_eq!(got["ns"].1, 0o600);
        assert_eq!(got["name"].1, 0o644);
        assert_eq!(text("labels"), "a=\"say \\\"hi\\\"\"\nb=\"2\"");
        assert_eq!(text("b"), "2");
        assert_eq!(text("cpu"), "250");
        assert_eq!(text("cores"), "1", "rounded up");
        assert_eq!(text("mem"), "64");
        let bad: Vec<DownwardAPIVolumeFile> = serde_json::from_value(
            serde_json::json!([{"path": "ip", "fieldRef": {"fieldPath": "status.podIP"}}]),
        )
        .unwrap();
        assert!(files(&pod, &bad, 0o644)
            .unwrap_err()
            .contains("status.podIP"));
    }
}
