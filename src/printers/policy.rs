//! Printers for the `policy` group: PodDisruptionBudget, as kubectl's
//! `printPodDisruptionBudget` shows it.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{int_at, name_cell, value_string};

pub(super) const POD_DISRUPTION_BUDGET: KindPrinter = KindPrinter {
    group: "policy",
    kind: "PodDisruptionBudget",
    columns: &[
        NAME,
        Column::text(
            "Min Available",
            "The minimum number of pods that must be available.",
        ),
        Column::text(
            "Max Unavailable",
            "The maximum number of pods that may be unavailable.",
        ),
        Column::integer(
            "Allowed Disruptions",
            "Calculated number of pods that may be disrupted at this time.",
        ),
        AGE,
    ],
    cells: pdb_cells,
};

/// An int-or-string as `IntOrString.String()` prints it, `N/A` when unset.
fn int_or_string(obj: &Value, ptr: &str) -> Value {
    match obj.pointer(ptr) {
        Some(v) if !v.is_null() => value_string(v).into(),
        _ => "N/A".into(),
    }
}

fn pdb_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(obj),
        int_or_string(obj, "/spec/minAvailable"),
        int_or_string(obj, "/spec/maxUnavailable"),
        int_at(obj, "/status/disruptionsAllowed").into(),
        age_cell(obj, now),
    ]
}
