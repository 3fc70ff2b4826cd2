//! Whether a decoded schema is structural and allowed in a CRD, with the
//! apiextensions-apiserver's messages (`ValidateStructural` and the CRD
//! schema checks of `ValidateCustomResourceDefinitionOpenAPISchema`).

use serde_json::Value;

use super::schema::{Additional, Node};
use crate::validation::FieldError;

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Level {
    Root,
    Item,
    Field,
}

const TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

const UNSUPPORTED: &[(&str, &str)] = &[
    ("$ref", "$ref is not supported"),
    ("id", "id is not supported"),
    ("$schema", "$schema is not supported"),
    ("additionalItems", "additionalItems is not supported"),
    ("patternProperties", "patternProperties is not supported"),
    ("definitions", "definitions is not supported"),
    ("dependencies", "dependencies is not supported"),
];

fn key(path: &str, k: &str) -> String {
    format!("{path}.properties[{k}]")
}

/// Checks a node of the structural part of the schema (not under a
/// logical junctor) and its children.
pub(crate) fn check(n: &Node, lvl: Level, path: &str, errs: &mut Vec<FieldError>) {
    let p = |k: &str| format!("{path}.{k}");
    common(n, path, errs);
    if n.ty == "array" && n.items.is_none() {
        errs.push(FieldError::required(p("items"), "must be specified"));
    }
    if let Some(items) = &n.items {
        check(items, Level::Item, &p("items"), errs);
    }
    for (k, v) in &n.properties {
        check(v, Level::Field, &key(path, k), errs);
    }
    match &n.additional {
        Some(Additional::Schema(s)) => {
            if lvl == Level::Root {
                errs.push(FieldError::forbidden(
                    p("additionalProperties"),
                    "must not be used at the root",
                ));
            }
            check(s, Level::Field, &p("additionalProperties"), errs);
        }
        Some(Additional::Allows(false)) => errs.push(FieldError::forbidden(
            p("additionalProperties"),
            "additionalProperties cannot be set to false",
        )),
        Some(Additional::Allows(true)) if lvl == Level::Root => errs.push(FieldError::forbidden(
            p("additionalProperties"),
            "must not be used at the root",
        )),
        _ => {}
    }
    if n.additional.is_some() && !n.properties.is_empty() {
        errs.push(FieldError::forbidden(
            p("additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if n.int_or_string && n.preserve_unknown == Some(true) {
        errs.push(FieldError::invalid(
            p("x-kubernetes-preserve-unknown-fields"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if n.int_or_string && n.embedded {
        errs.push(FieldError::invalid(
            p("x-kubernetes-embedded-resource"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if n.preserve_unknown == Some(false) {
        errs.push(FieldError::invalid(
            p("x-kubernetes-preserve-unknown-fields"),
            false,
            "must be true or undefined",
        ));
    }
    // Value validations under the logical junctors.
    let int_or_string_any_of = is_int_or_string_pair(&n.any_of);
    if !int_or_string_any_of {
        for (i, s) in n.any_of.iter().enumerate() {
            nested(s, &format!("{path}.anyOf[{i}]"), errs);
        }
    }
    for (i, s) in n.all_of.iter().enumerate() {
        if i == 0 && is_int_or_string_pair(&s.any_of) {
            let mut rest = s.clone();
            rest.any_of.clear();
            nested(&rest, &format!("{path}.allOf[{i}]"), errs);
        } else {
            nested(s, &format!("{path}.allOf[{i}]"), errs);
        }
    }
    for (i, s) in n.one_of.iter().enumerate() {
        nested(s, &format!("{path}.oneOf[{i}]"), errs);
    }
    if let Some(not) = &n.not {
        nested(not, &p("not"), errs);
    }

    let check_metadata = lvl == Level::Root || n.embedded;
    if n.embedded && n.ty != "object" {
        if n.ty.is_empty() {
            errs.push(FieldError::required(
                p("type"),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        } else {
            errs.push(FieldError::invalid(
                p("type"),
                n.ty.clone(),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        }
    } else if n.ty.is_empty() && !n.int_or_string && !n.preserves_unknown() {
        errs.push(FieldError::required(
            p("type"),
            match lvl {
                Level::Root => "must not be empty at the root",
                Level::Item => "must not be empty for specified array items",
                Level::Field => "must not be empty for specified object fields",
            },
        ));
    }
    if n.embedded && n.additional.is_some() {
        errs.push(FieldError::forbidden(
            p("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !n.ty.is_empty() && n.ty != "object" {
        errs.push(FieldError::invalid(
            p("type"),
            n.ty.clone(),
            "must be object at the root",
        ));
    }
    for k in ["kind", "apiVersion"] {
        if let Some(s) = n.properties.get(k).filter(|_| check_metadata) {
            if s.ty != "string" {
                errs.push(FieldError::invalid(
                    format!("{}.type", key(path, k)),
                    s.ty.clone(),
                    "must be string",
                ));
            }
        }
    }
    if let Some(meta) = n.properties.get("metadata") {
        let mp = key(path, "metadata");
        if check_metadata && meta.ty != "object" {
            errs.push(FieldError::invalid(
                format!("{mp}.type"),
                meta.ty.clone(),
                "must be object",
            ));
        }
        if lvl == Level::Root && !metadata_is_name_only(meta) {
            errs.push(FieldError::forbidden(
                mp,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    if n.embedded && !n.preserves_unknown() && n.properties.is_empty() {
        errs.push(FieldError::required(
            p("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
    list_type(n, path, errs);
    super::rules::check_field_paths(n, path, errs);
}

/// Checks shared by every node, structural or nested.
fn common(n: &Node, path: &str, errs: &mut Vec<FieldError>) {
    let p = |k: &str| format!("{path}.{k}");
    for (k, msg) in UNSUPPORTED {
        if n.has(k) {
            errs.push(FieldError::forbidden(p(k), *msg));
        }
    }
    if !n.ty.is_empty() && !TYPES.contains(&n.ty.as_str()) {
        errs.push(FieldError::not_supported(p("type"), n.ty.clone(), TYPES));
    }
    if n.unique_items {
        errs.push(FieldError::forbidden(
            p("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some((pat, None)) = &n.pattern {
        let err = regex::Regex::new(pat)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        errs.push(FieldError::invalid(
            p("pattern"),
            pat.clone(),
            format!("must be a valid regular expression, but isn't: {err}"),
        ));
    }
    if let Some(m) = n.multiple_of.filter(|m| *m <= 0.0) {
        errs.push(FieldError::invalid(
            p("multipleOf"),
            m,
            "must be greater than zero",
        ));
    }
}

fn is_int_or_string_pair(any_of: &[Node]) -> bool {
    let bare = |n: &Node, ty: &str| n.ty == ty && n.keys.len() == 1;
    any_of.len() == 2 && bare(&any_of[0], "integer") && bare(&any_of[1], "string")
}

/// metadata at the root may only restrict name and generateName.
fn metadata_is_name_only(meta: &Node) -> bool {
    let allowed = ["type", "properties", "description"];
    meta.keys.iter().all(|k| allowed.contains(&k.as_str()))
        && meta
            .properties
            .keys()
            .all(|k| k == "name" || k == "generateName")
}

/// A value validation under allOf/anyOf/oneOf/not: no structure of its own.
fn nested(n: &Node, path: &str, errs: &mut Vec<FieldError>) {
    let p = |k: &str| format!("{path}.{k}");
    common(n, path, errs);
    for (i, s) in n.any_of.iter().enumerate() {
        nested(s, &format!("{path}.anyOf[{i}]"), errs);
    }
    for (i, s) in n.all_of.iter().enumerate() {
        nested(s, &format!("{path}.allOf[{i}]"), errs);
    }
    for (i, s) in n.one_of.iter().enumerate() {
        nested(s, &format!("{path}.oneOf[{i}]"), errs);
    }
    if let Some(not) = &n.not {
        nested(not, &p("not"), errs);
    }
    if let Some(items) = &n.items {
        nested(items, &p("items"), errs);
    }
    for (k, v) in &n.properties {
        nested(v, &key(path, k), errs);
    }
    let forbid = |errs: &mut Vec<FieldError>, k: &str, msg: &str| {
        errs.push(FieldError::forbidden(p(k), msg))
    };
    if !n.ty.is_empty() {
        forbid(errs, "type", "must be empty to be structural");
    }
    if n.additional.is_some() {
        forbid(
            errs,
            "additionalProperties",
            "must be undefined to be structural",
        );
    }
    if n.default.is_some() {
        forbid(errs, "default", "must be undefined to be structural");
    }
    if n.has("title") {
        forbid(errs, "title", "must be empty to be structural");
    }
    if n.has("description") {
        forbid(errs, "description", "must be empty to be structural");
    }
    if n.nullable {
        forbid(errs, "nullable", "must be false to be structural");
    }
    if n.has("externalDocs") {
        forbid(errs, "externalDocs", "must be undefined to be structural");
    }
    if n.preserves_unknown() {
        forbid(
            errs,
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        );
    }
    if n.embedded {
        forbid(
            errs,
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        );
    }
    if n.int_or_string {
        forbid(
            errs,
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        );
    }
    if !n.list_map_keys.is_empty() {
        forbid(
            errs,
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        );
    }
    if n.list_type.is_some() {
        forbid(
            errs,
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        );
    }
    if n.map_type.is_some() {
        forbid(
            errs,
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        );
    }
    if !n.rules.is_empty() {
        forbid(
            errs,
            "x-kubernetes-validations",
            "must be empty to be structural",
        );
    }
    if n.properties.contains_key("metadata") {
        errs.push(FieldError::forbidden(
            key(path, "metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// x-kubernetes-list-type / list-map-keys / map-type.
fn list_type(n: &Node, path: &str, errs: &mut Vec<FieldError>) {
    let p = |k: &str| format!("{path}.{k}");
    if let Some(mt) = &n.map_type {
        if mt != "granular" && mt != "atomic" {
            errs.push(FieldError::not_supported(
                p("x-kubernetes-map-type"),
                mt.clone(),
                &["granular", "atomic"],
            ));
        }
    }
    let lt = n.list_type.as_deref();
    if let Some(lt) = lt {
        if !["atomic", "set", "map"].contains(&lt) {
            errs.push(FieldError::not_supported(
                p("x-kubernetes-list-type"),
                lt,
                &["atomic", "set", "map"],
            ));
        }
        if n.ty != "array" {
            errs.push(FieldError::invalid(
                p("x-kubernetes-list-type"),
                lt,
                "must only be used if type is array",
            ));
        }
    }
    if lt != Some("map") && !n.list_map_keys.is_empty() {
        errs.push(FieldError::forbidden(
            p("x-kubernetes-list-map-keys"),
            "must be empty if x-kubernetes-list-type is not map",
        ));
    }
    let Some(items) = &n.items else { return };
    match lt {
        Some("map") => {
            if n.list_map_keys.is_empty() {
                errs.push(FieldError::required(
                    p("x-kubernetes-list-map-keys"),
                    "must not be empty if x-kubernetes-list-type is map",
                ));
            }
            if items.ty != "object" {
                errs.push(FieldError::invalid(
                    p("items.type"),
                    items.ty.clone(),
                    "must be object if parent array's x-kubernetes-list-type is map",
                ));
            }
            for k in &n.list_map_keys {
                match items.properties.get(k) {
                    None => errs.push(FieldError::invalid(
                        p("x-kubernetes-list-map-keys"),
                        Value::from(n.list_map_keys.clone()),
                        "entries must all be names of item properties",
                    )),
                    Some(kp)
                        if !matches!(
                            kp.ty.as_str(),
                            "string" | "integer" | "number" | "boolean"
                        ) =>
                    {
                        errs.push(FieldError::invalid(
                            format!("{}.type", key(&p("items"), k)),
                            kp.ty.clone(),
                            "must be a scalar type if parent array's x-kubernetes-list-type is map",
                        ))
                    }
                    _ => {}
                }
            }
        }
        Some("set") if items.ty == "object" && items.map_type.as_deref() != Some("atomic") => {
            errs.push(FieldError::invalid(
                p("items.x-kubernetes-map-type"),
                items.map_type.clone().unwrap_or_default(),
                "must be atomic as item of a list with x-kubernetes-list-type=set",
            ));
        }
        Some("set") if items.ty == "array" && items.list_type.as_deref() != Some("atomic") => {
            errs.push(FieldError::invalid(
                p("items.x-kubernetes-list-type"),
                items.list_type.clone().unwrap_or_default(),
                "must be atomic as item of a list with x-kubernetes-list-type=set",
            ));
        }
        _ => {}
    }
}

/// Every field or array a value validation (allOf/anyOf/oneOf/not) names
/// must also be specified in the structural part (upstream's completeness
/// check, run from the root).
pub(crate) fn completeness(s: &Node, path: &str, errs: &mut Vec<FieldError>) {
    junctors(s, s, path, path, errs);
}

fn junctors(v: &Node, s: &Node, s_path: &str, v_path: &str, errs: &mut Vec<FieldError>) {
    if let Some(not) = &v.not {
        nested_complete(not, Some(s), s_path, &format!("{v_path}.not"), errs);
    }
    for (name, list) in [
        ("allOf", &v.all_of),
        ("anyOf", &v.any_of),
        ("oneOf", &v.one_of),
    ] {
        for (i, n) in list.iter().enumerate() {
            nested_complete(n, Some(s), s_path, &format!("{v_path}.{name}[{i}]"), errs);
        }
    }
}

fn nested_complete(
    v: &Node,
    s: Option<&Node>,
    s_path: &str,
    v_path: &str,
    errs: &mut Vec<FieldError>,
) {
    let Some(s) = s else {
        errs.push(FieldError::required(
            s_path,
            format!("because it is defined in {v_path}"),
        ));
        return;
    };
    junctors(v, s, s_path, v_path, errs);
    if let Some(items) = &v.items {
        nested_complete(
            items,
            s.items.as_deref(),
            &format!("{s_path}.items"),
            &format!("{v_path}.items"),
            errs,
        );
    }
    for (k, vf) in &v.properties {
        match s.properties.get(k) {
            None => errs.push(FieldError::required(
                key(s_path, k),
                format!("because it is defined in {}", key(v_path, k)),
            )),
            Some(sf) => nested_complete(vf, Some(sf), &key(s_path, k), &key(v_path, k), errs),
        }
    }
}
