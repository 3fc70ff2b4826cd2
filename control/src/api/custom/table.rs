//! Server-side Tables of custom resources, as the apiextensions-apiserver's
//! table convertor builds them: a Name column, then the version's
//! `additionalPrinterColumns` (an Age column from
//! `.metadata.creationTimestamp` when it declares none), each cell the
//! first value the column's JSONPath finds, typed by the column's type;
//! `date` cells are ages, nothing found is a null cell.

use bosun::printers::{human_age, IncludeObject};
use chrono::{DateTime, Utc};
use jsonpath_rust::JsonPath;
use serde_json::{json, Value};

use super::{CustomVersion, PrinterColumn};

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating \
resources, although some resources may allow a client to request the generation of an appropriate \
name automatically. Name is primarily intended for creation idempotence and configuration \
definition. Cannot be updated. More info: \
https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when \
this object was created. It is not guaranteed to be set in happens-before order across separate \
operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\n\
Populated by the system. Read-only. Null for lists. More info: \
https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The columns of a version after Name: its own, or Age.
fn columns(v: &CustomVersion) -> Vec<PrinterColumn> {
    if !v.columns.is_empty() {
        return v.columns.clone();
    }
    vec![PrinterColumn {
        name: "Age".into(),
        type_: "date".into(),
        format: String::new(),
        description: AGE_DESCRIPTION.into(),
        priority: 0,
        json_path: ".metadata.creationTimestamp".into(),
    }]
}

/// The first value `path` (kubectl's `.a.b[0]` form) finds in `obj`.
pub fn find(obj: &Value, path: &str) -> Option<Value> {
    let path = path.trim();
    let path = path
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path);
    let query = if path.starts_with('$') {
        path.to_string()
    } else if path.starts_with('.') || path.starts_with('[') {
        format!("${path}")
    } else {
        format!("$.{path}")
    };
    obj.query(&query).ok()?.first().map(|v| (*v).clone())
}

/// One cell of a column of type `type_` from the value found.
fn cell(type_: &str, value: Value, now: DateTime<Utc>) -> Value {
    match (type_, &value) {
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, |i| json!(i)),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, |f| json!(f)),
        ("boolean", Value::Bool(_)) => value,
        ("string", Value::String(_)) => value,
        // A string column prints whatever it finds, as JSONPath prints it.
        ("string", Value::Null) => Value::Null,
        ("string", other) => json!(other.to_string()),
        ("date", Value::String(s)) => match DateTime::parse_from_rfc3339(s) {
            Ok(t) => json!(human_age(t.with_timezone(&Utc), now)),
            Err(_) => json!("<invalid>"),
        },
        _ => Value::Null,
    }
}

/// The column definitions of a version's Table.
pub fn column_definitions(v: &CustomVersion) -> Vec<Value> {
    let mut defs = vec![json!({"name": "Name", "type": "string", "format": "name",
        "description": NAME_DESCRIPTION, "priority": 0})];
    defs.extend(columns(v).iter().map(|c| {
        json!({"name": c.name, "type": c.type_, "format": c.format,
            "description": c.description, "priority": c.priority})
    }));
    defs
}

/// One row: the name, then each column's cell.
pub fn row(v: &CustomVersion, obj: &Value, include: IncludeObject, now: DateTime<Utc>) -> Value {
    let mut cells = vec![obj
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or_else(|| json!(""))];
    for c in columns(v) {
        cells.push(match find(obj, &c.json_path) {
            Some(value) => cell(&c.type_, value, now),
            None => Value::Null,
        });
    }
    let mut row = json!({"cells": cells});
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
            })
        }
        IncludeObject::Object => row["object"] = obj.clone(),
    }
    row
}

/// A whole Table of `items`.
pub fn table(
    v: &CustomVersion,
    items: &[Value],
    resource_version: &str,
    include: IncludeObject,
    now: DateTime<Utc>,
) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": column_definitions(v),
        "rows": items.iter().map(|o| row(v, o, include, now)).collect::<Vec<_>>(),
    })
}
