//! Printers for coordination.k8s.io: Lease, as kubectl's `printLease`.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{name_cell, str_at};

pub(super) const LEASE: KindPrinter = KindPrinter {
    group: "coordination.k8s.io",
    kind: "Lease",
    columns: &[
        NAME,
        Column::text(
            "Holder",
            "holderIdentity contains the identity of the holder of a current lease.",
        ),
        AGE,
    ],
    cells: lease_cells,
};

fn lease_cells(lease: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(lease),
        str_at(lease, "/spec/holderIdentity").into(),
        age_cell(lease, now),
    ]
}
