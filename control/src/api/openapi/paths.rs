//! The operations of each served resource, with the query parameters
//! they take: enough for clients to learn that the server validates
//! fields itself (`fieldValidation`), as kubectl checks before it sends a
//! create or an apply, and responses that point at the kind's schema.

use bosun::resources::ResourceInfo;
use serde_json::{json, Map, Value};

/// OpenAPI 3 or Swagger 2: where a parameter's type goes and how a
/// response names its schema.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    V2,
    V3,
}

fn query(dialect: Dialect, name: &str) -> Value {
    match dialect {
        Dialect::V3 => {
            json!({"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": true})
        }
        Dialect::V2 => json!({"name": name, "in": "query", "type": "string", "uniqueItems": true}),
    }
}

fn response(dialect: Dialect, schema_ref: Option<&str>) -> Value {
    match (dialect, schema_ref) {
        (_, None) => json!({"200": {"description": "OK"}}),
        (Dialect::V3, Some(r)) => json!({"200": {
            "description": "OK",
            "content": {"application/json": {"schema": {"$ref": r}}},
        }}),
        (Dialect::V2, Some(r)) => json!({"200": {"description": "OK", "schema": {"$ref": r}}}),
    }
}

/// The paths of `resources`; `schema_ref` gives the `$ref` of a kind's
/// schema when the document has one.
pub fn paths(
    dialect: Dialect,
    resources: &[&ResourceInfo],
    schema_ref: impl Fn(&ResourceInfo) -> Option<String>,
) -> Map<String, Value> {
    let q = |name: &str| query(dialect, name);
    let mut paths = Map::new();
    for r in resources {
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let reference = schema_ref(r);
        let write_params = json!([q("dryRun"), q("fieldManager"), q("fieldValidation")]);
        let op = |action: &str, params: &Value| {
            json!({
                "operationId": format!("{action}{}", r.kind),
                "parameters": params,
                "responses": response(dialect, reference.as_deref().filter(|_| action != "list" && action != "delete")),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        let base = r.collection_path(if r.namespaced {
            Some("{namespace}")
        } else {
            None
        });
        if r.is_create_only() {
            paths.insert(base.clone(), json!({"post": op("post", &write_params)}));
            continue;
        }
        if r.is_read_only() {
            let list = json!([q("labelSelector"), q("fieldSelector")]);
            paths.insert(base.clone(), json!({"get": op("list", &list)}));
            paths.insert(
                format!("{base}/{{name}}"),
                json!({"get": op("get", &json!([]))}),
            );
            continue;
        }
        let mut patch_params = write_params.clone();
        patch_params.as_array_mut().expect("array").push(q("force"));
        let list = json!([q("labelSelector"), q("fieldSelector"), q("watch")]);
        let delete = json!([q("dryRun"), q("gracePeriodSeconds"), q("propagationPolicy")]);
        paths.insert(
            base.clone(),
            json!({"get": op("list", &list), "post": op("post", &write_params)}),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({"get": op("get", &json!([])),
                   "put": op("put", &write_params),
                   "patch": op("patch", &patch_params),
                   "delete": op("delete", &delete)}),
        );
    }
    paths
}

/// A custom resource's `status` and `scale` subresources, as the
/// apiextensions-apiserver serves them: read, replace and patch, with
/// the kind's schema for status and autoscaling/v1's Scale for scale.
pub fn subresource_paths(
    dialect: Dialect,
    r: &ResourceInfo,
    kind_ref: Option<&str>,
    scale_ref: Option<&str>,
) -> Map<String, Value> {
    let q = |name: &str| query(dialect, name);
    let write_params = json!([q("dryRun"), q("fieldManager"), q("fieldValidation")]);
    let mut patch_params = write_params.clone();
    patch_params.as_array_mut().expect("array").push(q("force"));
    let item = format!(
        "{}/{{name}}",
        r.collection_path(r.namespaced.then_some("{namespace}"))
    );
    let mut paths = Map::new();
    for (sub, suffix, reference, gvk) in [
        (
            "status",
            "Status",
            kind_ref,
            json!({"group": r.group, "version": r.version, "kind": r.kind}),
        ),
        (
            "scale",
            "Scale",
            scale_ref,
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
        ),
    ] {
        if !r.has_subresource(sub) {
            continue;
        }
        let op = |action: &str, verb: &str, params: &Value| {
            json!({
                "operationId": format!("{verb}{}{suffix}", r.kind),
                "parameters": params,
                "responses": response(dialect, reference),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        paths.insert(
            format!("{item}/{sub}"),
            json!({"get": op("get", "read", &json!([])),
                   "put": op("put", "replace", &write_params),
                   "patch": op("patch", "patch", &patch_params)}),
        );
    }
    paths
}
