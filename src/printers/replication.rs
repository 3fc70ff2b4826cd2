//! Printers for core v1 PodTemplate and ReplicationController, as kubectl's
//! (`printPodTemplate`, `printReplicationController`).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, CONTAINERS, IMAGES, NAME};
use super::fields::{container_cells, format_labels, int_at, name_cell, replicas_at};

pub(super) const POD_TEMPLATE: KindPrinter = KindPrinter {
    group: "",
    kind: "PodTemplate",
    columns: &[
        NAME,
        Column::text("Containers", "Names of each container in the template."),
        Column::text(
            "Images",
            "Images referenced by each container in the template.",
        ),
        Column::text("Pod Labels", "The labels for the pod template."),
    ],
    cells: pod_template_cells,
};

fn pod_template_cells(obj: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    let (names, images) = container_cells(obj, "/template/spec/containers");
    vec![
        name_cell(obj),
        names,
        images,
        format_labels(obj.pointer("/template/metadata/labels")).into(),
    ]
}

pub(super) const REPLICATION_CONTROLLER: KindPrinter = KindPrinter {
    group: "",
    kind: "ReplicationController",
    columns: &[
        NAME,
        Column::integer("Desired", "Replicas is the number of desired replicas."),
        Column::integer(
            "Current",
            "Replicas is the most recently observed number of replicas.",
        ),
        Column::integer(
            "Ready",
            "The number of ready replicas for this replication controller.",
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        Column::text("Selector", "Label selector for pods.").wide(),
    ],
    cells: replication_controller_cells,
};

fn replication_controller_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (names, images) = container_cells(obj, "/spec/template/spec/containers");
    vec![
        name_cell(obj),
        replicas_at(obj, "/spec/replicas").into(),
        int_at(obj, "/status/replicas").into(),
        int_at(obj, "/status/readyReplicas").into(),
        age_cell(obj, now),
        names,
        images,
        format_labels(obj.pointer("/spec/selector")).into(),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn columns_as_kubectl() {
        let now = Utc::now();
        let rc = json!({"metadata": {"name": "web"},
            "spec": {"replicas": 3, "selector": {"app": "web"},
                "template": {"spec": {"containers": [{"name": "c", "image": "img:1"}]}}},
            "status": {"replicas": 2, "readyReplicas": 1}});
        let cells = replication_controller_cells(&rc, now);
        assert_eq!(cells[..4], [json!("web"), json!(3), json!(2), json!(1)]);
        assert_eq!(cells[5..], [json!("c"), json!("img:1"), json!("app=web")]);
        let pt = json!({"metadata": {"name": "t"}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "img:1"}]}}});
        assert_eq!(
            pod_template_cells(&pt, now),
            [json!("t"), json!("c"), json!("img:1"), json!("a=b")]
        );
    }
}
