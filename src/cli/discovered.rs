//! Resources the server serves beyond bosun's built-in table (custom
//! resources, aggregated APIs): found in the server's aggregated
//! discovery document when a name or kind is not in the table, as
//! kubectl's discovery finds them. Read again on every miss, so a CRD
//! established a moment ago is found.

use std::sync::RwLock;

use anyhow::{Context, Result};
use serde_json::Value;

use bosun::resources::{self, ResourceInfo};

use super::client::Ctx;

/// What kubectl asks `/apis` for: the aggregated document.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

static FOUND: RwLock<Vec<&'static ResourceInfo>> = RwLock::new(Vec::new());

fn found() -> Vec<&'static ResourceInfo> {
    FOUND.read().expect("discovered resources lock").clone()
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

fn leak_list(v: &Value) -> &'static [&'static str] {
    let items: Vec<&'static str> = v
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(leak)
        .collect();
    Box::leak(items.into_boxed_slice())
}

/// The resources of an aggregated discovery document that bosun's table
/// lacks; a group's first (preferred) version is each one's preferred.
fn parse(doc: &Value) -> Vec<ResourceInfo> {
    let mut out = Vec::new();
    for group in doc["items"].as_array().into_iter().flatten() {
        let name = group["metadata"]["name"].as_str().unwrap_or_default();
        let versions = group["versions"].as_array().cloned().unwrap_or_default();
        let preferred = versions
            .first()
            .and_then(|v| v["version"].as_str())
            .unwrap_or_default();
        for v in &versions {
            let version = v["version"].as_str().unwrap_or_default();
            for r in v["resources"].as_array().into_iter().flatten() {
                let plural = r["resource"].as_str().unwrap_or_default();
                let kind = r["responseKind"]["kind"].as_str().unwrap_or_default();
                if plural.is_empty()
                    || kind.is_empty()
                    || resources::by_path(name, version, plural).is_some()
                {
                    continue;
                }
                let subresources: Vec<&'static str> = r["subresources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s["subresource"].as_str())
                    .map(leak)
                    .collect();
                out.push(ResourceInfo {
                    group: leak(name),
                    version: leak(version),
                    kind: leak(kind),
                    plural: leak(plural),
                    singular: leak(r["singularResource"].as_str().unwrap_or_default()),
                    namespaced: r["scope"] == "Namespaced",
                    short_names: leak_list(&r["shortNames"]),
                    categories: leak_list(&r["categories"]),
                    subresources: Box::leak(subresources.into_boxed_slice()),
                    storage_version: leak(preferred),
                    selectable_fields: &[],
                });
            }
        }
    }
    out
}

/// Reads the server's discovery document again.
pub async fn refresh(ctx: &Ctx) -> Result<()> {
    let doc = ctx
        .request_json(http::Method::GET, "/apis", Some(AGGREGATED), None, None)
        .await
        .context("reading the server's discovery document")?;
    let list: Vec<&'static ResourceInfo> = parse(&doc)
        .into_iter()
        .map(|r| &*Box::leak(Box::new(r)))
        .collect();
    *FOUND.write().expect("discovered resources lock") = list;
    Ok(())
}

/// The resource a user means by `name`: bosun's table first, then what
/// discovery found (its preferred version when several serve it).
pub fn by_name(name: &str) -> Option<&'static ResourceInfo> {
    if let Some(r) = resources::by_name(name) {
        return Some(r);
    }
    resources::preferred(found().into_iter().filter(|r| r.matches_name(name)))
}

/// The resource of an object's `apiVersion` and `kind`.
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceInfo> {
    if let Some(r) = resources::by_kind(api_version, kind) {
        return Some(r);
    }
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    found()
        .into_iter()
        .find(|r| r.group == group && r.version == version && r.kind == kind)
}

/// The discovered resources in `category` (`all`), preferred versions.
pub fn in_category(category: &str) -> Vec<&'static ResourceInfo> {
    found()
        .into_iter()
        .filter(|r| r.categories.contains(&category) && r.is_storage_version())
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn custom_resources_are_read_from_aggregated_discovery() {
        let doc = json!({"kind": "APIGroupDiscoveryList", "items": [
            {"metadata": {"name": "apps"}, "versions": [{"version": "v1", "resources": [
                {"resource": "deployments", "responseKind": {"kind": "Deployment"}}]}]},
            {"metadata": {"name": "example.com"}, "versions": [
                {"version": "v2", "resources": [{"resource": "widgets",
                    "responseKind": {"group": "example.com", "version": "v2", "kind": "Widget"},
                    "scope": "Namespaced", "singularResource": "widget", "shortNames": ["wd"],
                    "categories": ["all"], "subresources": [{"subresource": "status"}]}]},
                {"version": "v1", "resources": [{"resource": "widgets",
                    "responseKind": {"kind": "Widget"}, "scope": "Namespaced",
                    "singularResource": "widget"}]}]}]});
        let found = parse(&doc);
        assert_eq!(found.len(), 2, "deployments are bosun's own: {found:?}");
        let v2 = &found[0];
        assert_eq!(
            (v2.group, v2.version, v2.kind),
            ("example.com", "v2", "Widget")
        );
        assert!(v2.matches_name("wd") && v2.matches_name("widgets.example.com"));
        assert!(v2.namespaced && v2.is_storage_version());
        assert_eq!(v2.categories, ["all"]);
        assert_eq!(v2.subresources, ["status"]);
        assert!(
            !found[1].is_storage_version(),
            "v2 is the preferred version"
        );
    }
}
