//! The v2 document in gnostic's protobuf encoding (`OpenAPIv2.proto`,
//! package `openapi.v2`), the only form kubectl's discovery client asks
//! `/openapi/v2` for: `kubectl explain --output plaintext-openapiv2`, and
//! kubectl's client-side validation when a server does not validate
//! fields itself. Encoded by hand on the protobuf codec's wire helpers: the document's definitions (schemas
//! with their vendor extensions), which is what those readers use.
//!
//! Paths are left out on purpose: k8s-openapi's schemas carry no
//! `x-kubernetes-patch-merge-key`/`-strategy`, and with no PATCH
//! `consumes` to find, `kubectl apply` computes its strategic merge patch
//! from its built-in types (merging `containers` by name), not from these
//! schemas (which would replace such lists whole). The v3 documents'
//! PATCH operations likewise name no request body for the same reason.

use serde_json::{Map, Value};

// Strings and messages (wire type 2) are `put_len`.
use crate::api::protobuf::wire::{put_len, put_tag, VARINT};

/// The media type kubectl sends in Accept (with an `@` Go's mime parser
/// rejects), and the one the apiserver answers with.
pub const ACCEPTED_MEDIA_TYPE: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
pub const MEDIA_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// A bool (wire type 0), left out when false as proto3 does.
fn bool_field(out: &mut Vec<u8>, field: u32, v: bool) {
    if v {
        put_tag(out, field, VARINT);
        out.push(1);
    }
}

/// `Any`: gnostic keeps a value as its YAML text (JSON is YAML).
fn any(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    put_len(&mut out, 2, v.to_string().as_bytes());
    out
}

/// `NamedAny`: a vendor extension.
fn named_any(name: &str, v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    put_len(&mut out, 1, name.as_bytes());
    put_len(&mut out, 2, &any(v));
    out
}

/// `NamedSchema`.
fn named_schema(name: &str, schema: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    put_len(&mut out, 1, name.as_bytes());
    put_len(&mut out, 2, &encode_schema(schema));
    out
}

/// `Schema`: the keywords bosun's schemas use; others are dropped.
pub fn encode_schema(schema: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(map) = schema.as_object() else {
        return out;
    };
    let text = |key: &str| map.get(key).and_then(Value::as_str);
    for (field, key) in [(1, "$ref"), (2, "format"), (3, "title"), (4, "description")] {
        if let Some(s) = text(key) {
            put_len(&mut out, field, s.as_bytes());
        }
    }
    if let Some(d) = map.get("default") {
        put_len(&mut out, 5, &any(d));
    }
    for r in map
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        put_len(&mut out, 19, r.as_str().unwrap_or_default().as_bytes());
    }
    for e in map
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        put_len(&mut out, 20, &any(e));
    }
    match map.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut item = Vec::new();
            bool_field(&mut item, 2, *b);
            put_len(&mut out, 21, &item);
        }
        Some(s @ Value::Object(_)) => {
            let mut item = Vec::new();
            put_len(&mut item, 1, &encode_schema(s));
            put_len(&mut out, 21, &item);
        }
        _ => {}
    }
    let types: Vec<&str> = match map.get("type") {
        Some(Value::String(t)) => vec![t],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    if !types.is_empty() {
        let mut item = Vec::new();
        for t in types {
            put_len(&mut item, 1, t.as_bytes());
        }
        put_len(&mut out, 22, &item);
    }
    if let Some(items) = map.get("items") {
        let mut item = Vec::new();
        match items {
            Value::Array(all) => all
                .iter()
                .for_each(|s| put_len(&mut item, 1, &encode_schema(s))),
            s => put_len(&mut item, 1, &encode_schema(s)),
        }
        put_len(&mut out, 23, &item);
    }
    for s in map
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        put_len(&mut out, 24, &encode_schema(s));
    }
    if let Some(props) = map.get("properties").and_then(Value::as_object) {
        let mut item = Vec::new();
        for (name, s) in props {
            put_len(&mut item, 1, &named_schema(name, s));
        }
        put_len(&mut out, 25, &item);
    }
    if let Some(Value::Bool(b)) = map.get("readOnly") {
        bool_field(&mut out, 27, *b);
    }
    for (name, v) in map.iter().filter(|(k, _)| k.starts_with("x-")) {
        put_len(&mut out, 31, &named_any(name, v));
    }
    out
}

/// The entries of `Definitions` (repeated `NamedSchema`): entries of
/// several calls concatenated are the definitions of them all, so the
/// built-in kinds' are encoded once and custom kinds' added to them.
pub fn encode_definitions(definitions: &Map<String, Value>) -> Vec<u8> {
    let mut defs = Vec::new();
    for (name, schema) in definitions {
        put_len(&mut defs, 1, &named_schema(name, schema));
    }
    defs
}

/// `Document`: swagger, info and the definitions (entries from
/// [`encode_definitions`]).
pub fn encode_document(info: &Value, definitions: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    put_len(&mut out, 1, b"2.0");
    let mut info_msg = Vec::new();
    for (field, key) in [(1, "title"), (2, "version")] {
        if let Some(s) = info.get(key).and_then(Value::as_str) {
            put_len(&mut info_msg, field, s.as_bytes());
        }
    }
    put_len(&mut out, 2, &info_msg);
    put_len(&mut out, 8, &[]);
    put_len(&mut out, 9, definitions);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_fields_use_gnostic_numbers_and_wire_types() {
        // description = 4 (0x22), type = 22 -> TypeItem.value = 1.
        let got = encode_schema(&json!({"description": "d", "type": "string"}));
        assert_eq!(
            got,
            [0x22, 1, b'd', 0xb2, 0x01, 8, 0x0a, 6, b's', b't', b'r', b'i', b'n', b'g']
        );
        // $ref = 1; a vendor extension = 31 -> NamedAny{name 1, Any{yaml 2}}.
        let got = encode_schema(&json!({"$ref": "r", "x-a": true}));
        assert_eq!(
            got,
            [
                0x0a, 1, b'r', 0xfa, 0x01, 13, 0x0a, 3, b'x', b'-', b'a', 0x12, 6, 0x12, 4, b't',
                b'r', b'u', b'e'
            ]
        );
    }
}
