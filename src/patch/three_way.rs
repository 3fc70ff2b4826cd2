//! The three-way strategic patch `kubectl apply` computes on the client from the
//! last-applied configuration, the manifest and the live object.

use serde_json::{Map, Value};

use super::schema::{list_kind, ListKind};
use super::strategic::{
    element_directive, is_directive_key, DELETE_FROM_PRIMITIVE_LIST, DIRECTIVE, RETAIN_KEYS,
    SET_ELEMENT_ORDER,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DiffMode {
    /// What must be added or changed to reach the target; nothing is deleted.
    AddsAndChanges,
    /// Only what must be deleted.
    Deletions,
}

/// kubectl's client-side apply: the strategic merge patch that takes `current` to `modified`,
/// given `original` (the last-applied configuration, `None` on first apply). Fields in
/// `original` but not in `modified` are deleted, fields in `modified` are set, and fields only
/// the server or another client set (in `current`, not in `original`) are kept. Keyed lists in
/// the patch carry `$setElementOrder` so their elements end up in the manifest's order.
/// An unchanged manifest gives `{}`.
pub fn three_way_strategic_patch(
    original: Option<&Value>,
    modified: &Value,
    current: &Value,
) -> Value {
    let empty = Map::new();
    let modified = modified.as_object().unwrap_or(&empty);
    let current = current.as_object().unwrap_or(&empty);
    let mut path = Vec::new();
    let delta = diff_maps(current, modified, DiffMode::AddsAndChanges, &mut path);
    let deletions = match original.and_then(Value::as_object) {
        Some(o) => diff_maps(o, modified, DiffMode::Deletions, &mut path),
        None => Map::new(),
    };
    let mut patch = combine(deletions, delta, &mut path);
    add_element_order(&mut patch, modified, &mut path);
    Value::Object(patch)
}

fn diff_maps(
    from: &Map<String, Value>,
    to: &Map<String, Value>,
    mode: DiffMode,
    path: &mut Vec<String>,
) -> Map<String, Value> {
    let changes = mode == DiffMode::AddsAndChanges;
    let mut out = Map::new();
    for (k, tv) in to {
        let Some(fv) = from.get(k) else {
            if changes {
                out.insert(k.clone(), tv.clone());
            }
            continue;
        };
        match (fv, tv) {
            (Value::Object(fm), Value::Object(tm)) => {
                path.push(k.clone());
                let d = diff_maps(fm, tm, mode, path);
                path.pop();
                if !d.is_empty() {
                    out.insert(k.clone(), Value::Object(d));
                }
            }
            (Value::Array(fl), Value::Array(tl)) => {
                let kind = list_kind(path, k);
                path.push(k.clone());
                diff_lists(fl, tl, k, kind, mode, path, &mut out);
                path.pop();
            }
            _ => {
                if changes && fv != tv {
                    out.insert(k.clone(), tv.clone());
                }
            }
        }
    }
    if mode == DiffMode::Deletions {
        for k in from.keys() {
            if !to.contains_key(k) {
                out.insert(k.clone(), Value::Null);
            }
        }
    }
    out
}

fn diff_lists(
    from: &[Value],
    to: &[Value],
    field: &str,
    kind: ListKind,
    mode: DiffMode,
    path: &mut Vec<String>,
    out: &mut Map<String, Value>,
) {
    let changes = mode == DiffMode::AddsAndChanges;
    let keyed = |key: &str| {
        from.iter()
            .chain(to)
            .all(|v| v.as_object().is_some_and(|m| m.contains_key(key)))
    };
    match kind {
        ListKind::MergeKey(key) if keyed(key) => {
            let mut elems = Vec::new();
            for (i, te) in to.iter().enumerate() {
                let tk = &te[key];
                match from.iter().find(|f| &f[key] == tk) {
                    None => {
                        if changes {
                            elems.push(te.clone());
                        }
                    }
                    Some(fe) => {
                        if let (Some(fm), Some(tm)) = (fe.as_object(), te.as_object()) {
                            path.push(format!("[{i}]"));
                            let mut d = diff_maps(fm, tm, mode, path);
                            path.pop();
                            if !d.is_empty() {
                                d.insert(key.to_string(), tk.clone());
                                elems.push(Value::Object(d));
                            }
                        }
                    }
                }
            }
            if !changes {
                for fe in from {
                    let fk = &fe[key];
                    if !to.iter().any(|t| &t[key] == fk) {
                        let mut m = Map::new();
                        m.insert(key.to_string(), fk.clone());
                        m.insert(DIRECTIVE.to_string(), Value::String("delete".into()));
                        elems.push(Value::Object(m));
                    }
                }
            }
            if !elems.is_empty() {
                out.insert(field.to_string(), Value::Array(elems));
            }
        }
        ListKind::MergePrimitive => {
            if changes {
                let added: Vec<Value> = to.iter().filter(|v| !from.contains(v)).cloned().collect();
                if !added.is_empty() {
                    out.insert(field.to_string(), Value::Array(added));
                }
            } else {
                let removed: Vec<Value> =
                    from.iter().filter(|v| !to.contains(v)).cloned().collect();
                if !removed.is_empty() {
                    out.insert(
                        format!("{DELETE_FROM_PRIMITIVE_LIST}{field}"),
                        Value::Array(removed),
                    );
                }
            }
        }
        _ => {
            if changes && from != to {
                out.insert(field.to_string(), Value::Array(to.to_vec()));
            }
        }
    }
}

/// Merges two patches computed from the same manifest (deletions, then additions/changes).
fn combine(
    mut a: Map<String, Value>,
    b: Map<String, Value>,
    path: &mut Vec<String>,
) -> Map<String, Value> {
    for (k, bv) in b {
        let kind = list_kind(path, &k);
        let merged = match (a.remove(&k), bv) {
            (Some(Value::Object(am)), Value::Object(bm)) => {
                path.push(k.clone());
                let m = combine(am, bm, path);
                path.pop();
                Value::Object(m)
            }
            (Some(Value::Array(mut al)), Value::Array(bl)) => match kind {
                ListKind::MergeKey(key) => {
                    path.push(k.clone());
                    for be in bl {
                        let pos = al.iter().position(|ae| {
                            ae.get(key).is_some()
                                && ae.get(key) == be.get(key)
                                && element_directive(ae).is_none()
                                && element_directive(&be).is_none()
                        });
                        match (pos, be) {
                            (Some(pos), Value::Object(bm)) => {
                                if let Value::Object(am) = al.remove(pos) {
                                    path.push(format!("[{pos}]"));
                                    al.insert(pos, Value::Object(combine(am, bm, path)));
                                    path.pop();
                                }
                            }
                            (_, be) => al.push(be),
                        }
                    }
                    path.pop();
                    Value::Array(al)
                }
                _ => {
                    al.extend(bl);
                    Value::Array(al)
                }
            },
            (_, bv) => bv,
        };
        a.insert(k, merged);
    }
    a
}

/// Whether the map at `field` under `path` is patched with `$retainKeys` (its keys are a
/// union where one member replaces another): a Deployment's `spec.strategy` and each element
/// of `volumes`.
fn retains_keys(path: &[String], field: &str) -> bool {
    let fields: Vec<&str> = path
        .iter()
        .filter(|s| !s.starts_with('['))
        .map(String::as_str)
        .collect();
    (field == "strategy" && fields == ["spec"])
        || (field.starts_with('[') && fields.last() == Some(&"volumes"))
}

fn retain_keys_of(m: &Map<String, Value>) -> Value {
    let mut keys: Vec<&String> = m.keys().filter(|k| !is_directive_key(k)).collect();
    keys.sort();
    Value::Array(keys.into_iter().map(|k| Value::String(k.clone())).collect())
}

/// Adds `$setElementOrder/<field>` beside every keyed list in `patch`, listing the keys in
/// the order `modified` has them, and `$retainKeys` to union-like maps (deployment strategy,
/// volumes) so a replaced member is dropped, as kubectl does.
fn add_element_order(
    patch: &mut Map<String, Value>,
    modified: &Map<String, Value>,
    path: &mut Vec<String>,
) {
    let keys: Vec<String> = patch.keys().cloned().collect();
    for k in keys {
        if is_directive_key(&k) {
            continue;
        }
        let Some(mv) = modified.get(&k) else { continue };
        match (patch.get_mut(&k), mv) {
            (Some(Value::Object(pm)), Value::Object(mm)) => {
                if retains_keys(path, &k) {
                    pm.insert(RETAIN_KEYS.to_string(), retain_keys_of(mm));
                }
                path.push(k.clone());
                add_element_order(pm, mm, path);
                path.pop();
            }
            (Some(Value::Array(pl)), Value::Array(ml)) => {
                let ListKind::MergeKey(key) = list_kind(path, &k) else {
                    continue;
                };
                if !ml.iter().all(|m| m.get(key).is_some()) {
                    continue;
                }
                path.push(k.clone());
                for (i, pe) in pl.iter_mut().enumerate() {
                    if element_directive(pe).is_some() {
                        continue;
                    }
                    let Some(me) = ml
                        .iter()
                        .find(|m| pe.get(key).is_some() && m.get(key) == pe.get(key))
                        .and_then(Value::as_object)
                    else {
                        continue;
                    };
                    if let Value::Object(pm) = pe {
                        if retains_keys(path, &format!("[{i}]")) {
                            pm.insert(RETAIN_KEYS.to_string(), retain_keys_of(me));
                        }
                        path.push(format!("[{i}]"));
                        add_element_order(pm, me, path);
                        path.pop();
                    }
                }
                path.pop();
                let order: Vec<Value> = ml
                    .iter()
                    .map(|m| {
                        let mut o = Map::new();
                        o.insert(key.to_string(), m[key].clone());
                        Value::Object(o)
                    })
                    .collect();
                patch.insert(format!("{SET_ELEMENT_ORDER}{k}"), Value::Array(order));
            }
            _ => {}
        }
    }
}
