//! Printers for the `apps` group: Deployment, ReplicaSet, StatefulSet, DaemonSet and
//! ControllerRevision, as kubectl's printers show them.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, CONTAINERS, IMAGES, NAME, SELECTOR};
use super::fields::{container_cells, format_labels, int_at, name_cell, replicas_at, str_at};
use crate::owners::controller_of_json;
use crate::selector::label_selector_string_json;

pub(super) const DEPLOYMENT: KindPrinter = KindPrinter {
    group: "apps",
    kind: "Deployment",
    columns: &[
        NAME,
        Column::text("Ready", "Number of the pod with ready state"),
        Column::integer("Up-to-date", "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
        Column::integer("Available", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: deployment_cells,
};

fn deployment_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut cells = vec![
        name_cell(obj),
        ready_of_desired(obj),
        int_at(obj, "/status/updatedReplicas").into(),
        int_at(obj, "/status/availableReplicas").into(),
    ];
    cells.extend(workload_tail_cells(obj, now));
    cells
}

/// The READY cell of deployments and stateful sets: ready of desired replicas.
fn ready_of_desired(obj: &Value) -> Value {
    format!(
        "{}/{}",
        int_at(obj, "/status/readyReplicas"),
        replicas_at(obj, "/spec/replicas")
    )
    .into()
}

/// The AGE, CONTAINERS, IMAGES and SELECTOR cells deployments, replica sets and daemon sets
/// end with.
fn workload_tail_cells(obj: &Value, now: DateTime<Utc>) -> [Value; 4] {
    let (names, images) = container_cells(obj, "/spec/template/spec/containers");
    [
        age_cell(obj, now),
        names,
        images,
        label_selector_string_json(obj.pointer("/spec/selector")).into(),
    ]
}

pub(super) const REPLICA_SET: KindPrinter = KindPrinter {
    group: "apps",
    kind: "ReplicaSet",
    columns: &[
        NAME,
        Column::integer("Desired", "Replicas is the number of desired replicas."),
        Column::integer(
            "Current",
            "Replicas is the most recently observed number of replicas.",
        ),
        Column::integer(
            "Ready",
            "The number of ready replicas for this replica set.",
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: replica_set_cells,
};

fn replica_set_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut cells = vec![
        name_cell(obj),
        replicas_at(obj, "/spec/replicas").into(),
        int_at(obj, "/status/replicas").into(),
        int_at(obj, "/status/readyReplicas").into(),
    ];
    cells.extend(workload_tail_cells(obj, now));
    cells
}

pub(super) const STATEFUL_SET: KindPrinter = KindPrinter {
    group: "apps",
    kind: "StatefulSet",
    columns: &[
        NAME,
        Column::text("Ready", "Number of the pod with ready state"),
        AGE,
        CONTAINERS,
        IMAGES,
    ],
    cells: stateful_set_cells,
};

fn stateful_set_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (names, images) = container_cells(obj, "/spec/template/spec/containers");
    vec![
        name_cell(obj),
        ready_of_desired(obj),
        age_cell(obj, now),
        names,
        images,
    ]
}

pub(super) const DAEMON_SET: KindPrinter = KindPrinter {
    group: "apps",
    kind: "DaemonSet",
    columns: &[
        NAME,
        Column::integer("Desired", "The total number of nodes that should be running the daemon pod."),
        Column::integer("Current", "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod."),
        Column::integer("Ready", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready."),
        Column::integer("Up-to-date", "The total number of nodes that are running updated daemon pod."),
        Column::integer("Available", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available."),
        Column::text("Node Selector", "NodeSelector is a selector which must be true for the pod to fit on a node."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: daemon_set_cells,
};

fn daemon_set_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut cells = vec![
        name_cell(obj),
        int_at(obj, "/status/desiredNumberScheduled").into(),
        int_at(obj, "/status/currentNumberScheduled").into(),
        int_at(obj, "/status/numberReady").into(),
        int_at(obj, "/status/updatedNumberScheduled").into(),
        int_at(obj, "/status/numberAvailable").into(),
        format_labels(obj.pointer("/spec/template/spec/nodeSelector")).into(),
    ];
    cells.extend(workload_tail_cells(obj, now));
    cells
}

pub(super) const CONTROLLER_REVISION: KindPrinter = KindPrinter {
    group: "apps",
    kind: "ControllerRevision",
    columns: &[
        NAME,
        Column::text("Controller", "Controller of the object"),
        Column::integer(
            "Revision",
            "Revision indicates the revision of the state represented by Data.",
        ),
        AGE,
    ],
    cells: controller_revision_cells,
};

fn controller_revision_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (name, age) = (name_cell(obj), age_cell(obj, now));
    vec![
        name,
        controller_name(obj).into(),
        int_at(obj, "/revision").into(),
        age,
    ]
}

/// The controlling owner as `kind.group/name` (`daemonset.apps/fluentd`), `<none>` without one.
fn controller_name(obj: &Value) -> String {
    let Some(owner) = obj.get("metadata").and_then(controller_of_json) else {
        return "<none>".to_string();
    };
    let kind = str_at(owner, "/kind");
    let name = str_at(owner, "/name");
    let group = str_at(owner, "/apiVersion")
        .rsplit_once('/')
        .map(|(g, _)| g)
        .unwrap_or("");
    match (kind.is_empty(), group.is_empty()) {
        (true, _) => name.to_string(),
        (false, true) => format!("{}/{name}", kind.to_lowercase()),
        (false, false) => format!("{}.{group}/{name}", kind.to_lowercase()),
    }
}
