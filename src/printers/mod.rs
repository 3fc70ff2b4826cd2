//! Server-side printing: the columns and cells of the `meta.k8s.io/v1` Table the API server
//! returns for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, for every served kind.
//!
//! Columns and cell formats follow kubectl's printers
//! (k8s.io/kubernetes/pkg/printers/internalversion/printers.go). Column names are sent as
//! Kubernetes sends them ("Name", "Up-to-date", "Nominated Node"); kubectl, and the bosun CLI,
//! print them upper-cased ([`header`]). Rows always carry every column, the `priority: 1` ones
//! included; a client shows those only with `-o wide`.
//!
//! Everything works on the object's JSON; missing fields print as kubectl prints them
//! (`<none>`, `<unknown>`, `0`) and never panic.
//!
//! Each kind has one [`KindPrinter`](column::KindPrinter) (its columns next to its cell
//! function) in the file of its API group, registered in [`PRINTERS`].

mod admissionregistration;
mod age;
mod apiextensions;
mod apiregistration;
mod apps;
mod autoscaling;
mod batch;
mod certificates;
mod column;
mod component_status;
mod coordination;
mod core_group;
mod discovery;
mod events;
mod fields;
mod flowcontrol;
mod ingress;
mod networkpolicy;
mod node_api;
mod pod;
mod policy;
mod quota;
mod rbac;
mod replication;
mod scheduling;
mod storage;
mod storage_csi;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::resources::ResourceInfo;
use column::{KindPrinter, AGE, NAME};
use fields::name_cell;

pub use age::{human_age, human_duration};
pub use column::{header, Column};
pub use core_group::{access_modes, storage_class};
pub use pod::pod_status;
pub use storage::is_default_class;

/// Every kind's printer; kinds not listed print NAME and AGE.
const PRINTERS: &[&KindPrinter] = &[
    &pod::POD,
    &core_group::SERVICE,
    &core_group::ENDPOINTS,
    &core_group::NODE,
    &core_group::NAMESPACE,
    &core_group::EVENT,
    &events::EVENTS_V1_EVENT,
    &core_group::PERSISTENT_VOLUME,
    &core_group::PERSISTENT_VOLUME_CLAIM,
    &core_group::CONFIG_MAP,
    &core_group::SECRET,
    &core_group::SERVICE_ACCOUNT,
    &quota::RESOURCE_QUOTA,
    &quota::LIMIT_RANGE,
    &replication::POD_TEMPLATE,
    &replication::REPLICATION_CONTROLLER,
    &component_status::COMPONENT_STATUS,
    &discovery::ENDPOINT_SLICE,
    &coordination::LEASE,
    &networkpolicy::NETWORK_POLICY,
    &apps::DEPLOYMENT,
    &apps::REPLICA_SET,
    &apps::STATEFUL_SET,
    &apps::DAEMON_SET,
    &apps::CONTROLLER_REVISION,
    &batch::JOB,
    &batch::CRON_JOB,
    &autoscaling::HORIZONTAL_POD_AUTOSCALER,
    &policy::POD_DISRUPTION_BUDGET,
    &storage::STORAGE_CLASS,
    &rbac::ROLE,
    &rbac::CLUSTER_ROLE,
    &rbac::ROLE_BINDING,
    &rbac::CLUSTER_ROLE_BINDING,
    &ingress::INGRESS,
    &ingress::INGRESS_CLASS,
    &scheduling::PRIORITY_CLASS,
    &apiregistration::API_SERVICE,
    &apiextensions::CUSTOM_RESOURCE_DEFINITION,
    &admissionregistration::VALIDATING_WEBHOOK_CONFIGURATION,
    &admissionregistration::MUTATING_WEBHOOK_CONFIGURATION,
    &admissionregistration::VALIDATING_ADMISSION_POLICY,
    &admissionregistration::VALIDATING_ADMISSION_POLICY_BINDING,
    &certificates::CERTIFICATE_SIGNING_REQUEST,
    &node_api::RUNTIME_CLASS,
    &storage_csi::CSI_DRIVER,
    &storage_csi::CSI_NODE,
    &storage_csi::CSI_STORAGE_CAPACITY,
    &storage_csi::VOLUME_ATTACHMENT,
    &flowcontrol::FLOW_SCHEMA,
    &flowcontrol::PRIORITY_LEVEL_CONFIGURATION,
];

/// The printer of a kind without its own: NAME and AGE.
const DEFAULT_PRINTER: KindPrinter = KindPrinter {
    group: "",
    kind: "",
    columns: &[NAME, AGE],
    cells: |obj, now| vec![name_cell(obj), age::age_cell(obj, now)],
};

fn printer_for(res: &ResourceInfo) -> &'static KindPrinter {
    PRINTERS
        .iter()
        .find(|p| p.group == res.group && p.kind == res.kind)
        .copied()
        .unwrap_or(&DEFAULT_PRINTER)
}

/// The Table columns for a resource, in kubectl's order.
pub fn columns(res: &ResourceInfo) -> Vec<Column> {
    printer_for(res).columns.to_vec()
}

/// The cells of one row, one per column of [`columns`], computed as of `now`.
pub fn row_cells(res: &ResourceInfo, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    (printer_for(res).cells)(obj, now)
}

/// What each Table row carries besides its cells (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    /// The object's metadata as a PartialObjectMetadata, the default: enough for a client
    /// to print a NAMESPACE column or labels.
    Metadata,
    Object,
}

impl IncludeObject {
    /// The `includeObject` query parameter; anything but `None` or `Object` is `Metadata`.
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// One Table row: the object's cells as of `now`, and the object as `include` asks.
pub fn row(res: &ResourceInfo, obj: &Value, include: IncludeObject, now: DateTime<Utc>) -> Value {
    let mut row = json!({"cells": row_cells(res, obj, now)});
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
            })
        }
        IncludeObject::Object => row["object"] = obj.clone(),
    }
    row
}

/// A `meta.k8s.io/v1` Table without rows: the kind's column definitions, for the rows of
/// [`row`] to be added to `rows`.
pub fn empty_table(res: &ResourceInfo, resource_version: &str) -> Value {
    let columns: Vec<Value> = columns(res).iter().map(Column::to_json).collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": [],
    })
}

/// A whole `meta.k8s.io/v1` Table for `items`: the kind's column definitions and one row per
/// object, with its cells as of `now` and the object as `include` asks.
pub fn table(
    res: &ResourceInfo,
    items: &[Value],
    resource_version: &str,
    include: IncludeObject,
    now: DateTime<Utc>,
) -> Value {
    let mut table = empty_table(res, resource_version);
    table["rows"] = items
        .iter()
        .map(|obj| row(res, obj, include, now))
        .collect();
    table
}

#[cfg(test)]
mod tests;
