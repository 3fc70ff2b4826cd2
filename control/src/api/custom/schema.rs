//! The one place a custom resource's schema acts on a write.
//!
//! [`admit`] is called on every create, update, patch and apply of a
//! custom resource (main resource and `status`), after the body is decoded
//! and merged with the stored object and before anything is stored: the
//! object's shape (a JSON object with `apiVersion`, `kind` and `metadata`),
//! then, with the version's compiled `openAPIV3Schema`
//! ([`bosun::crd_schema`]), pruning of unknown fields, defaulting, and
//! validation (types, formats, enums, CEL rules, ratcheting unchanged
//! values on update), each error naming its field path, as the
//! apiextensions-apiserver does.

use bosun::validation::FieldError;
use serde_json::Value;

use super::CustomVersion;

/// Prunes, defaults and validates `obj`, a write of `crd_version`'s
/// resource (`old`: the stored object on update). Errors make the write a
/// 422 naming each field; nothing is stored. The paths pruned go to
/// `unknown`, for the request's `fieldValidation`.
pub fn admit(
    crd_version: &CustomVersion,
    obj: &mut Value,
    old: Option<&Value>,
    unknown: &mut Vec<String>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(map) = obj.as_object() else {
        errs.push(FieldError::invalid(
            "<root>",
            Value::Null,
            "must be a JSON object",
        ));
        return errs;
    };
    for field in ["apiVersion", "kind"] {
        if map
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            errs.push(FieldError::required(field, ""));
        }
    }
    if !map.get("metadata").is_some_and(Value::is_object) {
        errs.push(FieldError::required("metadata", ""));
    }
    if !errs.is_empty() {
        return errs;
    }
    if let Some(schema) = &crd_version.structural.0 {
        unknown.extend(schema.prune_reporting(obj));
        schema.apply_defaults(obj);
        errs.extend(schema.validate(obj, old));
    }
    errs
}
