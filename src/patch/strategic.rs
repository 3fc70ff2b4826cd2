//! Strategic merge patch (`application/strategic-merge-patch+json`) as the API server applies
//! it to built-in types: maps merge recursively, `null` deletes a key, lists follow their
//! field's strategy (`schema`), and the `$patch`, `$retainKeys`, `$setElementOrder` and
//! `$deleteFromPrimitiveList` directives are carried out and never left in the result.

use serde_json::{Map, Value};

use super::schema::{list_kind, ListKind};
use super::{require_object, PatchError};

pub(super) const DIRECTIVE: &str = "$patch";
pub(super) const RETAIN_KEYS: &str = "$retainKeys";
pub(super) const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
pub(super) const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for seg in path {
        if !seg.starts_with('[') && !out.is_empty() {
            out.push('.');
        }
        out.push_str(seg);
    }
    if out.is_empty() {
        "the object".to_string()
    } else {
        out
    }
}

pub(super) fn is_directive_key(k: &str) -> bool {
    k == DIRECTIVE
        || k == RETAIN_KEYS
        || k.starts_with(SET_ELEMENT_ORDER)
        || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
}

/// Applies a strategic merge patch (`application/strategic-merge-patch+json`) the way the
/// Kubernetes API server does for built-in types. The result never contains directives.
pub fn apply_strategic_merge_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let patch = require_object(patch)?;
    let mut path = Vec::new();
    let merged = merge_map(target.as_object(), patch, &mut path)?;
    Ok(Value::Object(merged))
}

fn directive_list<'a>(
    v: &'a Value,
    directive: &str,
    path: &[String],
) -> Result<&'a Vec<Value>, PatchError> {
    v.as_array().ok_or_else(|| PatchError::BadDirective {
        path: display_path(path),
        directive: directive.to_string(),
    })
}

fn merge_map(
    original: Option<&Map<String, Value>>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Result<Map<String, Value>, PatchError> {
    let mut result = original.cloned().unwrap_or_default();
    if let Some(d) = patch.get(DIRECTIVE) {
        match d.as_str() {
            Some("replace") => result = Map::new(),
            Some("delete") => return Ok(Map::new()),
            Some("merge") => {}
            _ => {
                return Err(PatchError::UnknownDirective {
                    path: display_path(path),
                    value: d.to_string(),
                })
            }
        }
    }

    for (k, v) in patch {
        if let Some(field) = k.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            let remove = directive_list(v, k, path)?;
            if let Some(Value::Array(list)) = result.get_mut(field) {
                list.retain(|x| !remove.contains(x));
            }
        }
    }

    for (k, pv) in patch {
        if is_directive_key(k) {
            continue;
        }
        if pv.is_null() {
            result.remove(k);
            continue;
        }
        path.push(k.clone());
        let merged = merge_value(result.get(k), pv, k, path);
        path.pop();
        result.insert(k.clone(), merged?);
    }

    for (k, v) in patch {
        if let Some(field) = k.strip_prefix(SET_ELEMENT_ORDER) {
            let order = directive_list(v, k, path)?;
            let key = match list_kind(path, field) {
                ListKind::MergeKey(key) => Some(key),
                _ => None,
            };
            if let Some(Value::Array(list)) = result.get_mut(field) {
                reorder(list, order, key);
            }
        }
    }

    if let Some(keep) = patch.get(RETAIN_KEYS) {
        let keep = directive_list(keep, RETAIN_KEYS, path)?;
        result.retain(|k, _| keep.iter().any(|x| x.as_str() == Some(k)));
    }
    Ok(result)
}

fn merge_value(
    original: Option<&Value>,
    patch: &Value,
    field: &str,
    path: &mut Vec<String>,
) -> Result<Value, PatchError> {
    match patch {
        Value::Object(pm) => {
            let om = original.and_then(Value::as_object);
            merge_map(om, pm, path).map(Value::Object)
        }
        Value::Array(pl) => {
            let kind = list_kind(&path[..path.len() - 1], field);
            let ol = original.and_then(Value::as_array);
            merge_list(ol, pl, kind, path).map(Value::Array)
        }
        other => Ok(other.clone()),
    }
}

pub(super) fn element_directive(v: &Value) -> Option<&Value> {
    v.as_object().and_then(|m| m.get(DIRECTIVE))
}

/// A list element that is only a directive (`{"$patch": "replace"}`), not data.
fn is_directive_only(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|m| !m.is_empty() && m.keys().all(|k| is_directive_key(k)))
}

/// The patch's list taken as is, with directives removed.
fn clean_list(patch: &[Value], path: &mut Vec<String>) -> Result<Vec<Value>, PatchError> {
    let mut out = Vec::new();
    for (i, el) in patch.iter().enumerate() {
        if is_directive_only(el) || element_directive(el).and_then(Value::as_str) == Some("delete")
        {
            continue;
        }
        path.push(format!("[{i}]"));
        let cleaned = match el {
            Value::Object(m) => merge_map(None, m, path).map(Value::Object),
            Value::Array(l) => clean_list(l, path).map(Value::Array),
            other => Ok(other.clone()),
        };
        path.pop();
        out.push(cleaned?);
    }
    Ok(out)
}

fn merge_list(
    original: Option<&Vec<Value>>,
    patch: &[Value],
    kind: ListKind,
    path: &mut Vec<String>,
) -> Result<Vec<Value>, PatchError> {
    let replace = patch
        .iter()
        .any(|el| element_directive(el).and_then(Value::as_str) == Some("replace"));
    if replace || kind == ListKind::Replace {
        return clean_list(patch, path);
    }
    let mut result = original.cloned().unwrap_or_default();
    match kind {
        ListKind::Replace => unreachable!("handled above"),
        ListKind::MergePrimitive => {
            for v in patch {
                if !result.contains(v) {
                    result.push(v.clone());
                }
            }
        }
        ListKind::MergeKey(key) => {
            for (i, el) in patch.iter().enumerate() {
                if is_directive_only(el) {
                    continue;
                }
                path.push(format!("[{i}]"));
                let Some(em) = el.as_object() else {
                    return Err(PatchError::ElementNotAnObject {
                        path: display_path(path),
                        key,
                    });
                };
                let Some(kv) = em.get(key) else {
                    return Err(PatchError::MissingMergeKey {
                        path: display_path(path),
                        key,
                    });
                };
                if em.get(DIRECTIVE).and_then(Value::as_str) == Some("delete") {
                    result.retain(|x| x.get(key) != Some(kv));
                    path.pop();
                    continue;
                }
                let merged = match result.iter().position(|x| x.get(key) == Some(kv)) {
                    Some(pos) => {
                        let m = merge_map(result[pos].as_object(), em, path)?;
                        result[pos] = Value::Object(m);
                        Ok(())
                    }
                    None => merge_map(None, em, path).map(|m| result.push(Value::Object(m))),
                };
                path.pop();
                merged?;
            }
        }
    }
    Ok(result)
}

/// Puts the elements named in `order` first, in that order; the rest follow in their
/// existing relative order.
fn reorder(list: &mut Vec<Value>, order: &[Value], key: Option<&str>) {
    let ident = |v: &Value| -> Option<Value> {
        match key {
            Some(k) => v.get(k).cloned(),
            None => Some(v.clone()),
        }
    };
    let mut remaining = std::mem::take(list);
    for o in order {
        let Some(id) = ident(o) else { continue };
        if let Some(pos) = remaining
            .iter()
            .position(|v| ident(v).as_ref() == Some(&id))
        {
            list.push(remaining.remove(pos));
        }
    }
    list.extend(remaining);
}
