//! Events (`ValidateEventCreate` / `ValidateEventUpdate`): every event,
//! however written, passes the legacy checks; one written through
//! events.k8s.io/v1 also the strict ones (eventTime, type, no deprecated
//! fields, a valid series). The object is in the stored (core v1) shape;
//! field paths are named as the request's version names them.

use serde_json::Value;

use super::{get, int_of, str_of, sub, FieldError};
use crate::names::{is_dns1123_subdomain, is_qualified_name};

const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

fn set(v: &Value, k: &str) -> bool {
    get(v, k).is_some_and(|x| !x.is_null() && x != "")
}

/// `events_v1`: the request came through events.k8s.io/v1.
pub(crate) fn validate_event(
    obj: &Value,
    old: Option<&Value>,
    events_v1: bool,
    errs: &mut Vec<FieldError>,
) {
    legacy(obj, events_v1, errs);
    if !events_v1 {
        return;
    }
    match old {
        None => {
            series(obj, errs);
            if !set(obj, "eventTime") {
                errs.push(FieldError::required("eventTime", ""));
            }
            let ty = str_of(obj, "type");
            if ty != "Normal" && ty != "Warning" {
                errs.push(FieldError::invalid(
                    "type",
                    "",
                    format!("has invalid value: {ty}"),
                ));
            }
            for (core, field) in [
                ("firstTimestamp", "deprecatedFirstTimestamp"),
                ("lastTimestamp", "deprecatedLastTimestamp"),
            ] {
                if set(obj, core) {
                    errs.push(FieldError::invalid(field, "", "needs to be unset"));
                }
            }
            if int_of(obj, "count").unwrap_or(0) != 0 {
                errs.push(FieldError::invalid(
                    "deprecatedCount",
                    "",
                    "needs to be unset",
                ));
            }
            let source = sub(obj, "source");
            if set(source, "component") || set(source, "host") {
                errs.push(FieldError::invalid(
                    "deprecatedSource",
                    "",
                    "needs to be unset",
                ));
            }
        }
        Some(old) => {
            if get(obj, "series") != get(old, "series") {
                series(obj, errs);
            }
            // Upstream names the internal (core) fields here.
            for field in [
                "involvedObject",
                "reason",
                "message",
                "source",
                "firstTimestamp",
                "lastTimestamp",
                "count",
                "type",
                "eventTime",
                "action",
                "related",
                "reportingComponent",
                "reportingInstance",
            ] {
                let (new, was) = (sub(obj, field), sub(old, field));
                if new != was {
                    let name = if field == "reportingComponent" {
                        "reportingController"
                    } else {
                        field
                    };
                    errs.push(FieldError::immutable(name, new.clone()));
                }
            }
        }
    }
}

/// `validateV1EventSeries`.
fn series(obj: &Value, errs: &mut Vec<FieldError>) {
    let Some(series) = get(obj, "series").filter(|s| s.is_object()) else {
        return;
    };
    if int_of(series, "count").unwrap_or(0) < 2 {
        errs.push(FieldError::invalid(
            "series.count",
            "",
            "should be at least 2",
        ));
    }
    if !set(series, "lastObservedTime") {
        errs.push(FieldError::required("series.lastObservedTime", ""));
    }
}

/// `legacyValidateEvent`.
fn legacy(obj: &Value, events_v1: bool, errs: &mut Vec<FieldError>) {
    let namespace = str_of(sub(obj, "metadata"), "namespace");
    let involved_ns = str_of(sub(obj, "involvedObject"), "namespace");
    let mismatch = || {
        FieldError::invalid(
            "involvedObject.namespace",
            involved_ns,
            "does not match event.namespace",
        )
    };
    if !set(obj, "eventTime") {
        if involved_ns.is_empty() {
            if !namespace.is_empty() && namespace != "default" {
                errs.push(mismatch());
            }
        } else if namespace != involved_ns {
            errs.push(mismatch());
        }
    } else {
        if involved_ns.is_empty() && namespace != "default" && namespace != "kube-system" {
            errs.push(mismatch());
        }
        let controller_field = if events_v1 {
            "reportingController"
        } else {
            "reportingComponent"
        };
        let controller = str_of(obj, "reportingComponent");
        if controller.is_empty() {
            errs.push(FieldError::required(controller_field, ""));
        }
        for m in is_qualified_name(controller) {
            errs.push(FieldError::invalid(controller_field, controller, m));
        }
        let limited = [
            (
                "reportingInstance",
                "reportingInstance",
                REPORTING_INSTANCE_LIMIT,
                true,
            ),
            ("action", "action", ACTION_LIMIT, true),
            ("reason", "reason", REASON_LIMIT, true),
            ("message", "message", NOTE_LIMIT, false),
        ];
        for (key, field, limit, required) in limited {
            let value = str_of(obj, key);
            if required && value.is_empty() {
                errs.push(FieldError::required(field, ""));
            }
            if value.len() > limit {
                errs.push(FieldError::invalid(
                    field,
                    "",
                    format!("can have at most {limit} characters"),
                ));
            }
        }
    }
    for m in is_dns1123_subdomain(namespace) {
        errs.push(FieldError::invalid("namespace", namespace, m));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(obj: Value, events_v1: bool) -> Vec<String> {
        let mut errs = Vec::new();
        validate_event(&obj, None, events_v1, &mut errs);
        errs.iter().map(|e| e.message()).collect()
    }

    #[test]
    fn events_v1_requires_what_a_new_event_carries() {
        let ok = json!({"metadata": {"name": "e", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingComponent": "example.com/ctl",
            "reportingInstance": "i", "action": "Reconcile", "reason": "Done", "type": "Normal"});
        assert!(
            messages(ok.clone(), true).is_empty(),
            "{:?}",
            messages(ok.clone(), true)
        );
        let mut bare = ok.clone();
        for k in [
            "eventTime",
            "reportingComponent",
            "action",
            "reportingInstance",
        ] {
            bare.as_object_mut().unwrap().remove(k);
        }
        let errs = messages(bare, true);
        assert!(
            errs.iter()
                .any(|e| e.starts_with("eventTime: Required value")),
            "{errs:?}"
        );
        let mut no_controller = ok.clone();
        no_controller
            .as_object_mut()
            .unwrap()
            .remove("reportingComponent");
        let errs = messages(no_controller.clone(), true);
        assert!(
            errs.iter()
                .any(|e| e.starts_with("reportingController: Required value")),
            "{errs:?}"
        );
        let errs = messages(no_controller, false);
        assert!(
            errs.iter()
                .any(|e| e.starts_with("reportingComponent: Required value")),
            "{errs:?}"
        );
        let mut deprecated = ok.clone();
        deprecated["count"] = json!(3);
        deprecated["series"] = json!({"count": 1});
        let errs = messages(deprecated, true);
        assert!(
            errs.iter().any(|e| e.starts_with("deprecatedCount")),
            "{errs:?}"
        );
        assert!(
            errs.iter().any(|e| e.starts_with("series.count")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.starts_with("series.lastObservedTime")),
            "{errs:?}"
        );
    }

    #[test]
    fn legacy_events_keep_their_loose_rules() {
        let old_style = json!({"metadata": {"name": "e", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": "n1"}, "reason": "Up", "message": "m"});
        assert!(messages(old_style, false).is_empty());
        let elsewhere = json!({"metadata": {"name": "e", "namespace": "a"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "b"}});
        assert!(messages(elsewhere, false)[0].starts_with("involvedObject.namespace"));
    }
}
