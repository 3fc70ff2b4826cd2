//! Discovery with the aggregated APIs merged in, as kube-aggregator
//! serves `/apis` and `/apis/GROUP`: each remote APIService's group
//! version beside bosun's own (versions by `versionPriority`, groups
//! after bosun's by `groupPriorityMinimum`), and in the aggregated form
//! (`apidiscovery.k8s.io/v2`) with the resources its server last reported
//! to the availability check (`Stale` until it has). `/apis/GROUP/VERSION`
//! of a remote group version is proxied, not answered here.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bosun::resources::ResourceInfo;
use serde_json::{json, Value};

use super::{Aggregator, Remote};
use crate::api::discovery::{aggregated, api_group, api_group_list};

/// A remote group version and the `APIResourceList` its server reported.
#[derive(Debug, Clone)]
pub struct RemoteVersion {
    pub group: String,
    pub version: String,
    pub group_priority_minimum: i64,
    pub version_priority: i64,
    pub resources: Option<Value>,
}

/// The remote group versions, best group first, each group's versions
/// best first.
pub fn remote_versions(aggregator: &Aggregator) -> Vec<RemoteVersion> {
    let mut out: Vec<RemoteVersion> = aggregator
        .remotes()
        .into_iter()
        .map(|r: Remote| RemoteVersion {
            resources: aggregator.discovered(&r.name),
            group: r.group,
            version: r.version,
            group_priority_minimum: r.group_priority_minimum,
            version_priority: r.version_priority,
        })
        .collect();
    out.sort_by(|a, b| {
        b.group_priority_minimum
            .cmp(&a.group_priority_minimum)
            .then_with(|| a.group.cmp(&b.group))
            .then_with(|| b.version_priority.cmp(&a.version_priority))
            .then_with(|| a.version.cmp(&b.version))
    });
    out
}

fn group_version(group: &str, version: &str) -> Value {
    json!({"groupVersion": format!("{group}/{version}"), "version": version})
}

/// Adds the remote group versions to an `APIGroupList` (or to one
/// `APIGroup` when `only` names it): into a group bosun serves too, else
/// as a group of their own.
pub fn merge_group_list(list: &mut Value, remotes: &[RemoteVersion]) {
    let Some(groups) = list["groups"].as_array_mut() else {
        return;
    };
    for r in remotes.iter().filter(|r| !r.group.is_empty()) {
        match groups.iter_mut().find(|g| g["name"] == r.group.as_str()) {
            Some(g) => {
                let versions = g["versions"].as_array_mut();
                if let Some(versions) = versions {
                    if !versions.iter().any(|v| v["version"] == r.version.as_str()) {
                        versions.push(group_version(&r.group, &r.version));
                    }
                }
            }
            None => {
                let gv = group_version(&r.group, &r.version);
                groups.push(json!({"name": r.group, "versions": [gv], "preferredVersion": gv}));
            }
        }
    }
}

/// Adds the remote group versions to an `APIGroupDiscoveryList`; a remote
/// version replaces bosun's own of the same name (metrics.k8s.io once
/// metrics-server is registered).
pub fn merge_aggregated(doc: &mut Value, remotes: &[RemoteVersion]) {
    let Some(items) = doc["items"].as_array_mut() else {
        return;
    };
    for r in remotes.iter().filter(|r| !r.group.is_empty()) {
        let entry = r
            .resources
            .as_ref()
            .and_then(|list| aggregated::version_entry_of(list, &r.group, &r.version))
            .unwrap_or_else(
                || json!({"version": r.version, "resources": [], "freshness": "Stale"}),
            );
        let group = match items
            .iter_mut()
            .position(|g| g["metadata"]["name"] == r.group.as_str())
        {
            Some(i) => &mut items[i],
            None => {
                items.push(
                    json!({"metadata": {"name": r.group, "creationTimestamp": null},
                    "versions": []}),
                );
                items.last_mut().expect("just pushed")
            }
        };
        if let Some(versions) = group["versions"].as_array_mut() {
            match versions
                .iter()
                .position(|v| v["version"] == r.version.as_str())
            {
                Some(i) => versions[i] = entry,
                None => versions.push(entry),
            }
        }
    }
}

/// `/apis`, merged, in the form the Accept header asks for.
/// `extra`: the custom resources bosun serves.
pub fn serve_apis(
    aggregator: &Aggregator,
    extra: &[&'static ResourceInfo],
    headers: &HeaderMap,
) -> Response {
    let remotes = remote_versions(aggregator);
    if let Some(v) = aggregated::requested_version(headers) {
        let mut doc = aggregated::document(extra, false, v);
        merge_aggregated(&mut doc, &remotes);
        return aggregated::respond(&doc, v);
    }
    let mut doc = api_group_list(extra);
    merge_group_list(&mut doc, &remotes);
    let mut res = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(&doc).unwrap_or_default(),
    )
        .into_response();
    res.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    res
}

/// `/apis/GROUP`, merged: None when neither bosun nor an APIService
/// serves the group.
pub fn group(
    aggregator: &Aggregator,
    extra: &[&'static ResourceInfo],
    name: &str,
) -> Option<Value> {
    let remotes: Vec<RemoteVersion> = remote_versions(aggregator)
        .into_iter()
        .filter(|r| r.group == name)
        .collect();
    let mut doc = match api_group(extra, name) {
        Some(doc) => doc,
        None => {
            let first = remotes.first()?;
            let gv = group_version(&first.group, &first.version);
            json!({"kind": "APIGroup", "apiVersion": "v1", "name": name,
                "versions": [], "preferredVersion": gv})
        }
    };
    let mut list = json!({"groups": [doc.clone()]});
    merge_group_list(&mut list, &remotes);
    doc["versions"] = list["groups"][0]["versions"].clone();
    Some(doc)
}

#[cfg(test)]
mod tests;
