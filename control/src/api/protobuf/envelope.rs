//! The envelope around an object (`k8s\0`, then a `runtime.Unknown` naming
//! the apiVersion and kind around the kind's message) and the frames of a
//! protobuf watch stream.

use base64::Engine;
use serde_json::{json, Value};

use super::wire::{put_len, Reader, LEN};
use super::{
    decode_message, encode_message, err, message_name, Error, Result, MAGIC, MEDIA_TYPE, UNKNOWN,
};

/// apiVersion, kind and the message bytes of an enveloped object.
pub fn open_envelope(body: &[u8]) -> Result<(String, String, Vec<u8>)> {
    let Some(rest) = body.strip_prefix(MAGIC) else {
        return err(
            "the body is not a Kubernetes protobuf object: it does not start with the magic k8s\\x00",
        );
    };
    let unknown = decode_message(rest, UNKNOWN, "").map_err(|e| {
        Error(format!(
            "the protobuf envelope (runtime.Unknown) is malformed: {e}"
        ))
    })?;
    let api_version = unknown
        .pointer("/typeMeta/apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let kind = unknown
        .pointer("/typeMeta/kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    match unknown.get("contentEncoding").and_then(Value::as_str) {
        None | Some("") => {}
        Some(e) => return err(format!("unsupported content encoding {e:?}")),
    }
    match unknown.get("contentType").and_then(Value::as_str) {
        None | Some("") | Some(MEDIA_TYPE) => {}
        Some(t) => {
            return err(format!(
                "unsupported content type {t:?} inside the envelope"
            ))
        }
    }
    let raw = match unknown.get("raw").and_then(Value::as_str) {
        Some(b) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|e| Error(e.to_string()))?,
        None => Vec::new(),
    };
    Ok((api_version, kind, raw))
}

/// Reads an enveloped object into its JSON form, with `apiVersion` and
/// `kind` from the envelope.
pub fn decode_object(body: &[u8]) -> Result<Value> {
    let (api_version, kind, raw) = open_envelope(body)?;
    if kind.is_empty() {
        return err("the protobuf envelope does not name a kind (typeMeta.kind is empty)");
    }
    let Some(name) = message_name(&api_version, &kind) else {
        return err(format!(
            "no kind \"{kind}\" is registered for version \"{api_version}\" in protobuf"
        ));
    };
    let mut obj = decode_message(&raw, &name, "")
        .map_err(|e| Error(format!("decoding {kind} from protobuf: {e}")))?;
    let map = obj.as_object_mut().expect("a message decodes to an object");
    map.insert("apiVersion".into(), json!(api_version));
    map.insert("kind".into(), json!(kind));
    Ok(obj)
}

/// Writes an object (with `apiVersion` and `kind`) in the envelope.
pub fn encode_object(obj: &Value) -> Result<Vec<u8>> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let Some(name) = message_name(api_version, kind) else {
        return err(format!(
            "no kind \"{kind}\" is registered for version \"{api_version}\" in protobuf"
        ));
    };
    let raw = encode_message(obj, &name, "")?;
    let unknown = json!({
        "typeMeta": {"apiVersion": api_version, "kind": kind},
        "raw": base64::engine::general_purpose::STANDARD.encode(raw),
    });
    let mut out = MAGIC.to_vec();
    out.extend(encode_message(&unknown, UNKNOWN, "")?);
    Ok(out)
}

/// One frame of a protobuf watch stream: a `meta/v1 WatchEvent` (`type`,
/// `object.raw` = the enveloped object) after its length as four
/// big-endian bytes.
pub fn encode_watch_frame(event_type: &str, obj: &Value) -> Result<Vec<u8>> {
    let mut object = Vec::new();
    put_len(&mut object, 1, &encode_object(obj)?);
    let mut event = Vec::new();
    put_len(&mut event, 1, event_type.as_bytes());
    put_len(&mut event, 2, &object);
    let len = u32::try_from(event.len()).map_err(|_| Error("watch event too large".into()))?;
    let mut out = len.to_be_bytes().to_vec();
    out.extend(event);
    Ok(out)
}

/// Reads one frame of a protobuf watch stream from the front of `buf`:
/// the event type, the object, and how many bytes the frame took.
pub fn decode_watch_frame(buf: &[u8]) -> Result<(String, Value, usize)> {
    let Some(len) = buf.get(..4) else {
        return err("truncated frame length");
    };
    let len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
    let Some(event) = buf.get(4..4 + len) else {
        return err("truncated frame");
    };
    let mut r = Reader { buf: event, pos: 0 };
    let (mut event_type, mut raw) = (String::new(), &[][..]);
    while !r.done() {
        let tag = r.varint()?;
        match ((tag >> 3) as u32, (tag & 7) as u8) {
            (1, LEN) => {
                event_type = String::from_utf8_lossy(r.len_delimited()?).into_owned();
            }
            (2, LEN) => {
                let mut ext = Reader {
                    buf: r.len_delimited()?,
                    pos: 0,
                };
                while !ext.done() {
                    let tag = ext.varint()?;
                    match ((tag >> 3) as u32, (tag & 7) as u8) {
                        (1, LEN) => raw = ext.len_delimited()?,
                        (_, wire) => ext.skip(wire)?,
                    }
                }
            }
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok((event_type, decode_object(raw)?, 4 + len))
}
