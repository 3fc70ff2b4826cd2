//! coordination.k8s.io/v1: Lease (`ValidateLeaseSpec`).

use serde_json::Value;

use super::{child, int_of, nonnegative, FieldError};

pub(crate) fn validate_lease_spec(spec: &Value, errs: &mut Vec<FieldError>) {
    if let Some(d) = int_of(spec, "leaseDurationSeconds") {
        if d <= 0 {
            errs.push(FieldError::invalid(
                child("spec", "leaseDurationSeconds"),
                d,
                "must be greater than 0",
            ));
        }
    }
    nonnegative(errs, spec, "leaseTransitions", "spec");
}
