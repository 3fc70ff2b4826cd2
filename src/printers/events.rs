//! The printer of events.k8s.io/v1 Events: kubectl's event columns, as
//! upstream prints them (through the core Event they are stored as).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::column::KindPrinter;
use super::core_group::{event_cells, EVENT};
use crate::event_versions::events_v1_to_core;

pub(super) const EVENTS_V1_EVENT: KindPrinter = KindPrinter {
    group: "events.k8s.io",
    kind: "Event",
    columns: EVENT.columns,
    cells: events_v1_cells,
};

fn events_v1_cells(ev: &Value, now: DateTime<Utc>) -> Vec<Value> {
    event_cells(&events_v1_to_core(ev.clone()), now)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn shows_what_the_core_printer_shows() {
        let now = Utc::now();
        let ev = json!({"metadata": {"name": "e"}, "type": "Normal", "reason": "Done",
            "regarding": {"kind": "Pod", "name": "p"}, "note": "all good",
            "reportingController": "example.com/ctl", "eventTime": now.to_rfc3339()});
        let cells = events_v1_cells(&ev, now);
        assert_eq!(
            cells[1..5],
            [json!("Normal"), json!("Done"), json!("pod/p"), json!("")]
        );
        assert_eq!(cells[5], json!("example.com/ctl"));
        assert_eq!(cells[6], json!("all good"));
    }
}
