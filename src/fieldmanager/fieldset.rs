//! A set of field paths as server-side apply records them (structured-merge-diff's
//! `fieldpath.Set`), and its `FieldsV1` JSON form: `{"f:spec": {"f:replicas": {}}}`,
//! where a path element is `f:<field>`, `k:{<list-map keys>}`, `v:<set value>` or
//! `i:<index>`, and `".": {}` marks a node with children that is itself a member.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// One step of a path, kept in its `FieldsV1` spelling (`f:name`, `k:{"name":"c"}`,
/// `v:"x"`, `i:0`), which is also its order.
pub type PathElement = String;

/// A tree of path elements; each node may be a member (the path is in the set) and
/// may have children.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    children: BTreeMap<PathElement, Node>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Node {
    member: bool,
    children: FieldSet,
}

impl Node {
    fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }
}

/// The element for field `name` of an object.
pub fn field(name: &str) -> PathElement {
    format!("f:{name}")
}

/// The element for a list-map item with these key values (sorted by key name).
pub fn key(keys: &BTreeMap<&str, Value>) -> PathElement {
    let mut m = Map::new();
    for (k, v) in keys {
        m.insert((*k).to_string(), v.clone());
    }
    format!("k:{}", Value::Object(m))
}

/// The element for a member of a set-typed list.
pub fn value(v: &Value) -> PathElement {
    format!("v:{v}")
}

/// The element for a list item known only by its position.
pub fn index(i: usize) -> PathElement {
    format!("i:{i}")
}

impl FieldSet {
    pub fn new() -> Self {
        FieldSet::default()
    }

    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// Adds `path` as a member.
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        let node = self.children.entry(first.clone()).or_default();
        if rest.is_empty() {
            node.member = true;
        } else {
            node.children.insert(rest);
        }
    }

    /// Adds every member of `other` under `prefix`.
    pub fn insert_under(&mut self, prefix: &[PathElement], other: FieldSet) {
        if other.is_empty() {
            return;
        }
        match prefix.split_first() {
            None => *self = std::mem::take(self).union(&other),
            Some((first, rest)) => self
                .children
                .entry(first.clone())
                .or_default()
                .children
                .insert_under(rest, other),
        }
    }

    pub fn has(&self, path: &[PathElement]) -> bool {
        match path.split_first() {
            None => false,
            Some((first, rest)) => self.children.get(first).is_some_and(|n| {
                if rest.is_empty() {
                    n.member
                } else {
                    n.children.has(rest)
                }
            }),
        }
    }

    /// The subtree below `pe` (its members relative to it).
    pub fn child(&self, pe: &str) -> Option<&FieldSet> {
        self.children.get(pe).map(|n| &n.children)
    }

    /// Drops `pe` and everything below it.
    pub fn remove_subtree(&mut self, pe: &str) {
        self.children.remove(pe);
    }

    /// Keeps only `pe` and what is below it.
    pub fn only_subtree(&self, pe: &str) -> FieldSet {
        let mut out = FieldSet::new();
        if let Some(n) = self.children.get(pe) {
            out.children.insert(pe.to_string(), n.clone());
        }
        out
    }

    pub fn union(mut self, other: &FieldSet) -> FieldSet {
        for (pe, n) in &other.children {
            let mine = self.children.entry(pe.clone()).or_default();
            mine.member |= n.member;
            mine.children = std::mem::take(&mut mine.children).union(&n.children);
        }
        self
    }

    /// Members of `self` that are not members of `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        for (pe, n) in &self.children {
            let node = match other.children.get(pe) {
                None => n.clone(),
                Some(o) => Node {
                    member: n.member && !o.member,
                    children: n.children.difference(&o.children),
                },
            };
            if !node.is_empty() {
                out.children.insert(pe.clone(), node);
            }
        }
        out
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        for (pe, n) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let node = Node {
                    member: n.member && o.member,
                    children: n.children.intersection(&o.children),
                };
                if !node.is_empty() {
                    out.children.insert(pe.clone(), node);
                }
            }
        }
        out
    }

    /// The paths of `self` that `other` does not mention at all (neither as a
    /// member nor as the parent of one), each cut at its highest such node:
    /// what pruning removes when a manager stops applying fields nobody else
    /// holds.
    pub fn not_mentioned_in(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        for (pe, n) in &self.children {
            let node = match other.children.get(pe) {
                None => Node {
                    member: true,
                    children: FieldSet::new(),
                },
                Some(o) => Node {
                    member: false,
                    children: n.children.not_mentioned_in(&o.children),
                },
            };
            if !node.is_empty() {
                out.children.insert(pe.clone(), node);
            }
        }
        out
    }

    /// The member nodes directly at this level, with their subtrees.
    pub fn entries(&self) -> impl Iterator<Item = (&PathElement, bool, &FieldSet)> {
        self.children
            .iter()
            .map(|(pe, n)| (pe, n.member, &n.children))
    }

    /// Every member path, in order.
    pub fn paths(&self) -> Vec<Vec<PathElement>> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.collect_paths(&mut prefix, &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
        for (pe, n) in &self.children {
            prefix.push(pe.clone());
            if n.member {
                out.push(prefix.clone());
            }
            n.children.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The `FieldsV1` JSON form.
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        for (pe, n) in &self.children {
            let mut inner = match n.children.to_fields_v1() {
                Value::Object(o) => o,
                _ => Map::new(),
            };
            if n.member && !inner.is_empty() {
                inner.insert(".".into(), Value::Object(Map::new()));
            }
            m.insert(pe.clone(), Value::Object(inner));
        }
        Value::Object(m)
    }

    /// Reads the `FieldsV1` JSON form; an error says what is wrong.
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, String> {
        let Value::Object(m) = v else {
            return Err("fieldsV1 must be an object".into());
        };
        let mut out = FieldSet::new();
        for (k, child) in m {
            if k == "." {
                continue;
            }
            if !(k.starts_with("f:")
                || k.starts_with("k:")
                || k.starts_with("v:")
                || k.starts_with("i:"))
            {
                return Err(format!("unknown path element {k:?} in fieldsV1"));
            }
            let Value::Object(cm) = child else {
                return Err(format!("the value of {k:?} in fieldsV1 must be an object"));
            };
            let children = FieldSet::from_fields_v1(child)?;
            let member = cm.is_empty() || cm.contains_key(".");
            out.children.insert(k.clone(), Node { member, children });
        }
        Ok(out)
    }
}

/// A path the way Kubernetes prints it in conflicts: `.spec.replicas`,
/// `.spec.containers[name="web"].image`, `.metadata.finalizers[="x"]`.
pub fn display(path: &[PathElement]) -> String {
    let mut out = String::new();
    for pe in path {
        let (kind, rest) = pe.split_at(2.min(pe.len()));
        match kind {
            "f:" => {
                out.push('.');
                out.push_str(rest);
            }
            "k:" => {
                let parts: Vec<String> = match serde_json::from_str::<Value>(rest) {
                    Ok(Value::Object(m)) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                    _ => vec![rest.to_string()],
                };
                out.push_str(&format!("[{}]", parts.join(",")));
            }
            "v:" => out.push_str(&format!("[={rest}]")),
            _ => out.push_str(&format!("[{rest}]")),
        }
    }
    out
}
