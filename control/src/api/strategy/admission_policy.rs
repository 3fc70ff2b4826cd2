//! ValidatingAdmissionPolicy: besides the shared validation of its shape,
//! every CEL expression must compile (upstream's validation compiles them
//! too), the error naming the field:
//! `spec.validations[0].expression: Invalid value: "...": compilation
//! failed: ERROR: <input>:1:...`.

use bosun::validation::FieldError;
use serde_json::Value;

use super::{ApiOptions, Strategy};

pub struct ValidatingAdmissionPolicyStrategy;

impl Strategy for ValidatingAdmissionPolicyStrategy {
    fn validate(
        &self,
        _options: &ApiOptions,
        obj: &Value,
        _old: Option<&Value>,
    ) -> Vec<FieldError> {
        crate::api::admission::policy::configs::check_expressions(obj)
    }
}
