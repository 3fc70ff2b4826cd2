//! Writing the JSON form of a message to the wire, field by field from
//! its shape in [`super::schema`].

use base64::Engine;
use serde_json::Value;

use super::schema::{self, FieldType};
use super::special_types::encode_special;
use super::wire::{put_len, put_tag, put_varint, FIXED64, VARINT};
use super::{as_i64, err, is_inline, join, type_name, Error, Result};

/// Writes the JSON form of a message of type `name`.
pub fn encode_message(value: &Value, name: &str, path: &str) -> Result<Vec<u8>> {
    if let Some(special) = encode_special(value, name, path)? {
        return Ok(special);
    }
    let Some(msg) = schema::message(name) else {
        return err(format!("{path}: unknown message {name}"));
    };
    let Some(obj) = value.as_object() else {
        return err(format!("{path}: expected an object for {name}"));
    };
    let mut out = Vec::new();
    for field in &msg.fields {
        if is_inline(name, &field.name) {
            let inner = encode_message(value, type_name(&field.ty), path)?;
            if !inner.is_empty() {
                put_len(&mut out, field.number, &inner);
            }
            continue;
        }
        let Some(v) = obj.get(&field.name).filter(|v| !v.is_null()) else {
            continue;
        };
        let fpath = join(path, &field.name);
        if field.map {
            let Some(m) = v.as_object() else {
                return err(format!("{fpath}: expected an object"));
            };
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for k in keys {
                let mut entry = Vec::new();
                put_len(&mut entry, 1, k.as_bytes());
                if !m[k].is_null() {
                    encode_single(&mut entry, 2, &m[k], &field.ty, &format!("{fpath}[{k}]"))?;
                }
                put_len(&mut out, field.number, &entry);
            }
        } else if field.repeated {
            let Some(items) = v.as_array() else {
                return err(format!("{fpath}: expected an array"));
            };
            for (i, item) in items.iter().enumerate() {
                encode_single(
                    &mut out,
                    field.number,
                    item,
                    &field.ty,
                    &format!("{fpath}[{i}]"),
                )?;
            }
        } else {
            encode_single(&mut out, field.number, v, &field.ty, &fpath)?;
        }
    }
    Ok(out)
}

fn encode_single(
    out: &mut Vec<u8>,
    number: u32,
    v: &Value,
    ty: &FieldType,
    path: &str,
) -> Result<()> {
    match ty {
        FieldType::Bool => {
            let Some(b) = v.as_bool() else {
                return err(format!("{path}: expected a boolean, got {v}"));
            };
            put_tag(out, number, VARINT);
            put_varint(out, u64::from(b));
        }
        FieldType::Int32 | FieldType::Int64 => {
            let n = as_i64(v, path)?;
            if *ty == FieldType::Int32 && i32::try_from(n).is_err() {
                return err(format!("{path}: {n} does not fit in 32 bits"));
            }
            put_tag(out, number, VARINT);
            put_varint(out, n as u64);
        }
        FieldType::Double => {
            let Some(f) = v.as_f64() else {
                return err(format!("{path}: expected a number, got {v}"));
            };
            put_tag(out, number, FIXED64);
            out.extend_from_slice(&f.to_le_bytes());
        }
        FieldType::String => match v {
            Value::String(s) => put_len(out, number, s.as_bytes()),
            other => return err(format!("{path}: expected a string, got {other}")),
        },
        FieldType::Bytes => {
            let Some(s) = v.as_str() else {
                return err(format!("{path}: expected base64 text, got {v}"));
            };
            let b = base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|e| Error(format!("{path}: not base64: {e}")))?;
            put_len(out, number, &b);
        }
        FieldType::Message(name) => {
            let b = encode_message(v, name, path)?;
            put_len(out, number, &b);
        }
    }
    Ok(())
}
