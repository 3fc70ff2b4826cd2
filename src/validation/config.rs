//! Core v1 ConfigMap and Secret (`ValidateConfigMap`, `ValidateConfigMapUpdate`,
//! `ValidateSecret`, `ValidateSecretUpdate`).
//!
//! Objects arrive normalized: `data` of a Secret and `binaryData` of a
//! ConfigMap are base64 strings (k8s-openapi's `ByteString` checked them),
//! and a Secret's `stringData` was folded into `data` by the API server's
//! strategy before validation, as Kubernetes' conversion does.

use base64::Engine;
use serde_json::{Map, Value};

use super::{get, key, obj_of, str_of, FieldError};
use crate::names::is_config_map_key;

/// Kubernetes' `MaxSecretSize`, the limit of a ConfigMap's too.
pub const MAX_SIZE: usize = 1024 * 1024;

/// Kubernetes' message for a change of an immutable ConfigMap or Secret.
pub const IMMUTABLE_WHEN_SET: &str = "field is immutable when `immutable` is set";

/// The bytes a base64 value stands for; 0 for one that does not decode
/// (normalize already rejected those).
fn decoded(v: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(v.as_str().unwrap_or_default())
        .unwrap_or_default()
}

fn keys_valid(errs: &mut Vec<FieldError>, field: &str, m: &Map<String, Value>) {
    for k in m.keys() {
        for msg in is_config_map_key(k) {
            errs.push(FieldError::invalid(key(field, k), k.as_str(), msg));
        }
    }
}

fn immutable(obj: &Value, old: &Value, fields: &[&str], errs: &mut Vec<FieldError>) {
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return;
    }
    if obj.get("immutable").and_then(Value::as_bool) != Some(true) {
        errs.push(FieldError::forbidden("immutable", IMMUTABLE_WHEN_SET));
    }
    for f in fields {
        // An empty map and an absent one are the same object once stored.
        let empty = |v: Option<&Value>| v.and_then(Value::as_object).is_none_or(Map::is_empty);
        let (new, was) = (get(obj, f), get(old, f));
        if new != was && !(empty(new) && empty(was)) {
            errs.push(FieldError::forbidden(*f, IMMUTABLE_WHEN_SET));
        }
    }
}

pub(crate) fn validate_config_map(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let empty = Map::new();
    let data = obj_of(obj, "data").unwrap_or(&empty);
    let binary = obj_of(obj, "binaryData").unwrap_or(&empty);
    keys_valid(errs, "data", data);
    let mut total = 0;
    for (k, v) in data {
        if binary.contains_key(k) {
            errs.push(FieldError::invalid(
                key("data", k),
                k.as_str(),
                "duplicate of key present in binaryData",
            ));
        }
        total += v.as_str().map_or(0, str::len);
    }
    keys_valid(errs, "binaryData", binary);
    for (k, v) in binary {
        if data.contains_key(k) {
            errs.push(FieldError::invalid(
                key("binaryData", k),
                k.as_str(),
                "duplicate of key present in data",
            ));
        }
        total += decoded(v).len();
    }
    if total > MAX_SIZE {
        // Kubernetes names the whole object (an empty path); bosun names
        // `data` so the message says where the bytes are.
        errs.push(FieldError::too_long("data", MAX_SIZE));
    }
    if let Some(old) = old {
        immutable(obj, old, &["data", "binaryData"], errs);
    }
}

pub(crate) fn validate_secret(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let empty = Map::new();
    let data = obj_of(obj, "data").unwrap_or(&empty);
    keys_valid(errs, "data", data);
    let total: usize = data.values().map(|v| decoded(v).len()).sum();
    if total > MAX_SIZE {
        errs.push(FieldError::too_long("data", MAX_SIZE));
    }
    let required = |errs: &mut Vec<FieldError>, k: &str| {
        errs.push(FieldError::required(key("data", k), ""));
    };
    let json_key = |errs: &mut Vec<FieldError>, k: &str| match data.get(k) {
        None => required(errs, k),
        Some(v) => {
            if let Err(e) = serde_json::from_slice::<Map<String, Value>>(&decoded(v)) {
                errs.push(FieldError::invalid(
                    key("data", k),
                    "<secret contents redacted>",
                    e.to_string(),
                ));
            }
        }
    };
    match str_of(obj, "type") {
        "kubernetes.io/service-account-token" => {
            let named = obj
                .pointer("/metadata/annotations/kubernetes.io~1service-account.name")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
            if !named {
                errs.push(FieldError::required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                ));
            }
        }
        "kubernetes.io/dockercfg" => json_key(errs, ".dockercfg"),
        "kubernetes.io/dockerconfigjson" => json_key(errs, ".dockerconfigjson"),
        "kubernetes.io/basic-auth"
            if !data.contains_key("username") && !data.contains_key("password") =>
        {
            required(errs, "username");
            required(errs, "password");
        }
        "kubernetes.io/ssh-auth"
            if data
                .get("ssh-privatekey")
                .is_none_or(|v| decoded(v).is_empty()) =>
        {
            required(errs, "ssh-privatekey");
        }
        "kubernetes.io/tls" => {
            for k in ["tls.crt", "tls.key"] {
                if !data.contains_key(k) {
                    required(errs, k);
                }
            }
        }
        // Opaque, and types of the user's own: nothing required.
        _ => {}
    }
    if let Some(old) = old {
        let (t, was) = (str_of(obj, "type"), str_of(old, "type"));
        if t != was {
            errs.push(FieldError::immutable("type", t));
        }
        immutable(obj, old, &["data"], errs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn config_map_keys_and_duplicates() {
        let cm = json!({
            "data": {"ok.key": "v", "..x": "v", "a/b": "v", "dup": "v"},
            "binaryData": {"dup": "AA=="},
        });
        let mut errs = Vec::new();
        validate_config_map(&cm, None, &mut errs);
        let m = messages(&errs);
        assert!(
            m.iter()
                .any(|e| e == "data[..x]: Invalid value: \"..x\": must not start with '..'"),
            "{m:?}"
        );
        assert!(m.iter().any(|e| e.starts_with("data[a/b]: Invalid value: \"a/b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',")), "{m:?}");
        assert!(m.contains(
            &"data[dup]: Invalid value: \"dup\": duplicate of key present in binaryData"
                .to_string()
        ));
        assert!(m.contains(
            &"binaryData[dup]: Invalid value: \"dup\": duplicate of key present in data"
                .to_string()
        ));
        assert_eq!(errs.len(), 4, "{m:?}");
    }

    #[test]
    fn config_map_over_one_mebibyte() {
        let cm = json!({"data": {"a": "x".repeat(MAX_SIZE), "b": "y"}});
        let mut errs = Vec::new();
        validate_config_map(&cm, None, &mut errs);
        assert_eq!(
            messages(&errs),
            vec!["data: Too long: may not be more than 1048576 bytes"]
        );
    }

    #[test]
    fn secret_types_need_their_keys() {
        let mut errs = Vec::new();
        validate_secret(
            &json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "AA=="}}),
            None,
            &mut errs,
        );
        assert_eq!(messages(&errs), vec!["data[tls.key]: Required value"]);
        errs.clear();
        validate_secret(
            &json!({"type": "kubernetes.io/dockerconfigjson", "data": {}}),
            None,
            &mut errs,
        );
        assert_eq!(
            messages(&errs),
            vec!["data[.dockerconfigjson]: Required value"]
        );
        errs.clear();
        // "not json" in base64
        validate_secret(
            &json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "bm90IGpzb24="}}),
            None,
            &mut errs,
        );
        assert_eq!(errs.len(), 1);
        assert!(errs[0]
            .message()
            .starts_with("data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\""));
        errs.clear();
        validate_secret(
            &json!({"type": "kubernetes.io/service-account-token"}),
            None,
            &mut errs,
        );
        assert_eq!(
            messages(&errs),
            vec!["metadata.annotations[kubernetes.io/service-account.name]: Required value"]
        );
        errs.clear();
        validate_secret(
            &json!({"type": "Opaque", "data": {"a": "AA=="}}),
            None,
            &mut errs,
        );
        assert!(errs.is_empty());
    }

    #[test]
    fn immutable_objects_keep_their_data() {
        let old = json!({"type": "Opaque", "immutable": true, "data": {"a": "AA=="}});
        let mut errs = Vec::new();
        validate_secret(&old, Some(&old), &mut errs);
        assert!(errs.is_empty());
        let new = json!({"type": "Opaque", "immutable": false, "data": {"a": "AQ=="}});
        validate_secret(&new, Some(&old), &mut errs);
        assert_eq!(
            messages(&errs),
            vec![
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set",
            ]
        );
        errs.clear();
        let retyped = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
        validate_secret(&retyped, Some(&json!({"type": "Opaque"})), &mut errs);
        assert_eq!(
            messages(&errs),
            vec!["type: Invalid value: \"kubernetes.io/tls\": field is immutable"]
        );
        errs.clear();
        let old_cm = json!({"immutable": true, "data": {"a": "1"}});
        validate_config_map(
            &json!({"immutable": true, "data": {"a": "2"}}),
            Some(&old_cm),
            &mut errs,
        );
        assert_eq!(
            messages(&errs),
            vec!["data: Forbidden: field is immutable when `immutable` is set"]
        );
        // A mutable one changes freely, and may become immutable.
        errs.clear();
        validate_config_map(&old_cm, Some(&json!({"data": {"a": "0"}})), &mut errs);
        assert!(errs.is_empty());
    }
}
