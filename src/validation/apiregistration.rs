//! apiregistration.k8s.io/v1: APIService, as kube-aggregator's
//! `ValidateAPIService` (the same checks on create and update).

use serde_json::Value;

use super::{get, int_of, str_of, sub, FieldError};
use crate::names::{is_dns1035_label, is_dns1123_subdomain, is_valid_port_num};

/// The name an APIService must have: `VERSION.GROUP` (`v1.` for the core group).
pub fn api_service_name(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

pub(crate) fn validate_api_service(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = sub(obj, "spec");
    let (group, version) = (str_of(spec, "group"), str_of(spec, "version"));
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let required = api_service_name(group, version);
    // The path-segment check of the name ran with the metadata; only a name
    // that passed it is compared with the one the spec asks for.
    if !name.is_empty()
        && !name.contains(['/', '%'])
        && name != "."
        && name != ".."
        && name != required
    {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            format!("must be `spec.version+\".\"+spec.group`: \"{required}\""),
        ));
    }
    if group.is_empty() && version != "v1" {
        errs.push(FieldError::required(
            "spec.group",
            "only v1 may have an empty group and it better be legacy kube",
        ));
    }
    if !group.is_empty() {
        for m in is_dns1123_subdomain(group) {
            errs.push(FieldError::invalid("spec.group", group, m));
        }
    }
    for m in is_dns1035_label(version) {
        errs.push(FieldError::invalid("spec.version", version, m));
    }
    let group_min = int_of(spec, "groupPriorityMinimum").unwrap_or(0);
    if !(1..=20000).contains(&group_min) {
        errs.push(FieldError::invalid(
            "spec.groupPriorityMinimum",
            group_min,
            "must be positive and less than 20000",
        ));
    }
    let version_priority = int_of(spec, "versionPriority").unwrap_or(0);
    if !(1..=1000).contains(&version_priority) {
        errs.push(FieldError::invalid(
            "spec.versionPriority",
            version_priority,
            "must be positive and less than 1000",
        ));
    }
    let ca_bundle = str_of(spec, "caBundle");
    let insecure = get(spec, "insecureSkipTLSVerify")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let Some(service) = get(spec, "service").filter(|s| s.is_object()) else {
        if !ca_bundle.is_empty() {
            errs.push(FieldError::invalid(
                "spec.caBundle",
                format!("{} bytes", decoded_len(ca_bundle)),
                "local APIServices may not have a caBundle",
            ));
        }
        if insecure {
            errs.push(FieldError::invalid(
                "spec.insecureSkipTLSVerify",
                insecure,
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
        return;
    };
    for k in ["namespace", "name"] {
        if str_of(service, k).is_empty() {
            errs.push(FieldError::required(format!("spec.service.{k}"), ""));
        }
    }
    let port = int_of(service, "port").unwrap_or(443);
    let port_errs = is_valid_port_num(port);
    if !port_errs.is_empty() {
        errs.push(FieldError::invalid(
            "spec.service.port",
            port,
            format!("port is not valid: {}", port_errs.join(", ")),
        ));
    }
    if insecure && !ca_bundle.is_empty() {
        errs.push(FieldError::invalid(
            "spec.insecureSkipTLSVerify",
            insecure,
            "may not be true if caBundle is present",
        ));
    }
}

/// The length of a base64 `[]byte` field once decoded (as Go counts it).
fn decoded_len(b64: &str) -> usize {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map(|b| b.len())
        .unwrap_or(b64.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(obj: Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate_api_service(&obj, &mut errs);
        errs.iter().map(|e| e.field.clone()).collect()
    }

    fn service(name: &str, spec: Value) -> Value {
        json!({"metadata": {"name": name}, "spec": spec})
    }

    #[test]
    fn a_registered_service_passes() {
        let ok = service(
            "v1.demo.bosun.dev",
            json!({"group": "demo.bosun.dev", "version": "v1", "groupPriorityMinimum": 1000,
                   "versionPriority": 15, "service": {"namespace": "default", "name": "demo", "port": 443},
                   "insecureSkipTLSVerify": true}),
        );
        assert!(errors(ok).is_empty());
        let core = service(
            "v1.",
            json!({"group": "", "version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1}),
        );
        assert!(errors(core).is_empty());
    }

    #[test]
    fn names_priorities_and_tls_are_checked_as_upstream() {
        let bad = service(
            "v1.other",
            json!({"group": "demo.bosun.dev", "version": "V1", "groupPriorityMinimum": 0,
                   "versionPriority": 1001, "service": {"namespace": "", "name": "demo", "port": 70000},
                   "insecureSkipTLSVerify": true, "caBundle": "YWJj"}),
        );
        assert_eq!(
            errors(bad),
            [
                "metadata.name",
                "spec.version",
                "spec.groupPriorityMinimum",
                "spec.versionPriority",
                "spec.service.namespace",
                "spec.service.port",
                "spec.insecureSkipTLSVerify",
            ]
        );
        let local = service(
            "v2.",
            json!({"group": "", "version": "v2", "groupPriorityMinimum": 1, "versionPriority": 1,
                   "caBundle": "YWJj", "insecureSkipTLSVerify": true}),
        );
        assert_eq!(
            errors(local),
            ["spec.group", "spec.caBundle", "spec.insecureSkipTLSVerify"]
        );
    }
}
