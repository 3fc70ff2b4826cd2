//! CustomResourceDefinition, as the apiextensions-apiserver's CRD
//! strategy and REST storage: defaults (`names.singular`,
//! `names.listKind`, `conversion.strategy: None`), a new CRD's status
//! holding only its storage version in `storedVersions` (the CRD
//! controllers accept its names and establish it), every new storage
//! version added there on update, and a delete that first marks the CRD
//! `Terminating` behind the `customresourcecleanup.apiextensions.k8s.io`
//! finalizer, which the finalizing controller removes once every instance
//! is gone.

use bosun::validation::FieldError;
use serde_json::{json, Value};

use super::Strategy;
use crate::api::ApiOptions;

/// The finalizer that keeps a deleted CRD until its instances are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

pub struct CustomResourceDefinitionStrategy;

/// Upstream's defaults for a CRD's spec.
pub fn set_defaults(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let empty = |v: Option<&Value>| v.and_then(Value::as_str).is_none_or(str::is_empty);
        if empty(names.get("singular")) && !kind.is_empty() {
            names.insert("singular".into(), json!(kind.to_ascii_lowercase()));
        }
        if empty(names.get("listKind")) && !kind.is_empty() {
            names.insert("listKind".into(), json!(format!("{kind}List")));
        }
    }
    let conversion = spec
        .entry("conversion")
        .or_insert_with(|| json!({"strategy": "None"}));
    if let Some(c) = conversion.as_object_mut() {
        c.entry("strategy").or_insert_with(|| json!("None"));
        if c["strategy"] == "Webhook" {
            if let Some(w) = c.get_mut("webhook").and_then(Value::as_object_mut) {
                w.entry("conversionReviewVersions")
                    .or_insert_with(|| json!(["v1beta1"]));
            }
        }
    }
}

fn storage_version(obj: &Value) -> Option<String> {
    obj.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v["storage"] == true)?
        .get("name")?
        .as_str()
        .map(str::to_string)
}

impl Strategy for CustomResourceDefinitionStrategy {
    fn initial_status(&self, obj: &Value) -> Option<Value> {
        Some(json!({
            "acceptedNames": {"plural": "", "kind": ""},
            "storedVersions": storage_version(obj).into_iter().collect::<Vec<_>>(),
        }))
    }

    fn prepare_for_create(&self, _options: &ApiOptions, obj: &mut Value) {
        set_defaults(obj);
    }

    /// Upstream's `ValidateCustomResourceDefinition` (and its update
    /// rules): names, versions, each version's schema compiled.
    fn validate(&self, _options: &ApiOptions, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        bosun::crd_schema::validate_crd(obj, old)
    }

    fn prepare_for_update(&self, _current: &Value, next: &mut Value) {
        set_defaults(next);
        let Some(storage) = storage_version(next) else {
            return;
        };
        let Some(status) = next.get_mut("status").and_then(Value::as_object_mut) else {
            return;
        };
        let stored = status.entry("storedVersions").or_insert_with(|| json!([]));
        if let Some(list) = stored.as_array_mut() {
            if !list.iter().any(|v| v == storage.as_str()) {
                list.push(json!(storage));
            }
        }
    }

    /// A CRD not yet marked is kept for its instances to go first.
    fn blocks_deletion(&self, obj: &Value) -> bool {
        obj.pointer("/metadata/deletionTimestamp").is_none()
    }

    fn mark_deleting(&self, obj: &mut Value) {
        let md = crate::api::object::metadata_mut(obj);
        let fins = md.entry("finalizers").or_insert_with(|| json!([]));
        if let Some(list) = fins.as_array_mut() {
            if !list.iter().any(|f| f == CLEANUP_FINALIZER) {
                list.push(json!(CLEANUP_FINALIZER));
            }
        }
        if !obj["status"].is_object() {
            obj["status"] = json!({});
        }
        let conditions = obj["status"]
            .as_object_mut()
            .expect("status is an object")
            .entry("conditions")
            .or_insert_with(|| json!([]));
        if let Some(list) = conditions.as_array_mut() {
            if !list.iter().any(|c| c["type"] == "Terminating") {
                list.push(json!({
                    "type": "Terminating",
                    "status": "True",
                    "lastTransitionTime": bosun::time::now_rfc3339(),
                    "reason": "InstanceDeletionPending",
                    "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
                }));
            }
        }
    }
}
