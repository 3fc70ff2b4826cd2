//! Printers for node.k8s.io: RuntimeClass, as kubectl's
//! `printRuntimeClass` (its handler).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{name_cell, str_at};

pub(super) const RUNTIME_CLASS: KindPrinter = KindPrinter {
    group: "node.k8s.io",
    kind: "RuntimeClass",
    columns: &[
        NAME,
        Column::text("Handler", "handler specifies the underlying runtime and configuration that the CRI implementation will use to handle pods of this class. The possible values are specific to the node & CRI configuration.  It is assumed that all handlers are available on every node, and handlers of the same name are equivalent on every node. For example, a handler called \"runc\" might specify that the runc OCI runtime (using native Linux containers) will be used to run the containers in a pod. The Handler must be lowercase, conform to the DNS Label (RFC 1123) requirements, and is immutable."),
        AGE,
    ],
    cells: runtime_class_cells,
};

fn runtime_class_cells(class: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(class),
        str_at(class, "/handler").into(),
        age_cell(class, now),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn shows_the_handler() {
        let obj = json!({"metadata": {"name": "gvisor"}, "handler": "runsc"});
        assert_eq!(runtime_class_cells(&obj, Utc::now())[1], "runsc");
    }
}
