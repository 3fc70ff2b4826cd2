//! A CustomResourceDefinition version's schemas as the
//! apiextensions-apiserver's OpenAPI builder publishes them: the kind
//! (`com.example.v1.Widget`, the group reversed) from the version's
//! `openAPIV3Schema` with apiVersion, kind and metadata (a `$ref` to
//! ObjectMeta) set, and its list kind (`com.example.v1.WidgetList`), both
//! marked with `x-kubernetes-group-version-kind`.
//!
//! The v3 schema keeps what a structural schema holds (types,
//! descriptions, defaults, value validations, `nullable`, the
//! `x-kubernetes-*` extensions) with int-or-string unfolded into its
//! `anyOf`; [`to_v2`] drops what Swagger 2.0 and kubectl's v2 readers
//! cannot take, as upstream's `ToStructuralOpenAPIV2`.

use serde_json::{json, Map, Value};

use super::schemas::V3_REF_PREFIX;
use crate::api::custom::CustomVersion;

pub const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
pub const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
pub const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";

const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DOC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The keywords a structural schema keeps (upstream's `Structural` and
/// its `ToKubeOpenAPI`); others (`example`, `externalDocs`, `$schema`,
/// ...) are not published.
const KEPT: &[&str] = &[
    "description",
    "type",
    "format",
    "title",
    "default",
    "nullable",
    "properties",
    "items",
    "additionalProperties",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
];

/// `example.com`, `v1`, `Widget` -> `com.example.v1.Widget`, as upstream's
/// `ToRESTFriendlyName`.
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{kind}", parts.join("."))
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

fn is_true(map: &Map<String, Value>, key: &str) -> bool {
    map.get(key) == Some(&Value::Bool(true))
}

/// A published copy of a schema node: kept keywords only, int-or-string
/// unfolded, embedded resources given apiVersion, kind and metadata.
fn publish(v: &Value) -> Value {
    let Some(map) = v.as_object() else {
        return v.clone();
    };
    let mut out = Map::new();
    for (k, child) in map.iter().filter(|(k, _)| KEPT.contains(&k.as_str())) {
        let child = match k.as_str() {
            "properties" => Value::Object(
                child
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, s)| (name.clone(), publish(s)))
                    .collect(),
            ),
            "items" | "additionalProperties" | "not" if child.is_object() => publish(child),
            "allOf" | "oneOf" | "anyOf" => Value::Array(
                child
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(publish)
                    .collect(),
            ),
            _ => child.clone(),
        };
        out.insert(k.clone(), child);
    }
    if is_true(&out, "x-kubernetes-int-or-string") && !out.contains_key("anyOf") {
        out.insert(
            "anyOf".into(),
            json!([{"type": "integer"}, {"type": "string"}]),
        );
    }
    if is_true(&out, "x-kubernetes-embedded-resource") {
        add_type_meta(&mut out);
        let required = out.entry("required").or_insert_with(|| json!([]));
        if let Some(list) = required.as_array_mut() {
            for field in ["apiVersion", "kind"] {
                if !list.iter().any(|f| f == field) {
                    list.push(json!(field));
                }
            }
        }
    }
    Value::Object(out)
}

/// apiVersion, kind and metadata as every object has them.
fn add_type_meta(schema: &mut Map<String, Value>) {
    let props = schema
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("properties is an object");
    props.insert(
        "apiVersion".into(),
        json!({"type": "string", "description": API_VERSION_DOC}),
    );
    props.insert(
        "kind".into(),
        json!({"type": "string", "description": KIND_DOC}),
    );
    props.insert(
        "metadata".into(),
        json!({"$ref": format!("{V3_REF_PREFIX}{OBJECT_META}"), "description": METADATA_DOC}),
    );
}

/// The kind's schema (v3 dialect, `$ref`s to `#/components/schemas/`).
/// A version without a schema, or whose schema is not structural, is
/// published as an object of any fields, as upstream does.
pub fn kind_schema(v: &CustomVersion) -> Value {
    let r = v.res;
    let mut schema = match (&v.schema, &v.structural.0) {
        (Some(s), Some(_)) => match publish(s) {
            Value::Object(mut map) => {
                add_type_meta(&mut map);
                map.insert("type".into(), json!("object"));
                map
            }
            _ => Map::new(),
        },
        _ => Map::from_iter([("type".to_string(), json!("object"))]),
    };
    schema.insert(
        "x-kubernetes-group-version-kind".into(),
        gvk(r.group, r.version, r.kind),
    );
    Value::Object(schema)
}

/// The list kind's schema (`WidgetList`).
pub fn list_schema(v: &CustomVersion) -> Value {
    let r = v.res;
    let item = format!(
        "{V3_REF_PREFIX}{}",
        definition_name(r.group, r.version, r.kind)
    );
    json!({
        "type": "object",
        "description": format!("{} is a list of {}", v.list_kind, r.kind),
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": API_VERSION_DOC},
            "kind": {"type": "string", "description": KIND_DOC},
            "items": {
                "type": "array",
                "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/api-conventions.md", r.plural),
                "items": {"$ref": item},
            },
            "metadata": {"$ref": format!("{V3_REF_PREFIX}{LIST_META}"), "description": METADATA_DOC},
        },
        "x-kubernetes-group-version-kind": gvk(r.group, r.version, &v.list_kind),
    })
}

/// The kind's and the list's definitions, by name (v3 dialect).
pub fn definitions(v: &CustomVersion) -> Map<String, Value> {
    let r = v.res;
    let mut out = Map::new();
    out.insert(definition_name(r.group, r.version, r.kind), kind_schema(v));
    out.insert(
        definition_name(r.group, r.version, &v.list_kind),
        list_schema(v),
    );
    out
}

/// A v3 schema made Swagger 2.0 as upstream's `ToStructuralOpenAPIV2`:
/// no allOf/oneOf/anyOf/not; a nullable field loses its type, items and
/// properties (and is no longer required); a field preserving unknown
/// fields loses its items and properties; an array without items loses
/// its type. A kind whose root preserves unknown fields is an object of
/// any fields.
pub fn to_v2(kind_schema: &Value) -> Value {
    let mut out = kind_schema.clone();
    if let Some(map) = out.as_object_mut() {
        if is_true(map, "x-kubernetes-preserve-unknown-fields") {
            let gvk = map.remove("x-kubernetes-group-version-kind");
            map.clear();
            map.insert("type".into(), json!("object"));
            if let Some(gvk) = gvk {
                map.insert("x-kubernetes-group-version-kind".into(), gvk);
            }
            return out;
        }
    }
    v2_node(&mut out);
    out
}

fn v2_node(v: &mut Value) {
    let Some(map) = v.as_object_mut() else {
        return;
    };
    for key in ["allOf", "oneOf", "anyOf", "not"] {
        map.remove(key);
    }
    if is_true(map, "nullable") {
        for key in ["type", "items", "properties"] {
            map.remove(key);
        }
    }
    map.remove("nullable");
    if is_true(map, "x-kubernetes-preserve-unknown-fields") {
        map.remove("items");
        map.remove("properties");
    }
    if map.get("type") == Some(&json!("array")) && !map.contains_key("items") {
        map.remove("type");
    }
    let nullable: Vec<String> = map
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, s)| s.get("nullable") == Some(&Value::Bool(true)))
        .map(|(k, _)| k.clone())
        .collect();
    if let Some(required) = map.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|f| !nullable.iter().any(|n| f == n.as_str()));
        if required.is_empty() {
            map.remove("required");
        }
    }
    if let Some(props) = map.get_mut("properties").and_then(Value::as_object_mut) {
        props.values_mut().for_each(v2_node);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get_mut(key) {
            v2_node(child);
        }
    }
}

#[cfg(test)]
#[path = "crd_tests.rs"]
mod tests;
