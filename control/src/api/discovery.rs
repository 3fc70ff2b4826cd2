//! Discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/<g>/<v>`) and
//! `/version`, in the legacy (non-aggregated) form; `/api` and `/apis` also
//! in the aggregated form (`aggregated`) when the client asks for it.

pub(crate) mod aggregated;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use bosun::resources::{served, ResourceInfo};
use serde_json::{json, Value};

/// `/api` (`core`) or `/apis`: the aggregated `APIGroupDiscoveryList` when
/// the Accept header asks for it, else the legacy `APIVersions` /
/// `APIGroupList`. Either way the answer varies by Accept.
pub fn serve_root(extra: &[&'static ResourceInfo], core: bool, headers: &HeaderMap) -> Response {
    if let Some(v) = aggregated::requested_version(headers) {
        return aggregated::response(extra, core, v);
    }
    let doc = if core {
        api_versions()
    } else {
        api_group_list(extra)
    };
    let mut res = super::json_response(StatusCode::OK, &doc);
    res.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    res
}

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

/// Every resource served: the built-in ones, then `extra` (the custom
/// resources, each CRD's versions by priority).
fn all<'a>(extra: &'a [&'static ResourceInfo]) -> impl Iterator<Item = &'static ResourceInfo> + 'a {
    served().chain(extra.iter().copied())
}

/// The API groups other than core, each with its versions, preferred first.
pub fn groups(extra: &[&'static ResourceInfo]) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in all(extra).filter(|r| !r.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, versions)) => {
                if !versions.contains(&r.version) {
                    versions.push(r.version);
                }
            }
            None => out.push((r.group, vec![r.version])),
        }
    }
    out
}

pub fn api_group_list(extra: &[&'static ResourceInfo]) -> Value {
    let groups: Vec<Value> = groups(extra)
        .iter()
        .map(|(name, versions)| group_doc(name, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn api_group(extra: &[&'static ResourceInfo], group: &str) -> Option<Value> {
    let (name, versions) = groups(extra).into_iter().find(|(n, _)| *n == group)?;
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
        "verbs": if r.is_read_only() {
            &["get", "list"][..]
        } else if r.is_create_only() {
            &["create"][..]
        } else {
            VERBS
        },
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
pub fn resource_list(extra: &[&'static ResourceInfo], group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for r in all(extra).filter(|r| r.group == group && r.version == version) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apps_v1_lists_scale_subresources() {
        let doc = resource_list(&[], "apps", "v1").unwrap();
        let names: Vec<&str> = doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"deployments"));
        assert!(names.contains(&"deployments/scale"));
        assert!(names.contains(&"statefulsets/status"));
        assert!(resource_list(&[], "apps", "v2").is_none());
    }

    #[test]
    fn pods_list_log_exec_and_attach_as_kubernetes_does() {
        let doc = resource_list(&[], "", "v1").unwrap();
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
        let doc = resource_list(&[], "metrics.k8s.io", "v1beta1").unwrap();
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
        assert!(api_group(&[], "metrics.k8s.io").is_some());
    }

    #[test]
    fn autoscaling_prefers_v2() {
        let g = api_group(&[], "autoscaling").unwrap();
        assert_eq!(g["preferredVersion"]["version"], "v2");
    }
}
