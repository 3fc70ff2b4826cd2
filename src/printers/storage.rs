//! Printers for storage.k8s.io: StorageClass, as kubectl's printers show it.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{non_empty_or, str_at};

/// The annotations that make a class the default (GA and beta).
pub const DEFAULT_CLASS_ANNOTATIONS: [&str; 2] = [
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];

pub(super) const STORAGE_CLASS: KindPrinter = KindPrinter {
    group: "storage.k8s.io",
    kind: "StorageClass",
    columns: &[
        NAME,
        Column::text("Provisioner", "provisioner indicates the type of the provisioner."),
        Column::text("ReclaimPolicy", "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete."),
        Column::text("VolumeBindingMode", "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature."),
        Column::text("AllowVolumeExpansion", "allowVolumeExpansion shows whether the storage class allow volume expand."),
        AGE,
    ],
    cells: storage_class_cells,
};

/// Whether `class` is marked the default (kubectl's `IsDefaultAnnotation`).
pub fn is_default_class(class: &Value) -> bool {
    DEFAULT_CLASS_ANNOTATIONS.iter().any(|a| {
        class
            .pointer("/metadata/annotations")
            .and_then(|m| m.get(*a))
            .and_then(Value::as_str)
            == Some("true")
    })
}

fn storage_class_cells(class: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut name = str_at(class, "/metadata/name").to_string();
    if is_default_class(class) {
        name.push_str(" (default)");
    }
    let expansion = class
        .get("allowVolumeExpansion")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    vec![
        name.into(),
        str_at(class, "/provisioner").into(),
        non_empty_or(str_at(class, "/reclaimPolicy"), "Delete").into(),
        non_empty_or(str_at(class, "/volumeBindingMode"), "Immediate").into(),
        expansion.to_string().into(),
        age_cell(class, now),
    ]
}
