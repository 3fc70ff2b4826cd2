//! Walking objects (plain JSON values) against the list and map types of
//! [`crate::patch::apply_list_type`]: the fields an object sets, the fields two
//! objects differ in, the merge of an applied configuration into a live
//! object, and removing fields from an object.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fieldset::{self, FieldSet, PathElement};
use crate::patch::{apply_list_type, is_atomic_map, list_key_default, ListType};

/// How a value is walked.
enum Shape {
    /// An object whose fields are owned one by one.
    Map,
    /// A list whose items are owned one by one, each known by its element.
    Items,
    /// Owned as a whole: scalars, atomic lists and maps.
    Leaf,
}

/// Where the walk is: the field names from the root, for the type tables.
struct Ctx {
    names: Vec<String>,
    path: Vec<PathElement>,
}

impl Ctx {
    fn new() -> Ctx {
        Ctx {
            names: Vec::new(),
            path: Vec::new(),
        }
    }

    fn field(&self) -> &str {
        self.names.last().map(String::as_str).unwrap_or("")
    }

    fn list_type(&self) -> ListType {
        let n = self.names.len();
        if n == 0 {
            return ListType::Atomic;
        }
        apply_list_type(&self.names[..n - 1], &self.names[n - 1])
    }

    fn shape(&self, v: &Value) -> Shape {
        match v {
            Value::Object(_) if !self.names.is_empty() && is_atomic_map(self.field()) => {
                Shape::Leaf
            }
            Value::Object(_) => Shape::Map,
            Value::Array(_) if self.list_type() != ListType::Atomic => Shape::Items,
            _ => Shape::Leaf,
        }
    }

    /// The element naming item `i` of the list being walked.
    fn item_element(&self, i: usize, item: &Value) -> PathElement {
        match self.list_type() {
            ListType::Set => fieldset::value(item),
            ListType::Map(keys) => {
                let mut found = BTreeMap::new();
                for k in keys {
                    match item.get(*k) {
                        Some(v) if !v.is_null() => {
                            found.insert(*k, v.clone());
                        }
                        _ => {
                            if let Some(d) = list_key_default(k) {
                                found.insert(*k, Value::String(d.into()));
                            }
                        }
                    }
                }
                if found.is_empty() {
                    fieldset::index(i)
                } else {
                    fieldset::key(&found)
                }
            }
            ListType::Atomic => fieldset::index(i),
        }
    }

    fn items<'a>(&self, list: &'a [Value]) -> Vec<(PathElement, &'a Value)> {
        list.iter()
            .enumerate()
            .map(|(i, v)| (self.item_element(i, v), v))
            .collect()
    }

    fn enter_field(&mut self, name: &str) {
        self.names.push(name.to_string());
        self.path.push(fieldset::field(name));
    }

    fn leave_field(&mut self) {
        self.names.pop();
        self.path.pop();
    }
}

/// The fields `obj` sets, as server-side apply records an applied
/// configuration: every scalar, atomic value and list item is a member; an
/// object is a member only when it is empty or null.
pub fn fields_of(obj: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    let mut ctx = Ctx::new();
    collect(obj, &mut ctx, &mut out);
    out
}

fn collect(v: &Value, ctx: &mut Ctx, out: &mut FieldSet) {
    match (ctx.shape(v), v) {
        (Shape::Map, Value::Object(m)) => {
            for (k, child) in m {
                ctx.enter_field(k);
                let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                if empty || !matches!(ctx.shape(child), Shape::Map | Shape::Items) {
                    out.insert(&ctx.path);
                }
                collect(child, ctx, out);
                ctx.leave_field();
            }
        }
        (Shape::Items, Value::Array(list)) => {
            for (pe, item) in ctx.items(list) {
                ctx.path.push(pe);
                out.insert(&ctx.path);
                collect(item, ctx, out);
                ctx.path.pop();
            }
        }
        _ => {}
    }
}

/// The fields two versions of an object differ in, as structured-merge-diff's
/// `Compare` reports them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }

    /// Added or modified: what another manager's fields conflict with.
    pub fn changed(&self) -> FieldSet {
        self.added.clone().union(&self.modified)
    }
}

pub fn compare(old: &Value, new: &Value) -> Comparison {
    let mut out = Comparison::default();
    let mut ctx = Ctx::new();
    compare_at(Some(old), Some(new), &mut ctx, &mut out);
    out
}

fn subtree(v: &Value, ctx: &mut Ctx) -> FieldSet {
    let mut out = FieldSet::new();
    let depth = ctx.path.len();
    let saved = std::mem::take(&mut ctx.path);
    collect(v, ctx, &mut out);
    ctx.path = saved;
    debug_assert_eq!(ctx.path.len(), depth);
    out
}

fn compare_at(old: Option<&Value>, new: Option<&Value>, ctx: &mut Ctx, out: &mut Comparison) {
    // A member for the node itself, except for the top-level objects
    // (metadata, spec, status), which every object of a kind has.
    let own_member = ctx.path.len() > 1 || !matches!(new.or(old), Some(Value::Object(_)));
    match (old, new) {
        (None, None) => {}
        (None, Some(n)) => {
            if own_member {
                out.added.insert(&ctx.path);
            }
            let below = subtree(n, ctx);
            out.added.insert_under(&ctx.path, below);
        }
        (Some(o), None) => {
            if own_member {
                out.removed.insert(&ctx.path);
            }
            let below = subtree(o, ctx);
            out.removed.insert_under(&ctx.path, below);
        }
        (Some(o), Some(n)) => match (ctx.shape(o), ctx.shape(n), o, n) {
            (Shape::Map, Shape::Map, Value::Object(om), Value::Object(nm)) => {
                for (k, nv) in nm {
                    ctx.enter_field(k);
                    compare_at(om.get(k), Some(nv), ctx, out);
                    ctx.leave_field();
                }
                for (k, ov) in om {
                    if !nm.contains_key(k) {
                        ctx.enter_field(k);
                        compare_at(Some(ov), None, ctx, out);
                        ctx.leave_field();
                    }
                }
            }
            (Shape::Items, Shape::Items, Value::Array(ol), Value::Array(nl)) => {
                let olds: BTreeMap<PathElement, &Value> = ctx.items(ol).into_iter().collect();
                let news = ctx.items(nl);
                for (pe, nv) in &news {
                    ctx.path.push(pe.clone());
                    compare_at(olds.get(pe).copied(), Some(nv), ctx, out);
                    ctx.path.pop();
                }
                for (pe, ov) in olds {
                    if !news.iter().any(|(p, _)| *p == pe) {
                        ctx.path.push(pe);
                        compare_at(Some(ov), None, ctx, out);
                        ctx.path.pop();
                    }
                }
            }
            _ => {
                if o != n {
                    out.modified.insert(&ctx.path);
                }
            }
        },
    }
}

/// Merges an applied configuration into the live object: objects field by
/// field, list maps and sets item by item (live order first, new items after),
/// everything else replaced. A null in the configuration removes the field.
pub fn merge(live: &Value, config: &Value) -> Value {
    let mut ctx = Ctx::new();
    merge_at(live, config, &mut ctx)
}

fn merge_at(live: &Value, config: &Value, ctx: &mut Ctx) -> Value {
    match (ctx.shape(config), live, config) {
        (Shape::Map, Value::Object(lm), Value::Object(cm))
            if matches!(ctx.shape(live), Shape::Map) =>
        {
            let mut out = lm.clone();
            for (k, cv) in cm {
                if cv.is_null() {
                    out.remove(k);
                    continue;
                }
                ctx.enter_field(k);
                let merged = match lm.get(k) {
                    Some(lv) => merge_at(lv, cv, ctx),
                    None => cv.clone(),
                };
                ctx.leave_field();
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Shape::Items, Value::Array(ll), Value::Array(cl)) => {
            let cfg = ctx.items(cl);
            let lives = ctx.items(ll);
            let mut out = Vec::with_capacity(ll.len() + cl.len());
            for (pe, lv) in &lives {
                match cfg.iter().find(|(p, _)| p == pe) {
                    Some((_, cv)) => {
                        ctx.path.push(pe.clone());
                        out.push(merge_at(lv, cv, ctx));
                        ctx.path.pop();
                    }
                    None => out.push((*lv).clone()),
                }
            }
            for (pe, cv) in cfg {
                if !lives.iter().any(|(p, _)| *p == pe) {
                    out.push(cv.clone());
                }
            }
            Value::Array(out)
        }
        _ => config.clone(),
    }
}

/// Removes every member of `set` (with what is below it) from `obj`.
pub fn remove(obj: &mut Value, set: &FieldSet) {
    let mut ctx = Ctx::new();
    remove_at(obj, set, &mut ctx);
}

fn remove_at(v: &mut Value, set: &FieldSet, ctx: &mut Ctx) {
    match v {
        Value::Object(m) => {
            for (pe, member, below) in set.entries() {
                let Some(name) = pe.strip_prefix("f:") else {
                    continue;
                };
                if member {
                    m.remove(name);
                } else if let Some(child) = m.get_mut(name) {
                    ctx.enter_field(name);
                    remove_at(child, below, ctx);
                    ctx.leave_field();
                }
            }
        }
        Value::Array(list) => {
            let elements: Vec<PathElement> = ctx.items(list).into_iter().map(|(p, _)| p).collect();
            let mut keep = Vec::with_capacity(list.len());
            for (item, pe) in std::mem::take(list).into_iter().zip(elements) {
                let entry = set.entries().find(|(p, _, _)| **p == pe);
                match entry {
                    Some((_, true, _)) => {}
                    Some((_, false, below)) => {
                        let mut item = item;
                        ctx.path.push(pe);
                        remove_at(&mut item, below, ctx);
                        ctx.path.pop();
                        keep.push(item);
                    }
                    None => keep.push(item),
                }
            }
            *list = keep;
        }
        _ => {}
    }
}
