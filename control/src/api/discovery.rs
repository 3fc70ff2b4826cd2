//! Discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/<g>/<v>`) and
//! `/version`, in the legacy (non-aggregated) form: a client that asks for
//! aggregated discovery gets plain `application/json` and falls back.

use bosun::resources::{groups, served, ResourceInfo, RESOURCES};
use serde_json::{json, Value};

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

pub fn api_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    })
}

fn group_doc(name: &str, versions: &[&str]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs[0],
    })
}

pub fn api_group_list() -> Value {
    let groups: Vec<Value> = groups()
        .iter()
        .map(|(name, versions)| group_doc(name, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn api_group(group: &str) -> Option<Value> {
    let (name, versions) = groups().into_iter().find(|(n, _)| *n == group)?;
    let mut doc = group_doc(name, &versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

fn resource_entry(r: &ResourceInfo) -> Value {
    let mut e = json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": if r.is_read_only() { &["get", "list"][..] } else { VERBS },
    });
    if !r.short_names.is_empty() {
        e["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        e["categories"] = json!(r.categories);
    }
    e
}

/// The APIResourceList of one group version, or None if it is not served.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for r in served().filter(|r| r.group == group && r.version == version) {
        resources.push(resource_entry(r));
        for sub in r.subresources {
            let (verbs, kind) = r.subresource_discovery(sub);
            let mut e = json!({
                "name": format!("{}/{sub}", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": kind,
                "verbs": verbs,
            });
            if *sub == "scale" {
                e["group"] = json!("autoscaling");
                e["version"] = json!("v1");
                e["kind"] = json!("Scale");
            }
            if *sub == "eviction" {
                e["group"] = json!("policy");
                e["version"] = json!("v1");
            }
            if *sub == "token" {
                e["group"] = json!("authentication.k8s.io");
                e["version"] = json!("v1");
            }
            resources.push(e);
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }))
}

/// `/version`: the Kubernetes API level bosun's types come from.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": bosun::version::KUBERNETES_MINOR.to_string(),
        "gitVersion": bosun::version::git_version(),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

/// `/openapi/v3`: the index of per-group-version documents.
pub fn openapi_v3_index() -> Value {
    let mut paths = serde_json::Map::new();
    let mut gvs: Vec<(&str, &str)> = RESOURCES.iter().map(|r| (r.group, r.version)).collect();
    gvs.dedup();
    for (group, version) in gvs {
        let key = if group.is_empty() {
            format!("api/{version}")
        } else {
            format!("apis/{group}/{version}")
        };
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={}", env!("CARGO_PKG_VERSION"))}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/<g>/<v>`: a document with the
/// operations of each resource and the query parameters they take. It
/// describes operations, not schemas: enough for clients to learn that
/// the server validates fields itself (`fieldValidation`), as kubectl
/// checks before it sends a create or an apply.
pub fn openapi_v3_group_version(group: &str, version: &str) -> Option<Value> {
    let served: Vec<&ResourceInfo> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if served.is_empty() {
        return None;
    }
    let query = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": true});
    let mut paths = serde_json::Map::new();
    for r in served {
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let write_params = json!([
            query("dryRun"),
            query("fieldManager"),
            query("fieldValidation")
        ]);
        let op = |action: &str, params: &Value| {
            json!({
                "operationId": format!("{action}{}", r.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        let base = r.collection_path(if r.namespaced {
            Some("{namespace}")
        } else {
            None
        });
        let mut patch_params = write_params.clone();
        patch_params
            .as_array_mut()
            .expect("array")
            .push(query("force"));
        paths.insert(
            base.clone(),
            json!({"get": op("list", &json!([query("labelSelector"), query("fieldSelector"), query("watch")])),
                   "post": op("post", &write_params)}),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({"get": op("get", &json!([])),
                   "put": op("put", &write_params),
                   "patch": op("patch", &patch_params),
                   "delete": op("delete", &json!([query("dryRun"), query("gracePeriodSeconds"), query("propagationPolicy")]))}),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": self::version()["gitVersion"]},
        "paths": paths,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apps_v1_lists_scale_subresources() {
        let doc = resource_list("apps", "v1").unwrap();
        let names: Vec<&str> = doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"deployments"));
        assert!(names.contains(&"deployments/scale"));
        assert!(names.contains(&"statefulsets/status"));
        assert!(resource_list("apps", "v2").is_none());
    }

    #[test]
    fn pods_list_log_exec_and_attach_as_kubernetes_does() {
        let doc = resource_list("", "v1").unwrap();
        let entry = |name: &str| {
            doc["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("{name} is listed"))
        };
        assert_eq!(entry("pods/log")["verbs"], json!(["get"]));
        assert_eq!(entry("pods/exec")["verbs"], json!(["create", "get"]));
        assert_eq!(entry("pods/exec")["kind"], "PodExecOptions");
        assert_eq!(entry("pods/attach")["verbs"], json!(["create", "get"]));
        assert_eq!(
            entry("pods/status")["verbs"],
            json!(["get", "patch", "update"])
        );
    }

    #[test]
    fn metrics_are_listed_read_only_as_metrics_server_lists_them() {
        let doc = resource_list("metrics.k8s.io", "v1beta1").unwrap();
        let entries = doc["resources"].as_array().unwrap();
        let names: Vec<(&str, &str, bool)> = entries
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap(),
                    e["kind"].as_str().unwrap(),
                    e["namespaced"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("nodes", "NodeMetrics", false),
                ("pods", "PodMetrics", true)
            ]
        );
        for e in entries {
            assert_eq!(e["verbs"], json!(["get", "list"]));
        }
        assert!(api_group("metrics.k8s.io").is_some());
    }

    #[test]
    fn autoscaling_prefers_v2() {
        let g = api_group("autoscaling").unwrap();
        assert_eq!(g["preferredVersion"]["version"], "v2");
    }
}
