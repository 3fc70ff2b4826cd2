//! `metadata`: names, namespace, labels, annotations, owner references, label selectors.

use serde_json::Value;

use super::{arr_of, child, get, index, obj_of, str_of, FieldError};
use crate::names::*;
use crate::resources::ResourceInfo;

/// Kubernetes' cap on the total size of an object's annotations.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// The name check a kind uses (`prefix` = checking a `generateName`).
fn name_errors(res: &ResourceInfo, name: &str, prefix: bool) -> Vec<String> {
    // A generateName may end in '-': the random suffix follows it.
    let name = if prefix {
        name.strip_suffix('-')
            .map(|n| format!("{n}a"))
            .unwrap_or_else(|| name.to_string())
    } else {
        name.to_string()
    };
    match (res.group, res.kind) {
        ("", "Namespace") => is_dns1123_label(&name),
        ("", "Service") => is_dns1035_label(&name),
        // ValidateRBACName: `system:discovery` is a valid role name.
        // APIServices are named VERSION.GROUP (`v1.` for the core group).
        ("", "PersistentVolume")
        | ("rbac.authorization.k8s.io", _)
        | ("apiregistration.k8s.io", "APIService") => is_valid_path_segment_name(&name),
        _ => is_dns1123_subdomain(&name),
    }
}

pub(crate) fn validate_object_meta(res: &ResourceInfo, meta: &Value, errs: &mut Vec<FieldError>) {
    let path = "metadata";
    let name = str_of(meta, "name");
    let generate_name = str_of(meta, "generateName");
    if !generate_name.is_empty() {
        for m in name_errors(res, generate_name, true) {
            errs.push(FieldError::invalid(
                child(path, "generateName"),
                generate_name,
                m,
            ));
        }
    }
    if name.is_empty() {
        if generate_name.is_empty() {
            errs.push(FieldError::required(
                child(path, "name"),
                "name or generateName is required",
            ));
        }
    } else {
        for m in name_errors(res, name, false) {
            errs.push(FieldError::invalid(child(path, "name"), name, m));
        }
        if res.group == "batch" && res.kind == "CronJob" && name.len() > 52 {
            errs.push(FieldError::invalid(
                child(path, "name"),
                name,
                max_len_error(52),
            ));
        }
    }
    let namespace = str_of(meta, "namespace");
    if res.namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required(child(path, "namespace"), ""));
        } else {
            for m in is_dns1123_label(namespace) {
                errs.push(FieldError::invalid(child(path, "namespace"), namespace, m));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            child(path, "namespace"),
            "not allowed on this type",
        ));
    }
    validate_labels(get(meta, "labels"), &child(path, "labels"), errs);
    validate_annotations(get(meta, "annotations"), &child(path, "annotations"), errs);
    for (i, r) in arr_of(meta, "ownerReferences").iter().enumerate() {
        let p = index(&child(path, "ownerReferences"), i);
        let api_version = str_of(r, "apiVersion");
        let version = api_version.rsplit('/').next().unwrap_or("");
        if version.is_empty() {
            errs.push(FieldError::invalid(
                child(&p, "apiVersion"),
                api_version,
                "version must not be empty",
            ));
        }
        for (k, what) in [("kind", "kind"), ("name", "name"), ("uid", "uid")] {
            if str_of(r, k).is_empty() {
                errs.push(FieldError::invalid(
                    child(&p, k),
                    "",
                    format!("{what} must not be empty"),
                ));
            }
        }
    }
}

/// On update the name and namespace stay as they were.
pub(crate) fn validate_object_meta_update(meta: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    for k in ["name", "namespace"] {
        let (new, was) = (str_of(meta, k), str_of(old, k));
        if new != was {
            errs.push(FieldError::immutable(child("metadata", k), new));
        }
    }
}

/// Label keys are qualified names, values are label values; errors name the whole map's path.
pub fn validate_labels(labels: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let Some(map) = labels.and_then(Value::as_object) else {
        return;
    };
    for (k, v) in map {
        for m in is_qualified_name(k) {
            errs.push(FieldError::invalid(path, k.as_str(), m));
        }
        let v = v.as_str().unwrap_or_default();
        for m in is_valid_label_value(v) {
            errs.push(FieldError::invalid(path, v, m));
        }
    }
}

/// Annotation keys are qualified names (any case); their total size is capped.
pub fn validate_annotations(annotations: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let Some(map) = annotations.and_then(Value::as_object) else {
        return;
    };
    let mut total = 0;
    for (k, v) in map {
        for m in is_qualified_name(&k.to_ascii_lowercase()) {
            errs.push(FieldError::invalid(path, k.as_str(), m));
        }
        total += k.len() + v.as_str().map(str::len).unwrap_or(0);
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
}

/// `ValidateLabelSelector`: matchLabels as labels, each expression's operator, key and values.
pub(crate) fn validate_label_selector(sel: &Value, path: &str, errs: &mut Vec<FieldError>) {
    validate_labels(get(sel, "matchLabels"), &child(path, "matchLabels"), errs);
    for (i, expr) in arr_of(sel, "matchExpressions").iter().enumerate() {
        let p = index(&child(path, "matchExpressions"), i);
        let values = arr_of(expr, "values");
        match str_of(expr, "operator") {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        child(&p, "values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(FieldError::forbidden(
                        child(&p, "values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            op => errs.push(FieldError::invalid(
                child(&p, "operator"),
                op,
                "not a valid selector operator",
            )),
        }
        let k = str_of(expr, "key");
        for m in is_qualified_name(k) {
            errs.push(FieldError::invalid(child(&p, "key"), k, m));
        }
        for (vi, v) in values.iter().enumerate() {
            let v = v.as_str().unwrap_or_default();
            for m in is_valid_label_value(v) {
                errs.push(FieldError::invalid(index(&child(&p, "values"), vi), v, m));
            }
        }
    }
}

/// Whether a selector (JSON `LabelSelector`) has no requirements at all.
pub(crate) fn selector_is_empty(sel: &Value) -> bool {
    obj_of(sel, "matchLabels").is_none_or(|m| m.is_empty())
        && arr_of(sel, "matchExpressions").is_empty()
}
