//! Reading a message from the wire into its JSON form, field by field
//! from its shape in [`super::schema`].

use base64::Engine;
use serde_json::{json, Map, Number, Value};

use super::schema::{self, Field, FieldType};
use super::special_types::decode_special;
use super::wire::{Reader, FIXED64, LEN, VARINT};
use super::{err, is_inline, join, type_name, Error, Result, KEEP_ZERO};

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// Reads one message of type `name` into its JSON form.
pub fn decode_message(buf: &[u8], name: &str, path: &str) -> Result<Value> {
    if let Some(special) = decode_special(buf, name, path)? {
        return Ok(special);
    }
    let Some(msg) = schema::message(name) else {
        return err(format!("{path}: unknown message {name}"));
    };
    let mut out = Map::new();
    let mut r = Reader { buf, pos: 0 };
    while !r.done() {
        let key = r.varint()?;
        let (number, wire) = ((key >> 3) as u32, (key & 7) as u8);
        let Some(field) = msg.by_number(number) else {
            r.skip(wire)?;
            continue;
        };
        let fpath = join(path, &field.name);
        if field.map {
            if wire != LEN {
                return err(format!("{fpath}: a map entry must be length-delimited"));
            }
            let (k, v) = decode_map_entry(r.len_delimited()?, field, &fpath)?;
            let entry = out.entry(field.name.clone()).or_insert_with(|| json!({}));
            if let Some(m) = entry.as_object_mut() {
                m.insert(k, v);
            }
        } else if field.repeated {
            let values = decode_repeated(&mut r, wire, field, &fpath)?;
            let entry = out.entry(field.name.clone()).or_insert_with(|| json!([]));
            if let Some(a) = entry.as_array_mut() {
                a.extend(values);
            }
        } else if is_inline(name, &field.name) {
            if let Value::Object(inner) = decode_single(&mut r, wire, &field.ty, path)? {
                out.extend(inner);
            }
        } else {
            let v = decode_single(&mut r, wire, &field.ty, &fpath)?;
            // A message on the wire was set (a zero IntOrString such as
            // `maxUnavailable: 0` stays); only scalars are omitempty's.
            let scalar = !matches!(field.ty, FieldType::Message(_));
            if v.is_null() || (scalar && is_zero(&v) && !KEEP_ZERO.contains(&field.name.as_str())) {
                out.remove(&field.name);
            } else {
                out.insert(field.name.clone(), v);
            }
        }
    }
    Ok(Value::Object(out))
}

fn decode_map_entry(buf: &[u8], field: &Field, path: &str) -> Result<(String, Value)> {
    let mut r = Reader { buf, pos: 0 };
    let (mut key, mut value) = (String::new(), None);
    while !r.done() {
        let tag = r.varint()?;
        match ((tag >> 3) as u32, (tag & 7) as u8) {
            (1, LEN) => {
                key = String::from_utf8(r.len_delimited()?.to_vec())
                    .map_err(|_| Error(format!("{path}: a map key is not UTF-8")))?;
            }
            (2, wire) => value = Some(decode_single(&mut r, wire, &field.ty, path)?),
            (_, wire) => r.skip(wire)?,
        }
    }
    let value = match value {
        Some(v) => v,
        None => decode_single(&mut Reader { buf: &[], pos: 0 }, LEN, &field.ty, path)
            .unwrap_or(Value::Null),
    };
    Ok((key, value))
}

fn decode_repeated(r: &mut Reader, wire: u8, field: &Field, path: &str) -> Result<Vec<Value>> {
    let packable = matches!(
        field.ty,
        FieldType::Bool | FieldType::Int32 | FieldType::Int64 | FieldType::Double
    );
    if packable && wire == LEN {
        let mut inner = Reader {
            buf: r.len_delimited()?,
            pos: 0,
        };
        let elem_wire = if field.ty == FieldType::Double {
            FIXED64
        } else {
            VARINT
        };
        let mut out = Vec::new();
        while !inner.done() {
            out.push(decode_single(&mut inner, elem_wire, &field.ty, path)?);
        }
        return Ok(out);
    }
    Ok(vec![decode_single(r, wire, &field.ty, path)?])
}

fn decode_single(r: &mut Reader, wire: u8, ty: &FieldType, path: &str) -> Result<Value> {
    let expected = match ty {
        FieldType::Bool | FieldType::Int32 | FieldType::Int64 => VARINT,
        FieldType::Double => FIXED64,
        _ => LEN,
    };
    if wire != expected {
        return err(format!(
            "{path}: wire type {wire} where {} needs {expected}",
            type_name(ty)
        ));
    }
    Ok(match ty {
        FieldType::Bool => json!(r.varint()? != 0),
        FieldType::Int32 => json!(r.varint()? as i64 as i32),
        FieldType::Int64 => json!(r.varint()? as i64),
        FieldType::Double => {
            let b = r.take(8)?;
            let f = f64::from_le_bytes(b.try_into().expect("8 bytes"));
            Number::from_f64(f).map_or(Value::Null, Value::Number)
        }
        FieldType::String => {
            let b = r.len_delimited()?;
            json!(std::str::from_utf8(b)
                .map_err(|_| Error(format!("{path}: a string is not UTF-8")))?)
        }
        FieldType::Bytes => {
            json!(base64::engine::general_purpose::STANDARD.encode(r.len_delimited()?))
        }
        FieldType::Message(name) => decode_message(r.len_delimited()?, name, path)?,
    })
}
