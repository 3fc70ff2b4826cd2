//! The aggregated form against the legacy one, and which Accept headers
//! ask for it.

use super::super::{api_group, resource_list};
use super::*;

fn accept(value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::ACCEPT, value.parse().unwrap());
    h
}

/// What kubectl 1.32 sends for `/api` and `/apis`.
const KUBECTL: &str = "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

#[test]
fn accept_header_chooses_the_form() {
    assert_eq!(requested_version(&accept(KUBECTL)), Some("v2"));
    let beta = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    assert_eq!(requested_version(&accept(beta)), Some("v2beta1"));
    assert_eq!(requested_version(&accept("application/json")), None);
    assert_eq!(requested_version(&HeaderMap::new()), None);
    // Only protobuf: the legacy JSON answer, which such a client also takes.
    let pb =
        "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    assert_eq!(requested_version(&accept(pb)), None);
    let other = "application/json;g=apidiscovery.k8s.io;v=v1;as=APIGroupDiscoveryList";
    assert_eq!(requested_version(&accept(other)), None);
    let wrong_kind = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupList";
    assert_eq!(requested_version(&accept(wrong_kind)), None);
}

/// Every group version the legacy form serves: core `v1`, then each
/// group's versions, preferred first.
fn legacy_group_versions() -> Vec<(String, Vec<String>)> {
    let mut out = vec![(String::new(), vec!["v1".to_string()])];
    for (g, _) in groups(&[]) {
        let doc = api_group(&[], g).unwrap();
        let versions = doc["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["version"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            doc["preferredVersion"]["version"], doc["versions"][0]["version"],
            "{g}: preferred first"
        );
        out.push((g.to_string(), versions));
    }
    out
}

/// (resource or resource/sub, verbs, kind, group, version) of a legacy list,
/// with scope, singular, short names and categories for top-level ones.
fn legacy_entries(group: &str, version: &str) -> Vec<Value> {
    let list = resource_list(&[], group, version).unwrap();
    list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let mut out = json!({
                "name": e["name"],
                "verbs": e["verbs"],
                "kind": {
                    "group": e.get("group").cloned().unwrap_or(json!(group)),
                    "version": e.get("version").cloned().unwrap_or(json!(version)),
                    "kind": e["kind"],
                },
            });
            if !e["name"].as_str().unwrap().contains('/') {
                out["namespaced"] = e["namespaced"].clone();
                out["singular"] = e["singularName"].clone();
                out["shortNames"] = e.get("shortNames").cloned().unwrap_or(json!(null));
                out["categories"] = e.get("categories").cloned().unwrap_or(json!(null));
            }
            out
        })
        .collect()
}

/// The same, read from one aggregated `APIVersionDiscovery`.
fn aggregated_entries(version: &Value) -> Vec<Value> {
    assert_eq!(version["freshness"], "Current");
    let mut out = Vec::new();
    for r in version["resources"].as_array().unwrap() {
        let name = r["resource"].as_str().unwrap();
        out.push(json!({
            "name": name,
            "verbs": r["verbs"],
            "kind": r["responseKind"],
            "namespaced": match r["scope"].as_str().unwrap() {
                "Namespaced" => true,
                "Cluster" => false,
                s => panic!("{name}: scope {s}"),
            },
            "singular": r["singularResource"],
            "shortNames": r.get("shortNames").cloned().unwrap_or(json!(null)),
            "categories": r.get("categories").cloned().unwrap_or(json!(null)),
        }));
        for s in r["subresources"].as_array().into_iter().flatten() {
            out.push(json!({
                "name": format!("{name}/{}", s["subresource"].as_str().unwrap()),
                "verbs": s["verbs"],
                "kind": s["responseKind"],
            }));
        }
    }
    out
}

fn sorted(mut v: Vec<Value>) -> Vec<Value> {
    v.sort_by_key(|e| e["name"].as_str().unwrap().to_string());
    v
}

#[test]
fn aggregated_and_legacy_list_the_same_resources_and_verbs() {
    let core = document(&[], true, "v2");
    let apis = document(&[], false, "v2");
    assert_eq!(core["kind"], "APIGroupDiscoveryList");
    assert_eq!(apis["apiVersion"], "apidiscovery.k8s.io/v2");
    let mut items: Vec<&Value> = core["items"].as_array().unwrap().iter().collect();
    assert_eq!(items.len(), 1, "/api has only the core group");
    assert!(items[0]["metadata"].get("name").is_none());
    items.extend(apis["items"].as_array().unwrap());
    let legacy = legacy_group_versions();
    let names: Vec<&str> = items
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap_or(""))
        .collect();
    let legacy_names: Vec<&str> = legacy.iter().map(|(g, _)| g.as_str()).collect();
    assert_eq!(names, legacy_names, "the same groups in the same order");
    for (item, (group, versions)) in items.iter().zip(&legacy) {
        let agg_versions: Vec<&str> = item["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["version"].as_str().unwrap())
            .collect();
        assert_eq!(
            agg_versions, *versions,
            "{group}: versions, preferred first"
        );
        for (v, version) in item["versions"].as_array().unwrap().iter().zip(versions) {
            assert_eq!(
                sorted(aggregated_entries(v)),
                sorted(legacy_entries(group, version)),
                "{group}/{version}"
            );
        }
    }
}

#[test]
fn deployments_carry_their_scale_subresource_as_autoscaling_scale() {
    let apis = document(&[], false, "v2beta1");
    assert_eq!(apis["apiVersion"], "apidiscovery.k8s.io/v2beta1");
    let apps = apis["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == "apps")
        .unwrap();
    let deployments = apps["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "deployments")
        .unwrap();
    assert_eq!(deployments["scope"], "Namespaced");
    assert_eq!(deployments["singularResource"], "deployment");
    assert_eq!(deployments["shortNames"], json!(["deploy"]));
    assert_eq!(
        deployments["responseKind"],
        json!({"group": "apps", "version": "v1", "kind": "Deployment"})
    );
    let scale = deployments["subresources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["subresource"] == "scale")
        .unwrap();
    assert_eq!(
        scale["responseKind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert_eq!(scale["verbs"], json!(["get", "patch", "update"]));
}
