//! storage.k8s.io/v1: StorageClass (`ValidateStorageClass`,
//! `ValidateStorageClassUpdate`).

use serde_json::Value;

use super::{get, str_of, FieldError};
use crate::names::is_qualified_name;

pub(crate) fn validate_storage_class(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let provisioner = str_of(obj, "provisioner");
    if provisioner.is_empty() {
        errs.push(FieldError::required("provisioner", ""));
    } else {
        for m in is_qualified_name(&provisioner.to_lowercase()) {
            errs.push(FieldError::invalid("provisioner", provisioner, m));
        }
    }
    let policy = str_of(obj, "reclaimPolicy");
    if !["Delete", "Retain"].contains(&policy) {
        errs.push(FieldError::not_supported(
            "reclaimPolicy",
            policy,
            &["Delete", "Retain"],
        ));
    }
    let mode = str_of(obj, "volumeBindingMode");
    if !["Immediate", "WaitForFirstConsumer"].contains(&mode) {
        errs.push(FieldError::not_supported(
            "volumeBindingMode",
            mode,
            &["Immediate", "WaitForFirstConsumer"],
        ));
    }
    let Some(old) = old else { return };
    if get(obj, "parameters") != get(old, "parameters") {
        errs.push(FieldError::forbidden(
            "parameters",
            "updates to parameters are forbidden.",
        ));
    }
    if provisioner != str_of(old, "provisioner") {
        errs.push(FieldError::forbidden(
            "provisioner",
            "updates to provisioner are forbidden.",
        ));
    }
    if policy != str_of(old, "reclaimPolicy") {
        errs.push(FieldError::forbidden(
            "reclaimPolicy",
            "updates to reclaimPolicy are forbidden.",
        ));
    }
    if mode != str_of(old, "volumeBindingMode") {
        errs.push(FieldError::immutable("volumeBindingMode", mode));
    }
}
