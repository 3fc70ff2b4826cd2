//! Reading an object's JSON for its cells: fields by JSON pointer with kubectl's fallbacks
//! for missing ones, and the cell formats several kinds share (labels, containers,
//! conditions).

use chrono::{DateTime, Utc};
use serde_json::Value;

/// The string at `ptr`, "" when missing or not a string.
pub(super) fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// The integer at `ptr`, 0 when missing.
pub(super) fn int_at(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

/// `spec.replicas`, which defaults to 1.
pub(super) fn replicas_at(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(1)
}

/// The array at `ptr`, empty when missing.
pub(super) fn array_at<'a>(v: &'a Value, ptr: &str) -> &'a [Value] {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The RFC 3339 timestamp at `ptr`.
pub(super) fn time_at(v: &Value, ptr: &str) -> Option<DateTime<Utc>> {
    let raw = v.pointer(ptr)?.as_str()?;
    DateTime::parse_from_rfc3339(raw)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// `v`, or `default` when it is empty.
pub(super) fn non_empty_or<'a>(v: &'a str, default: &'a str) -> &'a str {
    if v.is_empty() {
        default
    } else {
        v
    }
}

/// A scalar as text: strings as they are (quantities like "1Gi"), numbers printed.
pub(super) fn value_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The NAME cell: `metadata.name`.
pub(super) fn name_cell(obj: &Value) -> Value {
    str_at(obj, "/metadata/name").into()
}

/// Whether the object is being deleted (`metadata.deletionTimestamp` is set).
pub(super) fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// Whether the condition list at `ptr` has `type_` with status True.
pub(super) fn has_condition(obj: &Value, ptr: &str, type_: &str) -> bool {
    array_at(obj, ptr)
        .iter()
        .any(|c| str_at(c, "/type") == type_ && str_at(c, "/status") == "True")
}

/// labels.FormatLabels: `a=1,b=2` sorted by key, `<none>` when empty.
pub(super) fn format_labels(map: Option<&Value>) -> String {
    let Some(map) = map.and_then(Value::as_object) else {
        return "<none>".to_string();
    };
    if map.is_empty() {
        return "<none>".to_string();
    }
    let mut pairs: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{k}={}", value_string(v)))
        .collect();
    pairs.sort();
    pairs.join(",")
}

/// The CONTAINERS and IMAGES cells: names and images joined by commas.
pub(super) fn container_cells(obj: &Value, ptr: &str) -> (Value, Value) {
    let containers = array_at(obj, ptr);
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, "/image")).collect();
    (names.join(",").into(), images.join(",").into())
}
