//! events.k8s.io/v1 Events are core v1 Events in another shape: one object
//! in one storage, read and written in either (upstream's
//! `pkg/apis/events/v1` conversion). The fields map one to one.

use serde_json::{Map, Value};

/// core v1 field ↔ events.k8s.io/v1 field; every other field (reason,
/// type, action, eventTime, series, related, reportingInstance, metadata)
/// has the same name in both.
const RENAMED: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

fn rename(mut obj: Value, to_events: bool) -> Value {
    let Some(map) = obj.as_object_mut() else {
        return obj;
    };
    let mut moved = Map::new();
    for (core, events) in RENAMED {
        let (from, to) = if to_events {
            (core, events)
        } else {
            (events, core)
        };
        if let Some(v) = map.remove(*from) {
            moved.insert((*to).to_string(), v);
        }
    }
    map.extend(moved);
    obj
}

/// A core v1 Event (as stored) in events.k8s.io/v1's shape.
pub fn core_to_events_v1(obj: Value) -> Value {
    rename(obj, true)
}

/// An events.k8s.io/v1 Event in core v1's shape (as stored).
pub fn events_v1_to_core(obj: Value) -> Value {
    rename(obj, false)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fields_move_both_ways() {
        let core = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"},
            "message": "m", "reason": "Started", "reportingComponent": "kubelet",
            "reportingInstance": "n1", "count": 3, "source": {"component": "kubelet"},
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:01Z",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}});
        let v1 = core_to_events_v1(core.clone());
        assert_eq!(v1["regarding"]["name"], "p");
        assert_eq!(v1["note"], "m");
        assert_eq!(v1["reportingController"], "kubelet");
        assert_eq!(v1["deprecatedCount"], 3);
        assert_eq!(v1["deprecatedSource"]["component"], "kubelet");
        assert_eq!(v1["series"]["count"], 2);
        assert!(v1.get("involvedObject").is_none() && v1.get("message").is_none());
        assert_eq!(events_v1_to_core(v1), core);
    }
}
