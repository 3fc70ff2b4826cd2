//! PersistentVolumes start Available and claims Pending, until the binder
//! pairs them. On create, as Kubernetes' admission plugins do:
//!
//! - a claim that names no class gets the default StorageClass
//!   (`DefaultStorageClass`: the class annotated
//!   `storageclass.kubernetes.io/is-default-class: "true"`, the newest if
//!   several are); `storageClassName: ""` asks for no class and is kept;
//! - claims get the `kubernetes.io/pvc-protection` finalizer and volumes
//!   `kubernetes.io/pv-protection` (`StorageObjectInUseProtection`), so a
//!   claim a pod uses, or a volume bound to a claim, stays until the
//!   volume binder lets it go.

use async_trait::async_trait;
use bosun::validation::FieldError;
use serde_json::{json, Value};

use super::Strategy;
use crate::api::error::ApiResult;
use crate::api::{object, ApiOptions, ApiState};

use bosun::well_known::{PVC_PROTECTION, PV_PROTECTION};

fn add_finalizer(obj: &mut Value, finalizer: &str) {
    let md = object::metadata_mut(obj);
    let list = md.entry("finalizers").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let list = list.as_array_mut().expect("an array");
    if !list.iter().any(|f| f == finalizer) {
        list.push(json!(finalizer));
    }
}

pub struct PersistentVolumeStrategy;

impl Strategy for PersistentVolumeStrategy {
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"phase": "Available"}))
    }

    fn prepare_for_create(&self, _options: &ApiOptions, obj: &mut Value) {
        add_finalizer(obj, PV_PROTECTION);
    }
}

pub struct PersistentVolumeClaimStrategy;

/// The default class among `classes`: annotated as the default; the newest
/// (then the first by name) when several are, as Kubernetes picks.
pub fn default_class(classes: &[Value]) -> Option<String> {
    super::newest_default(classes, bosun::printers::is_default_class)
}

#[async_trait]
impl Strategy for PersistentVolumeClaimStrategy {
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"phase": "Pending"}))
    }

    fn prepare_for_create(&self, _options: &ApiOptions, obj: &mut Value) {
        add_finalizer(obj, PVC_PROTECTION);
    }

    /// `DefaultStorageClass`: a claim that names no class (and has no beta
    /// class annotation) gets the default class, if there is one.
    async fn allocate(&self, state: &ApiState, obj: &mut Value) -> ApiResult<Vec<FieldError>> {
        super::set_default_class(
            state,
            obj,
            "storageclasses",
            "storageClassName",
            "volume.beta.kubernetes.io/storage-class",
            default_class,
        )
        .await?;
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, created: &str, default: bool) -> Value {
        json!({"metadata": {"name": name, "creationTimestamp": created,
            "annotations": {"storageclass.kubernetes.io/is-default-class": default.to_string()}},
            "provisioner": "p"})
    }

    #[test]
    fn the_newest_default_class_wins() {
        assert_eq!(default_class(&[]), None);
        let plain = class("plain", "2026-01-02T00:00:00Z", false);
        assert_eq!(default_class(std::slice::from_ref(&plain)), None);
        let old = class("old", "2026-01-01T00:00:00Z", true);
        let new = class("new", "2026-01-03T00:00:00Z", true);
        assert_eq!(
            default_class(&[old.clone(), plain, new]).as_deref(),
            Some("new")
        );
        let twin = class("a-twin", "2026-01-01T00:00:00Z", true);
        assert_eq!(default_class(&[old, twin]).as_deref(), Some("a-twin"));
    }
}
