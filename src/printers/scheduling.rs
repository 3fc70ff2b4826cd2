//! Printers for scheduling.k8s.io: PriorityClass, as kubectl's
//! `printPriorityClass`.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{name_cell, str_at};

pub(super) const PRIORITY_CLASS: KindPrinter = KindPrinter {
    group: "scheduling.k8s.io",
    kind: "PriorityClass",
    columns: &[
        NAME,
        Column::integer("Value", "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec."),
        Column {
            type_: "boolean",
            ..Column::text("Global-Default", "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.")
        },
        AGE,
        Column::text("PreemptionPolicy", "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset."),
    ],
    cells: priority_class_cells,
};

fn priority_class_cells(class: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let policy = match str_at(class, "/preemptionPolicy") {
        "" => "<none>",
        p => p,
    };
    vec![
        name_cell(class),
        class
            .get("value")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            .into(),
        class
            .get("globalDefault")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            .into(),
        age_cell(class, now),
        policy.into(),
    ]
}
