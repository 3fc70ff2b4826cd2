//! admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration and
//! MutatingWebhookConfiguration, as upstream's
//! `pkg/apis/admissionregistration/validation` checks them: webhook names
//! fully qualified and unique in their configuration, `v1` among the
//! AdmissionReview versions, exactly one of `url` and `service`, rules'
//! operations, groups, versions, resources (`*/*` forms) and scope,
//! `sideEffects` required (None or NoneOnDryRun), a timeout of 1 to 30 s,
//! selectors, `matchConditions` named uniquely with an expression.
//!
//! On update the relaxations upstream makes for objects stored by older
//! servers apply: a configuration whose stored webhooks already had other
//! side effects, unknown review versions or duplicate names keeps them.

use std::collections::HashSet;

use serde_json::Value;

use super::meta::validate_label_selector;
use super::{arr_of, child, get, index, str_of, ErrorKind, FieldError};
use crate::names::{is_dns1035_label, is_dns1123_subdomain, is_qualified_name, is_valid_port_num};

/// The AdmissionReview versions a webhook may name; one must be known.
const ACCEPTED_REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];
/// Side effects allowed on v1 objects (upstream's noSideEffectClasses).
const NO_SIDE_EFFECTS: [&str; 2] = ["None", "NoneOnDryRun"];
/// Every side-effect class, for objects stored before v1 required none.
const ALL_SIDE_EFFECTS: [&str; 4] = ["None", "NoneOnDryRun", "Some", "Unknown"];
pub(super) const FAILURE_POLICIES: [&str; 2] = ["Fail", "Ignore"];
pub(super) const MATCH_POLICIES: [&str; 2] = ["Equivalent", "Exact"];
const OPERATIONS: [&str; 5] = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const REINVOCATION_POLICIES: [&str; 2] = ["IfNeeded", "Never"];
const SCOPES: [&str; 3] = ["*", "Cluster", "Namespaced"];
/// Upstream's limit on a webhook's match conditions.
const MAX_MATCH_CONDITIONS: usize = 64;

/// What an update may keep of what the stored object already had.
struct Options {
    require_no_side_effects: bool,
    require_recognized_version: bool,
    require_unique_names: bool,
}

impl Options {
    fn for_update(old: Option<&Value>) -> Options {
        let Some(old) = old else {
            return Options {
                require_no_side_effects: true,
                require_recognized_version: true,
                require_unique_names: true,
            };
        };
        let hooks = arr_of(old, "webhooks");
        let mut names = HashSet::new();
        Options {
            require_no_side_effects: hooks
                .iter()
                .all(|h| NO_SIDE_EFFECTS.contains(&str_of(h, "sideEffects"))),
            require_recognized_version: hooks.iter().all(|h| {
                let versions = arr_of(h, "admissionReviewVersions");
                versions.is_empty()
                    || versions
                        .iter()
                        .any(|v| ACCEPTED_REVIEW_VERSIONS.contains(&v.as_str().unwrap_or_default()))
            }),
            require_unique_names: hooks.iter().all(|h| names.insert(str_of(h, "name"))),
        }
    }
}

/// Validates either configuration kind (`mutating`: the mutating one,
/// whose webhooks also carry a reinvocation policy).
pub(crate) fn validate_webhook_configuration(
    obj: &Value,
    old: Option<&Value>,
    mutating: bool,
    errs: &mut Vec<FieldError>,
) {
    let opts = Options::for_update(old);
    let mut names = HashSet::new();
    for (i, hook) in arr_of(obj, "webhooks").iter().enumerate() {
        let path = index("webhooks", i);
        validate_webhook(hook, &path, mutating, &opts, errs);
        validate_review_versions(
            arr_of(hook, "admissionReviewVersions"),
            &child(&path, "admissionReviewVersions"),
            opts.require_recognized_version,
            errs,
        );
        let name = str_of(hook, "name");
        if opts.require_unique_names && !name.is_empty() && !names.insert(name) {
            errs.push(FieldError::duplicate(child(&path, "name"), name));
        }
    }
}

fn validate_webhook(
    hook: &Value,
    path: &str,
    mutating: bool,
    opts: &Options,
    errs: &mut Vec<FieldError>,
) {
    validate_fully_qualified_name(str_of(hook, "name"), &child(path, "name"), errs);
    for (i, rule) in arr_of(hook, "rules").iter().enumerate() {
        validate_rule(rule, &index(&child(path, "rules"), i), errs);
    }
    one_of(hook, "failurePolicy", &FAILURE_POLICIES, path, errs);
    one_of(hook, "matchPolicy", &MATCH_POLICIES, path, errs);
    let allowed: &[&str] = if opts.require_no_side_effects {
        &NO_SIDE_EFFECTS
    } else {
        &ALL_SIDE_EFFECTS
    };
    match get(hook, "sideEffects").filter(|v| !v.is_null()) {
        None => errs.push(FieldError::required(
            child(path, "sideEffects"),
            format!("must specify one of {}", allowed.join(", ")),
        )),
        Some(_) => one_of(hook, "sideEffects", allowed, path, errs),
    }
    if let Some(t) = get(hook, "timeoutSeconds").and_then(Value::as_i64) {
        if !(1..=30).contains(&t) {
            errs.push(FieldError::invalid(
                child(path, "timeoutSeconds"),
                t,
                "the timeout value must be between 1 and 30 seconds",
            ));
        }
    }
    for sel in ["namespaceSelector", "objectSelector"] {
        if let Some(s) = get(hook, sel).filter(|v| !v.is_null()) {
            validate_label_selector(s, &child(path, sel), errs);
        }
    }
    if mutating {
        one_of(
            hook,
            "reinvocationPolicy",
            &REINVOCATION_POLICIES,
            path,
            errs,
        );
    }
    validate_client_config(
        get(hook, "clientConfig").unwrap_or(&Value::Null),
        &child(path, "clientConfig"),
        errs,
    );
    validate_match_conditions(
        arr_of(hook, "matchConditions"),
        &child(path, "matchConditions"),
        errs,
    );
}

/// A string field, when set, is one of `supported`.
fn one_of(hook: &Value, key: &str, supported: &[&str], path: &str, errs: &mut Vec<FieldError>) {
    if let Some(v) = get(hook, key).filter(|v| !v.is_null()) {
        let s = v.as_str().unwrap_or_default();
        if !supported.contains(&s) {
            errs.push(FieldError::not_supported(child(path, key), s, supported));
        }
    }
}

/// Upstream's IsFullyQualifiedName: a DNS subdomain of three labels or more.
fn validate_fully_qualified_name(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let bad = is_dns1123_subdomain(name);
    if !bad.is_empty() {
        errs.push(FieldError::invalid(path, name, bad.join(",")));
    } else if name.split('.').count() < 3 {
        errs.push(FieldError::invalid(
            path,
            name,
            "should be a domain with at least three segments separated by dots",
        ));
    }
}

fn validate_review_versions(
    versions: &[Value],
    path: &str,
    require_recognized: bool,
    errs: &mut Vec<FieldError>,
) {
    if versions.is_empty() {
        errs.push(FieldError::required(
            path,
            format!(
                "must specify one of {}",
                ACCEPTED_REVIEW_VERSIONS.join(", ")
            ),
        ));
        return;
    }
    let mut seen = HashSet::new();
    let mut known = false;
    for (i, v) in versions.iter().enumerate() {
        let v = v.as_str().unwrap_or_default();
        if !seen.insert(v) {
            errs.push(FieldError::invalid(index(path, i), v, "duplicate version"));
            continue;
        }
        for m in is_dns1035_label(v) {
            errs.push(FieldError::invalid(index(path, i), v, m));
        }
        known |= ACCEPTED_REVIEW_VERSIONS.contains(&v);
    }
    if require_recognized && !known {
        errs.push(FieldError::invalid(
            path,
            Value::Array(versions.to_vec()),
            format!(
                "must include at least one of {}",
                ACCEPTED_REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    arr_of(v, key)
        .iter()
        .map(|s| s.as_str().unwrap_or_default().to_string())
        .collect()
}

fn has_wildcard(list: &[String]) -> bool {
    list.iter().any(|s| s == "*")
}

/// A rule with operations (upstream's validateRuleWithOperations).
pub(super) fn validate_rule(rule: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let ops = strings(rule, "operations");
    let ops_path = child(path, "operations");
    if ops.is_empty() {
        errs.push(FieldError::required(&ops_path, ""));
    }
    if ops.len() > 1 && has_wildcard(&ops) {
        errs.push(FieldError::invalid(
            &ops_path,
            ops.clone(),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (i, op) in ops.iter().enumerate() {
        if !OPERATIONS.contains(&op.as_str()) {
            errs.push(FieldError::not_supported(
                index(&ops_path, i),
                op.as_str(),
                &OPERATIONS,
            ));
        }
    }
    let groups = strings(rule, "apiGroups");
    if groups.is_empty() {
        errs.push(FieldError::required(child(path, "apiGroups"), ""));
    }
    if groups.len() > 1 && has_wildcard(&groups) {
        errs.push(FieldError::invalid(
            child(path, "apiGroups"),
            groups.clone(),
            "if '*' is present, must not specify other API groups",
        ));
    }
    let versions = strings(rule, "apiVersions");
    let versions_path = child(path, "apiVersions");
    if versions.is_empty() {
        errs.push(FieldError::required(&versions_path, ""));
    }
    if versions.len() > 1 && has_wildcard(&versions) {
        errs.push(FieldError::invalid(
            &versions_path,
            versions.clone(),
            "if '*' is present, must not specify other API versions",
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        if v.is_empty() {
            errs.push(FieldError::required(index(&versions_path, i), ""));
        }
    }
    validate_resources(&strings(rule, "resources"), &child(path, "resources"), errs);
    if let Some(scope) = get(rule, "scope").and_then(Value::as_str) {
        if !SCOPES.contains(&scope) {
            errs.push(FieldError::not_supported(
                child(path, "scope"),
                scope,
                &SCOPES,
            ));
        }
    }
}

/// Resources with subresources: `x`, `x/y`, `x/*`, `*/y`, `*`, `*/*`,
/// without overlapping wildcards.
fn validate_resources(resources: &[String], path: &str, errs: &mut Vec<FieldError>) {
    if resources.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    let mut with_any_sub: HashSet<&str> = HashSet::new();
    let mut sub_of_any: HashSet<&str> = HashSet::new();
    let (mut double, mut single, mut plain) = (false, false, false);
    for (i, r) in resources.iter().enumerate() {
        if r.is_empty() {
            errs.push(FieldError::required(index(path, i), ""));
            continue;
        }
        double |= r == "*/*";
        single |= r == "*";
        let Some((res, sub)) = r.split_once('/') else {
            // As upstream: the last resource without a subresource decides.
            plain = r != "*";
            continue;
        };
        if with_any_sub.contains(res) {
            errs.push(FieldError::invalid(
                index(path, i),
                r.as_str(),
                format!("if '{res}/*' is present, must not specify {r}"),
            ));
        }
        if sub_of_any.contains(sub) {
            errs.push(FieldError::invalid(
                index(path, i),
                r.as_str(),
                format!("if '*/{sub}' is present, must not specify {r}"),
            ));
        }
        if sub == "*" {
            with_any_sub.insert(res);
        }
        if res == "*" {
            sub_of_any.insert(sub);
        }
    }
    if resources.len() > 1 && double {
        errs.push(FieldError::invalid(
            path,
            resources.to_vec(),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single && plain {
        errs.push(FieldError::invalid(
            path,
            resources.to_vec(),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
}

fn validate_client_config(cc: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let url = get(cc, "url").and_then(Value::as_str);
    let service = get(cc, "service").filter(|s| !s.is_null());
    match (url, service) {
        (Some(url), None) => validate_url(url, &child(path, "url"), errs),
        (None, Some(svc)) => validate_service(svc, &child(path, "service"), errs),
        _ => errs.push(FieldError::required(
            path,
            "exactly one of url or service is required",
        )),
    }
}

/// Upstream's ValidateWebhookURL with https forced.
fn validate_url(raw: &str, path: &str, errs: &mut Vec<FieldError>) {
    const FORM: &str = "; desired format: https://host[/path]";
    let u = match url::Url::parse(raw) {
        Ok(u) => u,
        Err(e) => {
            errs.push(FieldError::required(
                path,
                format!("url must be a valid URL: {e}{FORM}"),
            ));
            return;
        }
    };
    if u.scheme() != "https" {
        errs.push(FieldError::invalid(
            path,
            u.scheme(),
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    let host = u.host_str().unwrap_or_default();
    if host.is_empty() {
        errs.push(FieldError::invalid(
            path,
            host,
            format!("host must be provided{FORM}"),
        ));
    }
    if !u.username().is_empty() || u.password().is_some() {
        let user = match u.password() {
            Some(p) => format!("{}:{p}", u.username()),
            None => u.username().to_string(),
        };
        errs.push(FieldError::invalid(
            path,
            user,
            "user information is not permitted in the URL",
        ));
    }
    if let Some(f) = u.fragment().filter(|f| !f.is_empty()) {
        errs.push(FieldError::invalid(
            path,
            f,
            "fragments are not permitted in the URL",
        ));
    }
    if let Some(q) = u.query().filter(|q| !q.is_empty()) {
        errs.push(FieldError::invalid(
            path,
            q,
            "query parameters are not permitted in the URL",
        ));
    }
}

/// Upstream's ValidateWebhookService: name, namespace, port, and a path of
/// DNS-subdomain segments.
fn validate_service(svc: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if str_of(svc, "name").is_empty() {
        errs.push(FieldError::required(
            child(path, "name"),
            "service name is required",
        ));
    }
    if str_of(svc, "namespace").is_empty() {
        errs.push(FieldError::required(
            child(path, "namespace"),
            "service namespace is required",
        ));
    }
    let port = get(svc, "port").and_then(Value::as_i64).unwrap_or(443);
    let bad = is_valid_port_num(port);
    if !bad.is_empty() {
        errs.push(FieldError::invalid(
            child(path, "port"),
            port,
            format!("port is not valid: {}", bad.join(", ")),
        ));
    }
    let Some(url_path) = get(svc, "path").and_then(Value::as_str) else {
        return;
    };
    let path_field = child(path, "path");
    if url_path.is_empty() || url_path == "/" {
        return;
    }
    if url_path == "//" {
        errs.push(FieldError::invalid(
            &path_field,
            url_path,
            "segment[0] may not be empty",
        ));
        return;
    }
    if !url_path.starts_with('/') {
        errs.push(FieldError::invalid(
            &path_field,
            url_path,
            "must start with a '/'",
        ));
    }
    let rest = url_path.get(1..).unwrap_or_default();
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    for (i, step) in rest.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(
                &path_field,
                url_path,
                format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for m in is_dns1123_subdomain(step) {
            errs.push(FieldError::invalid(
                &path_field,
                url_path,
                format!("segment[{i}]: {m}"),
            ));
        }
    }
}

/// Names unique and qualified, expressions non-empty. The expressions are
/// not compiled here: CEL is checked where it is evaluated.
pub(super) fn validate_match_conditions(conds: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    if conds.len() > MAX_MATCH_CONDITIONS {
        errs.push(FieldError {
            field: path.to_string(),
            kind: ErrorKind::TooMany,
            bad_value: Some(conds.len().into()),
            detail: format!("must have at most {MAX_MATCH_CONDITIONS} items"),
        });
    }
    let mut names = HashSet::new();
    for (i, c) in conds.iter().enumerate() {
        let p = index(path, i);
        if str_of(c, "expression").trim().is_empty() {
            errs.push(FieldError::required(child(&p, "expression"), ""));
        }
        let name = str_of(c, "name");
        if name.is_empty() {
            errs.push(FieldError::required(child(&p, "name"), ""));
        } else {
            for m in is_qualified_name(name) {
                errs.push(FieldError::invalid(child(&p, "name"), name, m));
            }
            if !names.insert(name) {
                errs.push(FieldError::duplicate(child(&p, "name"), name));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn hook() -> Value {
        json!({
            "name": "deny.example.com",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "clientConfig": {"service": {"namespace": "ns", "name": "svc", "port": 443}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["configmaps"], "scope": "*"}],
        })
    }

    fn errors(hooks: Vec<Value>, mutating: bool) -> Vec<String> {
        let mut errs = Vec::new();
        validate_webhook_configuration(&json!({ "webhooks": hooks }), None, mutating, &mut errs);
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn a_good_webhook_passes() {
        assert_eq!(errors(vec![hook()], true), Vec::<String>::new());
    }

    #[test]
    fn each_bad_field_is_named() {
        let mut h = hook();
        h["name"] = json!("deny");
        h["sideEffects"] = json!("Some");
        h["timeoutSeconds"] = json!(31);
        h["admissionReviewVersions"] = json!(["v2"]);
        h["clientConfig"] = json!({"url": "http://u:p@x/hook?q=1#f", "service": null});
        h["rules"][0]["resources"] = json!(["*/*", "pods"]);
        h["rules"][0]["operations"] = json!(["*", "PATCH"]);
        h["matchConditions"] =
            json!([{"name": "a", "expression": " "}, {"name": "a", "expression": "true"}]);
        let errs = errors(vec![h], false);
        let fields: Vec<&str> = errs
            .iter()
            .map(|e| e.split(':').next().unwrap_or_default())
            .collect();
        for want in [
            "webhooks[0].name",
            "webhooks[0].sideEffects",
            "webhooks[0].timeoutSeconds",
            "webhooks[0].admissionReviewVersions",
            "webhooks[0].clientConfig.url",
            "webhooks[0].rules[0].resources",
            "webhooks[0].rules[0].operations",
            "webhooks[0].rules[0].operations[1]",
            "webhooks[0].matchConditions[0].expression",
            "webhooks[0].matchConditions[1].name",
        ] {
            assert!(fields.contains(&want), "{want} missing from {errs:#?}");
        }
        assert!(errs
            .iter()
            .any(|e| e.contains("'https' is the only allowed URL scheme")));
        assert!(errs
            .iter()
            .any(|e| e.contains("query parameters are not permitted")));
        assert!(errs
            .iter()
            .any(|e| e.contains("fragments are not permitted")));
        assert!(errs
            .iter()
            .any(|e| e.contains("user information is not permitted")));
    }

    #[test]
    fn names_unique_and_one_client() {
        let mut two = hook();
        two["clientConfig"] = json!({});
        let errs = errors(vec![hook(), two], true);
        assert!(errs
            .iter()
            .any(|e| e.starts_with("webhooks[1].name: Duplicate value")));
        assert!(errs.iter().any(|e| e.contains(
            "webhooks[1].clientConfig: Required value: exactly one of url or service is required"
        )));
    }

    #[test]
    fn side_effects_required_and_kept_on_update() {
        let mut h = hook();
        h.as_object_mut().unwrap().remove("sideEffects");
        let errs = errors(vec![h], false);
        assert_eq!(
            errs,
            ["webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"]
        );
        let mut old = hook();
        old["sideEffects"] = json!("Some");
        let obj = json!({"webhooks": [old.clone()]});
        let mut errs = Vec::new();
        validate_webhook_configuration(&obj, Some(&json!({"webhooks": [old]})), false, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
    }

    #[test]
    fn resource_wildcards() {
        let check = |rs: &[&str]| {
            let mut errs = Vec::new();
            let rs: Vec<String> = rs.iter().map(|s| s.to_string()).collect();
            validate_resources(&rs, "r", &mut errs);
            errs.len()
        };
        assert_eq!(check(&["*/*"]), 0);
        assert_eq!(check(&["*", "pods/status"]), 0);
        assert_eq!(check(&["pods/*", "pods/status"]), 1);
        assert_eq!(check(&["*/status", "pods/status"]), 1);
        assert_eq!(check(&["*", "pods"]), 1);
        assert_eq!(check(&[]), 1);
    }
}
