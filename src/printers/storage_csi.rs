//! Printers for storage.k8s.io's CSI kinds, as kubectl's
//! `printCSIDriver`, `printCSINode`, `printCSIStorageCapacity` and
//! `printVolumeAttachment`.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{array_at, name_cell, non_empty_or, str_at};

const fn boolean(name: &'static str, description: &'static str) -> Column {
    Column {
        type_: "boolean",
        ..Column::text(name, description)
    }
}

pub(super) const CSI_DRIVER: KindPrinter = KindPrinter {
    group: "storage.k8s.io",
    kind: "CSIDriver",
    columns: &[
        NAME,
        boolean("AttachRequired", "attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting."),
        boolean("PodInfoOnMount", "podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true."),
        boolean("StorageCapacity", "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report by creating CSIStorageCapacity objects with capacity information, if set to true."),
        Column::text("TokenRequests", "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication."),
        boolean("RequiresRepublish", "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume."),
        Column::text("Modes", "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports."),
        AGE,
    ],
    cells: csi_driver_cells,
};

fn csi_driver_cells(d: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let flag =
        |ptr: &str, default: bool| d.pointer(ptr).and_then(Value::as_bool).unwrap_or(default);
    let modes: Vec<&str> = array_at(d, "/spec/volumeLifecycleModes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let tokens = match d.pointer("/spec/tokenRequests").and_then(Value::as_array) {
        Some(ts) => ts
            .iter()
            .map(|t| str_at(t, "/audience"))
            .collect::<Vec<_>>()
            .join(","),
        None => "<unset>".to_string(),
    };
    vec![
        name_cell(d),
        flag("/spec/attachRequired", true).into(),
        flag("/spec/podInfoOnMount", false).into(),
        flag("/spec/storageCapacity", false).into(),
        tokens.into(),
        flag("/spec/requiresRepublish", false).into(),
        non_empty_or(&modes.join(","), "<none>").to_string().into(),
        age_cell(d, now),
    ]
}

pub(super) const CSI_NODE: KindPrinter = KindPrinter {
    group: "storage.k8s.io",
    kind: "CSINode",
    columns: &[
        NAME,
        Column::integer(
            "Drivers",
            "Drivers indicates the number of CSI drivers registered on the node",
        ),
        AGE,
    ],
    cells: csi_node_cells,
};

fn csi_node_cells(n: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(n),
        array_at(n, "/spec/drivers").len().into(),
        age_cell(n, now),
    ]
}

pub(super) const CSI_STORAGE_CAPACITY: KindPrinter = KindPrinter {
    group: "storage.k8s.io",
    kind: "CSIStorageCapacity",
    columns: &[
        NAME,
        Column::text("StorageClassName", "storageClassName represents the name of the StorageClass that the reported capacity applies to."),
        Column::text("Capacity", "capacity is the value reported by the CSI driver in its GetCapacityResponse for a GetCapacityRequest with topology and parameters that match the previous fields."),
        AGE,
    ],
    cells: csi_storage_capacity_cells,
};

fn csi_storage_capacity_cells(c: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(c),
        str_at(c, "/storageClassName").into(),
        non_empty_or(str_at(c, "/capacity"), "<unset>").into(),
        age_cell(c, now),
    ]
}

pub(super) const VOLUME_ATTACHMENT: KindPrinter = KindPrinter {
    group: "storage.k8s.io",
    kind: "VolumeAttachment",
    columns: &[
        NAME,
        Column::text("Attacher", "attacher indicates the name of the volume driver that MUST handle this request. This is the name returned by GetPluginName()."),
        Column::text("PV", "persistentVolumeName represents the name of the persistent volume to attach."),
        Column::text("Node", "nodeName represents the node that the volume should be attached to."),
        boolean("Attached", "attached indicates the volume is successfully attached. This field must only be set by the entity completing the attach operation, i.e. the external-attacher."),
        AGE,
    ],
    cells: volume_attachment_cells,
};

fn volume_attachment_cells(a: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(a),
        str_at(a, "/spec/attacher").into(),
        str_at(a, "/spec/source/persistentVolumeName").into(),
        str_at(a, "/spec/nodeName").into(),
        a.pointer("/status/attached")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            .into(),
        age_cell(a, now),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn cells_as_kubectl_prints_them() {
        let now = Utc::now();
        let d = json!({"metadata": {"name": "csi.example.com"}, "spec": {
            "volumeLifecycleModes": ["Persistent", "Ephemeral"]}});
        let cells = csi_driver_cells(&d, now);
        assert_eq!(
            cells[1..7],
            [
                json!(true),
                json!(false),
                json!(false),
                json!("<unset>"),
                json!(false),
                json!("Persistent,Ephemeral")
            ]
        );
        let n = json!({"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "a"}]}});
        assert_eq!(csi_node_cells(&n, now)[1], 1);
        let c = json!({"metadata": {"name": "c"}, "storageClassName": "fast"});
        assert_eq!(
            csi_storage_capacity_cells(&c, now)[1..3],
            [json!("fast"), json!("<unset>")]
        );
        let a = json!({"metadata": {"name": "a"}, "spec": {"attacher": "csi.example.com",
            "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}},
            "status": {"attached": true}});
        assert_eq!(
            volume_attachment_cells(&a, now)[1..5],
            [
                json!("csi.example.com"),
                json!("pv1"),
                json!("n1"),
                json!(true)
            ]
        );
    }
}
