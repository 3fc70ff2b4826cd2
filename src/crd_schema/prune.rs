//! Pruning (dropping what the schema does not declare) and structural
//! defaulting, in the apiextensions-apiserver's order: the object is pruned,
//! then non-nullable nulls without a default are dropped and `default`s
//! filled in. Defaults are pruned themselves when the schema is compiled.

use serde_json::{Map, Value};

use super::schema::{Additional, Node};

/// The fields ObjectMeta has: what an embedded resource's metadata keeps.
const OBJECT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Where pruning is: at a resource's root and in embedded resources,
/// apiVersion, kind and metadata are the object's own.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum At {
    Root,
    Nested,
}

fn join(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

/// Prunes `v` against `node`; returns the paths it removed
/// (`spec.foo`, `spec.list[1].bar`), as upstream reports unknown fields.
pub(crate) fn prune(node: Option<&Node>, v: &mut Value, at: At, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            let Some(node) = node else { return };
            let preserve = node.preserves_unknown();
            let resource = at == At::Root || node.embedded;
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let p = join(path, &k);
                if resource && (k == "apiVersion" || k == "kind") {
                    continue;
                }
                if resource && k == "metadata" {
                    if at != At::Root {
                        if let Some(Value::Object(meta)) = m.get_mut("metadata") {
                            prune_meta(meta, &p, out);
                        }
                    }
                    continue;
                }
                let Some(child) = m.get_mut(&k) else { continue };
                if let Some(prop) = node.properties.get(&k) {
                    prune(Some(prop), child, At::Nested, &p, out);
                } else {
                    match &node.additional {
                        Some(Additional::Schema(s)) => prune(Some(s), child, At::Nested, &p, out),
                        Some(Additional::Allows(true)) => {}
                        _ if preserve => {}
                        _ => {
                            m.remove(&k);
                            out.push(p);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            let Some(node) = node else { return };
            for (i, it) in items.iter_mut().enumerate() {
                prune(
                    node.items.as_deref(),
                    it,
                    At::Nested,
                    &format!("{path}[{i}]"),
                    out,
                );
            }
        }
        _ => {}
    }
}

fn prune_meta(meta: &mut Map<String, Value>, path: &str, out: &mut Vec<String>) {
    let unknown: Vec<String> = meta
        .keys()
        .filter(|k| !OBJECT_META.contains(&k.as_str()))
        .cloned()
        .collect();
    for k in unknown {
        meta.remove(&k);
        out.push(join(path, &k));
    }
}

fn is_non_nullable_null(v: &Value, node: &Node) -> bool {
    v.is_null() && !node.nullable
}

/// Upstream's structural defaulting (`Default`), after dropping nulls of
/// non-nullable fields that have no default.
pub(crate) fn default(node: &Node, v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, prop) in &node.properties {
                let Some(d) = &prop.default else { continue };
                if m.get(k).is_none_or(|x| is_non_nullable_null(x, prop)) {
                    m.insert(k.clone(), d.clone());
                }
            }
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let child_node = match node.properties.get(&k) {
                    Some(p) => Some(p),
                    None => match &node.additional {
                        Some(Additional::Schema(s)) => Some(&**s),
                        _ => None,
                    },
                };
                let Some(cn) = child_node else { continue };
                let Some(child) = m.get_mut(&k) else { continue };
                if is_non_nullable_null(child, cn) {
                    match &cn.default {
                        Some(d) => *child = d.clone(),
                        None => {
                            m.remove(&k);
                            continue;
                        }
                    }
                }
                if let Some(child) = m.get_mut(&k) {
                    default(cn, child);
                }
            }
        }
        Value::Array(items) => {
            let Some(item_node) = node.items.as_deref() else {
                return;
            };
            for it in items.iter_mut() {
                if is_non_nullable_null(it, item_node) {
                    if let Some(d) = &item_node.default {
                        *it = d.clone();
                    }
                }
                default(item_node, it);
            }
        }
        _ => {}
    }
}

/// Prunes every `default` in the tree against its own node, as upstream
/// requires defaults to be pruned; returns the paths of defaults that had
/// unknown fields, for the CRD's validation.
pub(crate) fn prune_defaults(node: &mut Node, path: &str, bad: &mut Vec<String>) {
    let copy = node.clone();
    if let Some(d) = node.default.as_mut() {
        let mut removed = Vec::new();
        prune(Some(&copy), d, At::Nested, "", &mut removed);
        if !removed.is_empty() {
            bad.push(format!("{path}.default"));
        }
    }
    for (k, p) in node.properties.iter_mut() {
        prune_defaults(p, &format!("{path}.properties[{k}]"), bad);
    }
    if let Some(items) = node.items.as_deref_mut() {
        prune_defaults(items, &format!("{path}.items"), bad);
    }
    if let Some(Additional::Schema(s)) = node.additional.as_mut() {
        prune_defaults(s, &format!("{path}.additionalProperties"), bad);
    }
}
