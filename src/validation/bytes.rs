//! `[]byte` fields (a Secret's `data`, a ConfigMap's `binaryData`) read as
//! the API server reads them: base64 decoded the way Go's `encoding/json`
//! decodes a `[]byte` (`base64.StdEncoding`, not strict), which skips `\r`
//! and `\n` anywhere (PEM pasted into a manifest is wrapped at 64 or 76
//! columns) and ignores non-zero bits after the last byte, but refuses every
//! other character (space, tab), missing or misplaced padding and anything
//! after the padding. Values are rewritten in canonical form before the
//! typed decode, whose base64 (k8s-openapi's `ByteString`) is strict, so
//! what is stored and served is what Kubernetes would encode.

use base64::Engine;
use serde_json::Value;

use crate::resources::ResourceInfo;

/// Where Go's decoder stops: the offset of the byte it refuses, as Go counts
/// it (`illegal base64 data at input byte N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt(pub usize);

impl std::fmt::Display for Corrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "illegal base64 data at input byte {}", self.0)
    }
}

/// The `[]byte` maps of the served kinds: (kind, field). Every value of
/// each is base64 text. bosun-control's OpenAPI test
/// `every_byte_field_of_a_served_kind_is_decoded_as_go_decodes_it` holds
/// this list to the served schemas (`format: byte`).
pub const BYTE_MAPS: &[(&str, &str)] = &[("Secret", "data"), ("ConfigMap", "binaryData")];

/// The `[]byte` fields in each element of a list of the served kinds:
/// (group, kind, list, field path in the element); held to the schemas by
/// the same test as [`BYTE_MAPS`] (as `KIND LIST[].PATH`).
pub const BYTE_FIELDS: &[(&str, &str, &str, &str)] = &[
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        "webhooks",
        "clientConfig.caBundle",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        "webhooks",
        "clientConfig.caBundle",
    ),
];

/// Single `[]byte` fields of the served kinds: (group, kind, field path);
/// held to the schemas by the same test as [`BYTE_MAPS`] (as `KIND PATH`).
pub const BYTE_VALUES: &[(&str, &str, &str)] = &[
    ("apiregistration.k8s.io", "APIService", "spec.caBundle"),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "spec.conversion.webhook.clientConfig.caBundle",
    ),
    (
        "certificates.k8s.io",
        "CertificateSigningRequest",
        "spec.request",
    ),
    (
        "certificates.k8s.io",
        "CertificateSigningRequest",
        "status.certificate",
    ),
];

fn sextet(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

fn is_newline(c: u8) -> bool {
    c == b'\n' || c == b'\r'
}

/// Decodes `text` as Go's `base64.StdEncoding.DecodeString` does, with the
/// same error offsets.
pub fn decode_std(text: &str) -> Result<Vec<u8>, Corrupt> {
    let src = text.as_bytes();
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    loop {
        // One quantum: up to four sextets, newlines skipped.
        let mut buf = [0u8; 4];
        let mut j = 0;
        let mut last = false;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                // A padded encoding needs a whole quantum.
                return Err(Corrupt(si - j));
            }
            let c = src[si];
            si += 1;
            if let Some(v) = sextet(c) {
                buf[j] = v;
                j += 1;
                continue;
            }
            if is_newline(c) {
                continue;
            }
            if c != b'=' || j < 2 {
                return Err(Corrupt(si - 1));
            }
            if j == 2 {
                // "==" is needed; the first '=' is consumed.
                while si < src.len() && is_newline(src[si]) {
                    si += 1;
                }
                if si == src.len() {
                    return Err(Corrupt(src.len()));
                }
                if src[si] != b'=' {
                    return Err(Corrupt(si - 1));
                }
                si += 1;
            }
            while si < src.len() && is_newline(src[si]) {
                si += 1;
            }
            if si < src.len() {
                return Err(Corrupt(si));
            }
            last = true;
            break;
        }
        let val = (u32::from(buf[0]) << 18)
            | (u32::from(buf[1]) << 12)
            | (u32::from(buf[2]) << 6)
            | u32::from(buf[3]);
        let bytes = [(val >> 16) as u8, (val >> 8) as u8, val as u8];
        // j sextets carry j - 1 whole bytes; the bits left over are ignored.
        out.extend_from_slice(&bytes[..j - 1]);
        if last {
            return Ok(out);
        }
    }
}

/// `obj` (of kind `res`) with every `[]byte` value that Go accepts in
/// canonical base64, or None when each already is (no copy is made then);
/// a value Go refuses is an error naming its field (`data.tls.crt: illegal
/// base64 data at input byte 4`). Values that are not strings are left for
/// the typed decode to refuse.
pub fn canonical(res: &ResourceInfo, obj: &Value) -> Result<Option<Value>, String> {
    let engine = &base64::engine::general_purpose::STANDARD;
    let mut out: Option<Value> = None;
    for (kind, field) in BYTE_MAPS {
        if !res.group.is_empty() || *kind != res.kind {
            continue;
        }
        let Some(map) = obj.get(*field).and_then(Value::as_object) else {
            continue;
        };
        for (key, value) in map {
            let Value::String(text) = value else { continue };
            if engine.decode(text.as_bytes()).is_ok() {
                continue; // already canonical
            }
            let bytes = decode_std(text).map_err(|e| format!("{field}.{key}: {e}"))?;
            let copy = out.get_or_insert_with(|| obj.clone());
            copy[*field][key.as_str()] = Value::String(engine.encode(bytes));
        }
    }
    for (group, kind, list, path) in BYTE_FIELDS {
        if res.group != *group || res.kind != *kind {
            continue;
        }
        let pointer = format!("/{}", path.replace('.', "/"));
        let items = obj.get(*list).and_then(Value::as_array);
        for (i, item) in items.into_iter().flatten().enumerate() {
            let Some(Value::String(text)) = item.pointer(&pointer) else {
                continue;
            };
            if engine.decode(text.as_bytes()).is_ok() {
                continue;
            }
            let bytes = decode_std(text).map_err(|e| format!("{list}[{i}].{path}: {e}"))?;
            let copy = out.get_or_insert_with(|| obj.clone());
            if let Some(slot) = copy[*list][i].pointer_mut(&pointer) {
                *slot = Value::String(engine.encode(bytes));
            }
        }
    }
    for (group, kind, path) in BYTE_VALUES {
        if res.group != *group || res.kind != *kind {
            continue;
        }
        let pointer = format!("/{}", path.replace('.', "/"));
        let Some(Value::String(text)) = obj.pointer(&pointer) else {
            continue;
        };
        if engine.decode(text.as_bytes()).is_ok() {
            continue;
        }
        let bytes = decode_std(text).map_err(|e| format!("{path}: {e}"))?;
        let copy = out.get_or_insert_with(|| obj.clone());
        if let Some(slot) = copy.pointer_mut(&pointer) {
            *slot = Value::String(engine.encode(bytes));
        }
    }
    Ok(out)
}

/// [`canonical`] in place. Returns whether anything changed.
pub fn canonicalize(res: &ResourceInfo, obj: &mut Value) -> Result<bool, String> {
    let Some(done) = canonical(res, obj)? else {
        return Ok(false);
    };
    *obj = done;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's `base64.StdEncoding.DecodeString` on each input, from Go's
    /// base64_test.go (TestDecodeCorrupt, TestNewLineCharacters) and its
    /// documented behaviour: Ok(bytes) or Err(offset).
    #[test]
    fn decodes_as_go_std_encoding() {
        let ok: &[(&str, &[u8])] = &[
            ("", b""),
            ("\n", b""),
            ("\r\n\r\n", b""),
            ("YQ==", b"a"),
            ("YWI=", b"ab"),
            ("YWJj", b"abc"),
            ("YWJjZA==", b"abcd"),
            // Newlines anywhere, also inside and after the padding.
            ("Y\nQ==", b"a"),
            ("YQ\r\n==", b"a"),
            ("YQ=\n=", b"a"),
            ("YQ==\n", b"a"),
            ("YQ==\r\n\r\n", b"a"),
            ("YW\nJj\nZA\n==", b"abcd"),
            ("\nYWJj", b"abc"),
            // Not strict: bits after the last byte are ignored.
            ("YR==", b"a"),
            ("YWJ=", b"ab"),
            ("+/+/", &[0xfb, 0xff, 0xbf]),
        ];
        for (input, want) in ok {
            assert_eq!(decode_std(input).as_deref(), Ok(*want), "{input:?}");
        }
        let bad: &[(&str, usize)] = &[
            ("!!!!", 0),
            ("====", 0),
            ("x===", 1),
            ("=AAA", 0),
            ("A=AA", 1),
            ("AA=A", 2),
            ("AA==A", 4),
            ("AAA=AAAA", 4),
            ("AAAAA", 4),
            ("AAAAAA", 4),
            ("A=", 1),
            ("A==", 1),
            ("AA=", 3),
            ("AA", 0),
            ("AAA", 0),
            ("AAAA=", 4),
            ("YQ==YQ==", 4),
            ("YQ== ", 4),
            (" YQ==", 0),
            ("Y Q==", 1),
            ("YQ\t==", 2),
            ("YWJj\x0bZA==", 4),
            ("YWJj-_==", 4),
            ("AA=\n", 4),
            ("AA=\nx", 3),
            // Go's offset for a short last quantum does not count newlines.
            ("A\n", 1),
            ("AB\nC", 1),
        ];
        for (input, at) in bad {
            assert_eq!(decode_std(input), Err(Corrupt(*at)), "{input:?}");
        }
    }

    fn res(kind: &str) -> &'static ResourceInfo {
        crate::resources::by_kind("v1", kind).expect("served")
    }

    /// 300 bytes of every value, base64 wrapped at 76 columns as a PEM file.
    fn wrapped() -> (Vec<u8>, String) {
        let bytes: Vec<u8> = (0..300u32).map(|i| (i * 7 % 256) as u8).collect();
        let flat = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let lines: Vec<&str> = flat
            .as_bytes()
            .chunks(76)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        (bytes, lines.join("\n") + "\n")
    }

    #[test]
    fn wrapped_values_become_canonical_base64_of_the_same_bytes() {
        let (bytes, text) = wrapped();
        assert!(text.contains('\n'));
        let mut secret = serde_json::json!({"data": {"tls.crt": text, "plain": "YQ=="}});
        assert_eq!(canonicalize(res("Secret"), &mut secret), Ok(true));
        let engine = &base64::engine::general_purpose::STANDARD;
        let stored = secret["data"]["tls.crt"].as_str().unwrap();
        assert_eq!(engine.decode(stored).unwrap(), bytes);
        assert_eq!(secret["data"]["plain"], "YQ==");
        let crlf = text.replace('\n', "\r\n");
        let mut cm = serde_json::json!({"binaryData": {"k": crlf}, "data": {"s": "a b\n"}});
        assert_eq!(canonicalize(res("ConfigMap"), &mut cm), Ok(true));
        assert_eq!(
            engine
                .decode(cm["binaryData"]["k"].as_str().unwrap())
                .unwrap(),
            bytes
        );
        // A ConfigMap's `data` is text, not bytes.
        assert_eq!(cm["data"]["s"], "a b\n");
        let mut same = serde_json::json!({"data": {"k": "YQ==", "n": 5}});
        assert_eq!(canonicalize(res("Secret"), &mut same), Ok(false));
    }

    #[test]
    fn a_wrapped_ca_bundle_becomes_canonical() {
        let (bytes, text) = wrapped();
        let res = crate::resources::by_name("validatingwebhookconfigurations").unwrap();
        let mut obj = serde_json::json!({"webhooks": [
            {"name": "a.b.c", "clientConfig": {"url": "https://x"}},
            {"name": "d.e.f", "clientConfig": {"caBundle": text}}]});
        assert_eq!(canonicalize(res, &mut obj), Ok(true));
        let engine = &base64::engine::general_purpose::STANDARD;
        let stored = obj["webhooks"][1]["clientConfig"]["caBundle"]
            .as_str()
            .unwrap();
        assert_eq!(engine.decode(stored).unwrap(), bytes);
        let mut bad = serde_json::json!({"webhooks": [{"clientConfig": {"caBundle": "a!=="}}]});
        let err = canonicalize(res, &mut bad).unwrap_err();
        assert!(
            err.starts_with("webhooks[0].clientConfig.caBundle: "),
            "{err}"
        );
    }

    #[test]
    fn wrapped_single_ca_bundles_become_canonical() {
        let (bytes, text) = wrapped();
        let engine = &base64::engine::general_purpose::STANDARD;
        let crds = crate::resources::by_name("customresourcedefinitions").unwrap();
        let mut crd = serde_json::json!({"spec": {"conversion": {"strategy": "Webhook",
            "webhook": {"clientConfig": {"caBundle": text.replace('\n', "\r\n")}}}}});
        assert_eq!(canonicalize(crds, &mut crd), Ok(true));
        let stored = crd
            .pointer("/spec/conversion/webhook/clientConfig/caBundle")
            .and_then(Value::as_str)
            .unwrap();
        assert_eq!(engine.decode(stored).unwrap(), bytes);
        let apiservices = crate::resources::by_name("apiservices").unwrap();
        let mut svc = serde_json::json!({"spec": {"caBundle": text}});
        assert_eq!(canonicalize(apiservices, &mut svc), Ok(true));
        assert_eq!(
            engine
                .decode(svc["spec"]["caBundle"].as_str().unwrap())
                .unwrap(),
            bytes
        );
        let mut bad = serde_json::json!({"spec": {"caBundle": "YQ= ="}});
        assert_eq!(
            canonicalize(apiservices, &mut bad),
            Err("spec.caBundle: illegal base64 data at input byte 2".to_string())
        );
    }

    #[test]
    fn what_go_refuses_is_an_error_naming_the_field() {
        let (_, text) = wrapped();
        for (bad, at) in [
            (text.replacen('\n', " ", 1), 76),
            (text.replacen('\n', "\t", 1), 76),
        ] {
            let mut secret = serde_json::json!({"data": {"tls.crt": bad}});
            assert_eq!(
                canonicalize(res("Secret"), &mut secret),
                Err(format!(
                    "data.tls.crt: illegal base64 data at input byte {at}"
                ))
            );
        }
        let mut cm = serde_json::json!({"binaryData": {"k": "YQ="}});
        assert_eq!(
            canonicalize(res("ConfigMap"), &mut cm),
            Err("binaryData.k: illegal base64 data at input byte 3".to_string())
        );
    }

    #[test]
    fn normalize_decodes_wrapped_values_and_names_refused_ones() {
        let (bytes, text) = wrapped();
        let secret = serde_json::json!({"metadata": {"name": "s"}, "data": {"tls.crt": text}});
        let out = crate::validation::normalize(res("Secret"), secret).unwrap();
        let engine = &base64::engine::general_purpose::STANDARD;
        assert_eq!(
            engine
                .decode(out["data"]["tls.crt"].as_str().unwrap())
                .unwrap(),
            bytes
        );
        let tab = serde_json::json!({"data": {"tls.crt": "YWJj\tZA=="}});
        assert_eq!(
            crate::validation::normalize(res("Secret"), tab),
            Err("Secret in version \"v1\" cannot be handled as a Secret: \
                 data.tls.crt: illegal base64 data at input byte 4"
                .to_string())
        );
    }
}
