//! policy/v1: PodDisruptionBudget (`ValidatePodDisruptionBudget` and the
//! status checks of `ValidatePodDisruptionBudgetStatusUpdate`).

use serde_json::Value;

use super::apps::{not_more_than_100_percent, validate_positive_int_or_percent};
use super::meta::validate_label_selector;
use super::{child, get, nonnegative, str_of, sub, FieldError};

/// The values `spec.unhealthyPodEvictionPolicy` may take.
pub const UNHEALTHY_POD_EVICTION_POLICIES: [&str; 2] = ["AlwaysAllow", "IfHealthyBudget"];

pub(crate) fn validate_pdb(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = sub(obj, "spec");
    let min = get(spec, "minAvailable").filter(|v| !v.is_null());
    let max = get(spec, "maxUnavailable").filter(|v| !v.is_null());
    if min.is_some() && max.is_some() {
        errs.push(FieldError::invalid(
            "spec",
            spec.clone(),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for (field, v) in [("minAvailable", min), ("maxUnavailable", max)] {
        let path = child("spec", field);
        validate_positive_int_or_percent(v, &path, errs);
        not_more_than_100_percent(v, &path, errs);
    }
    if let Some(sel) = get(spec, "selector").filter(|v| !v.is_null()) {
        validate_label_selector(sel, "spec.selector", errs);
    }
    let policy = str_of(spec, "unhealthyPodEvictionPolicy");
    if get(spec, "unhealthyPodEvictionPolicy").is_some_and(|v| !v.is_null())
        && !UNHEALTHY_POD_EVICTION_POLICIES.contains(&policy)
    {
        errs.push(FieldError::not_supported(
            "spec.unhealthyPodEvictionPolicy",
            policy,
            &UNHEALTHY_POD_EVICTION_POLICIES,
        ));
    }
    let status = sub(obj, "status");
    for k in [
        "disruptionsAllowed",
        "currentHealthy",
        "desiredHealthy",
        "expectedPods",
    ] {
        nonnegative(errs, status, k, "status");
    }
}
