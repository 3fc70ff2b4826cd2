//! `application/vnd.kubernetes.protobuf`: Kubernetes' protobuf encoding,
//! transcoded to and from the JSON `Value`s the handlers work on.
//!
//! The envelope (as apimachinery's `runtime/serializer/protobuf`): the
//! four bytes `k8s\0`, then a `runtime.Unknown` message whose `typeMeta`
//! names the apiVersion and kind and whose `raw` is the kind's message.
//! The kind's message is read and written field by field from the
//! message shapes in [`schema`], mapping the types whose JSON form differs
//! from their protobuf form: `Time`/`MicroTime` (seconds and nanos, JSON
//! RFC 3339), `Duration` (nanoseconds, JSON `1m30s`), `Quantity` (a
//! message holding a string, JSON the string), `IntOrString` (a tagged
//! message, JSON a number or a string), `RawExtension`/`FieldsV1` (bytes
//! holding JSON, JSON the value inline), `bytes` (JSON base64).
//!
//! Presence: Go's generated marshallers write every non-pointer field,
//! zero or not, where JSON's `omitempty` leaves zeros out. So a zero
//! scalar (`""`, `0`, `false`) read from the wire is dropped, as JSON
//! would have it (messages stay: `maxUnavailable: 0` is an IntOrString
//! that was set, and JSON keeps empty structs too), except for the pointer fields in [`KEEP_ZERO`] whose
//! explicit zero means something (`replicas: 0`, `backoffLimit: 0`,
//! `automountServiceAccountToken: false`, `storageClassName: ""`).

pub mod schema;
pub(crate) mod wire;

use base64::Engine;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Map, Number, Value};

use schema::{Field, FieldType};
use wire::{put_len, put_tag, put_varint, Reader, FIXED64, LEN, VARINT};

/// The media type, as clients name it in Content-Type and Accept.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// What every protobuf-encoded object starts with.
pub const MAGIC: &[u8; 4] = b"k8s\0";

const META: &str = "apimachinery.pkg.apis.meta.v1";
const UNKNOWN: &str = "apimachinery.pkg.runtime.Unknown";

/// Pointer fields whose zero value is kept when it is on the wire: Go
/// writes a pointer field only when it is set, so a zero there was meant.
pub const KEEP_ZERO: &[&str] = &[
    "replicas",
    "minReplicas",
    "backoffLimit",
    "backoffLimitPerIndex",
    "maxFailedIndexes",
    "parallelism",
    "completions",
    "ttlSecondsAfterFinished",
    "activeDeadlineSeconds",
    "startingDeadlineSeconds",
    "terminationGracePeriodSeconds",
    "tolerationSeconds",
    "stabilizationWindowSeconds",
    "gracePeriodSeconds",
    "revisionHistoryLimit",
    "progressDeadlineSeconds",
    "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit",
    "automountServiceAccountToken",
    "enableServiceLinks",
    "shareProcessNamespace",
    "hostUsers",
    "storageClassName",
    "runAsUser",
    "runAsGroup",
    "runAsNonRoot",
    "fsGroup",
    "privileged",
    "allowPrivilegeEscalation",
    "readOnlyRootFilesystem",
    "defaultMode",
    "mode",
    "optional",
    "ready",
    "serving",
    "terminating",
    "orphanDependents",
    "leaseDurationSeconds",
    "leaseTransitions",
    "expirationSeconds",
    "port",
];

/// Fields Go embeds with `json:",inline"`: their fields sit in the parent
/// object in JSON.
const INLINE: &[(&str, &str)] = &[
    ("api.core.v1.Probe", "handler"),
    ("api.core.v1.Volume", "volumeSource"),
    ("api.core.v1.PersistentVolumeSpec", "persistentVolumeSource"),
    ("api.core.v1.EphemeralContainer", "ephemeralContainerCommon"),
    ("api.core.v1.VolumeMountStatus", "volumeStatus"),
];

fn is_inline(message: &str, field: &str) -> bool {
    // ConfigMap and Secret references embed a LocalObjectReference.
    field == "localObjectReference" || INLINE.contains(&(message, field))
}

/// Why a body could not be read or an object could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Error(pub String);

type Result<T> = std::result::Result<T, Error>;

fn err<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error(msg.into()))
}

/// The full name of the message of `kind` in `apiVersion`, if bosun knows it:
/// `apps/v1 Deployment` is `api.apps.v1.Deployment`; meta kinds (`Status`,
/// `DeleteOptions`) are found in `meta/v1` from any version.
pub fn message_name(api_version: &str, kind: &str) -> Option<String> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    // autoscaling/v2beta2's messages are v2's (the same fields and
    // numbers); its proto file is not vendored.
    let version = match (group, version) {
        ("autoscaling", "v2beta2") => "v2",
        _ => version,
    };
    let package = match group {
        "" => "core",
        g => g.split('.').next().unwrap_or(g),
    };
    [
        format!("api.{package}.{version}.{kind}"),
        format!("{META}.{kind}"),
    ]
    .into_iter()
    .find(|n| schema::message(n).is_some())
}

// ---------------------------------------------------------------- envelope

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

// ---------------------------------------------------------------- decode

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

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

fn type_name(ty: &FieldType) -> &str {
    match ty {
        FieldType::String => "string",
        FieldType::Bytes => "bytes",
        FieldType::Bool => "bool",
        FieldType::Int32 => "int32",
        FieldType::Int64 => "int64",
        FieldType::Double => "double",
        FieldType::Message(m) => m,
    }
}

/// The fields of a small message by number, for the special types.
fn scalar_fields<'a>(buf: &'a [u8], path: &str) -> Result<Vec<(u32, u64, &'a [u8])>> {
    let mut r = Reader { buf, pos: 0 };
    let mut out = Vec::new();
    while !r.done() {
        let tag = r.varint()?;
        let (n, wire) = ((tag >> 3) as u32, (tag & 7) as u8);
        match wire {
            VARINT => out.push((n, r.varint()?, &[][..])),
            LEN => out.push((n, 0, r.len_delimited()?)),
            w => {
                r.skip(w).map_err(|e| Error(format!("{path}: {}", e.0)))?;
            }
        }
    }
    Ok(out)
}

fn decode_special(buf: &[u8], name: &str, path: &str) -> Result<Option<Value>> {
    let short = name.rsplit('.').next().unwrap_or(name);
    let kind = match (name, short) {
        (n, "Time" | "MicroTime" | "Duration" | "FieldsV1") if n.starts_with(META) => short,
        ("apimachinery.pkg.api.resource.Quantity", _) => "Quantity",
        ("apimachinery.pkg.util.intstr.IntOrString", _) => "IntOrString",
        ("apimachinery.pkg.runtime.RawExtension", _) => "RawExtension",
        _ => return Ok(None),
    };
    let fields = scalar_fields(buf, path)?;
    let int = |n: u32| fields.iter().rev().find(|f| f.0 == n).map_or(0, |f| f.1);
    let bytes = |n: u32| fields.iter().rev().find(|f| f.0 == n).map(|f| f.2);
    let text = |n: u32| -> Result<String> {
        String::from_utf8(bytes(n).unwrap_or_default().to_vec())
            .map_err(|_| Error(format!("{path}: a string is not UTF-8")))
    };
    Ok(Some(match kind {
        "Time" | "MicroTime" => {
            let (secs, nanos) = (int(1) as i64, int(2) as i64 as i32);
            if secs == 0 && nanos == 0 {
                Value::Null
            } else {
                let t = DateTime::<Utc>::from_timestamp(secs, nanos.max(0) as u32)
                    .ok_or_else(|| Error(format!("{path}: time out of range")))?;
                let format = if kind == "Time" {
                    SecondsFormat::Secs
                } else {
                    SecondsFormat::Micros
                };
                json!(t.to_rfc3339_opts(format, true))
            }
        }
        "Duration" => json!(go_duration(int(1) as i64)),
        "Quantity" => json!(text(1)?),
        "IntOrString" => {
            if int(1) == 1 {
                json!(text(3)?)
            } else {
                json!(int(2) as i64 as i32)
            }
        }
        _ => match bytes(1) {
            None | Some([]) => Value::Null,
            Some(raw) => serde_json::from_slice(raw)
                .map_err(|e| Error(format!("{path}: the embedded object is not JSON: {e}")))?,
        },
    }))
}

/// Go's `time.Duration.String()` for whole and fractional seconds.
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < 1_000_000_000 {
        let (unit, div) = match n {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{sign}{}{unit}", trim_fraction(n, div));
    }
    let (h, rest) = (n / 3_600_000_000_000, n % 3_600_000_000_000);
    let (m, s) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let secs = format!("{}s", trim_fraction(s, 1_000_000_000));
    match (h, m) {
        (0, 0) => format!("{sign}{secs}"),
        (0, m) => format!("{sign}{m}m{secs}"),
        (h, m) => format!("{sign}{h}h{m}m{secs}"),
    }
}

fn trim_fraction(n: u64, div: u64) -> String {
    let (whole, frac) = (n / div, n % div);
    if frac == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let f = format!("{frac:0width$}");
    format!("{whole}.{}", f.trim_end_matches('0'))
}

fn parse_go_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(0);
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let value: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[unit_end..];
    }
    let n = total.round() as i64;
    Some(if neg { -n } else { n })
}

// ---------------------------------------------------------------- encode

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

fn as_i64(v: &Value, path: &str) -> Result<i64> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .ok_or_else(|| Error(format!("{path}: expected an integer, got {n}"))),
        Value::String(s) => s
            .parse()
            .map_err(|_| Error(format!("{path}: expected an integer, got {s:?}"))),
        other => err(format!("{path}: expected an integer, got {other}")),
    }
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

fn encode_special(v: &Value, name: &str, path: &str) -> Result<Option<Vec<u8>>> {
    let short = name.rsplit('.').next().unwrap_or(name);
    let mut out = Vec::new();
    match (name, short) {
        (n, "Time" | "MicroTime") if n.starts_with(META) => {
            let Some(s) = v.as_str() else {
                return err(format!("{path}: expected an RFC 3339 time, got {v}"));
            };
            let t = DateTime::parse_from_rfc3339(s)
                .map_err(|e| Error(format!("{path}: {s:?} is not an RFC 3339 time: {e}")))?;
            put_tag(&mut out, 1, VARINT);
            put_varint(&mut out, t.timestamp() as u64);
            if t.timestamp_subsec_nanos() != 0 {
                put_tag(&mut out, 2, VARINT);
                put_varint(&mut out, u64::from(t.timestamp_subsec_nanos()));
            }
        }
        (n, "Duration") if n.starts_with(META) => {
            let s = v.as_str().unwrap_or("");
            let nanos = parse_go_duration(s)
                .ok_or_else(|| Error(format!("{path}: {v} is not a duration")))?;
            put_tag(&mut out, 1, VARINT);
            put_varint(&mut out, nanos as u64);
        }
        (n, "FieldsV1") if n.starts_with(META) => {
            put_len(&mut out, 1, &serde_json::to_vec(v).unwrap_or_default());
        }
        ("apimachinery.pkg.runtime.RawExtension", _) => {
            put_len(&mut out, 1, &serde_json::to_vec(v).unwrap_or_default());
        }
        ("apimachinery.pkg.api.resource.Quantity", _) => {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => return err(format!("{path}: expected a quantity, got {other}")),
            };
            put_len(&mut out, 1, s.as_bytes());
        }
        ("apimachinery.pkg.util.intstr.IntOrString", _) => match v {
            Value::String(s) => {
                put_tag(&mut out, 1, VARINT);
                put_varint(&mut out, 1);
                put_len(&mut out, 3, s.as_bytes());
            }
            other => {
                let n = as_i64(other, path)?;
                put_tag(&mut out, 1, VARINT);
                put_varint(&mut out, 0);
                put_tag(&mut out, 2, VARINT);
                put_varint(&mut out, n as u64);
            }
        },
        _ => return Ok(None),
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests;
