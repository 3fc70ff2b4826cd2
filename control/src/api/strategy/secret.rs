//! Secrets: `stringData` is a write-only convenience. Its values are folded
//! into `data` (base64, winning over a `data` key of the same name) and the
//! field dropped before validation, on create and on update, as
//! Kubernetes' v1 conversion does; so `immutable` compares `data` alone.

use base64::Engine;
use serde_json::Value;

use super::Strategy;
use crate::api::ApiOptions;

pub struct SecretStrategy;

impl Strategy for SecretStrategy {
    fn prepare_for_create(&self, _options: &ApiOptions, obj: &mut Value) {
        fold_string_data(obj);
    }

    fn prepare_for_update(&self, _current: &Value, next: &mut Value) {
        fold_string_data(next);
    }
}

/// Moves `stringData` into `data`.
pub fn fold_string_data(obj: &mut Value) {
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    let Some(string_data) = root.remove("stringData") else {
        return;
    };
    let Some(string_data) = string_data.as_object().filter(|m| !m.is_empty()) else {
        return;
    };
    let data = root
        .entry("data")
        .or_insert_with(|| Value::Object(Default::default()));
    if !data.is_object() {
        *data = Value::Object(Default::default());
    }
    let data = data.as_object_mut().expect("an object");
    for (k, v) in string_data {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap_or_default());
        data.insert(k.clone(), Value::String(encoded));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn string_data_is_folded_into_data_and_dropped() {
        let mut s = json!({
            "data": {"a": "YQ==", "b": "YQ=="},
            "stringData": {"b": "bee", "c": ""},
        });
        fold_string_data(&mut s);
        assert_eq!(s, json!({"data": {"a": "YQ==", "b": "YmVl", "c": ""}}));
        let mut only = json!({"stringData": {"k": "v"}});
        fold_string_data(&mut only);
        assert_eq!(only, json!({"data": {"k": "dg=="}}));
    }
}
