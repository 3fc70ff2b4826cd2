//! flowcontrol.apiserver.k8s.io/v1: FlowSchema and
//! PriorityLevelConfiguration, as upstream's
//! `pkg/apis/flowcontrol/validation` (v1 rules: a nominal concurrency
//! share of 0 is allowed, `lendablePercent` 0..100). The mandatory
//! objects' specs are fixed (the `exempt` level's `exempt` numbers aside).

use serde_json::Value;

use super::{arr_of, child, get, index, int_of, str_of, sub, FieldError};
use crate::flowcontrol::{mandatory, EXEMPT, MAX_MATCHING_PRECEDENCE};
use crate::names::{is_dns1123_label, is_dns1123_subdomain};

const SUPPORTED_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "proxy",
    "update",
    "watch",
];
const NS_ERR_INTRO: &str = "each member of this list must be '*' or a DNS-1123 label; ";
const MAX_QUEUES: i64 = 10_000_000;
const MAX_HASH_BITS: f64 = 60.0;

fn strings(v: &Value, k: &str) -> Vec<String> {
    arr_of(v, k)
        .iter()
        .map(|s| s.as_str().unwrap_or_default().to_string())
        .collect()
}

fn has_wildcard(list: &[String]) -> bool {
    list.iter().any(|s| s == "*")
}

pub(crate) fn validate_flow_schema(obj: &Value, errs: &mut Vec<FieldError>) {
    let name = str_of(sub(obj, "metadata"), "name");
    let spec = sub(obj, "spec");
    let path = "spec";
    let precedence = int_of(spec, "matchingPrecedence").unwrap_or(0);
    let p = child(path, "matchingPrecedence");
    if precedence <= 0 {
        errs.push(FieldError::invalid(
            &p,
            precedence,
            "must be a positive value",
        ));
    }
    if precedence > MAX_MATCHING_PRECEDENCE {
        errs.push(FieldError::invalid(
            &p,
            precedence,
            format!("must not be greater than {MAX_MATCHING_PRECEDENCE}"),
        ));
    }
    if precedence == 1 && name != EXEMPT {
        errs.push(FieldError::invalid(
            &p,
            precedence,
            "only the schema named 'exempt' may have matchingPrecedence 1",
        ));
    }
    if let Some(m) = get(spec, "distinguisherMethod").filter(|m| !m.is_null()) {
        let t = str_of(m, "type");
        if !matches!(t, "ByUser" | "ByNamespace") {
            errs.push(FieldError::not_supported(
                child(&child(path, "distinguisherMethod"), "type"),
                t,
                &["ByNamespace", "ByUser"],
            ));
        }
    }
    let level = str_of(sub(spec, "priorityLevelConfiguration"), "name");
    let p = child(&child(path, "priorityLevelConfiguration"), "name");
    if level.is_empty() {
        errs.push(FieldError::required(&p, "must reference a priority level"));
    } else {
        for m in is_dns1123_subdomain(level) {
            errs.push(FieldError::invalid(&p, level, m));
        }
    }
    for (i, rule) in arr_of(spec, "rules").iter().enumerate() {
        validate_rule(rule, &index(&child(path, "rules"), i), errs);
    }
    if let Some(m) = mandatory("FlowSchema", name) {
        if spec != &m["spec"] {
            errs.push(FieldError::invalid(
                path,
                spec.clone(),
                format!("spec of '{name}' must equal the fixed value"),
            ));
        }
    }
    validate_conditions(obj, errs);
}

fn validate_rule(rule: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let subjects = arr_of(rule, "subjects");
    if subjects.is_empty() {
        errs.push(FieldError::required(
            child(path, "subjects"),
            "subjects must contain at least one value",
        ));
    }
    for (i, s) in subjects.iter().enumerate() {
        validate_subject(s, &index(&child(path, "subjects"), i), errs);
    }
    let resource_rules = arr_of(rule, "resourceRules");
    let non_resource_rules = arr_of(rule, "nonResourceRules");
    if resource_rules.is_empty() && non_resource_rules.is_empty() {
        errs.push(FieldError::required(
            path,
            "at least one of resourceRules and nonResourceRules has to be non-empty",
        ));
    }
    for (i, r) in resource_rules.iter().enumerate() {
        validate_resource_rule(r, &index(&child(path, "resourceRules"), i), errs);
    }
    for (i, r) in non_resource_rules.iter().enumerate() {
        validate_non_resource_rule(r, &index(&child(path, "nonResourceRules"), i), errs);
    }
}

fn present(v: &Value, k: &str) -> bool {
    get(v, k).is_some_and(|v| !v.is_null())
}

fn validate_subject(s: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let kind = str_of(s, "kind");
    let forbid = |errs: &mut Vec<FieldError>, field: &str, kind: &str| {
        if present(s, field) {
            errs.push(FieldError::forbidden(
                child(path, field),
                format!("{field} is forbidden when subject kind is not '{kind}'"),
            ));
        }
    };
    match kind {
        "ServiceAccount" => {
            let p = child(path, "serviceAccount");
            match get(s, "serviceAccount").filter(|v| !v.is_null()) {
                None => errs.push(FieldError::required(
                    &p,
                    "serviceAccount is required when subject kind is 'ServiceAccount'",
                )),
                Some(sa) => {
                    let name = str_of(sa, "name");
                    if name.is_empty() {
                        errs.push(FieldError::required(child(&p, "name"), ""));
                    } else if name != "*" {
                        for m in is_dns1123_subdomain(name) {
                            errs.push(FieldError::invalid(child(&p, "name"), name, m));
                        }
                    }
                    let ns = str_of(sa, "namespace");
                    if ns.is_empty() {
                        errs.push(FieldError::required(
                            child(&p, "namespace"),
                            "must specify namespace for service account",
                        ));
                    } else {
                        for m in is_dns1123_label(ns) {
                            errs.push(FieldError::invalid(child(&p, "namespace"), ns, m));
                        }
                    }
                }
            }
            forbid(errs, "user", "User");
            forbid(errs, "group", "Group");
        }
        "User" | "Group" => {
            let field = if kind == "User" { "user" } else { "group" };
            let p = child(path, field);
            match get(s, field).filter(|v| !v.is_null()) {
                None => errs.push(FieldError::required(
                    &p,
                    format!("{field} is required when subject kind is '{kind}'"),
                )),
                Some(v) if str_of(v, "name").is_empty() => {
                    errs.push(FieldError::required(child(&p, "name"), ""))
                }
                Some(_) => {}
            }
            forbid(errs, "serviceAccount", "ServiceAccount");
            if kind == "User" {
                forbid(errs, "group", "Group");
            } else {
                forbid(errs, "user", "User");
            }
        }
        _ => errs.push(FieldError::not_supported(
            child(path, "kind"),
            kind,
            &["Group", "ServiceAccount", "User"],
        )),
    }
}

/// Upstream's "`*` only alone" rule for a list at `p`: whether `*` is in
/// it, with an error if anything else is too (`others`: what the message
/// calls the other values).
fn wildcard_alone(list: &[String], p: &str, others: &str, errs: &mut Vec<FieldError>) -> bool {
    if !has_wildcard(list) {
        return false;
    }
    if list.len() > 1 {
        errs.push(FieldError::invalid(
            p,
            list.to_vec(),
            format!("if '*' is present, must not specify other {others}"),
        ));
    }
    true
}

fn validate_verbs(rule: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let verbs = strings(rule, "verbs");
    let p = child(path, "verbs");
    if verbs.is_empty() {
        errs.push(FieldError::required(
            &p,
            "verbs must contain at least one value",
        ));
    } else if !wildcard_alone(&verbs, &p, "verbs", errs)
        && !verbs.iter().all(|v| SUPPORTED_VERBS.contains(&v.as_str()))
    {
        errs.push(FieldError::not_supported(&p, verbs, SUPPORTED_VERBS));
    }
}

/// `resources`/`apiGroups`: required, `*` only alone.
fn validate_list(rule: &Value, path: &str, field: &str, what: &str, errs: &mut Vec<FieldError>) {
    let list = strings(rule, field);
    let p = child(path, field);
    if list.is_empty() {
        errs.push(FieldError::required(
            &p,
            format!("resource rules must supply at least one {what}"),
        ));
    } else {
        let plural = if what == "api group" {
            "api groups"
        } else {
            "resources"
        };
        wildcard_alone(&list, &p, plural, errs);
    }
}

fn validate_resource_rule(rule: &Value, path: &str, errs: &mut Vec<FieldError>) {
    validate_verbs(rule, path, errs);
    validate_list(rule, path, "apiGroups", "api group", errs);
    validate_list(rule, path, "resources", "resource", errs);
    let namespaces = strings(rule, "namespaces");
    let cluster_scope = rule.get("clusterScope").and_then(Value::as_bool) == Some(true);
    let p = child(path, "namespaces");
    if namespaces.is_empty() && !cluster_scope {
        errs.push(FieldError::required(
            &p,
            "resource rules that are not cluster scoped must supply at least one namespace",
        ));
    } else if !wildcard_alone(&namespaces, &p, "namespaces", errs) {
        for (i, ns) in namespaces.iter().enumerate() {
            for m in is_dns1123_label(ns) {
                errs.push(FieldError::invalid(
                    index(&p, i),
                    ns.as_str(),
                    format!("{NS_ERR_INTRO}{m}"),
                ));
            }
        }
    }
}

fn validate_non_resource_rule(rule: &Value, path: &str, errs: &mut Vec<FieldError>) {
    validate_verbs(rule, path, errs);
    let urls = strings(rule, "nonResourceURLs");
    let p = child(path, "nonResourceURLs");
    if urls.is_empty() {
        errs.push(FieldError::required(
            &p,
            "nonResourceURLs must contain at least one value",
        ));
    } else if !wildcard_alone(&urls, &p, "non-resource URLs", errs) {
        for (i, url) in urls.iter().enumerate() {
            if let Some(m) = non_resource_url_problem(url) {
                errs.push(FieldError::invalid(index(&p, i), url.as_str(), m));
            }
        }
    }
}

/// `ValidateNonResourceURLPath`.
fn non_resource_url_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("must not be empty");
    }
    if path == "/" {
        return None;
    }
    if !path.starts_with('/') {
        return Some("must start with slash");
    }
    if path.contains(' ') {
        return Some("must not contain white-space");
    }
    if path.contains("//") {
        return Some("must not contain double slash");
    }
    let wildcards = path.matches('*').count();
    if wildcards > 1 || (wildcards == 1 && !path.ends_with("/*")) {
        return Some("wildcard can only do suffix matching");
    }
    None
}

pub(crate) fn validate_priority_level(obj: &Value, errs: &mut Vec<FieldError>) {
    let name = str_of(sub(obj, "metadata"), "name");
    let spec = sub(obj, "spec");
    let path = "spec";
    let t = str_of(spec, "type");
    if (name == EXEMPT) != (t == "Exempt") {
        errs.push(FieldError::invalid(
            child(path, "type"),
            t,
            "type must be 'Exempt' if and only if name is 'exempt'",
        ));
    }
    match t {
        "Exempt" => {
            if present(spec, "limited") {
                errs.push(FieldError::forbidden(
                    child(path, "limited"),
                    "must be nil if the type is not Limited",
                ));
            }
            if let Some(e) = get(spec, "exempt").filter(|v| !v.is_null()) {
                validate_shares(e, &child(path, "exempt"), errs);
            }
        }
        "Limited" => {
            if present(spec, "exempt") {
                errs.push(FieldError::forbidden(
                    child(path, "exempt"),
                    "must be nil if the type is Limited",
                ));
            }
            match get(spec, "limited").filter(|v| !v.is_null()) {
                None => errs.push(FieldError::required(
                    child(path, "limited"),
                    "must not be empty when type is Limited",
                )),
                Some(l) => validate_limited(l, &child(path, "limited"), errs),
            }
        }
        _ => errs.push(FieldError::not_supported(
            child(path, "type"),
            t,
            &["Exempt", "Limited"],
        )),
    }
    if name != EXEMPT {
        if let Some(m) = mandatory("PriorityLevelConfiguration", name) {
            if spec != &m["spec"] {
                errs.push(FieldError::invalid(
                    path,
                    spec.clone(),
                    format!("spec of '{name}' must equal the fixed value"),
                ));
            }
        }
    }
    validate_conditions(obj, errs);
}

/// `nominalConcurrencyShares` and `lendablePercent`, of either type.
fn validate_shares(v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(n) = int_of(v, "nominalConcurrencyShares").filter(|n| *n < 0) {
        errs.push(FieldError::invalid(
            child(path, "nominalConcurrencyShares"),
            n,
            "must be a non-negative integer",
        ));
    }
    if let Some(p) = int_of(v, "lendablePercent").filter(|p| !(0..=100).contains(p)) {
        errs.push(FieldError::invalid(
            child(path, "lendablePercent"),
            p,
            "must be between 0 and 100, inclusive",
        ));
    }
}

fn validate_limited(l: &Value, path: &str, errs: &mut Vec<FieldError>) {
    validate_shares(l, path, errs);
    if let Some(b) = int_of(l, "borrowingLimitPercent").filter(|b| *b < 0) {
        errs.push(FieldError::invalid(
            child(path, "borrowingLimitPercent"),
            b,
            "if specified, must be a non-negative integer",
        ));
    }
    let lr = sub(l, "limitResponse");
    let path = child(path, "limitResponse");
    let t = str_of(lr, "type");
    match t {
        "Reject" => {
            if present(lr, "queuing") {
                errs.push(FieldError::forbidden(
                    child(&path, "queuing"),
                    "must be nil if limited.limitResponse.type is not Limited",
                ));
            }
        }
        "Queue" => match get(lr, "queuing").filter(|v| !v.is_null()) {
            None => errs.push(FieldError::required(
                child(&path, "queuing"),
                "must not be empty if limited.limitResponse.type is Limited",
            )),
            Some(q) => validate_queuing(q, &child(&path, "queuing"), errs),
        },
        _ => errs.push(FieldError::not_supported(
            child(&path, "type"),
            t,
            &["Queue", "Reject"],
        )),
    }
}

fn validate_queuing(q: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let limit = int_of(q, "queueLengthLimit").unwrap_or(0);
    if limit <= 0 {
        errs.push(FieldError::invalid(
            child(path, "queueLengthLimit"),
            limit,
            "must be positive",
        ));
    }
    let queues = int_of(q, "queues").unwrap_or(0);
    if queues <= 0 {
        errs.push(FieldError::invalid(
            child(path, "queues"),
            queues,
            "must be positive",
        ));
    } else if queues > MAX_QUEUES {
        errs.push(FieldError::invalid(
            child(path, "queues"),
            queues,
            format!("must not be greater than {MAX_QUEUES}"),
        ));
    }
    let hand = int_of(q, "handSize").unwrap_or(0);
    let p = child(path, "handSize");
    if hand <= 0 {
        errs.push(FieldError::invalid(&p, hand, "must be positive"));
    } else if hand > queues {
        errs.push(FieldError::invalid(
            &p,
            hand,
            format!("should not be greater than queues ({queues})"),
        ));
    } else if ((queues as f64).log2() * hand as f64).ceil() > MAX_HASH_BITS {
        errs.push(FieldError::invalid(
            &p,
            hand,
            format!(
                "required entropy bits of deckSize {queues} and handSize {hand} should not be greater than {MAX_HASH_BITS}"
            ),
        ));
    }
}

/// Condition types are required and unique.
fn validate_conditions(obj: &Value, errs: &mut Vec<FieldError>) {
    let path = "status.conditions";
    let mut seen = Vec::new();
    for (i, c) in arr_of(sub(obj, "status"), "conditions").iter().enumerate() {
        let t = str_of(c, "type");
        let p = child(&index(path, i), "type");
        if t.is_empty() {
            errs.push(FieldError::required(&p, "must not be empty"));
        } else if seen.contains(&t) {
            errs.push(FieldError::duplicate(&p, t));
        }
        seen.push(t);
    }
}

#[cfg(test)]
mod tests;
