//! Containers of a pod spec (`validateContainers` and what it calls): image and
//! policies, ports, env, volume mounts, resources, probes and lifecycle handlers.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::volume_files::validate_sub_paths;
use super::{
    arr_of, child, get, index, int_of, key, nonnegative, obj_of, str_of, sub, FieldError,
    IS_NEGATIVE,
};
use crate::names::*;
use crate::quantity::parse_quantity;

pub(crate) const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];
const PULL_POLICIES: [&str; 3] = ["Always", "IfNotPresent", "Never"];
const TERMINATION_MESSAGE_POLICIES: [&str; 2] = ["File", "FallbackToLogsOnError"];

/// A quantity that must parse and be ≥ 0. Returns whether it parsed.
pub(super) fn validate_quantity(q: &str, path: &str, errs: &mut Vec<FieldError>) -> bool {
    match parse_quantity(q) {
        Err(e) => {
            errs.push(FieldError::invalid(path, q, e.to_string()));
            false
        }
        Ok(v) => {
            if v.signum() < 0 {
                errs.push(FieldError::invalid(path, q, IS_NEGATIVE));
            }
            true
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn validate_container(
    c: &Value,
    path: &str,
    volumes: &BTreeSet<String>,
    names: &mut BTreeSet<String>,
    init: bool,
    host_network: bool,
    errs: &mut Vec<FieldError>,
) {
    let name = str_of(c, "name");
    let name_path = child(path, "name");
    if name.is_empty() {
        errs.push(FieldError::required(&name_path, ""));
    } else {
        for m in is_dns1123_label(name) {
            errs.push(FieldError::invalid(&name_path, name, m));
        }
    }
    if !name.is_empty() && !names.insert(name.to_string()) {
        errs.push(FieldError::duplicate(&name_path, name));
    }
    let image = str_of(c, "image");
    if image.is_empty() {
        errs.push(FieldError::required(child(path, "image"), ""));
    } else if image.trim() != image {
        errs.push(FieldError::invalid(
            child(path, "image"),
            image,
            "must not have leading or trailing whitespace",
        ));
    }
    let pull = str_of(c, "imagePullPolicy");
    if pull.is_empty() {
        errs.push(FieldError::required(child(path, "imagePullPolicy"), ""));
    } else if !PULL_POLICIES.contains(&pull) {
        errs.push(FieldError::not_supported(
            child(path, "imagePullPolicy"),
            pull,
            &PULL_POLICIES,
        ));
    }
    let tmp = str_of(c, "terminationMessagePolicy");
    if tmp.is_empty() {
        errs.push(FieldError::required(
            child(path, "terminationMessagePolicy"),
            "",
        ));
    } else if !TERMINATION_MESSAGE_POLICIES.contains(&tmp) {
        errs.push(FieldError::not_supported(
            child(path, "terminationMessagePolicy"),
            tmp,
            &TERMINATION_MESSAGE_POLICIES,
        ));
    }
    validate_container_ports(
        arr_of(c, "ports"),
        &child(path, "ports"),
        host_network,
        errs,
    );
    validate_env(arr_of(c, "env"), &child(path, "env"), errs);
    validate_volume_mounts(
        arr_of(c, "volumeMounts"),
        &child(path, "volumeMounts"),
        volumes,
        errs,
    );
    validate_resources(sub(c, "resources"), &child(path, "resources"), errs);

    let restart = get(c, "restartPolicy").and_then(Value::as_str);
    let sidecar = init && restart == Some("Always");
    if let Some(r) = restart {
        if init {
            if r != "Always" {
                errs.push(FieldError::not_supported(
                    child(path, "restartPolicy"),
                    r,
                    &["Always"],
                ));
            }
        } else {
            errs.push(FieldError::forbidden(
                child(path, "restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let Some(p) = get(c, probe) else { continue };
        let probe_path = child(path, probe);
        if init && !sidecar {
            errs.push(FieldError::forbidden(
                &probe_path,
                "may not be set for init containers without restartPolicy=Always",
            ));
            continue;
        }
        validate_probe(p, &probe_path, errs);
        if probe != "readinessProbe" {
            if let Some(s) = int_of(p, "successThreshold") {
                if s != 1 {
                    errs.push(FieldError::invalid(
                        child(&probe_path, "successThreshold"),
                        s,
                        "must be 1",
                    ));
                }
            }
        }
    }
    let lifecycle = sub(c, "lifecycle");
    for hook in ["postStart", "preStop"] {
        if let Some(h) = get(lifecycle, hook) {
            validate_handler(
                h,
                &child(&child(path, "lifecycle"), hook),
                &["exec", "httpGet", "tcpSocket", "sleep"],
                errs,
            );
        }
    }
}

fn validate_container_ports(
    ports: &[Value],
    path: &str,
    host_network: bool,
    errs: &mut Vec<FieldError>,
) {
    let mut names = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let p = index(path, i);
        let name = str_of(port, "name");
        if !name.is_empty() {
            let msgs = is_valid_port_name(name);
            if !msgs.is_empty() {
                for m in msgs {
                    errs.push(FieldError::invalid(child(&p, "name"), name, m));
                }
            } else if !names.insert(name.to_string()) {
                errs.push(FieldError::duplicate(child(&p, "name"), name));
            }
        }
        let container_port = int_of(port, "containerPort").unwrap_or(0);
        if container_port == 0 {
            errs.push(FieldError::required(child(&p, "containerPort"), ""));
        } else {
            for m in is_valid_port_num(container_port) {
                errs.push(FieldError::invalid(
                    child(&p, "containerPort"),
                    container_port,
                    m,
                ));
            }
        }
        let host_port = int_of(port, "hostPort").unwrap_or(0);
        if host_port != 0 {
            for m in is_valid_port_num(host_port) {
                errs.push(FieldError::invalid(child(&p, "hostPort"), host_port, m));
            }
            if host_network && host_port != container_port {
                errs.push(FieldError::invalid(
                    child(&p, "hostPort"),
                    host_port,
                    "must match `containerPort` when `hostNetwork` is true",
                ));
            }
        }
        let proto = str_of(port, "protocol");
        if proto.is_empty() {
            errs.push(FieldError::required(child(&p, "protocol"), ""));
        } else if !PROTOCOLS.contains(&proto) {
            errs.push(FieldError::not_supported(
                child(&p, "protocol"),
                proto,
                &PROTOCOLS,
            ));
        }
    }
}

const FIELD_REF_PATHS: [&str; 11] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "metadata.labels",
    "metadata.annotations",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

fn validate_env(env: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    for (i, ev) in env.iter().enumerate() {
        let p = index(path, i);
        let name = str_of(ev, "name");
        if name.is_empty() {
            errs.push(FieldError::required(child(&p, "name"), ""));
        } else {
            for m in is_env_var_name(name) {
                errs.push(FieldError::invalid(child(&p, "name"), name, m));
            }
        }
        let Some(from) = get(ev, "valueFrom") else {
            continue;
        };
        let from_path = child(&p, "valueFrom");
        if !str_of(ev, "value").is_empty() {
            errs.push(FieldError::invalid(
                &from_path,
                "",
                "may not be specified when `value` is not empty",
            ));
        }
        let sources: Vec<&str> = [
            "fieldRef",
            "resourceFieldRef",
            "configMapKeyRef",
            "secretKeyRef",
            "fileKeyRef",
        ]
        .into_iter()
        .filter(|k| get(from, k).is_some())
        .collect();
        match sources.len() {
            0 => errs.push(FieldError::invalid(
                &from_path,
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            )),
            1 => {}
            _ => errs.push(FieldError::invalid(
                &from_path,
                "",
                "may not have more than one field specified at a time",
            )),
        }
        if let Some(fr) = get(from, "fieldRef") {
            let fp = str_of(fr, "fieldPath");
            let fp_path = child(&child(&from_path, "fieldRef"), "fieldPath");
            let base = fp.split('[').next().unwrap_or(fp);
            if fp.is_empty() {
                errs.push(FieldError::required(&fp_path, ""));
            } else if !FIELD_REF_PATHS.contains(&base)
                || (fp.contains('[') && base != "metadata.labels" && base != "metadata.annotations")
            {
                errs.push(FieldError::not_supported(&fp_path, fp, &FIELD_REF_PATHS));
            }
        }
        for k in ["configMapKeyRef", "secretKeyRef"] {
            if let Some(r) = get(from, k) {
                if str_of(r, "key").is_empty() {
                    errs.push(FieldError::required(
                        child(&child(&from_path, k), "key"),
                        "",
                    ));
                }
            }
        }
        if let Some(r) = get(from, "resourceFieldRef") {
            if str_of(r, "resource").is_empty() {
                errs.push(FieldError::required(
                    child(&child(&from_path, "resourceFieldRef"), "resource"),
                    "",
                ));
            }
        }
    }
}

fn validate_volume_mounts(
    mounts: &[Value],
    path: &str,
    volumes: &BTreeSet<String>,
    errs: &mut Vec<FieldError>,
) {
    let mut mount_points = BTreeSet::new();
    for (i, m) in mounts.iter().enumerate() {
        let p = index(path, i);
        let name = str_of(m, "name");
        if name.is_empty() {
            errs.push(FieldError::required(child(&p, "name"), ""));
        }
        if !volumes.contains(name) {
            errs.push(FieldError::not_found(child(&p, "name"), name));
        }
        let mount_path = str_of(m, "mountPath");
        if mount_path.is_empty() {
            errs.push(FieldError::required(child(&p, "mountPath"), ""));
        } else if !mount_path.starts_with('/') {
            // Docker only mounts at absolute paths.
            errs.push(FieldError::invalid(
                child(&p, "mountPath"),
                mount_path,
                "must be an absolute path",
            ));
        }
        if !mount_path.is_empty() && !mount_points.insert(mount_path.to_string()) {
            errs.push(FieldError::invalid(
                child(&p, "mountPath"),
                mount_path,
                "must be unique",
            ));
        }
        validate_sub_paths(m, path, &p, errs);
    }
}

fn is_standard_container_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-")
}

fn validate_resources(res: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let limits_path = child(path, "limits");
    let requests_path = child(path, "requests");
    let mut limits = BTreeMap::new();
    let check_name = |name: &str, p: &str, errs: &mut Vec<FieldError>| {
        for m in is_qualified_name(name) {
            errs.push(FieldError::invalid(p, name, m));
        }
        if !name.contains('/') && !is_standard_container_resource(name) {
            errs.push(FieldError::invalid(
                p,
                name,
                "must be a standard resource for containers",
            ));
        }
    };
    if let Some(l) = obj_of(res, "limits") {
        for (name, q) in l {
            let p = key(&limits_path, name);
            check_name(name, &p, errs);
            let q = q.as_str().unwrap_or_default();
            if validate_quantity(q, &p, errs) {
                limits.insert(name.clone(), q.to_string());
            }
        }
    }
    if let Some(r) = obj_of(res, "requests") {
        for (name, q) in r {
            let p = key(&requests_path, name);
            check_name(name, &p, errs);
            let q = q.as_str().unwrap_or_default();
            if !validate_quantity(q, &p, errs) {
                continue;
            }
            if let Some(limit) = limits.get(name) {
                let (Ok(req), Ok(lim)) = (parse_quantity(q), parse_quantity(limit)) else {
                    continue;
                };
                if req > lim {
                    errs.push(FieldError::invalid(
                        &requests_path,
                        q,
                        format!("must be less than or equal to {name} limit of {limit}"),
                    ));
                }
            }
        }
    }
}

/// Exactly one handler among `kinds`; each handler's own fields.
fn validate_handler(h: &Value, path: &str, kinds: &[&str], errs: &mut Vec<FieldError>) {
    let present: Vec<&str> = kinds
        .iter()
        .copied()
        .filter(|k| get(h, k).is_some())
        .collect();
    if present.is_empty() {
        errs.push(FieldError::required(path, "must specify a handler type"));
        return;
    }
    for extra in &present[1..] {
        errs.push(FieldError::forbidden(
            child(path, extra),
            "may not specify more than 1 handler type",
        ));
    }
    let kind = present[0];
    let hp = child(path, kind);
    let body = sub(h, kind);
    match kind {
        "exec" if arr_of(body, "command").is_empty() => {
            errs.push(FieldError::required(child(&hp, "command"), ""));
        }
        "httpGet" => {
            if str_of(body, "path").is_empty() {
                errs.push(FieldError::required(child(&hp, "path"), ""));
            }
            validate_port_num_or_name(get(body, "port"), &child(&hp, "port"), errs);
            let scheme = str_of(body, "scheme");
            if !scheme.is_empty() && scheme != "HTTP" && scheme != "HTTPS" {
                errs.push(FieldError::not_supported(
                    child(&hp, "scheme"),
                    scheme,
                    &["HTTP", "HTTPS"],
                ));
            }
        }
        "tcpSocket" => validate_port_num_or_name(get(body, "port"), &child(&hp, "port"), errs),
        "grpc" => {
            let port = int_of(body, "port").unwrap_or(0);
            for m in is_valid_port_num(port) {
                errs.push(FieldError::invalid(child(&hp, "port"), port, m));
            }
        }
        "sleep" => nonnegative(errs, body, "seconds", &hp),
        _ => {}
    }
}

fn validate_probe(p: &Value, path: &str, errs: &mut Vec<FieldError>) {
    validate_handler(p, path, &["exec", "httpGet", "tcpSocket", "grpc"], errs);
    for k in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        nonnegative(errs, p, k, path);
    }
    if let Some(t) = int_of(p, "terminationGracePeriodSeconds") {
        if t <= 0 {
            errs.push(FieldError::invalid(
                child(path, "terminationGracePeriodSeconds"),
                t,
                "must be greater than 0",
            ));
        }
    }
}

/// `ValidatePortNumOrName`: a number 1–65535 or an IANA port name.
pub(crate) fn validate_port_num_or_name(
    port: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    match port {
        Some(Value::Number(n)) => {
            let n = n.as_i64().unwrap_or(0);
            for m in is_valid_port_num(n) {
                errs.push(FieldError::invalid(path, n, m));
            }
        }
        Some(Value::String(s)) => {
            for m in is_valid_port_name(s) {
                errs.push(FieldError::invalid(path, s.as_str(), m));
            }
        }
        _ => {
            for m in is_valid_port_num(0) {
                errs.push(FieldError::invalid(path, 0, m));
            }
        }
    }
}

/// `validateOverhead`: a pod's or a RuntimeClass's fixed overhead, checked
/// as a container's resource limits (errors at `<path>.limits[...]`, as
/// upstream reports them).
pub(super) fn validate_overhead(pod_fixed: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if pod_fixed.is_null() {
        return;
    }
    validate_resources(&serde_json::json!({"limits": pod_fixed}), path, errs);
}
