//! The types whose JSON form differs from their protobuf form: `Time` and
//! `MicroTime` (seconds and nanos; JSON RFC 3339), `Duration` (nanoseconds;
//! JSON Go's `1m30s`), `Quantity` (a message holding a string; JSON the
//! string), `IntOrString` (a tagged message; JSON a number or a string),
//! `RawExtension` and `FieldsV1` (bytes holding JSON; JSON the value inline).

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};

use super::wire::{put_len, put_tag, put_varint, Reader, LEN, VARINT};
use super::{as_i64, err, Error, Result, META};

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

pub(super) fn decode_special(buf: &[u8], name: &str, path: &str) -> Result<Option<Value>> {
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
pub(super) fn go_duration(nanos: i64) -> String {
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

pub(super) fn parse_go_duration(s: &str) -> Option<i64> {
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

pub(super) fn encode_special(v: &Value, name: &str, path: &str) -> Result<Option<Vec<u8>>> {
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
