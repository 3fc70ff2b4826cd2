//! Which of the names a CRD asks for it gets, as upstream's naming
//! controller decides (`calculateNamesAndConditions`): a name already
//! accepted stays; a new one is taken only if no other CRD of the group
//! accepted it and no built-in resource of the group uses it. Categories
//! are always taken.

use std::collections::BTreeSet;

use serde_json::{json, Value};

/// The names a CRD gets and, if some were refused, the reason and message
/// of the False `NamesAccepted` condition (the last conflict found, as
/// upstream reports it).
pub struct Decided {
    pub accepted: Value,
    pub conflict: Option<(String, String)>,
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn list(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The resource names and kinds in use in `group`, but for the CRD
/// `except`: other CRDs' accepted names, and the built-in resources'.
fn used_in_group(group: &str, others: &[Value]) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut resources = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    for other in others.iter().filter(|o| o["spec"]["group"] == group) {
        let names = &other["status"]["acceptedNames"];
        for n in [s(names, "plural"), s(names, "singular")] {
            if !n.is_empty() {
                resources.insert(n.to_string());
            }
        }
        resources.extend(list(names, "shortNames"));
        for k in [s(names, "kind"), s(names, "listKind")] {
            if !k.is_empty() {
                kinds.insert(k.to_string());
            }
        }
    }
    for r in bosun::resources::served().filter(|r| r.group == group) {
        resources.insert(r.plural.to_string());
        if !r.singular.is_empty() {
            resources.insert(r.singular.to_string());
        }
        resources.extend(r.short_names.iter().map(|n| n.to_string()));
        kinds.insert(r.kind.to_string());
        kinds.insert(format!("{}List", r.kind));
    }
    (resources, kinds)
}

/// Upstream's `equalToAcceptedOrFresh`.
fn check(requested: &str, accepted: &str, used: &BTreeSet<String>) -> Result<(), String> {
    if requested == accepted || !used.contains(requested) {
        return Ok(());
    }
    Err(format!("{requested:?} is already in use"))
}

/// Takes the requested `field` into `out` unless it is in use.
fn take(
    field: &str,
    requested: &Value,
    accepted: &Value,
    used: &BTreeSet<String>,
    out: &mut Value,
) -> Result<(), String> {
    check(s(requested, field), s(accepted, field), used)?;
    let v = s(requested, field);
    if v.is_empty() && field != "plural" && field != "kind" {
        out.as_object_mut().map(|m| m.remove(field));
    } else {
        out[field] = json!(v);
    }
    Ok(())
}

/// Decides the accepted names of `crd` against the `others` CRDs.
pub fn decide(crd: &Value, others: &[Value]) -> Decided {
    let group = s(&crd["spec"], "group");
    let requested = &crd["spec"]["names"];
    let accepted = crd
        .pointer("/status/acceptedNames")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let (resources, kinds) = used_in_group(group, others);
    let mut out = accepted.clone();
    let mut conflict = None;
    // Upstream's order: the last conflict found is the one reported.
    for (field, used, reason) in [
        ("plural", &resources, "PluralConflict"),
        ("singular", &resources, "SingularConflict"),
    ] {
        if let Err(message) = take(field, requested, &accepted, used, &mut out) {
            conflict = Some((reason.to_string(), message));
        }
    }
    let accepted_short = list(&accepted, "shortNames");
    let requested_short = list(requested, "shortNames");
    if requested_short != accepted_short {
        let taken: Vec<String> = requested_short
            .iter()
            .filter(|n| !accepted_short.contains(n) && resources.contains(*n))
            .map(|n| format!("{n:?} is already in use"))
            .collect();
        match taken.len() {
            0 if requested_short.is_empty() => {
                out.as_object_mut().map(|m| m.remove("shortNames"));
            }
            0 => out["shortNames"] = json!(requested_short),
            1 => conflict = Some(("ShortNamesConflict".into(), taken[0].clone())),
            _ => {
                conflict = Some((
                    "ShortNamesConflict".into(),
                    format!("[{}]", taken.join(", ")),
                ))
            }
        }
    }
    for (field, used, reason) in [
        ("kind", &kinds, "KindConflict"),
        ("listKind", &kinds, "ListKindConflict"),
    ] {
        if let Err(message) = take(field, requested, &accepted, used, &mut out) {
            conflict = Some((reason.to_string(), message));
        }
    }
    let categories = list(requested, "categories");
    if categories.is_empty() {
        out.as_object_mut().map(|m| m.remove("categories"));
    } else {
        out["categories"] = json!(categories);
    }
    Decided {
        accepted: out,
        conflict,
    }
}
