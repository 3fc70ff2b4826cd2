//! The three patch types the Kubernetes API server accepts, applied to JSON objects:
//! JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch, plus the
//! three-way strategic patch `kubectl apply` computes on the client.
//!
//! Strategic merge patch follows Kubernetes' rules for the built-in types: maps merge
//! recursively, `null` deletes a key, most lists are replaced, and the lists users edit by
//! element (containers, env, volumes, ports, ...) merge element by element on their merge key.
//! Which list is which is decided by the field's name and where it sits in the object.

use serde_json::{Map, Value};
use thiserror::Error;

/// Why a patch could not be applied. Each message names the place in the object.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PatchError {
    /// The patch body is not a JSON object (a merge or strategic patch must be one).
    #[error("the patch must be a JSON object, not {found}")]
    NotAnObject { found: &'static str },
    /// A JSON patch body that is not a list of valid operations.
    #[error("the JSON patch is not a list of operations: {0}")]
    InvalidJsonPatch(String),
    /// A JSON patch operation that could not be carried out (including a failed `test`).
    #[error("JSON patch operation {index} ({op} {path}) failed: {reason}")]
    JsonPatchFailed {
        index: usize,
        op: &'static str,
        path: String,
        reason: &'static str,
    },
    /// An element of a list that merges by key lacks the key.
    #[error("{path}: list element has no \"{key}\", the key this list merges on")]
    MissingMergeKey { path: String, key: &'static str },
    /// An element of a list that merges by key is not an object.
    #[error("{path}: list element must be an object with \"{key}\"")]
    ElementNotAnObject { path: String, key: &'static str },
    /// A `$patch` value other than replace, merge or delete.
    #[error(
        "{path}: unknown $patch directive {value} (expected \"replace\", \"merge\" or \"delete\")"
    )]
    UnknownDirective { path: String, value: String },
    /// A directive (`$retainKeys`, `$setElementOrder/..`, `$deleteFromPrimitiveList/..`) with a
    /// value of the wrong shape.
    #[error("{path}: {directive} must be a list")]
    BadDirective { path: String, directive: String },
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn require_object(patch: &Value) -> Result<&Map<String, Value>, PatchError> {
    patch.as_object().ok_or(PatchError::NotAnObject {
        found: json_type(patch),
    })
}

/// Applies a JSON merge patch (RFC 7386, `application/merge-patch+json`): objects merge
/// recursively, `null` deletes, everything else (lists included) replaces.
pub fn apply_merge_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    require_object(patch)?;
    let mut doc = target.clone();
    json_patch::merge(&mut doc, patch);
    Ok(doc)
}

/// Applies a JSON patch (RFC 6902, `application/json-patch+json`). The operations apply
/// atomically: on any failure (a failed `test` included) the target is left as it was.
pub fn apply_json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| PatchError::InvalidJsonPatch(e.to_string()))?;
    let mut doc = target.clone();
    json_patch::patch(&mut doc, &ops.0).map_err(|e| {
        let (op, path) = match ops.0.get(e.operation) {
            Some(o) => (op_name(o), o.path().as_str().to_string()),
            None => ("?", e.path.as_str().to_string()),
        };
        let reason = match e.kind {
            json_patch::PatchErrorKind::TestFailed => {
                "the value there is not the one the test expects"
            }
            json_patch::PatchErrorKind::InvalidPointer => "the path does not exist",
            json_patch::PatchErrorKind::InvalidFromPointer => "the \"from\" path does not exist",
            json_patch::PatchErrorKind::CannotMoveInsideItself => {
                "a value cannot be moved inside itself"
            }
            _ => "the operation is invalid",
        };
        PatchError::JsonPatchFailed {
            index: e.operation,
            op,
            path,
            reason,
        }
    })?;
    Ok(doc)
}

fn op_name(op: &json_patch::PatchOperation) -> &'static str {
    use json_patch::PatchOperation::*;
    match op {
        Add(_) => "add",
        Remove(_) => "remove",
        Replace(_) => "replace",
        Move(_) => "move",
        Copy(_) => "copy",
        Test(_) => "test",
    }
}

// ---------------------------------------------------------------------------------------------
// Strategic merge patch
// ---------------------------------------------------------------------------------------------

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

/// How a list field is patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListKind {
    /// The patch's list replaces the original (the default, as for `args`, `tolerations`).
    Replace,
    /// A set of primitives: the patch's values are added (`metadata.finalizers`).
    MergePrimitive,
    /// A list of objects merged element by element on this key.
    MergeKey(&'static str),
}

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// The patch strategy of list `field` found under `path` (field names and `[i]` indices).
fn list_kind(path: &[String], field: &str) -> ListKind {
    let fields: Vec<&str> = path
        .iter()
        .filter(|s| !s.starts_with('['))
        .map(String::as_str)
        .collect();
    let parent = fields.last().copied();
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets" => ListKind::MergeKey("name"),
        "hostAliases" | "podIPs" | "hostIPs" => ListKind::MergeKey("ip"),
        "volumeMounts" => ListKind::MergeKey("mountPath"),
        "volumeDevices" => ListKind::MergeKey("devicePath"),
        "conditions" => ListKind::MergeKey("type"),
        "topologySpreadConstraints" => ListKind::MergeKey("topologyKey"),
        "addresses" if parent == Some("status") => ListKind::MergeKey("type"),
        "ownerReferences" if parent == Some("metadata") => ListKind::MergeKey("uid"),
        "finalizers" if parent == Some("metadata") => ListKind::MergePrimitive,
        "ports" => match parent {
            Some(p) if CONTAINER_LISTS.contains(&p) => ListKind::MergeKey("containerPort"),
            // A Service's spec.ports.
            Some("spec") if fields.len() == 1 => ListKind::MergeKey("port"),
            _ => ListKind::Replace,
        },
        _ => ListKind::Replace,
    }
}

/// How server-side apply treats a list (Kubernetes' `x-kubernetes-list-type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// Owned and replaced as a whole (`args`, `tolerations`, unknown lists).
    Atomic,
    /// A set of primitives, each value owned on its own (`metadata.finalizers`).
    Set,
    /// Objects owned element by element, identified by these key fields
    /// (`x-kubernetes-list-map-keys`).
    Map(&'static [&'static str]),
}

/// The list type server-side apply uses for list `field` under the field
/// names `fields`. It follows the strategic merge table above, with the
/// places where the OpenAPI list-map keys differ from the patch merge key:
/// ports are keyed by port and protocol, spread constraints by topology key
/// and `whenUnsatisfiable`, and a node's addresses are atomic.
pub fn apply_list_type(fields: &[String], field: &str) -> ListType {
    let parent = fields.last().map(String::as_str);
    match field {
        "ports" => match parent {
            Some(p) if CONTAINER_LISTS.contains(&p) => {
                return ListType::Map(&["containerPort", "protocol"])
            }
            Some("spec") if fields.len() == 1 => return ListType::Map(&["port", "protocol"]),
            _ => {}
        },
        "topologySpreadConstraints" => return ListType::Map(&["topologyKey", "whenUnsatisfiable"]),
        "addresses" => return ListType::Atomic,
        _ => {}
    }
    match list_kind(fields, field) {
        ListKind::Replace => ListType::Atomic,
        ListKind::MergePrimitive => ListType::Set,
        ListKind::MergeKey(key) => ListType::Map(single_key(key)),
    }
}

fn single_key(key: &'static str) -> &'static [&'static str] {
    match key {
        "name" => &["name"],
        "ip" => &["ip"],
        "mountPath" => &["mountPath"],
        "devicePath" => &["devicePath"],
        "type" => &["type"],
        "uid" => &["uid"],
        "topologyKey" => &["topologyKey"],
        "containerPort" => &["containerPort"],
        "port" => &["port"],
        _ => &[],
    }
}

/// The value a list-map key field takes when an element leaves it out
/// (its OpenAPI default), so `{containerPort: 80}` and `{containerPort: 80,
/// protocol: TCP}` are the same element.
pub fn list_key_default(key: &str) -> Option<&'static str> {
    (key == "protocol").then_some("TCP")
}

/// Whether a map is owned as a whole (`x-kubernetes-map-type: atomic`):
/// label selectors and node selectors.
pub fn is_atomic_map(field: &str) -> bool {
    matches!(
        field,
        "selector" | "labelSelector" | "namespaceSelector" | "nodeSelector"
    )
}

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

fn is_directive_key(k: &str) -> bool {
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

fn element_directive(v: &Value) -> Option<&Value> {
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

// ---------------------------------------------------------------------------------------------
// Three-way patch (kubectl apply)
// ---------------------------------------------------------------------------------------------

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

#[cfg(test)]
mod tests;
