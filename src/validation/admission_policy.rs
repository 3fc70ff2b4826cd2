//! admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy and
//! ValidatingAdmissionPolicyBinding, as upstream's
//! `ValidateValidatingAdmissionPolicy` and
//! `ValidateValidatingAdmissionPolicyBinding` check their shape: failure
//! policy, param kind, match constraints (resource rules required on a
//! policy, resource names, selectors, match policy), match conditions,
//! variables named as CEL identifiers, at least one validation or audit
//! annotation, messages on one line, reasons upstream knows; a binding's
//! policy name, param reference (name or selector, namespace, not-found
//! action) and validation actions.
//!
//! The CEL expressions themselves are compiled where CEL lives, in the
//! API server's strategy for the kind (this crate's validation does not
//! depend on the CEL module).

use std::collections::HashSet;

use serde_json::Value;

use super::admissionregistration::{
    validate_match_conditions, validate_rule, FAILURE_POLICIES, MATCH_POLICIES,
};
use super::meta::validate_label_selector;
use super::{arr_of, child, get, index, str_of, FieldError};
use crate::names::{is_dns1035_label, is_dns1123_label, is_dns1123_subdomain, is_qualified_name};

/// The reasons a validation may give (upstream's supportedValidationPolicyReason).
pub const REASONS: [&str; 4] = [
    "Forbidden",
    "Invalid",
    "RequestEntityTooLarge",
    "Unauthorized",
];
const ACTIONS: [&str; 3] = ["Audit", "Deny", "Warn"];
const NOT_FOUND_ACTIONS: [&str; 2] = ["Deny", "Allow"];
const MAX_AUDIT_ANNOTATIONS: usize = 20;
const MAX_VALUE_EXPRESSION_LEN: usize = 5 * 1024;

pub(crate) fn validate_policy(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = get(obj, "spec").unwrap_or(&Value::Null);
    let path = "spec";
    match get(spec, "failurePolicy").and_then(Value::as_str) {
        None => errs.push(FieldError::required(child(path, "failurePolicy"), "")),
        Some(p) if !FAILURE_POLICIES.contains(&p) => errs.push(FieldError::not_supported(
            child(path, "failurePolicy"),
            p,
            &FAILURE_POLICIES,
        )),
        Some(_) => {}
    }
    if let Some(pk) = get(spec, "paramKind").filter(|v| v.is_object()) {
        validate_param_kind(pk, &child(path, "paramKind"), errs);
    }
    match get(spec, "matchConstraints").filter(|v| v.is_object()) {
        None => errs.push(FieldError::required(child(path, "matchConstraints"), "")),
        Some(mc) => {
            let mc_path = child(path, "matchConstraints");
            validate_match_resources(mc, &mc_path, errs);
            if arr_of(mc, "resourceRules").is_empty() {
                errs.push(FieldError::required(child(&mc_path, "resourceRules"), ""));
            }
        }
    }
    validate_match_conditions(
        arr_of(spec, "matchConditions"),
        &child(path, "matchConditions"),
        errs,
    );
    for (i, v) in arr_of(spec, "variables").iter().enumerate() {
        let p = index(&child(path, "variables"), i);
        let name = str_of(v, "name");
        if name.trim().is_empty() {
            errs.push(FieldError::required(
                child(&p, "name"),
                "name is not specified",
            ));
        } else if !is_cel_identifier(name) {
            errs.push(FieldError::invalid(
                child(&p, "name"),
                name,
                "name is not a valid CEL identifier",
            ));
        }
        if str_of(v, "expression").trim().is_empty() {
            errs.push(FieldError::required(
                child(&p, "expression"),
                "expression is not specified",
            ));
        }
    }
    let validations = arr_of(spec, "validations");
    let annotations = arr_of(spec, "auditAnnotations");
    if validations.is_empty() && annotations.is_empty() {
        errs.push(FieldError::required(
            child(path, "validations"),
            "validations or auditAnnotations must contain at least one item",
        ));
    }
    for (i, v) in validations.iter().enumerate() {
        validate_validation(v, &index(&child(path, "validations"), i), errs);
    }
    let ann_path = child(path, "auditAnnotations");
    if annotations.len() > MAX_AUDIT_ANNOTATIONS {
        errs.push(FieldError::invalid(
            &ann_path,
            Value::Array(annotations.to_vec()),
            format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
        ));
    }
    let policy_name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut keys = HashSet::new();
    for (i, a) in annotations.iter().enumerate() {
        let p = index(&ann_path, i);
        let key = str_of(a, "key");
        if policy_name.is_empty() {
            errs.push(FieldError::invalid(
                child(&p, "key"),
                key,
                "requires metadata.name be non-empty",
            ));
        } else {
            let full = format!("{policy_name}/{key}");
            for m in is_qualified_name(&full) {
                errs.push(FieldError::invalid(child(&p, "key"), full.as_str(), m));
            }
        }
        if !keys.insert(key) {
            errs.push(FieldError::duplicate(child(&p, "key"), key));
        }
        let value = str_of(a, "valueExpression").trim();
        if value.is_empty() {
            errs.push(FieldError::required(
                child(&p, "valueExpression"),
                "valueExpression is not specified",
            ));
        } else if value.len() > MAX_VALUE_EXPRESSION_LEN {
            errs.push(FieldError::required(
                child(&p, "valueExpression"),
                format!("must not exceed {MAX_VALUE_EXPRESSION_LEN} bytes in length"),
            ));
        }
    }
}

/// Upstream's isCELIdentifier: a letter or `_`, then letters, digits, `_`,
/// and not a reserved word.
fn is_cel_identifier(name: &str) -> bool {
    const RESERVED: [&str; 18] = [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
    ];
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !RESERVED.contains(&name)
}

fn validate_validation(v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if str_of(v, "expression").trim().is_empty() {
        errs.push(FieldError::required(
            child(path, "expression"),
            "expression is not specified",
        ));
    }
    let me = str_of(v, "messageExpression");
    if !me.is_empty() && me.trim().is_empty() {
        errs.push(FieldError::invalid(
            child(path, "messageExpression"),
            me,
            "must be non-empty if specified",
        ));
    }
    let msg = str_of(v, "message");
    if !msg.is_empty() && msg.trim().is_empty() {
        errs.push(FieldError::invalid(
            child(path, "message"),
            msg,
            "message must be non-empty if specified",
        ));
    } else if msg.trim().contains(['\n', '\r']) {
        errs.push(FieldError::invalid(
            child(path, "message"),
            msg,
            "message must not contain line breaks",
        ));
    }
    if let Some(reason) = get(v, "reason").and_then(Value::as_str) {
        if !REASONS.contains(&reason) {
            errs.push(FieldError::not_supported(
                child(path, "reason"),
                reason,
                &REASONS,
            ));
        }
    }
}

fn validate_param_kind(pk: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let api_version = str_of(pk, "apiVersion");
    let av_path = child(path, "apiVersion");
    if api_version.is_empty() {
        errs.push(FieldError::required(&av_path, ""));
    } else {
        let (group, version) = match api_version.split('/').collect::<Vec<_>>()[..] {
            [v] => ("", v),
            [g, v] => (g, v),
            _ => {
                errs.push(FieldError::invalid(
                    &av_path,
                    api_version,
                    format!("unexpected GroupVersion string: {api_version}"),
                ));
                return;
            }
        };
        if !group.is_empty() {
            let m = is_dns1123_subdomain(group);
            if !m.is_empty() {
                errs.push(FieldError::invalid(&av_path, group, m.join(",")));
            }
        }
        if version.is_empty() {
            errs.push(FieldError::invalid(
                &av_path,
                api_version,
                "version must be specified",
            ));
        } else {
            let m = is_dns1035_label(version);
            if !m.is_empty() {
                errs.push(FieldError::invalid(&av_path, version, m.join(",")));
            }
        }
    }
    let kind = str_of(pk, "kind");
    if kind.is_empty() {
        errs.push(FieldError::required(child(path, "kind"), ""));
    } else {
        let m = is_dns1035_label(&kind.to_ascii_lowercase());
        if !m.is_empty() {
            errs.push(FieldError::invalid(
                child(path, "kind"),
                kind,
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    m.join(",")
                ),
            ));
        }
    }
}

fn validate_match_resources(mc: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match get(mc, "matchPolicy").and_then(Value::as_str) {
        None => errs.push(FieldError::required(child(path, "matchPolicy"), "")),
        Some(p) if !MATCH_POLICIES.contains(&p) => errs.push(FieldError::not_supported(
            child(path, "matchPolicy"),
            p,
            &MATCH_POLICIES,
        )),
        Some(_) => {}
    }
    for key in ["namespaceSelector", "objectSelector"] {
        match get(mc, key).filter(|v| v.is_object()) {
            None => errs.push(FieldError::required(child(path, key), "")),
            Some(sel) => validate_label_selector(sel, &child(path, key), errs),
        }
    }
    for key in ["resourceRules", "excludeResourceRules"] {
        for (i, rule) in arr_of(mc, key).iter().enumerate() {
            let p = index(&child(path, key), i);
            let mut names = HashSet::new();
            for (j, n) in arr_of(rule, "resourceNames").iter().enumerate() {
                let n = n.as_str().unwrap_or_default();
                let np = index(&child(&p, "resourceNames"), j);
                for m in path_segment_name(n) {
                    errs.push(FieldError::invalid(&np, n, m));
                }
                if !names.insert(n) {
                    errs.push(FieldError::duplicate(&np, n));
                }
            }
            validate_rule(rule, &p, errs);
        }
    }
}

/// Upstream's ValidatePathSegmentName: not `.` or `..`, no `/` or `%`.
fn path_segment_name(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|c| name.contains(*c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

pub(crate) fn validate_binding(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = get(obj, "spec").unwrap_or(&Value::Null);
    let path = "spec";
    let policy = str_of(spec, "policyName");
    if policy.is_empty() {
        errs.push(FieldError::required(child(path, "policyName"), ""));
    } else {
        for m in is_dns1123_subdomain(policy) {
            errs.push(FieldError::invalid(child(path, "policyName"), policy, m));
        }
    }
    if let Some(pr) = get(spec, "paramRef").filter(|v| v.is_object()) {
        validate_param_ref(pr, &child(path, "paramRef"), errs);
    }
    if let Some(mr) = get(spec, "matchResources").filter(|v| v.is_object()) {
        // Upstream's path has this spelling.
        validate_match_resources(mr, &child(path, "matchResouces"), errs);
    }
    let actions_path = child(path, "validationActions");
    let actions = arr_of(spec, "validationActions");
    let mut seen = HashSet::new();
    for (i, a) in actions.iter().enumerate() {
        let a = a.as_str().unwrap_or_default();
        if !ACTIONS.contains(&a) {
            errs.push(FieldError::not_supported(
                index(&actions_path, i),
                a,
                &ACTIONS,
            ));
        }
        if !seen.insert(a) {
            errs.push(FieldError::duplicate(index(&actions_path, i), a));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        errs.push(FieldError::invalid(
            &actions_path,
            Value::Array(actions.to_vec()),
            "must not contain both Deny and Warn (repeating the same validation failure \
             information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        errs.push(FieldError::required(
            &actions_path,
            "at least one validation action is required",
        ));
    }
}

fn validate_param_ref(pr: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let name = str_of(pr, "name");
    let selector = get(pr, "selector").filter(|v| v.is_object());
    if !name.is_empty() {
        for m in path_segment_name(name) {
            errs.push(FieldError::invalid(child(path, "name"), name, m));
        }
        if selector.is_some() {
            errs.push(FieldError::forbidden(
                child(path, "name"),
                "name and selector are mutually exclusive",
            ));
        }
    }
    let namespace = str_of(pr, "namespace");
    if !namespace.is_empty() {
        for m in is_dns1123_label(namespace) {
            errs.push(FieldError::invalid(child(path, "namespace"), namespace, m));
        }
    }
    if let Some(sel) = selector {
        validate_label_selector(sel, &child(path, "selector"), errs);
        if !name.is_empty() {
            errs.push(FieldError::forbidden(
                child(path, "selector"),
                "name and selector are mutually exclusive",
            ));
        }
    }
    if name.is_empty() && selector.is_none() {
        errs.push(FieldError::required(
            path,
            "one of name or selector must be specified",
        ));
    }
    match str_of(pr, "parameterNotFoundAction") {
        "" => errs.push(FieldError::required(
            child(path, "parameterNotFoundAction"),
            "",
        )),
        a if !NOT_FOUND_ACTIONS.contains(&a) => errs.push(FieldError::not_supported(
            child(path, "parameterNotFoundAction"),
            a,
            &NOT_FOUND_ACTIONS,
        )),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn msgs(obj: &Value, binding: bool) -> Vec<String> {
        let mut errs = Vec::new();
        if binding {
            validate_binding(obj, &mut errs);
        } else {
            validate_policy(obj, &mut errs);
        }
        errs.iter().map(FieldError::message).collect()
    }

    fn policy() -> Value {
        json!({"metadata": {"name": "demo-policy.example.com"}, "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"matchPolicy": "Equivalent", "namespaceSelector": {},
                "objectSelector": {}, "resourceRules": [{"apiGroups": ["apps"],
                "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                "resources": ["deployments"], "scope": "*"}]},
            "validations": [{"expression": "object.spec.replicas <= 5"}]}})
    }

    #[test]
    fn upstream_example_is_valid() {
        assert!(msgs(&policy(), false).is_empty());
        let binding = json!({"spec": {"policyName": "demo-policy.example.com",
            "validationActions": ["Deny"],
            "matchResources": {"matchPolicy": "Equivalent", "objectSelector": {},
                "namespaceSelector": {"matchLabels": {"environment": "test"}}}}});
        assert!(msgs(&binding, true).is_empty());
    }

    #[test]
    fn policy_errors_name_the_field() {
        let mut p = policy();
        p["spec"]["validations"] = json!([]);
        assert_eq!(
            msgs(&p, false),
            ["spec.validations: Required value: validations or auditAnnotations must contain at least one item"]
        );
        let mut p = policy();
        p["spec"]["matchConstraints"]["resourceRules"] = json!([]);
        assert_eq!(
            msgs(&p, false),
            ["spec.matchConstraints.resourceRules: Required value"]
        );
        let mut p = policy();
        p["spec"]["validations"][0]["reason"] = json!("Teapot");
        p["spec"]["validations"][0]["message"] = json!("two\nlines");
        p["spec"]["variables"] = json!([{"name": "1x", "expression": "1"}]);
        p["spec"]["paramKind"] = json!({"apiVersion": "v1"});
        assert_eq!(
            msgs(&p, false),
            [
                "spec.paramKind.kind: Required value",
                "spec.variables[0].name: Invalid value: \"1x\": name is not a valid CEL identifier",
                "spec.validations[0].message: Invalid value: \"two\\nlines\": message must not contain line breaks",
                "spec.validations[0].reason: Unsupported value: \"Teapot\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\", \"Unauthorized\"",
            ]
        );
    }

    #[test]
    fn binding_errors_name_the_field() {
        let b = json!({"spec": {"validationActions": ["Deny", "Warn"],
            "paramRef": {"name": "a", "selector": {}}}});
        assert_eq!(
            msgs(&b, true),
            [
                "spec.policyName: Required value",
                "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.parameterNotFoundAction: Required value",
                "spec.validationActions: Invalid value: []string{\"Deny\", \"Warn\"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
            ]
        );
        let b = json!({"spec": {"policyName": "p", "validationActions": [],
            "paramRef": {"parameterNotFoundAction": "Maybe"}}});
        assert_eq!(
            msgs(&b, true),
            [
                "spec.paramRef: Required value: one of name or selector must be specified",
                "spec.paramRef.parameterNotFoundAction: Unsupported value: \"Maybe\": supported values: \"Deny\", \"Allow\"",
                "spec.validationActions: Required value: at least one validation action is required",
            ]
        );
    }
}
