//! networking.k8s.io/v1 Ingress and IngressClass, as upstream's
//! `pkg/apis/networking/validation` checks them: a backend is a service
//! XOR a resource, `pathType` is required, `Exact`/`Prefix` paths are
//! absolute and clean, hosts are DNS names (`*.` wildcards allowed), TLS
//! hosts likewise.

use serde_json::Value;

use super::{arr_of, child, get, index, int_of, str_of, sub, FieldError};
use crate::names::{
    is_dns1035_label, is_dns1123_subdomain, is_valid_path_segment_name, is_valid_port_name,
    is_valid_port_num, max_len_error, regex_error, DNS1123_SUBDOMAIN_MAX,
};

/// The path types upstream supports, sorted as its NotSupported lists them.
pub const PATH_TYPES: [&str; 3] = ["Exact", "ImplementationSpecific", "Prefix"];

const INVALID_PATH_SEQUENCES: [&str; 5] = ["//", "/./", "/../", "%2f", "%2F"];
const INVALID_PATH_SUFFIXES: [&str; 2] = ["/..", "/."];

const WILDCARD_FMT: &str = "\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const WILDCARD_ERR: &str = "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character";

/// Upstream's IsWildcardDNS1123Subdomain: `*.` then a DNS subdomain.
pub fn is_wildcard_dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    let ok = s
        .strip_prefix("*.")
        .is_some_and(|rest| is_dns1123_subdomain(rest).is_empty());
    if !ok {
        errs.push(regex_error(WILDCARD_ERR, WILDCARD_FMT, &["*.example.com"]));
    }
    errs
}

fn host_errors(host: &str) -> Vec<String> {
    if host.contains('*') {
        is_wildcard_dns1123_subdomain(host)
    } else {
        is_dns1123_subdomain(host)
    }
}

pub(crate) fn validate_ingress(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = sub(obj, "spec");
    let rules = arr_of(spec, "rules");
    let default_backend = get(spec, "defaultBackend").filter(|b| !b.is_null());
    if rules.is_empty() && default_backend.is_none() {
        // Upstream shows `[]networking.IngressRule(nil)`, Go's nil slice.
        errs.push(FieldError::invalid(
            "spec",
            Value::Null,
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(b) = default_backend {
        validate_backend(b, "spec.defaultBackend", errs);
    }
    for (i, rule) in rules.iter().enumerate() {
        let path = index("spec.rules", i);
        let host = str_of(rule, "host");
        if !host.is_empty() {
            if host.parse::<std::net::IpAddr>().is_ok() {
                errs.push(FieldError::invalid(
                    child(&path, "host"),
                    host,
                    "must be a DNS name, not an IP address",
                ));
            }
            for m in host_errors(host) {
                errs.push(FieldError::invalid(child(&path, "host"), host, m));
            }
        }
        if let Some(http) = get(rule, "http").filter(|h| !h.is_null()) {
            let http_path = child(&path, "http");
            let paths = arr_of(http, "paths");
            if paths.is_empty() {
                errs.push(FieldError::required(child(&http_path, "paths"), ""));
            }
            for (j, p) in paths.iter().enumerate() {
                validate_http_path(p, &index(&child(&http_path, "paths"), j), errs);
            }
        }
    }
    for (i, tls) in arr_of(spec, "tls").iter().enumerate() {
        let path = index("spec.tls", i);
        for (j, host) in arr_of(tls, "hosts").iter().enumerate() {
            let host = host.as_str().unwrap_or("");
            for m in host_errors(host) {
                errs.push(FieldError::invalid(
                    index(&child(&path, "hosts"), j),
                    host,
                    m,
                ));
            }
        }
        let secret = str_of(tls, "secretName");
        if !secret.is_empty() {
            for m in is_dns1123_subdomain(secret) {
                errs.push(FieldError::invalid(child(&path, "secretName"), secret, m));
            }
        }
    }
    if let Some(class) = get(spec, "ingressClassName").and_then(Value::as_str) {
        for m in is_dns1123_subdomain(class) {
            errs.push(FieldError::invalid("spec.ingressClassName", class, m));
        }
    }
}

fn validate_http_path(p: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let value = str_of(p, "path");
    let field = child(path, "path");
    match get(p, "pathType").and_then(Value::as_str) {
        None => {
            errs.push(FieldError::required(
                child(path, "pathType"),
                "pathType must be specified",
            ));
            return;
        }
        Some("Exact" | "Prefix") => {
            if !value.starts_with('/') {
                errs.push(FieldError::invalid(
                    &field,
                    value,
                    "must be an absolute path",
                ));
            }
            if !value.is_empty() {
                for seq in INVALID_PATH_SEQUENCES {
                    if value.contains(seq) {
                        errs.push(FieldError::invalid(
                            &field,
                            value,
                            format!("must not contain '{seq}'"),
                        ));
                    }
                }
                for suffix in INVALID_PATH_SUFFIXES {
                    if value.ends_with(suffix) {
                        errs.push(FieldError::invalid(
                            &field,
                            value,
                            format!("cannot end with '{suffix}'"),
                        ));
                    }
                }
            }
        }
        Some("ImplementationSpecific") => {
            if !value.is_empty() && !value.starts_with('/') {
                errs.push(FieldError::invalid(
                    &field,
                    value,
                    "must be an absolute path",
                ));
            }
        }
        Some(other) => errs.push(FieldError::not_supported(
            child(path, "pathType"),
            other,
            &PATH_TYPES,
        )),
    }
    validate_backend(sub(p, "backend"), &child(path, "backend"), errs);
}

fn validate_backend(b: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let resource = get(b, "resource").filter(|r| !r.is_null());
    let service = get(b, "service").filter(|s| !s.is_null());
    match (resource, service) {
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            path,
            "",
            "cannot set both resource and service backends",
        )),
        (Some(r), None) => {
            let rpath = child(path, "resource");
            for k in ["kind", "name"] {
                let v = str_of(r, k);
                if v.is_empty() {
                    errs.push(FieldError::required(child(&rpath, k), ""));
                } else {
                    for m in is_valid_path_segment_name(v) {
                        errs.push(FieldError::invalid(child(&rpath, k), v, m));
                    }
                }
            }
            if let Some(g) = get(r, "apiGroup").and_then(Value::as_str) {
                for m in is_dns1123_subdomain(g) {
                    errs.push(FieldError::invalid(child(&rpath, "apiGroup"), g, m));
                }
            }
        }
        (None, Some(s)) => {
            let name = str_of(s, "name");
            if name.is_empty() {
                errs.push(FieldError::required(format!("{path}.service.name"), ""));
            } else {
                for m in is_dns1035_label(name) {
                    errs.push(FieldError::invalid(format!("{path}.service.name"), name, m));
                }
            }
            let port = sub(s, "port");
            let port_name = str_of(port, "name");
            let number = int_of(port, "number").unwrap_or(0);
            if !port_name.is_empty() && number != 0 {
                errs.push(FieldError::invalid(
                    path,
                    "",
                    "cannot set both port name & port number",
                ));
            } else if !port_name.is_empty() {
                for m in is_valid_port_name(port_name) {
                    errs.push(FieldError::invalid(
                        format!("{path}.service.port.name"),
                        port_name,
                        m,
                    ));
                }
            } else if number != 0 {
                for m in is_valid_port_num(number) {
                    errs.push(FieldError::invalid(
                        format!("{path}.service.port.number"),
                        number,
                        m,
                    ));
                }
            } else {
                errs.push(FieldError::required(
                    path,
                    "port name or number is required",
                ));
            }
        }
        (None, None) => errs.push(FieldError::invalid(
            path,
            "",
            "resource or service backend is required",
        )),
    }
}

const MAX_CONTROLLER_LEN: usize = 250;

pub(crate) fn validate_ingress_class(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let spec = sub(obj, "spec");
    let controller = str_of(spec, "controller");
    if controller.is_empty() {
        errs.push(FieldError::required("spec.controller", ""));
    } else if controller.len() > MAX_CONTROLLER_LEN {
        errs.push(FieldError::too_long("spec.controller", MAX_CONTROLLER_LEN));
    } else {
        domain_prefixed_path("spec.controller", controller, errs);
    }
    if let Some(old) = old {
        let before = str_of(sub(old, "spec"), "controller");
        if before != controller {
            errs.push(FieldError::immutable("spec.controller", controller));
        }
    }
    if let Some(p) = get(spec, "parameters").filter(|p| !p.is_null()) {
        let path = "spec.parameters";
        for k in ["kind", "name"] {
            let v = str_of(p, k);
            if v.is_empty() {
                errs.push(FieldError::required(child(path, k), ""));
            } else {
                for m in is_valid_path_segment_name(v) {
                    errs.push(FieldError::invalid(child(path, k), v, m));
                }
            }
        }
        if let Some(g) = get(p, "apiGroup").and_then(Value::as_str) {
            for m in is_dns1123_subdomain(g) {
                errs.push(FieldError::invalid(child(path, "apiGroup"), g, m));
            }
        }
        let namespace = get(p, "namespace").and_then(Value::as_str);
        match get(p, "scope").and_then(Value::as_str) {
            None => errs.push(FieldError::required(child(path, "scope"), "")),
            Some("Namespace") => match namespace {
                None | Some("") => errs.push(FieldError::required(
                    child(path, "namespace"),
                    "`parameters.scope` is set to 'Namespace'",
                )),
                Some(ns) => {
                    for m in crate::names::is_dns1123_label(ns) {
                        errs.push(FieldError::invalid(child(path, "namespace"), ns, m));
                    }
                }
            },
            Some("Cluster") => {
                if namespace.is_some() {
                    errs.push(FieldError::forbidden(
                        child(path, "namespace"),
                        "`parameters.scope` is set to 'Cluster'",
                    ));
                }
            }
            Some(other) => errs.push(FieldError::not_supported(
                child(path, "scope"),
                other,
                &["Cluster", "Namespace"],
            )),
        }
    }
}

/// Upstream's IsDomainPrefixedPath: `example.com/path`.
fn domain_prefixed_path(field: &str, value: &str, errs: &mut Vec<FieldError>) {
    let Some((host, path)) = value
        .split_once('/')
        .filter(|(h, p)| !h.is_empty() && !p.is_empty())
    else {
        errs.push(FieldError::invalid(
            field,
            value,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        ));
        return;
    };
    for m in is_dns1123_subdomain(host) {
        errs.push(FieldError::invalid(field, host, m));
    }
    let path_ok = path
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&c));
    if !path_ok {
        errs.push(FieldError::invalid(field, path, "Invalid path"));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ingress_errors(spec: Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate_ingress(&json!({ "spec": spec }), &mut errs);
        errs.iter().map(|e| e.to_string()).collect()
    }

    fn svc() -> Value {
        json!({"service": {"name": "web", "port": {"number": 80}}})
    }

    fn one_path(path: Value) -> Value {
        json!({"rules": [{"host": "a.example.com", "http": {"paths": [path]}}]})
    }

    #[test]
    fn upstream_cases() {
        let cases: Vec<(Value, &str)> = vec![
            (json!({}), "spec: Invalid value: null: either `defaultBackend` or `rules` must be specified"),
            (one_path(json!({"path": "/", "backend": svc()})), "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified"),
            (one_path(json!({"path": "foo", "pathType": "Prefix", "backend": svc()})), "spec.rules[0].http.paths[0].path: Invalid value: \"foo\": must be an absolute path"),
            (one_path(json!({"path": "/foo//bar", "pathType": "Exact", "backend": svc()})), "must not contain '//'"),
            (one_path(json!({"path": "/foo/..", "pathType": "Exact", "backend": svc()})), "cannot end with '/..'"),
            (one_path(json!({"path": "foo", "pathType": "ImplementationSpecific", "backend": svc()})), "must be an absolute path"),
            (one_path(json!({"path": "/", "pathType": "Regex", "backend": svc()})), "spec.rules[0].http.paths[0].pathType: Unsupported value: \"Regex\""),
            (one_path(json!({"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}, "resource": {"kind": "Bucket", "name": "b"}}})), "spec.rules[0].http.paths[0].backend: Invalid value: \"\": cannot set both resource and service backends"),
            (one_path(json!({"path": "/", "pathType": "Prefix", "backend": {}})), "resource or service backend is required"),
            (one_path(json!({"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {}}}})), "spec.rules[0].http.paths[0].backend: Required value: port name or number is required"),
            (one_path(json!({"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"name": "http", "number": 80}}}})), "cannot set both port name & port number"),
            (json!({"rules": [{"host": "1.2.3.4", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": svc()}]}}]}), "spec.rules[0].host: Invalid value: \"1.2.3.4\": must be a DNS name, not an IP address"),
            (json!({"rules": [{"host": "*", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": svc()}]}}]}), "a wildcard DNS-1123 subdomain must start with '*.'"),
            (json!({"rules": [{"host": "foo.*.com", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": svc()}]}}]}), "spec.rules[0].host: Invalid value: \"foo.*.com\""),
            (json!({"defaultBackend": svc(), "tls": [{"hosts": ["*.*.example.com"]}]}), "spec.tls[0].hosts[0]: Invalid value"),
            (json!({"rules": [{"host": "a.example.com", "http": {"paths": []}}]}), "spec.rules[0].http.paths: Required value"),
        ];
        for (spec, want) in cases {
            let got = ingress_errors(spec.clone());
            assert!(
                got.iter().any(|e| e.contains(want)),
                "{spec}: want {want:?}, got {got:?}"
            );
        }
    }

    #[test]
    fn valid_ingresses_pass() {
        for spec in [
            json!({"defaultBackend": svc()}),
            one_path(json!({"path": "/foo", "pathType": "Prefix", "backend": svc()})),
            one_path(json!({"pathType": "ImplementationSpecific", "backend": svc()})),
            json!({"rules": [{"host": "*.example.com", "http": {"paths": [{"path": "/", "pathType": "Exact", "backend": {"service": {"name": "web", "port": {"name": "http"}}}}]}}],
                   "tls": [{"hosts": ["*.example.com", "a.example.com"], "secretName": "tls"}],
                   "ingressClassName": "bosun"}),
            json!({"rules": [{"host": "a.example.com"}], "defaultBackend": {"resource": {"apiGroup": "k8s.example.com", "kind": "StorageBucket", "name": "static"}}}),
        ] {
            assert_eq!(ingress_errors(spec.clone()), Vec::<String>::new(), "{spec}");
        }
    }

    #[test]
    fn ingress_class_controller_and_parameters() {
        let check = |spec: Value, old: Option<Value>| {
            let mut errs = Vec::new();
            validate_ingress_class(&json!({ "spec": spec }), old.as_ref(), &mut errs);
            errs.iter().map(|e| e.to_string()).collect::<Vec<_>>()
        };
        assert!(check(json!({"controller": "bosun.dev/ingress"}), None).is_empty());
        assert_eq!(
            check(json!({}), None),
            vec!["spec.controller: Required value"]
        );
        assert!(check(json!({"controller": "nodomain"}), None)[0]
            .contains("must be a domain-prefixed path (such as \"acme.io/foo\")"));
        assert!(check(
            json!({"controller": "a.io/b"}),
            Some(json!({"spec": {"controller": "a.io/c"}}))
        )[0]
        .contains("field is immutable"));
        assert!(check(
            json!({"controller": "a.io/b", "parameters": {"kind": "K", "name": "n", "scope": "Namespace"}}),
            None
        )[0]
        .starts_with("spec.parameters.namespace: Required value"));
    }
}
