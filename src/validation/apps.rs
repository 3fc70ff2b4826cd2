//! apps/v1: Deployment, ReplicaSet, StatefulSet, DaemonSet, ControllerRevision.

use serde_json::Value;

use super::core::validate_pvc_spec;
use super::meta::{selector_is_empty, validate_label_selector};
use super::pod::{template_labels, template_labels_value, validate_pod_template};
use super::{arr_of, child, get, index, int_of, nonnegative, str_of, sub, FieldError, IS_NEGATIVE};
use crate::names::{is_dns1035_label, is_dns1123_subdomain, is_valid_percent};
use crate::selector::LabelSelector;

const SELECTOR_MISMATCH: &str = "`selector` does not match template `labels`";

/// `spec.selector`: required, valid and not empty (`empty selector is invalid for <what>`).
/// Returns the parsed selector when it is usable.
fn validate_selector(
    spec: &Value,
    what: &str,
    errs: &mut Vec<FieldError>,
) -> Option<LabelSelector> {
    let Some(sel) = get(spec, "selector") else {
        errs.push(FieldError::required("spec.selector", ""));
        return None;
    };
    let before = errs.len();
    validate_label_selector(sel, "spec.selector", errs);
    if selector_is_empty(sel) {
        errs.push(FieldError::invalid(
            "spec.selector",
            sel.clone(),
            format!("empty selector is invalid for {what}"),
        ));
    }
    if errs.len() != before {
        return None;
    }
    LabelSelector::from_json(sel).ok()
}

/// The selector must select the template's own labels.
fn check_template_labels(selector: &LabelSelector, spec: &Value, errs: &mut Vec<FieldError>) {
    let tpl = sub(spec, "template");
    if !selector.is_empty() && !selector.matches(&template_labels(tpl)) {
        let labels = template_labels_value(tpl);
        errs.push(FieldError::invalid(
            "spec.template.metadata.labels",
            labels,
            SELECTOR_MISMATCH,
        ));
    }
}

/// Pods of long-running controllers must restart always and run without a deadline.
fn check_always_restart(spec: &Value, kind: &str, errs: &mut Vec<FieldError>) {
    let pod = sub(sub(spec, "template"), "spec");
    let restart = str_of(pod, "restartPolicy");
    if restart != "Always" {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            restart,
            &["Always"],
        ));
    }
    if let Some(d) = get(pod, "activeDeadlineSeconds") {
        if kind == "DaemonSet" {
            errs.push(FieldError::invalid(
                "spec.template.spec.activeDeadlineSeconds",
                d.clone(),
                "activeDeadlineSeconds in DaemonSet is not Supported",
            ));
        } else {
            errs.push(FieldError::forbidden(
                "spec.template.spec.activeDeadlineSeconds",
                format!("activeDeadlineSeconds in {kind} is not Supported"),
            ));
        }
    }
}

/// The number (or percentage) an int-or-percent stands for.
fn int_or_percent_value(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => s.trim_end_matches('%').parse().unwrap_or(0),
        _ => 0,
    }
}

pub(super) fn validate_positive_int_or_percent(
    v: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    match v {
        Some(Value::String(s)) => {
            for m in is_valid_percent(s) {
                errs.push(FieldError::invalid(path, s.as_str(), m));
            }
        }
        Some(Value::Number(n)) => {
            let n = n.as_i64().unwrap_or(0);
            if n < 0 {
                errs.push(FieldError::invalid(path, n, IS_NEGATIVE));
            }
        }
        _ => {}
    }
}

pub(super) fn not_more_than_100_percent(v: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(Value::String(s)) = v {
        if is_valid_percent(s).is_empty() && int_or_percent_value(v) > 100 {
            errs.push(FieldError::invalid(
                path,
                s.as_str(),
                "must not be greater than 100%",
            ));
        }
    }
}

fn selector_immutable(spec: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let (new, was) = (sub(spec, "selector"), sub(old, "selector"));
    if new != was {
        errs.push(FieldError::immutable("spec.selector", new.clone()));
    }
}

pub(crate) fn validate_deployment(spec: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    nonnegative(errs, spec, "replicas", "spec");
    if let Some(sel) = validate_selector(spec, "deployment", errs) {
        check_template_labels(&sel, spec, errs);
    }
    validate_pod_template(sub(spec, "template"), "spec.template", errs);
    check_always_restart(spec, "ReplicaSet", errs);

    let strategy = sub(spec, "strategy");
    let rolling = get(strategy, "rollingUpdate");
    match str_of(strategy, "type") {
        "Recreate" => {
            if rolling.is_some() {
                errs.push(FieldError::forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => match rolling {
            None => errs.push(FieldError::required(
                "spec.strategy.rollingUpdate",
                "this should be defaulted and never be nil",
            )),
            Some(ru) => {
                let (unavailable, surge) = (get(ru, "maxUnavailable"), get(ru, "maxSurge"));
                let path = "spec.strategy.rollingUpdate";
                validate_positive_int_or_percent(unavailable, &child(path, "maxUnavailable"), errs);
                validate_positive_int_or_percent(surge, &child(path, "maxSurge"), errs);
                if int_or_percent_value(unavailable) == 0 && int_or_percent_value(surge) == 0 {
                    errs.push(FieldError::invalid(
                        child(path, "maxUnavailable"),
                        unavailable.cloned().unwrap_or(Value::from(0)),
                        "may not be 0 when `maxSurge` is 0",
                    ));
                }
                not_more_than_100_percent(unavailable, &child(path, "maxUnavailable"), errs);
            }
        },
        other => errs.push(FieldError::not_supported(
            "spec.strategy.type",
            other,
            &["Recreate", "RollingUpdate"],
        )),
    }
    nonnegative(errs, spec, "minReadySeconds", "spec");
    nonnegative(errs, spec, "revisionHistoryLimit", "spec");
    if let Some(p) = int_of(spec, "progressDeadlineSeconds") {
        if p < 0 {
            errs.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                p,
                IS_NEGATIVE,
            ));
        }
        if p <= int_of(spec, "minReadySeconds").unwrap_or(0) {
            errs.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                p,
                "must be greater than minReadySeconds",
            ));
        }
    }
    if let Some(old) = old {
        selector_immutable(spec, old, errs);
    }
}

pub(crate) fn validate_replicaset(spec: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    nonnegative(errs, spec, "replicas", "spec");
    nonnegative(errs, spec, "minReadySeconds", "spec");
    // Kubernetes says "deployment" here too.
    if let Some(sel) = validate_selector(spec, "deployment", errs) {
        check_template_labels(&sel, spec, errs);
    }
    validate_pod_template(sub(spec, "template"), "spec.template", errs);
    check_always_restart(spec, "ReplicaSet", errs);
    if let Some(old) = old {
        selector_immutable(spec, old, errs);
    }
}

pub(crate) fn validate_statefulset(spec: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    match str_of(spec, "podManagementPolicy") {
        "" => errs.push(FieldError::required("spec.podManagementPolicy", "")),
        "OrderedReady" | "Parallel" => {}
        other => errs.push(FieldError::invalid(
            "spec.podManagementPolicy",
            other,
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    let strategy = sub(spec, "updateStrategy");
    match str_of(strategy, "type") {
        "" => errs.push(FieldError::required("spec.updateStrategy", "")),
        "OnDelete" => {
            if let Some(ru) = get(strategy, "rollingUpdate") {
                errs.push(FieldError::invalid(
                    "spec.updateStrategy.rollingUpdate",
                    ru.clone(),
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
        }
        "RollingUpdate" => {
            if let Some(ru) = get(strategy, "rollingUpdate") {
                nonnegative(errs, ru, "partition", "spec.updateStrategy.rollingUpdate");
                let mu = get(ru, "maxUnavailable");
                let path = "spec.updateStrategy.rollingUpdate.maxUnavailable";
                validate_positive_int_or_percent(mu, path, errs);
                if mu.is_some() && int_or_percent_value(mu) == 0 {
                    errs.push(FieldError::invalid(
                        path,
                        mu.cloned().unwrap_or_default(),
                        "must be greater than 0",
                    ));
                }
                not_more_than_100_percent(mu, path, errs);
            }
        }
        other => errs.push(FieldError::invalid(
            "spec.updateStrategy",
            strategy.clone(),
            format!("must be 'RollingUpdate' or 'OnDelete' (got {other:?})"),
        )),
    }
    nonnegative(errs, spec, "replicas", "spec");
    nonnegative(errs, spec, "minReadySeconds", "spec");
    nonnegative(errs, spec, "revisionHistoryLimit", "spec");
    let service_name = str_of(spec, "serviceName");
    if !service_name.is_empty() {
        for m in is_dns1035_label(service_name) {
            errs.push(FieldError::invalid("spec.serviceName", service_name, m));
        }
    }
    if let Some(sel) = validate_selector(spec, "statefulset", errs) {
        check_template_labels(&sel, spec, errs);
    }
    // Each claim template becomes a volume of the pods (as the StatefulSet
    // controller adds it), so mounts may name it.
    let mut template = sub(spec, "template").clone();
    let claims: Vec<Value> = arr_of(spec, "volumeClaimTemplates")
        .iter()
        .map(|vct| str_of(sub(vct, "metadata"), "name"))
        .filter(|n| !n.is_empty())
        .map(|n| serde_json::json!({"name": n, "persistentVolumeClaim": {"claimName": n}}))
        .collect();
    if !claims.is_empty() && template.is_object() {
        if !template["spec"].is_object() {
            template["spec"] = serde_json::json!({});
        }
        let volumes = &mut template["spec"]["volumes"];
        if !volumes.is_array() {
            *volumes = serde_json::json!([]);
        }
        volumes.as_array_mut().expect("array").extend(claims);
    }
    validate_pod_template(&template, "spec.template", errs);
    check_always_restart(spec, "StatefulSet", errs);
    for (i, vct) in arr_of(spec, "volumeClaimTemplates").iter().enumerate() {
        let p = index("spec.volumeClaimTemplates", i);
        let name = str_of(sub(vct, "metadata"), "name");
        if name.is_empty() {
            errs.push(FieldError::required(child(&p, "metadata.name"), ""));
        } else {
            for m in is_dns1123_subdomain(name) {
                errs.push(FieldError::invalid(child(&p, "metadata.name"), name, m));
            }
        }
        validate_pvc_spec(sub(vct, "spec"), &child(&p, "spec"), errs);
    }
    if let Some(old) = old {
        let strip = |s: &Value| -> Value {
            let mut s = s.clone();
            if let Some(m) = s.as_object_mut() {
                for k in [
                    "replicas",
                    "ordinals",
                    "template",
                    "updateStrategy",
                    "revisionHistoryLimit",
                    "persistentVolumeClaimRetentionPolicy",
                    "minReadySeconds",
                ] {
                    m.remove(k);
                }
            }
            s
        };
        if strip(spec) != strip(old) {
            errs.push(FieldError::forbidden(
                "spec",
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            ));
        }
    }
}

pub(crate) fn validate_daemonset(spec: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    if let Some(sel) = validate_selector(spec, "daemonset", errs) {
        check_template_labels(&sel, spec, errs);
    }
    validate_pod_template(sub(spec, "template"), "spec.template", errs);
    check_always_restart(spec, "DaemonSet", errs);
    nonnegative(errs, spec, "minReadySeconds", "spec");
    nonnegative(errs, spec, "revisionHistoryLimit", "spec");
    let strategy = sub(spec, "updateStrategy");
    match str_of(strategy, "type") {
        "OnDelete" => {}
        "RollingUpdate" => match get(strategy, "rollingUpdate") {
            None => errs.push(FieldError::required(
                "spec.updateStrategy.rollingUpdate",
                "",
            )),
            Some(ru) => {
                let path = "spec.updateStrategy.rollingUpdate";
                let (unavailable, surge) = (get(ru, "maxUnavailable"), get(ru, "maxSurge"));
                validate_positive_int_or_percent(unavailable, &child(path, "maxUnavailable"), errs);
                validate_positive_int_or_percent(surge, &child(path, "maxSurge"), errs);
                not_more_than_100_percent(unavailable, &child(path, "maxUnavailable"), errs);
                not_more_than_100_percent(surge, &child(path, "maxSurge"), errs);
                let has_unavailable = int_or_percent_value(unavailable) != 0;
                let has_surge = int_or_percent_value(surge) != 0;
                if has_unavailable && has_surge {
                    errs.push(FieldError::invalid(
                        child(path, "maxSurge"),
                        surge.cloned().unwrap_or_default(),
                        "may not be set when maxUnavailable is non-zero",
                    ));
                } else if !has_unavailable && !has_surge {
                    errs.push(FieldError::required(
                        child(path, "maxUnavailable"),
                        "cannot be 0 when maxSurge is 0",
                    ));
                }
            }
        },
        other => errs.push(FieldError::not_supported(
            "spec.updateStrategy.type",
            other,
            &["RollingUpdate", "OnDelete"],
        )),
    }
    if let Some(old) = old {
        selector_immutable(spec, old, errs);
    }
}

pub(crate) fn validate_controller_revision(
    obj: &Value,
    old: Option<&Value>,
    errs: &mut Vec<FieldError>,
) {
    nonnegative(errs, obj, "revision", "");
    if let Some(old) = old {
        let (new, was) = (sub(obj, "data"), sub(old, "data"));
        if new != was {
            errs.push(FieldError::immutable("data", new.clone()));
        }
    }
}
