//! Stand-in for `bosun::patch::three_way_strategic_patch` until the `patch`
//! branch lands; delete this file when merging it.
//!
//! Like kubectl: deletions come from original vs modified, changes and
//! additions from current vs modified. Lists are sent whole when the
//! modified list is not already contained in the current one.

use serde_json::{Map, Value};

/// Whether everything `m` says is already true of `c` (server defaults in `c` are ignored).
fn contained(m: &Value, c: &Value) -> bool {
    match (m, c) {
        (Value::Object(mm), Value::Object(cm)) => mm.iter().all(|(k, v)| {
            cm.get(k).is_some_and(|cv| contained(v, cv)) || (v.is_null() && !cm.contains_key(k))
        }),
        (Value::Array(ma), Value::Array(ca)) => {
            ma.len() == ca.len() && ma.iter().zip(ca).all(|(a, b)| contained(a, b))
        }
        _ => m == c,
    }
}

fn diff(
    original: &Value,
    modified: &Map<String, Value>,
    current: &Map<String, Value>,
) -> Map<String, Value> {
    let mut patch = Map::new();
    if let Some(o) = original.as_object() {
        for k in o.keys() {
            if !modified.contains_key(k) && current.contains_key(k) {
                patch.insert(k.clone(), Value::Null);
            }
        }
    }
    for (k, mv) in modified {
        match (mv, current.get(k)) {
            (Value::Object(mo), Some(Value::Object(co))) => {
                let sub = diff(&original[k.as_str()], mo, co);
                if !sub.is_empty() {
                    patch.insert(k.clone(), Value::Object(sub));
                }
            }
            (_, Some(cv)) if contained(mv, cv) => {}
            _ => {
                patch.insert(k.clone(), mv.clone());
            }
        }
    }
    patch
}

pub fn three_way_strategic_patch(
    original: &Value,
    modified: &Value,
    current: &Value,
) -> Result<Value, String> {
    let (Some(m), Some(c)) = (modified.as_object(), current.as_object()) else {
        return Err("objects expected".to_string());
    };
    Ok(Value::Object(diff(original, m, c)))
}
