//! Printers for the `autoscaling` group: HorizontalPodAutoscaler (v2 and v1 shapes), as
//! kubectl's printers show it.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{array_at, int_at, name_cell, str_at, value_string};

pub(super) const HORIZONTAL_POD_AUTOSCALER: KindPrinter = KindPrinter {
    group: "autoscaling",
    kind: "HorizontalPodAutoscaler",
    columns: &[
        NAME,
        Column::text("Reference", "reference to scaled resource; horizontal pod autoscaler will learn the current resource consumption and will set the desired number of pods by using its Scale subresource."),
        Column::text("Targets", "metrics contains the specifications for which to use to calculate the desired replica count."),
        Column::text("MinPods", "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down."),
        Column::integer("MaxPods", "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up."),
        Column::integer("Replicas", "currentReplicas is current number of replicas of pods managed by this autoscaler."),
        AGE,
    ],
    cells: hpa_cells,
};

fn hpa_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (name, age) = (name_cell(obj), age_cell(obj, now));
    let min = match obj.pointer("/spec/minReplicas") {
        Some(v) if !v.is_null() => value_string(v),
        _ => "<unset>".to_string(),
    };
    vec![
        name,
        format!(
            "{}/{}",
            str_at(obj, "/spec/scaleTargetRef/kind"),
            str_at(obj, "/spec/scaleTargetRef/name")
        )
        .into(),
        hpa_targets(obj).into(),
        min.into(),
        int_at(obj, "/spec/maxReplicas").into(),
        int_at(obj, "/status/currentReplicas").into(),
        age,
    ]
}

/// The TARGETS cell of an HPA: `cpu: 3%/5%`, `memory: <unknown>/10%`, at most two then
/// ` + N more...`; `<none>` without metrics. Reads autoscaling/v2 and autoscaling/v1 shapes.
fn hpa_targets(hpa: &Value) -> String {
    let specs = array_at(hpa, "/spec/metrics");
    if specs.is_empty() {
        // autoscaling/v1
        return match hpa.pointer("/spec/targetCPUUtilizationPercentage") {
            Some(t) if !t.is_null() => {
                let current = match hpa.pointer("/status/currentCPUUtilizationPercentage") {
                    Some(c) if !c.is_null() => format!("{}%", value_string(c)),
                    _ => "<unknown>".to_string(),
                };
                format!("cpu: {current}/{}%", value_string(t))
            }
            _ => "<none>".to_string(),
        };
    }
    let statuses = array_at(hpa, "/status/currentMetrics");
    let quantity_or_unknown = |v: Option<&Value>| match v {
        Some(q) if !q.is_null() => value_string(q),
        _ => "<unknown>".to_string(),
    };
    let mut list: Vec<String> = Vec::new();
    for (idx, spec) in specs.iter().enumerate() {
        let status = statuses.get(idx).unwrap_or(&Value::Null);
        let text = match str_at(spec, "/type") {
            t @ ("External" | "Object") => {
                let field = if t == "External" {
                    "external"
                } else {
                    "object"
                };
                let (target, current) = target_and_current(spec, status, field);
                match target_average_value(target) {
                    Some(avg) => format!(
                        "{}/{} (avg)",
                        quantity_or_unknown(current.and_then(|c| c.get("averageValue"))),
                        value_string(avg)
                    ),
                    None => format!(
                        "{}/{}",
                        quantity_or_unknown(current.and_then(|c| c.get("value"))),
                        target
                            .and_then(|t| t.get("value"))
                            .map(value_string)
                            .unwrap_or_default()
                    ),
                }
            }
            "Pods" => format!(
                "{}/{}",
                quantity_or_unknown(status.pointer("/pods/current/averageValue")),
                spec.pointer("/pods/target/averageValue")
                    .map(value_string)
                    .unwrap_or_default()
            ),
            t @ ("Resource" | "ContainerResource") => {
                let field = if t == "Resource" {
                    "resource"
                } else {
                    "containerResource"
                };
                let name = str_at(spec, &format!("/{field}/name"));
                let (target, current) = target_and_current(spec, status, field);
                match target_average_value(target) {
                    Some(avg) => format!(
                        "{name}: {}/{}",
                        quantity_or_unknown(current.and_then(|c| c.get("averageValue"))),
                        value_string(avg)
                    ),
                    None => {
                        let current = match current
                            .and_then(|c| c.get("averageUtilization"))
                            .filter(|v| !v.is_null())
                        {
                            Some(u) => format!("{}%", value_string(u)),
                            None => "<unknown>".to_string(),
                        };
                        let target = match target
                            .and_then(|t| t.get("averageUtilization"))
                            .filter(|v| !v.is_null())
                        {
                            Some(u) => format!("{}%", value_string(u)),
                            None => "<auto>".to_string(),
                        };
                        format!("{name}: {current}/{target}")
                    }
                }
            }
            _ => "<unknown type>".to_string(),
        };
        list.push(text);
    }
    const MAX: usize = 2;
    let count = list.len();
    if count > MAX {
        list.truncate(MAX);
        return format!("{} + {} more...", list.join(", "), count - MAX);
    }
    list.join(", ")
}

/// A metric's `target` in the HPA's spec and `current` in its status, under `field`
/// (`resource`, `object`, ...).
fn target_and_current<'a>(
    spec: &'a Value,
    status: &'a Value,
    field: &str,
) -> (Option<&'a Value>, Option<&'a Value>) {
    (
        spec.pointer(&format!("/{field}/target")),
        status.pointer(&format!("/{field}/current")),
    )
}

/// The `averageValue` a metric target sets, if it sets one.
fn target_average_value(target: Option<&Value>) -> Option<&Value> {
    target
        .and_then(|t| t.get("averageValue"))
        .filter(|v| !v.is_null())
}
