//! ResourceQuota and LimitRange, as upstream's `ValidateResourceQuota`
//! and `ValidateLimitRange`.

use serde_json::Value;

use super::container::validate_quantity;
use super::{sub, FieldError};
use crate::quantity::parse_quantity;

/// The scopes a quota may name (upstream's `ResourceQuotaScope` values).
pub const QUOTA_SCOPES: [&str; 6] = [
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
];

/// `spec.hard` (and `status.hard`/`status.used`): quantities ≥ 0, whole
/// numbers for object counts; `spec.scopes` known and not conflicting.
pub(super) fn validate_resource_quota(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = sub(obj, "spec");
    for (path, list) in [
        ("spec.hard", sub(spec, "hard")),
        ("status.hard", sub(sub(obj, "status"), "hard")),
        ("status.used", sub(sub(obj, "status"), "used")),
    ] {
        let Some(map) = list.as_object() else {
            continue;
        };
        for (k, v) in map {
            let p = format!("{path}[{k}]");
            let Some(q) = v.as_str() else { continue };
            if validate_quantity(q, &p, errs) && crate::quota::is_integer_resource(k) {
                if let Ok(parsed) = parse_quantity(q) {
                    if parsed.millis() % 1000 != 0 {
                        errs.push(FieldError::invalid(&p, q, "must be an integer"));
                    }
                }
            }
        }
    }
    let scopes: Vec<&str> = sub(spec, "scopes")
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (i, s) in scopes.iter().enumerate() {
        if !QUOTA_SCOPES.contains(s) {
            errs.push(FieldError::not_supported(
                format!("spec.scopes[{i}]"),
                *s,
                &QUOTA_SCOPES,
            ));
        }
    }
    let has = |s: &str| scopes.contains(&s);
    if (has("BestEffort") && has("NotBestEffort")) || (has("Terminating") && has("NotTerminating"))
    {
        errs.push(FieldError::invalid(
            "spec.scopes",
            sub(spec, "scopes").clone(),
            "conflicting scopes",
        ));
    }
}

const LIMIT_TYPES: [&str; 3] = ["Pod", "Container", "PersistentVolumeClaim"];

/// `spec.limits[*]`: a known type, quantities, and min ≤ defaultRequest ≤
/// default ≤ max as upstream words it.
pub(super) fn validate_limit_range(spec: &Value, errs: &mut Vec<FieldError>) {
    let Some(limits) = sub(spec, "limits").as_array() else {
        return;
    };
    for (i, item) in limits.iter().enumerate() {
        let path = format!("spec.limits[{i}]");
        let ty = sub(item, "type").as_str().unwrap_or("");
        if ty.is_empty() {
            errs.push(FieldError::required(format!("{path}.type"), ""));
        } else if !LIMIT_TYPES.contains(&ty) {
            errs.push(FieldError::not_supported(
                format!("{path}.type"),
                ty,
                &LIMIT_TYPES,
            ));
        }
        let field = |name: &str| -> Vec<(String, String)> {
            sub(item, name)
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut parsed = std::collections::BTreeMap::new();
        for name in [
            "max",
            "min",
            "default",
            "defaultRequest",
            "maxLimitRequestRatio",
        ] {
            for (k, q) in field(name) {
                let p = format!("{path}.{name}[{k}]");
                if validate_quantity(&q, &p, errs) {
                    parsed.insert((name, k), parse_quantity(&q).expect("checked"));
                }
            }
        }
        if ty == "Pod" {
            for name in ["default", "defaultRequest"] {
                if !field(name).is_empty() {
                    errs.push(FieldError::forbidden(
                        format!("{path}.{name}"),
                        "may not be specified when `type` is 'Pod'",
                    ));
                }
            }
        }
        let get = |name: &'static str, k: &str| parsed.get(&(name, k.to_string()));
        let keys: std::collections::BTreeSet<String> =
            parsed.keys().map(|(_, k)| k.clone()).collect();
        for k in &keys {
            let (min, max) = (get("min", k), get("max", k));
            let (def, def_req) = (get("default", k), get("defaultRequest", k));
            if let (Some(min), Some(max)) = (min, max) {
                if min > max {
                    errs.push(FieldError::invalid(
                        format!("{path}.min[{k}]"),
                        min.to_string(),
                        format!("min value {min} is greater than max value {max}"),
                    ));
                }
            }
            if let (Some(req), Some(def)) = (def_req, def) {
                if req > def {
                    errs.push(FieldError::invalid(
                        format!("{path}.defaultRequest[{k}]"),
                        req.to_string(),
                        format!(
                            "default request value {req} is greater than default limit value {def}"
                        ),
                    ));
                }
            }
            if let (Some(req), Some(max)) = (def_req, max) {
                if req > max {
                    errs.push(FieldError::invalid(
                        format!("{path}.defaultRequest[{k}]"),
                        req.to_string(),
                        format!("default request value {req} is greater than max value {max}"),
                    ));
                }
            }
            if let (Some(min), Some(req)) = (min, def_req) {
                if min > req {
                    errs.push(FieldError::invalid(
                        format!("{path}.defaultRequest[{k}]"),
                        req.to_string(),
                        format!("min value {min} is greater than default request value {req}"),
                    ));
                }
            }
            if let (Some(def), Some(max)) = (def, max) {
                if def > max {
                    errs.push(FieldError::invalid(
                        format!("{path}.default[{k}]"),
                        def.to_string(),
                        format!("default value {def} is greater than max value {max}"),
                    ));
                }
            }
            if let (Some(min), Some(def)) = (min, def) {
                if min > def {
                    errs.push(FieldError::invalid(
                        format!("{path}.default[{k}]"),
                        def.to_string(),
                        format!("min value {min} is greater than default value {def}"),
                    ));
                }
            }
            if let Some(ratio) = get("maxLimitRequestRatio", k) {
                if ratio.millis() < 1000 {
                    errs.push(FieldError::invalid(
                        format!("{path}.maxLimitRequestRatio[{k}]"),
                        ratio.to_string(),
                        "ratio must be greater than or equal to 1",
                    ));
                }
            }
        }
    }
}
