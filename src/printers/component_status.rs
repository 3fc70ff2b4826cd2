//! The printer of core v1 ComponentStatus, as kubectl's
//! (`printComponentStatus`): NAME STATUS MESSAGE ERROR from the Healthy
//! condition.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::column::{Column, KindPrinter, NAME};
use super::fields::{array_at, name_cell, str_at};

pub(super) const COMPONENT_STATUS: KindPrinter = KindPrinter {
    group: "",
    kind: "ComponentStatus",
    columns: &[
        NAME,
        Column::text("Status", "Status of the component conditions"),
        Column::text("Message", "Message of the component conditions"),
        Column::text("Error", "Error of the component conditions"),
    ],
    cells: component_status_cells,
};

fn component_status_cells(obj: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    let mut status = "Unknown";
    let (mut message, mut error) = ("", "");
    for c in array_at(obj, "/conditions") {
        if str_at(c, "/type") == "Healthy" {
            status = if str_at(c, "/status") == "True" {
                "Healthy"
            } else {
                "Unhealthy"
            };
            message = str_at(c, "/message");
            error = str_at(c, "/error");
            break;
        }
    }
    vec![name_cell(obj), status.into(), message.into(), error.into()]
}
