//! `metadata.managedFields`: who owns which fields, and how an apply or an
//! update moves ownership (k8s.io/apiserver's fieldmanager over
//! structured-merge-diff's `merge.Updater`).

use serde_json::{json, Map, Value};

use super::fieldset::{self, FieldSet};
use super::walk::{self, Comparison};

pub const APPLY: &str = "Apply";
pub const UPDATE: &str = "Update";

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: Option<String>,
    pub subresource: String,
    pub fields: FieldSet,
}

impl Entry {
    /// Whether this entry is the one `who` writes to: appliers are one entry
    /// whatever version they speak, updaters one per version.
    fn is(&self, who: &Actor) -> bool {
        self.manager == who.manager
            && self.operation == who.operation
            && self.subresource == who.subresource
            && (self.operation == APPLY || self.api_version == who.api_version)
    }
}

/// Who is writing: the field manager, the operation, the version it speaks
/// and the subresource it writes through ("" for the object itself).
#[derive(Debug, Clone)]
pub struct Actor {
    pub manager: String,
    pub operation: &'static str,
    pub api_version: String,
    pub subresource: String,
}

/// Reads `metadata.managedFields`; an error names what is wrong.
pub fn decode(managed: Option<&Value>) -> Result<Vec<Entry>, String> {
    let Some(list) = managed else {
        return Ok(Vec::new());
    };
    let Value::Array(list) = list else {
        return Err("metadata.managedFields must be a list".into());
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, e) in list.iter().enumerate() {
        let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let operation = s("operation");
        if operation != APPLY && operation != UPDATE {
            return Err(format!(
                "metadata.managedFields[{i}].operation: Unsupported value: {operation:?}: supported values: \"Apply\", \"Update\""
            ));
        }
        let fields_type = s("fieldsType");
        if fields_type != "FieldsV1" {
            return Err(format!(
                "metadata.managedFields[{i}].fieldsType: Unsupported value: {fields_type:?}: supported values: \"FieldsV1\""
            ));
        }
        let fields = FieldSet::from_fields_v1(e.get("fieldsV1").unwrap_or(&json!({})))
            .map_err(|err| format!("metadata.managedFields[{i}].fieldsV1: {err}"))?;
        out.push(Entry {
            manager: s("manager"),
            operation,
            api_version: s("apiVersion"),
            time: e.get("time").and_then(Value::as_str).map(str::to_string),
            subresource: s("subresource"),
            fields,
        });
    }
    Ok(out)
}

/// The `managedFields` list, sorted as the apiserver sorts it (operation,
/// time, manager).
pub fn encode(entries: &[Entry]) -> Value {
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|a, b| {
        (
            &a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    Value::Array(
        sorted
            .into_iter()
            .map(|e| {
                let mut m = Map::new();
                m.insert("manager".into(), json!(e.manager));
                m.insert("operation".into(), json!(e.operation));
                m.insert("apiVersion".into(), json!(e.api_version));
                if let Some(t) = &e.time {
                    m.insert("time".into(), json!(t));
                }
                m.insert("fieldsType".into(), json!("FieldsV1"));
                m.insert("fieldsV1".into(), e.fields.to_fields_v1());
                if !e.subresource.is_empty() {
                    m.insert("subresource".into(), json!(e.subresource));
                }
                Value::Object(m)
            })
            .collect(),
    )
}

/// Which part of an object a write owns fields in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything but the server's metadata (and status, when the kind has
    /// a status subresource).
    Main { has_status: bool },
    /// Only status.
    Status,
}

/// `set` without what no manager owns: apiVersion, kind, the server's
/// metadata, and what the scope resets.
pub fn strip(mut set: FieldSet, scope: Scope) -> FieldSet {
    // Built once: every write strips it.
    static SYSTEM: std::sync::LazyLock<FieldSet> = std::sync::LazyLock::new(|| {
        let mut system = FieldSet::new();
        system.insert(&[fieldset::field("apiVersion")]);
        system.insert(&[fieldset::field("kind")]);
        system.insert(&[fieldset::field("metadata")]);
        for f in [
            "name",
            "namespace",
            "creationTimestamp",
            "selfLink",
            "uid",
            "generation",
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            system.insert(&[fieldset::field("metadata"), fieldset::field(f)]);
        }
        system
    });
    set = set.difference(&SYSTEM);
    let mut md = set.child(&fieldset::field("metadata")).cloned();
    if let Some(m) = md.as_mut() {
        m.remove_subtree(&fieldset::field("managedFields"));
    }
    set.remove_subtree(&fieldset::field("metadata"));
    if let Some(m) = md {
        set.insert_under(&[fieldset::field("metadata")], m);
    }
    match scope {
        Scope::Main { has_status: true } => {
            set.remove_subtree(&fieldset::field("status"));
            set
        }
        Scope::Main { has_status: false } => set,
        Scope::Status => set.only_subtree(&fieldset::field("status")),
    }
}

fn strip_comparison(c: Comparison, scope: Scope) -> Comparison {
    Comparison {
        added: strip(c.added, scope),
        modified: strip(c.modified, scope),
        removed: strip(c.removed, scope),
    }
}

/// Records an update (any write that is not an apply) from `old` to `new`:
/// the writer gains what it added or changed, other managers lose it, and
/// nobody keeps what was removed. Returns whether anything changed hands.
pub fn record_update(
    entries: &mut Vec<Entry>,
    who: &Actor,
    old: &Value,
    new: &Value,
    scope: Scope,
    now: &str,
) {
    let diff = strip_comparison(walk::compare(old, new), scope);
    if diff.is_same() {
        return;
    }
    let changed = diff.changed();
    for e in entries.iter_mut() {
        e.fields = e.fields.difference(&changed).difference(&diff.removed);
    }
    let mine = match entries.iter().position(|e| e.is(who)) {
        Some(i) => i,
        None => {
            entries.push(Entry {
                manager: who.manager.clone(),
                operation: who.operation.to_string(),
                api_version: who.api_version.clone(),
                time: None,
                subresource: who.subresource.clone(),
                fields: FieldSet::new(),
            });
            entries.len() - 1
        }
    };
    let e = &mut entries[mine];
    e.fields = std::mem::take(&mut e.fields).union(&changed);
    e.api_version = who.api_version.clone();
    if !changed.is_empty() {
        e.time = Some(now.to_string());
    }
    entries.retain(|e| !e.fields.is_empty() || e.operation == APPLY);
}

/// One manager's fields that an apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub manager: String,
    pub api_version: String,
    pub paths: Vec<String>,
}

impl Conflict {
    /// `conflict with "mgr" using apps/v1`, as the apiserver names a cause.
    pub fn cause(&self) -> String {
        format!(
            "conflict with {:?} using {}",
            self.manager, self.api_version
        )
    }
}

/// The apiserver's message for a failed apply.
pub fn conflicts_message(conflicts: &[Conflict]) -> String {
    let count: usize = conflicts.iter().map(|c| c.paths.len()).sum();
    let mut msg = format!(
        "Apply failed with {count} conflict{}: ",
        if count == 1 { "" } else { "s" }
    );
    let parts: Vec<String> = conflicts
        .iter()
        .map(|c| {
            if c.paths.len() == 1 {
                format!("{}: {}", c.cause(), c.paths[0])
            } else {
                let list: Vec<String> = c.paths.iter().map(|p| format!("- {p}")).collect();
                format!(
                    "conflicts with {:?} using {}:\n{}",
                    c.manager,
                    c.api_version,
                    list.join("\n")
                )
            }
        })
        .collect();
    msg.push_str(&parts.join("\n"));
    msg
}

/// What an apply produces.
#[derive(Debug)]
pub struct Applied {
    /// The live object with the configuration merged in and the fields the
    /// manager stopped applying (and nobody else holds) removed.
    pub object: Value,
    /// The new ownership.
    pub entries: Vec<Entry>,
}

/// Applies `config` for `who` to `live` (an empty object when creating).
/// Other managers' fields that the apply would change are conflicts, unless
/// `force` takes them over.
pub fn apply(
    live: &Value,
    entries: &[Entry],
    config: &Value,
    who: &Actor,
    scope: Scope,
    force: bool,
    now: &str,
) -> Result<Applied, Vec<Conflict>> {
    let applied_set = strip(walk::fields_of(config), scope);
    let last = entries
        .iter()
        .find(|e| e.is(who))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut object = walk::merge(live, config);
    let held = entries
        .iter()
        .filter(|e| !e.is(who))
        .fold(applied_set.clone(), |acc, e| acc.union(&e.fields));
    walk::remove(&mut object, &last.not_mentioned_in(&held));
    let diff = strip_comparison(walk::compare(live, &object), scope);
    let changed = diff.changed();
    let mut conflicts = Vec::new();
    for e in entries.iter().filter(|e| !e.is(who)) {
        let clash = e.fields.intersection(&changed);
        if !clash.is_empty() {
            conflicts.push(Conflict {
                manager: e.manager.clone(),
                api_version: e.api_version.clone(),
                paths: clash.paths().iter().map(|p| fieldset::display(p)).collect(),
            });
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    let unchanged = diff.is_same() && last == applied_set && entries.iter().any(|e| e.is(who));
    if unchanged {
        return Ok(Applied {
            object,
            entries: entries.to_vec(),
        });
    }
    let mut out: Vec<Entry> = Vec::with_capacity(entries.len() + 1);
    for e in entries {
        if e.is(who) {
            continue;
        }
        let mut e = e.clone();
        e.fields = e.fields.difference(&diff.removed);
        if force {
            e.fields = e.fields.difference(&changed);
        }
        if !e.fields.is_empty() || e.operation == APPLY {
            out.push(e);
        }
    }
    out.push(Entry {
        manager: who.manager.clone(),
        operation: APPLY.to_string(),
        api_version: who.api_version.clone(),
        time: Some(now.to_string()),
        subresource: who.subresource.clone(),
        fields: applied_set,
    });
    Ok(Applied {
        object,
        entries: out,
    })
}
