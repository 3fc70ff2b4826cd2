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

mod schema;
mod strategic;
mod three_way;

pub use schema::{apply_list_type, is_atomic_map, list_key_default, ListType};
pub use strategic::apply_strategic_merge_patch;
pub use three_way::three_way_strategic_patch;

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

#[cfg(test)]
mod tests;
