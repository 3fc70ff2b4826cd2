//! autoscaling v2 and v1: HorizontalPodAutoscaler.

use serde_json::Value;

use super::{arr_of, child, get, index, int_of, str_of, sub, FieldError};
use crate::names::is_valid_path_segment_name;
use crate::quantity::parse_quantity;

const METRIC_TYPES: [&str; 5] = [
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

pub(crate) fn validate_hpa(version: &str, spec: &Value, errs: &mut Vec<FieldError>) {
    let min = int_of(spec, "minReplicas");
    if let Some(m) = min {
        if m < 1 {
            errs.push(FieldError::invalid(
                "spec.minReplicas",
                m,
                "must be greater than or equal to 1",
            ));
        }
    }
    let max = int_of(spec, "maxReplicas").unwrap_or(0);
    if max < 1 {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            max,
            "must be greater than 0",
        ));
    }
    if let Some(m) = min {
        if max < m {
            errs.push(FieldError::invalid(
                "spec.maxReplicas",
                max,
                "must be greater than or equal to `minReplicas`",
            ));
        }
    }
    let before = errs.len();
    let target = sub(spec, "scaleTargetRef");
    for k in ["kind", "name"] {
        let v = str_of(target, k);
        let p = child("spec.scaleTargetRef", k);
        if v.is_empty() {
            errs.push(FieldError::required(p, ""));
        } else {
            for m in is_valid_path_segment_name(v) {
                errs.push(FieldError::invalid(&p, v, m));
            }
        }
    }
    if errs.len() != before {
        return;
    }
    if version == "v1" {
        if let Some(t) = int_of(spec, "targetCPUUtilizationPercentage") {
            if t < 1 {
                errs.push(FieldError::invalid(
                    "spec.targetCPUUtilizationPercentage",
                    t,
                    "must be greater than 0",
                ));
            }
        }
        return;
    }
    for (i, m) in arr_of(spec, "metrics").iter().enumerate() {
        validate_metric(m, &index("spec.metrics", i), errs);
    }
}

fn validate_metric(m: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let ty = str_of(m, "type");
    if ty.is_empty() {
        errs.push(FieldError::required(
            child(path, "type"),
            "must specify a metric source type",
        ));
    } else if !METRIC_TYPES.contains(&ty) {
        errs.push(FieldError::not_supported(
            child(path, "type"),
            ty,
            &METRIC_TYPES,
        ));
    }
    let expected = match ty {
        "Object" => "object",
        "Pods" => "pods",
        "Resource" => "resource",
        "ContainerResource" => "containerResource",
        "External" => "external",
        _ => "",
    };
    let present: Vec<&str> = [
        "object",
        "pods",
        "resource",
        "containerResource",
        "external",
    ]
    .into_iter()
    .filter(|k| get(m, k).is_some())
    .collect();
    if !expected.is_empty() && get(m, expected).is_none() {
        errs.push(FieldError::required(
            child(path, expected),
            "must populate information for the given metric source",
        ));
    }
    for p in &present {
        if *p != expected {
            errs.push(FieldError::forbidden(
                child(path, p),
                "must populate the given metric source only",
            ));
        }
    }
    if let Some(src) = get(m, "resource").filter(|_| expected == "resource") {
        validate_resource_source(src, &child(path, "resource"), errs);
    }
    if let Some(src) = get(m, "containerResource").filter(|_| expected == "containerResource") {
        let p = child(path, "containerResource");
        if str_of(src, "container").is_empty() {
            errs.push(FieldError::required(
                child(&p, "container"),
                "must specify a container",
            ));
        }
        validate_resource_source(src, &p, errs);
    }
    for (k, needs_name) in [("pods", true), ("object", true), ("external", true)] {
        if let Some(src) = get(m, k).filter(|_| expected == k) {
            let p = child(path, k);
            if needs_name && str_of(sub(src, "metric"), "name").is_empty() {
                errs.push(FieldError::required(
                    child(&child(&p, "metric"), "name"),
                    "must specify a metric name",
                ));
            }
            validate_metric_target(sub(src, "target"), &child(&p, "target"), errs);
        }
    }
}

fn validate_resource_source(src: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if str_of(src, "name").is_empty() {
        errs.push(FieldError::required(
            child(path, "name"),
            "must specify a resource name",
        ));
    }
    let target = sub(src, "target");
    let tp = child(path, "target");
    validate_metric_target(target, &tp, errs);
    let (util, avg) = (
        get(target, "averageUtilization"),
        get(target, "averageValue"),
    );
    if util.is_none() && avg.is_none() {
        errs.push(FieldError::required(
            child(&tp, "averageUtilization"),
            "must set either a target raw value or a target utilization",
        ));
    }
    if util.is_some() && avg.is_some() {
        errs.push(FieldError::forbidden(
            child(&tp, "averageValue"),
            "may not set both a target raw value and a target utilization",
        ));
    }
}

fn validate_metric_target(t: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let ty = str_of(t, "type");
    if ty.is_empty() {
        errs.push(FieldError::required(
            child(path, "type"),
            "must specify a metric target type",
        ));
    }
    if !["Utilization", "Value", "AverageValue"].contains(&ty) {
        errs.push(FieldError::invalid(
            child(path, "type"),
            ty,
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    // The field the type names must be set (validateMetricTarget).
    match ty {
        "Utilization" if get(t, "averageUtilization").is_none() => errs.push(FieldError::required(
            child(path, "averageUtilization"),
            "must set either a target raw value or a target utilization",
        )),
        "Value" if get(t, "value").is_none() => errs.push(FieldError::required(
            child(path, "value"),
            "must set either a target value for metric or a per-pod target",
        )),
        "AverageValue" if get(t, "averageValue").is_none() => errs.push(FieldError::required(
            child(path, "averageValue"),
            "must set either a target value for metric or a per-pod target",
        )),
        _ => {}
    }
    for k in ["value", "averageValue"] {
        if let Some(q) = get(t, k) {
            let s = q.as_str().unwrap_or_default();
            match parse_quantity(s) {
                Err(e) => errs.push(FieldError::invalid(child(path, k), s, e.to_string())),
                Ok(v) if v.signum() != 1 => {
                    errs.push(FieldError::invalid(child(path, k), s, "must be positive"))
                }
                Ok(_) => {}
            }
        }
    }
    if let Some(u) = int_of(t, "averageUtilization") {
        if u < 1 {
            errs.push(FieldError::invalid(
                child(path, "averageUtilization"),
                u,
                "must be greater than 0",
            ));
        }
    }
}
