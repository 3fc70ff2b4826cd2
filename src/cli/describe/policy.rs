//! `describe poddisruptionbudget`: kubectl's layout
//! (`PodDisruptionBudgetDescriber` in kubectl's describe.go).

use serde_json::Value;

use bosun::selector::format_label_selector_json;

use super::writer::{str_of, Out};

pub(super) fn describe_pod_disruption_budget(obj: &Value) -> Out {
    let mut out = Out::default();
    let meta = &obj["metadata"];
    let spec = &obj["spec"];
    let status = &obj["status"];
    out.kv(0, "Name", str_of(&meta["name"]));
    out.kv(0, "Namespace", str_of(&meta["namespace"]));
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if !spec["minAvailable"].is_null() {
        out.kv(0, "Min available", &text(&spec["minAvailable"]));
    } else if !spec["maxUnavailable"].is_null() {
        out.kv(0, "Max unavailable", &text(&spec["maxUnavailable"]));
    }
    out.kv(
        0,
        "Selector",
        &format_label_selector_json(spec.get("selector").filter(|s| !s.is_null())),
    );
    out.line(0, "Status:");
    let int = |k: &str| status[k].as_i64().unwrap_or(0).to_string();
    out.kv(4, "Allowed disruptions", &int("disruptionsAllowed"));
    out.kv(4, "Current", &int("currentHealthy"));
    out.kv(4, "Desired", &int("desiredHealthy"));
    out.kv(4, "Total", &int("expectedPods"));
    out
}
