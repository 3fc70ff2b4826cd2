//! PersistentVolumes start Available and claims Pending, until the binder
//! pairs them.

use serde_json::{json, Value};

use super::Strategy;

pub struct PersistentVolumeStrategy;

impl Strategy for PersistentVolumeStrategy {
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"phase": "Available"}))
    }
}

pub struct PersistentVolumeClaimStrategy;

impl Strategy for PersistentVolumeClaimStrategy {
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"phase": "Pending"}))
    }
}
