//! A CRD's `openAPIV3Schema` read into a tree of [`Node`]s: the JSON
//! (`JSONSchemaProps`) decoded once, patterns and CEL rules compiled once.
//! Decoding reports fields of the wrong JSON type; whether the tree is
//! structural is `structural.rs`'s business.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::cel::{self, Program};
use crate::validation::FieldError;

/// `additionalProperties`: a bool or a schema.
#[derive(Debug, Clone)]
pub(crate) enum Additional {
    Allows(bool),
    Schema(Box<Node>),
}

/// One `x-kubernetes-validations` entry.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub rule: String,
    pub message: String,
    pub message_expression: Option<Program>,
    pub program: Option<Program>,
    /// The rule refers to `oldSelf`: it only runs on updates with an old value.
    pub transition: bool,
    pub field_path: String,
    pub reason: String,
}

/// One schema node (`JSONSchemaProps`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Node {
    pub ty: String,
    pub format: String,
    pub nullable: bool,
    pub properties: BTreeMap<String, Node>,
    pub additional: Option<Additional>,
    pub items: Option<Box<Node>>,
    pub required: Vec<String>,
    pub enum_values: Option<Vec<Value>>,
    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub multiple_of: Option<f64>,
    pub max_length: Option<i64>,
    pub min_length: Option<i64>,
    pub pattern: Option<(String, Option<regex::Regex>)>,
    pub max_items: Option<i64>,
    pub min_items: Option<i64>,
    pub unique_items: bool,
    pub max_properties: Option<i64>,
    pub min_properties: Option<i64>,
    pub all_of: Vec<Node>,
    pub any_of: Vec<Node>,
    pub one_of: Vec<Node>,
    pub not: Option<Box<Node>>,
    pub default: Option<Value>,
    pub preserve_unknown: Option<bool>,
    pub int_or_string: bool,
    pub embedded: bool,
    pub list_type: Option<String>,
    pub list_map_keys: Vec<String>,
    pub map_type: Option<String>,
    pub rules: Vec<Rule>,
    /// Keys the node had, for the structural checks (`title`, `$ref`, ...).
    pub keys: Vec<String>,
}

impl Node {
    pub fn preserves_unknown(&self) -> bool {
        self.preserve_unknown == Some(true)
    }

    pub fn has(&self, key: &str) -> bool {
        self.keys.iter().any(|k| k == key)
    }
}

/// Keys a `JSONSchemaProps` has; others (`x-kubernetes-patch-strategy`,
/// ...) are not part of the schema.
const KNOWN: &[&str] = &[
    "id",
    "$schema",
    "$ref",
    "description",
    "type",
    "format",
    "title",
    "default",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
    "items",
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "properties",
    "additionalProperties",
    "patternProperties",
    "dependencies",
    "additionalItems",
    "definitions",
    "externalDocs",
    "example",
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
];

/// Decodes `v` at `path`, pushing an error per malformed field.
pub(crate) fn parse(v: &Value, path: &str, errs: &mut Vec<FieldError>) -> Node {
    let mut n = Node::default();
    let Some(m) = v.as_object() else {
        errs.push(FieldError::invalid(path, v.clone(), "must be an object"));
        return n;
    };
    // Keys JSONSchemaProps lacks are dropped, as decoding the CRD drops them.
    n.keys = m
        .keys()
        .filter(|k| KNOWN.contains(&k.as_str()))
        .cloned()
        .collect();
    let p = |k: &str| format!("{path}.{k}");
    n.ty = string(m, "type", path, errs);
    n.format = string(m, "format", path, errs);
    n.nullable = boolean(m, "nullable", path, errs);
    n.exclusive_maximum = boolean(m, "exclusiveMaximum", path, errs);
    n.exclusive_minimum = boolean(m, "exclusiveMinimum", path, errs);
    n.unique_items = boolean(m, "uniqueItems", path, errs);
    n.int_or_string = boolean(m, "x-kubernetes-int-or-string", path, errs);
    n.embedded = boolean(m, "x-kubernetes-embedded-resource", path, errs);
    if m.contains_key("x-kubernetes-preserve-unknown-fields") {
        n.preserve_unknown = Some(boolean(
            m,
            "x-kubernetes-preserve-unknown-fields",
            path,
            errs,
        ));
    }
    n.maximum = number(m, "maximum", path, errs);
    n.minimum = number(m, "minimum", path, errs);
    n.multiple_of = number(m, "multipleOf", path, errs);
    n.max_length = integer(m, "maxLength", path, errs);
    n.min_length = integer(m, "minLength", path, errs);
    n.max_items = integer(m, "maxItems", path, errs);
    n.min_items = integer(m, "minItems", path, errs);
    n.max_properties = integer(m, "maxProperties", path, errs);
    n.min_properties = integer(m, "minProperties", path, errs);
    n.required = strings(m, "required", path, errs);
    n.list_map_keys = strings(m, "x-kubernetes-list-map-keys", path, errs);
    if m.contains_key("x-kubernetes-list-type") {
        n.list_type = Some(string(m, "x-kubernetes-list-type", path, errs));
    }
    if m.contains_key("x-kubernetes-map-type") {
        n.map_type = Some(string(m, "x-kubernetes-map-type", path, errs));
    }
    if m.contains_key("pattern") {
        let pat = string(m, "pattern", path, errs);
        let re = regex::Regex::new(&pat).ok();
        n.pattern = Some((pat, re));
    }
    match m.get("enum") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) => n.enum_values = Some(a.clone()),
        Some(other) => errs.push(FieldError::invalid(
            p("enum"),
            other.clone(),
            "must be an array",
        )),
    }
    n.default = m.get("default").cloned();
    if let Some(props) = m.get("properties") {
        match props.as_object() {
            Some(props) => {
                for (k, v) in props {
                    let child = parse(v, &format!("{path}.properties[{k}]"), errs);
                    n.properties.insert(k.clone(), child);
                }
            }
            None => errs.push(FieldError::invalid(
                p("properties"),
                props.clone(),
                "must be an object",
            )),
        }
    }
    match m.get("additionalProperties") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => n.additional = Some(Additional::Allows(*b)),
        Some(v) => {
            n.additional = Some(Additional::Schema(Box::new(parse(
                v,
                &p("additionalProperties"),
                errs,
            ))))
        }
    }
    match m.get("items") {
        None | Some(Value::Null) => {}
        Some(Value::Array(_)) => errs.push(FieldError::forbidden(
            p("items"),
            "items must be a schema object and not an array",
        )),
        Some(v) => n.items = Some(Box::new(parse(v, &p("items"), errs))),
    }
    for (key, list) in [
        ("allOf", &mut n.all_of),
        ("anyOf", &mut n.any_of),
        ("oneOf", &mut n.one_of),
    ] {
        match m.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) => {
                for (i, v) in a.iter().enumerate() {
                    list.push(parse(v, &format!("{path}.{key}[{i}]"), errs));
                }
            }
            Some(other) => errs.push(FieldError::invalid(
                p(key),
                other.clone(),
                "must be an array",
            )),
        }
    }
    if let Some(v) = m.get("not").filter(|v| !v.is_null()) {
        n.not = Some(Box::new(parse(v, &p("not"), errs)));
    }
    if let Some(v) = m.get("x-kubernetes-validations").filter(|v| !v.is_null()) {
        n.rules = parse_rules(v, &p("x-kubernetes-validations"), errs);
    }
    n
}

fn string(m: &Map<String, Value>, k: &str, path: &str, errs: &mut Vec<FieldError>) -> String {
    match m.get(k) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => {
            errs.push(FieldError::invalid(
                format!("{path}.{k}"),
                v.clone(),
                "must be a string",
            ));
            String::new()
        }
    }
}

fn boolean(m: &Map<String, Value>, k: &str, path: &str, errs: &mut Vec<FieldError>) -> bool {
    match m.get(k) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            errs.push(FieldError::invalid(
                format!("{path}.{k}"),
                v.clone(),
                "must be a boolean",
            ));
            false
        }
    }
}

fn number(m: &Map<String, Value>, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Option<f64> {
    match m.get(k) {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(v) => {
            errs.push(FieldError::invalid(
                format!("{path}.{k}"),
                v.clone(),
                "must be a number",
            ));
            None
        }
    }
}

fn integer(m: &Map<String, Value>, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Option<i64> {
    match m.get(k) {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_i64() {
            Some(i) => Some(i),
            None => {
                errs.push(FieldError::invalid(
                    format!("{path}.{k}"),
                    v.clone(),
                    "must be an integer",
                ));
                None
            }
        },
    }
}

fn strings(m: &Map<String, Value>, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Vec<String> {
    match m.get(k) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => a
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect(),
        Some(v) => {
            errs.push(FieldError::invalid(
                format!("{path}.{k}"),
                v.clone(),
                "must be a list of strings",
            ));
            Vec::new()
        }
    }
}

/// The variables a rule and its messageExpression see.
const RULE_VARS: &[&str] = &["self", "oldSelf"];

const REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// Decodes and compiles the rules at `path` (`...x-kubernetes-validations`).
pub(crate) fn parse_rules(v: &Value, path: &str, errs: &mut Vec<FieldError>) -> Vec<Rule> {
    let Some(list) = v.as_array() else {
        errs.push(FieldError::invalid(path, v.clone(), "must be an array"));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, r) in list.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let s = |k: &str| {
            r.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let rule = s("rule");
        let message = s("message");
        let mut program = None;
        if rule.trim().is_empty() {
            errs.push(FieldError::required(
                format!("{p}.rule"),
                "rule is not specified",
            ));
        } else {
            match cel::compile_with(&rule, RULE_VARS) {
                Ok(prog) => program = Some(prog),
                Err(e) => errs.push(FieldError::invalid(
                    format!("{p}.rule"),
                    rule.clone(),
                    format!("compilation failed: {e}"),
                )),
            }
        }
        if r.get("message").is_some() {
            if message.trim().is_empty() {
                errs.push(FieldError::invalid(
                    format!("{p}.message"),
                    message.clone(),
                    "message must be non-empty if specified",
                ));
            } else if message.contains('\n') {
                errs.push(FieldError::invalid(
                    format!("{p}.message"),
                    message.clone(),
                    "message must not contain line breaks",
                ));
            }
        }
        let mut message_expression = None;
        let mexpr = s("messageExpression");
        if r.get("messageExpression").is_some() {
            if mexpr.trim().is_empty() {
                errs.push(FieldError::required(
                    format!("{p}.messageExpression"),
                    "messageExpression must be non-empty if specified",
                ));
            } else {
                match cel::compile_with(&mexpr, RULE_VARS) {
                    Ok(prog) => message_expression = Some(prog),
                    Err(e) => errs.push(FieldError::invalid(
                        format!("{p}.messageExpression"),
                        mexpr.clone(),
                        format!("messageExpression compilation failed: {e}"),
                    )),
                }
            }
        }
        let reason = s("reason");
        if r.get("reason").is_some() && !REASONS.contains(&reason.as_str()) {
            errs.push(FieldError::not_supported(
                format!("{p}.reason"),
                reason.clone(),
                REASONS,
            ));
        }
        let transition = program.as_ref().is_some_and(|p| p.refers_to("oldSelf"));
        out.push(Rule {
            rule,
            message,
            message_expression,
            program,
            transition,
            field_path: s("fieldPath"),
            reason,
        });
    }
    out
}
