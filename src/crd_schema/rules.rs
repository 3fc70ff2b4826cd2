//! `x-kubernetes-validations` (decoded and compiled in `schema.rs`):
//! checking their `fieldPath`s, and running them against a value (with
//! `oldSelf` on updates) as the apiextensions-apiserver's CEL validator does.

use serde_json::Value;

use super::schema::Node;
use crate::validation::{ErrorKind, FieldError};

/// Checks each rule's `fieldPath` names a field the node declares
/// (`.spec.replicas`, `['a.b']`).
pub(crate) fn check_field_paths(node: &Node, path: &str, errs: &mut Vec<FieldError>) {
    for (i, r) in node.rules.iter().enumerate() {
        if r.field_path.is_empty() {
            continue;
        }
        let p = format!("{path}.x-kubernetes-validations[{i}].fieldPath");
        match split_field_path(&r.field_path) {
            None => errs.push(FieldError::invalid(
                p,
                r.field_path.clone(),
                "fieldPath must be a valid path",
            )),
            Some(parts) => {
                let mut cur = node;
                for part in parts {
                    match cur.properties.get(&part) {
                        Some(n) => cur = n,
                        None if cur.preserves_unknown() => break,
                        None => {
                            errs.push(FieldError::invalid(
                                p,
                                r.field_path.clone(),
                                "fieldPath must be a valid path: does not refer to a valid field",
                            ));
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// `.a.b['c.d']` → `["a", "b", "c.d"]`.
fn split_field_path(fp: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = fp;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']")?;
            out.push(r[..end].to_string());
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            out.push(r[..end].to_string());
            rest = &r[end..];
        } else {
            return None;
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The field path in Kubernetes' syntax for an error at `path` + `fieldPath`.
fn error_path(path: &str, field_path: &str) -> String {
    let Some(parts) = split_field_path(field_path) else {
        return path.to_string();
    };
    let mut p = path.to_string();
    for part in parts {
        p = if p.is_empty() {
            part
        } else {
            format!("{p}.{part}")
        };
    }
    p
}

/// cel-rust's error text in cel-go's words where they differ
/// (`No such key: x` → `no such key: x`).
fn go_error(e: &str) -> String {
    let mut c = e.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Runs the node's rules on `value` (and `old`, for transition rules).
pub(crate) fn run(
    node: &Node,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
    only_transitions: bool,
) {
    for r in &node.rules {
        let Some(program) = &r.program else { continue };
        if only_transitions && !r.transition {
            continue;
        }
        if r.transition && old.is_none() {
            continue;
        }
        let mut vars: Vec<(&str, &Value)> = vec![("self", value)];
        if let Some(o) = old {
            vars.push(("oldSelf", o));
        }
        let rule_text = r.rule.trim();
        // Objects and arrays are shown by their type, scalars by value.
        let shown = match node.ty.as_str() {
            "object" | "array" => Value::String(node.ty.clone()),
            // Numbers the rules saw as doubles print as written (`3`, not `3.0`).
            _ => match value.as_f64() {
                Some(f) if !value.is_i64() && f.fract() == 0.0 && f.abs() < 1e15 => {
                    Value::from(f as i64)
                }
                _ => value.clone(),
            },
        };
        match program.eval_bool(&vars) {
            Ok(true) => {}
            Ok(false) => {
                let detail = r
                    .message_expression
                    .as_ref()
                    .and_then(|m| m.eval_string(&vars).ok())
                    .map(|m| m.trim().to_string())
                    .filter(|m| !m.is_empty() && !m.contains('\n'))
                    .unwrap_or_else(|| {
                        if r.message.trim().is_empty() {
                            format!("failed rule: {rule_text}")
                        } else {
                            r.message.trim().to_string()
                        }
                    });
                let field = error_path(path, &r.field_path);
                errs.push(match r.reason.as_str() {
                    "FieldValueForbidden" => FieldError::forbidden(field, detail),
                    "FieldValueRequired" => FieldError::required(field, detail),
                    "FieldValueDuplicate" => FieldError {
                        field,
                        kind: ErrorKind::Duplicate,
                        bad_value: Some(shown),
                        detail: String::new(),
                    },
                    _ => FieldError::invalid(field, shown, detail),
                });
            }
            Err(e) => {
                let what = if r.message.trim().is_empty() {
                    rule_text
                } else {
                    r.message.trim()
                };
                let detail = if e.starts_with("found no matching overload") {
                    format!(
                        "'no such overload: {e}': call arguments did not match a supported operator, function or macro signature for rule: {what}"
                    )
                } else {
                    format!("{} evaluating rule: {what}", go_error(&e))
                };
                errs.push(FieldError::invalid(path, shown, detail));
            }
        }
    }
}
