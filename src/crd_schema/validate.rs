//! Validating a value against a schema [`Node`], with the messages of
//! kube-openapi's validator as the apiextensions-apiserver turns them into
//! field errors (`spec.replicas: Invalid value: "string": spec.replicas in body
//! must be of type integer: "string"`), the list-type checks and the CEL rules.

use serde_json::Value;

use super::formats::check_format;
use super::rules;
use super::schema::{Additional, Node};
use crate::validation::{ErrorKind, FieldError};

/// JSON's type name for `v`, as kube-openapi reports it.
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_integral(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integral(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// A number as Go's `%v` prints it for the limits in messages.
pub(crate) fn num(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

fn child_path(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

fn type_matches(ty: &str, v: &Value) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => matches!(v, Value::Number(n) if is_integral(n)),
        "number" => v.is_number(),
        _ => true,
    }
}

/// Validates the value at the root of the object (`path` empty): messages
/// then start with `in body` as kube-openapi's do for its root.
pub(crate) fn validate_root(
    node: &Node,
    v: &Value,
    old: Option<&Value>,
    errs: &mut Vec<FieldError>,
) {
    let start = errs.len();
    validate(node, v, old, "", errs);
    for e in &mut errs[start..] {
        if e.detail.starts_with(' ') {
            e.detail = e.detail.trim_start().to_string();
        }
    }
    // The rules run after the schema checks, as upstream's CEL validator
    // does, and see only name and generateName of the root's metadata.
    if has_rules(node) {
        let (v, old) = (cel_view(node, v), old.map(|o| cel_view(node, o)));
        cel_walk(node, &v, old.as_ref(), "", errs);
    }
    // Upstream names the root by its nil path.
    for e in &mut errs[start..] {
        if e.field.is_empty() {
            e.field = ROOT.to_string();
        }
    }
}

/// Whether any node of the schema has `x-kubernetes-validations` (else
/// the object need not be copied for the rules).
fn has_rules(n: &Node) -> bool {
    !n.rules.is_empty()
        || n.properties.values().any(has_rules)
        || n.items.as_deref().is_some_and(has_rules)
        || matches!(&n.additional, Some(Additional::Schema(s)) if has_rules(s))
}

/// The field of an error about the whole object, as upstream prints a nil path.
pub(crate) const ROOT: &str = "<nil>";

/// The object as rules see it: metadata cut to name and generateName at
/// the root, and `number` fields as doubles even when written as integers.
fn cel_view(node: &Node, v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, _| k == "name" || k == "generateName");
    }
    as_doubles(node, &mut v);
    v
}

fn as_doubles(node: &Node, v: &mut Value) {
    match v {
        Value::Number(n) if node.ty == "number" => {
            if let Some(d) = n.as_f64().and_then(serde_json::Number::from_f64) {
                *n = d;
            }
        }
        Value::Object(m) => {
            for (k, val) in m.iter_mut() {
                match (node.properties.get(k), &node.additional) {
                    (Some(p), _) => as_doubles(p, val),
                    (None, Some(Additional::Schema(s))) => as_doubles(s, val),
                    _ => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = &node.items {
                items.iter_mut().for_each(|it| as_doubles(item_node, it));
            }
        }
        _ => {}
    }
}

/// Runs the `x-kubernetes-validations` of every node the value reaches,
/// with the old value where it correlates (object keys, map-list keys). An
/// unchanged value only runs its transition rules (ratcheting).
fn cel_walk(node: &Node, v: &Value, old: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    if v.is_null() || !node.ty.is_empty() && !type_matches(&node.ty, v) {
        return;
    }
    let unchanged = old.is_some_and(|o| o == v);
    rules::run(node, v, old, path, errs, unchanged);
    match v {
        Value::Object(m) => {
            for (k, val) in m {
                let child = match (node.properties.get(k), &node.additional) {
                    (Some(p), _) => p,
                    (None, Some(Additional::Schema(s))) => &**s,
                    _ => continue,
                };
                let old_val = old.and_then(|o| o.get(k));
                cel_walk(child, val, old_val, &child_path(path, k), errs);
            }
        }
        Value::Array(items) => {
            let Some(item_node) = &node.items else { return };
            let old_items = old.and_then(Value::as_array);
            for (i, it) in items.iter().enumerate() {
                let old_it = correlate(node, old_items, it);
                cel_walk(item_node, it, old_it, &format!("{path}[{i}]"), errs);
            }
        }
        _ => {}
    }
}

/// The old item a new one meets: only map lists correlate, by their keys.
fn correlate<'a>(node: &Node, old_items: Option<&'a Vec<Value>>, it: &Value) -> Option<&'a Value> {
    if node.list_type.as_deref() != Some("map") {
        return None;
    }
    let k = map_keys(&node.list_map_keys, it);
    old_items?
        .iter()
        .find(|x| map_keys(&node.list_map_keys, x) == k)
}

/// Validates `v` at `path` against `node`; `old` is the value at the same
/// place in the old object, for transition rules.
pub(crate) fn validate(
    node: &Node,
    v: &Value,
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let name = path;
    if old.is_some_and(|o| o == v) {
        // Ratcheting: a value the update leaves as it was keeps passing
        // even if the schema has since tightened.
        return;
    }
    if v.is_null() && (node.nullable || node.ty.is_empty() && !node.int_or_string) {
        return;
    }
    let actual = json_type(v);
    if !node.ty.is_empty() && !type_matches(&node.ty, v) {
        errs.push(FieldError::invalid(
            path,
            actual,
            format!(
                "{name} in body must be of type {}: {}",
                node.ty,
                quote(actual)
            ),
        ));
        return;
    }
    if node.int_or_string && node.any_of.is_empty() && !matches!(actual, "integer" | "string") {
        errs.push(FieldError::invalid(
            path,
            actual,
            format!(
                "{name} in body must be of type integer,string: {}",
                quote(actual)
            ),
        ));
        return;
    }
    composition(node, v, path, errs);
    if let Some(values) = &node.enum_values {
        if !values.contains(v) {
            let shown: Vec<String> = values
                .iter()
                .map(|a| {
                    a.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| a.to_string())
                })
                .collect();
            let refs: Vec<&str> = shown.iter().map(String::as_str).collect();
            errs.push(FieldError::not_supported(path, v.clone(), &refs));
        }
    }
    match v {
        Value::String(s) => string(node, s, path, errs),
        Value::Number(n) => number(node, n.as_f64().unwrap_or_default(), v, path, errs),
        Value::Array(items) => array(node, items, old, path, errs),
        Value::Object(_) => object(node, v, old, path, errs),
        _ => {}
    }
}

fn string(node: &Node, s: &str, path: &str, errs: &mut Vec<FieldError>) {
    let chars = s.chars().count() as i64;
    if let Some(max) = node.max_length.filter(|m| chars > *m) {
        errs.push(FieldError::too_long(path, max as usize));
    }
    if let Some(min) = node.min_length.filter(|m| chars < *m) {
        errs.push(FieldError::invalid(
            path,
            s,
            format!("{path} in body should be at least {min} chars long"),
        ));
    }
    if let Some((pat, Some(re))) = &node.pattern {
        if !re.is_match(s) {
            errs.push(FieldError::invalid(
                path,
                s,
                format!("{path} in body should match '{pat}'"),
            ));
        }
    }
    if !node.format.is_empty() && !check_format(&node.format, s) {
        errs.push(FieldError::invalid(
            path,
            s,
            format!(
                "{path} in body must be of type {}: {}",
                node.format,
                quote(s)
            ),
        ));
    }
}

fn number(node: &Node, f: f64, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(max) = node.maximum {
        if node.exclusive_maximum && f >= max {
            errs.push(FieldError::invalid(
                path,
                v.clone(),
                format!("{path} in body should be less than {}", num(max)),
            ));
        } else if f > max {
            errs.push(FieldError::invalid(
                path,
                v.clone(),
                format!(
                    "{path} in body should be less than or equal to {}",
                    num(max)
                ),
            ));
        }
    }
    if let Some(min) = node.minimum {
        if node.exclusive_minimum && f <= min {
            errs.push(FieldError::invalid(
                path,
                v.clone(),
                format!("{path} in body should be greater than {}", num(min)),
            ));
        } else if f < min {
            errs.push(FieldError::invalid(
                path,
                v.clone(),
                format!(
                    "{path} in body should be greater than or equal to {}",
                    num(min)
                ),
            ));
        }
    }
    if let Some(m) = node.multiple_of.filter(|m| *m > 0.0) {
        let q = f / m;
        if (q - q.round()).abs() > 1e-9 {
            errs.push(FieldError::invalid(
                path,
                v.clone(),
                format!("{path} in body should be a multiple of {}", num(m)),
            ));
        }
    }
}

fn too_many(path: &str, actual: usize, max: i64, what: &str) -> FieldError {
    FieldError {
        field: path.to_string(),
        kind: ErrorKind::TooMany,
        bad_value: Some(Value::from(actual)),
        detail: format!("must have at most {max} {what}"),
    }
}

fn array(
    node: &Node,
    items: &[Value],
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let n = items.len();
    if let Some(max) = node.max_items.filter(|m| n as i64 > *m) {
        errs.push(too_many(path, n, max, "items"));
    }
    if let Some(min) = node.min_items.filter(|m| (n as i64) < *m) {
        errs.push(FieldError::invalid(
            path,
            n,
            format!("{path} in body should have at least {min} items"),
        ));
    }
    if node.unique_items && (1..n).any(|i| items[..i].contains(&items[i])) {
        errs.push(FieldError::invalid(
            path,
            "",
            format!("{path} in body shouldn't contain duplicates"),
        ));
    }
    let old_items = old.and_then(Value::as_array);
    match node.list_type.as_deref() {
        Some("set") => {
            for i in 1..n {
                if items[..i].contains(&items[i]) {
                    errs.push(FieldError::duplicate(
                        format!("{path}[{i}]"),
                        items[i].clone(),
                    ));
                }
            }
        }
        Some("map") => {
            let keys: Vec<Value> = items
                .iter()
                .map(|it| map_keys(&node.list_map_keys, it))
                .collect();
            for i in 1..n {
                if keys[..i].contains(&keys[i]) {
                    errs.push(FieldError::duplicate(
                        format!("{path}[{i}]"),
                        keys[i].clone(),
                    ));
                }
            }
        }
        _ => {}
    }
    if let Some(item_node) = &node.items {
        for (i, it) in items.iter().enumerate() {
            let old_it = correlate(node, old_items, it);
            validate(item_node, it, old_it, &format!("{path}[{i}]"), errs);
        }
    }
}

/// The key fields of a map-list item, as an object.
fn map_keys(keys: &[String], item: &Value) -> Value {
    let mut m = serde_json::Map::new();
    for k in keys {
        m.insert(k.clone(), item.get(k).cloned().unwrap_or(Value::Null));
    }
    Value::Object(m)
}

fn object(node: &Node, v: &Value, old: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let Some(m) = v.as_object() else { return };
    let n = m.len();
    if let Some(max) = node.max_properties.filter(|x| n as i64 > *x) {
        errs.push(too_many(path, n, max, "items"));
    }
    if let Some(min) = node.min_properties.filter(|x| (n as i64) < *x) {
        errs.push(FieldError::invalid(
            path,
            n,
            format!("{path} in body should have at least {min} properties"),
        ));
    }
    for r in &node.required {
        if !m.contains_key(r) {
            errs.push(FieldError::required(child_path(path, r), ""));
        }
    }
    if node.embedded {
        embedded(v, path, errs);
    }
    for (k, val) in m {
        let old_val = old.and_then(|o| o.get(k));
        if let Some(p) = node.properties.get(k) {
            validate(p, val, old_val, &child_path(path, k), errs);
        } else if let Some(Additional::Schema(s)) = &node.additional {
            validate(s, val, old_val, &child_path(path, k), errs);
        }
    }
}

/// An `x-kubernetes-embedded-resource`: apiVersion and kind required, the
/// metadata's name and labels valid.
fn embedded(v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for k in ["apiVersion", "kind"] {
        if v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
        {
            errs.push(FieldError::required(
                child_path(path, k),
                "must not be empty",
            ));
        }
    }
    let Some(meta) = v.get("metadata") else {
        return;
    };
    let mpath = child_path(path, "metadata");
    if !meta.is_object() {
        errs.push(FieldError::invalid(
            &mpath,
            json_type(meta),
            "must be of type object",
        ));
        return;
    }
    if let Some(name) = meta.get("name").and_then(Value::as_str) {
        for msg in crate::names::is_dns1123_subdomain(name) {
            errs.push(FieldError::invalid(format!("{mpath}.name"), name, msg));
        }
    }
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (k, val) in labels {
            for msg in crate::names::is_qualified_name(k) {
                errs.push(FieldError::invalid(
                    format!("{mpath}.labels"),
                    k.as_str(),
                    msg,
                ));
            }
            let s = val.as_str().unwrap_or_default();
            for msg in crate::names::is_valid_label_value(s) {
                errs.push(FieldError::invalid(format!("{mpath}.labels"), s, msg));
            }
        }
    }
}

/// allOf, anyOf, oneOf and not, with kube-openapi's messages.
fn composition(node: &Node, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for s in &node.all_of {
        validate(s, v, None, path, errs);
    }
    let run = |s: &Node| {
        let mut e = Vec::new();
        validate(s, v, None, path, &mut e);
        e
    };
    if !node.any_of.is_empty() {
        let results: Vec<Vec<FieldError>> = node.any_of.iter().map(run).collect();
        if results.iter().all(|e| !e.is_empty()) {
            errs.push(FieldError::invalid(
                path,
                "",
                format!("{path} must validate at least one schema (anyOf)"),
            ));
            if let Some(best) = results.into_iter().min_by_key(Vec::len) {
                errs.extend(best);
            }
        }
    }
    if !node.one_of.is_empty() {
        let results: Vec<Vec<FieldError>> = node.one_of.iter().map(run).collect();
        let passed = results.iter().filter(|e| e.is_empty()).count();
        if passed != 1 {
            errs.push(FieldError::invalid(
                path,
                "",
                format!("{path} must validate one and only one schema (oneOf)"),
            ));
            if passed == 0 {
                if let Some(best) = results.into_iter().min_by_key(Vec::len) {
                    errs.extend(best);
                }
            }
        }
    }
    if let Some(not) = &node.not {
        if run(not).is_empty() {
            errs.push(FieldError::invalid(
                path,
                "",
                format!("{path} must not validate the schema (not)"),
            ));
        }
    }
}
