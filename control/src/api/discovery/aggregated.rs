//! Aggregated discovery (`apidiscovery.k8s.io/v2` and `v2beta1`): `/api`
//! and `/apis` answered with an `APIGroupDiscoveryList` when the Accept
//! header asks for one, so a client learns every group version's resources
//! in one request. Built from the legacy `APIResourceList`s, so the two
//! forms cannot disagree.

use super::{api_group_list, groups, resource_list};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bosun::resources::ResourceInfo;
use serde_json::{json, Map, Value};

#[cfg(test)]
mod tests;

const GROUP: &str = "apidiscovery.k8s.io";
const KIND: &str = "APIGroupDiscoveryList";

/// The aggregated discovery version the Accept header asks for in JSON
/// (`v2` or `v2beta1`), the first one it names. A request only for the
/// protobuf form gets none: JSON is the fallback the client also accepts.
pub fn requested_version(headers: &HeaderMap) -> Option<&'static str> {
    let accept = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",");
    accept.split(',').find_map(|range| {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next()?;
        if !media.eq_ignore_ascii_case("application/json") {
            return None;
        }
        let (mut g, mut v, mut r#as) = (None, None, None);
        for p in parts {
            match p.split_once('=') {
                Some(("g", x)) => g = Some(x),
                Some(("v", x)) => v = Some(x),
                Some(("as", x)) => r#as = Some(x),
                _ => {}
            }
        }
        if g != Some(GROUP) || r#as != Some(KIND) {
            return None;
        }
        match v? {
            "v2" => Some("v2"),
            "v2beta1" => Some("v2beta1"),
            _ => None,
        }
    })
}

/// One `APIResourceList` entry's kind as a `responseKind`: the entry's own
/// group and version when it names them (`deployments/scale` is an
/// `autoscaling/v1` Scale), else those of the list.
fn response_kind(entry: &Value, group: &str, version: &str) -> Value {
    json!({
        "group": entry.get("group").and_then(Value::as_str).unwrap_or(group),
        "version": entry.get("version").and_then(Value::as_str).unwrap_or(version),
        "kind": entry["kind"],
    })
}

/// One group version's `APIVersionDiscovery`, from its `APIResourceList`.
fn version_entry(extra: &[&'static ResourceInfo], group: &str, version: &str) -> Option<Value> {
    version_entry_of(&resource_list(extra, group, version)?, group, version)
}

/// The `APIVersionDiscovery` of an `APIResourceList` (bosun's or an
/// extension server's).
pub(crate) fn version_entry_of(list: &Value, group: &str, version: &str) -> Option<Value> {
    let entries = list["resources"].as_array()?;
    let mut resources: Vec<Value> = Vec::new();
    for e in entries {
        let name = e["name"].as_str().unwrap_or_default();
        if let Some((parent, sub)) = name.split_once('/') {
            let Some(owner) = resources.iter_mut().find(|r| r["resource"] == parent) else {
                continue;
            };
            let subresources = owner
                .as_object_mut()?
                .entry("subresources")
                .or_insert_with(|| json!([]));
            subresources.as_array_mut()?.push(json!({
                "subresource": sub,
                "responseKind": response_kind(e, group, version),
                "verbs": e["verbs"],
            }));
            continue;
        }
        let mut r = Map::new();
        r.insert("resource".into(), json!(name));
        r.insert("responseKind".into(), response_kind(e, group, version));
        let scope = if e["namespaced"] == true {
            "Namespaced"
        } else {
            "Cluster"
        };
        r.insert("scope".into(), json!(scope));
        r.insert("singularResource".into(), e["singularName"].clone());
        r.insert("verbs".into(), e["verbs"].clone());
        for (from, to) in [("shortNames", "shortNames"), ("categories", "categories")] {
            if let Some(v) = e.get(from) {
                r.insert(to.into(), v.clone());
            }
        }
        resources.push(Value::Object(r));
    }
    Some(json!({"version": version, "resources": resources, "freshness": "Current"}))
}

fn group_entry(extra: &[&'static ResourceInfo], name: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .filter_map(|v| version_entry(extra, name, v))
        .collect();
    let mut metadata = json!({"creationTimestamp": null});
    if !name.is_empty() {
        metadata["name"] = json!(name);
    }
    json!({"metadata": metadata, "versions": versions})
}

/// The `APIGroupDiscoveryList` of `/api` (core, `core == true`) or
/// `/apis` (every other group, in the order the legacy `APIGroupList`
/// names them, versions preferred first).
pub fn document(extra: &[&'static ResourceInfo], core: bool, disco_version: &str) -> Value {
    let items: Vec<Value> = if core {
        vec![group_entry(extra, "", &["v1"])]
    } else {
        let order = api_group_list(extra);
        let all = groups(extra);
        order["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| all.iter().find(|(n, _)| g["name"] == *n))
            .map(|(name, versions)| group_entry(extra, name, versions))
            .collect()
    };
    json!({
        "kind": KIND,
        "apiVersion": format!("{GROUP}/{disco_version}"),
        "metadata": {},
        "items": items,
    })
}

/// The aggregated answer, typed so the client knows which form it got.
pub fn response(extra: &[&'static ResourceInfo], core: bool, disco_version: &str) -> Response {
    respond(&document(extra, core, disco_version), disco_version)
}

/// An `APIGroupDiscoveryList` answered as [`response`] does.
pub(crate) fn respond(doc: &Value, disco_version: &str) -> Response {
    let content_type = format!("application/json;g={GROUP};v={disco_version};as={KIND}");
    let body = serde_json::to_vec(doc).unwrap_or_default();
    crate::api::compression::compressible(
        (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, content_type),
                (header::VARY, "Accept".to_string()),
            ],
            body,
        )
            .into_response(),
    )
}
