//! Pod specs and pod templates (`ValidatePodSpec`, `ValidatePodTemplateSpec`, `ValidatePodUpdate`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::meta::{validate_annotations, validate_labels};
use super::names::*;
use super::{
    arr_of, child, get, index, int_of, key, nonnegative, obj_of, str_of, sub, FieldError,
    IS_NEGATIVE,
};
use crate::quantity::parse_quantity;

pub(crate) const RESTART_POLICIES: [&str; 3] = ["Always", "OnFailure", "Never"];
const DNS_POLICIES: [&str; 4] = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
pub(crate) const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];
const PULL_POLICIES: [&str; 3] = ["Always", "IfNotPresent", "Never"];
const TERMINATION_MESSAGE_POLICIES: [&str; 2] = ["File", "FallbackToLogsOnError"];

/// `ValidatePodTemplateSpec`: the template's labels and annotations (Kubernetes
/// reports them at `<path>.labels`), then its pod spec.
pub(crate) fn validate_pod_template(tpl: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let meta = sub(tpl, "metadata");
    validate_labels(get(meta, "labels"), &child(path, "labels"), errs);
    validate_annotations(get(meta, "annotations"), &child(path, "annotations"), errs);
    validate_pod_spec(sub(tpl, "spec"), &child(path, "spec"), errs);
}

/// The template's labels, for selector matching.
pub(crate) fn template_labels(tpl: &Value) -> BTreeMap<String, String> {
    obj_of(sub(tpl, "metadata"), "labels")
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn validate_pod_spec(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let volumes = validate_volumes(arr_of(spec, "volumes"), &child(path, "volumes"), errs);
    let host_network = spec
        .get("hostNetwork")
        .and_then(Value::as_bool)
        .unwrap_or(false);

    let containers = arr_of(spec, "containers");
    let containers_path = child(path, "containers");
    let mut names = BTreeSet::new();
    if containers.is_empty() {
        errs.push(FieldError::required(&containers_path, ""));
    }
    for (i, c) in containers.iter().enumerate() {
        validate_container(
            c,
            &index(&containers_path, i),
            &volumes,
            &mut names,
            false,
            host_network,
            errs,
        );
    }
    let init_path = child(path, "initContainers");
    for (i, c) in arr_of(spec, "initContainers").iter().enumerate() {
        validate_container(
            c,
            &index(&init_path, i),
            &volumes,
            &mut names,
            true,
            host_network,
            errs,
        );
    }

    let restart = str_of(spec, "restartPolicy");
    if restart.is_empty() {
        errs.push(FieldError::required(child(path, "restartPolicy"), ""));
    } else if !RESTART_POLICIES.contains(&restart) {
        errs.push(FieldError::not_supported(
            child(path, "restartPolicy"),
            restart,
            &RESTART_POLICIES,
        ));
    }
    let dns = str_of(spec, "dnsPolicy");
    if dns.is_empty() {
        errs.push(FieldError::required(child(path, "dnsPolicy"), ""));
    } else if !DNS_POLICIES.contains(&dns) {
        errs.push(FieldError::not_supported(
            child(path, "dnsPolicy"),
            dns,
            &DNS_POLICIES,
        ));
    }
    nonnegative(errs, spec, "terminationGracePeriodSeconds", path);
    if let Some(d) = int_of(spec, "activeDeadlineSeconds") {
        if !(1..=u32::MAX as i64).contains(&d) {
            errs.push(FieldError::invalid(
                child(path, "activeDeadlineSeconds"),
                d,
                inclusive_range_error(1, u32::MAX as i64),
            ));
        }
    }
    validate_labels(
        get(spec, "nodeSelector"),
        &child(path, "nodeSelector"),
        errs,
    );
    for (k, check) in [
        (
            "serviceAccountName",
            is_dns1123_subdomain as fn(&str) -> Vec<String>,
        ),
        ("nodeName", is_dns1123_subdomain),
        ("hostname", is_dns1123_label),
        ("subdomain", is_dns1123_label),
        ("priorityClassName", is_dns1123_subdomain),
    ] {
        let v = str_of(spec, k);
        if !v.is_empty() {
            for m in check(v) {
                errs.push(FieldError::invalid(child(path, k), v, m));
            }
        }
    }
    validate_tolerations(
        arr_of(spec, "tolerations"),
        &child(path, "tolerations"),
        errs,
    );
}

/// Volumes: unique DNS-label names and exactly one source each. Returns the names.
fn validate_volumes(volumes: &[Value], path: &str, errs: &mut Vec<FieldError>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, vol) in volumes.iter().enumerate() {
        let p = index(path, i);
        let sources: Vec<&String> = vol
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, v)| *k != "name" && !v.is_null())
                    .map(|(k, _)| k)
                    .collect()
            })
            .unwrap_or_default();
        match sources.len() {
            0 => errs.push(FieldError::required(&p, "must specify a volume type")),
            1 => validate_volume_source(
                sources[0],
                sub(vol, sources[0]),
                &child(&p, sources[0]),
                errs,
            ),
            _ => {
                for extra in &sources[1..] {
                    errs.push(FieldError::forbidden(
                        child(&p, extra),
                        "may not specify more than 1 volume type",
                    ));
                }
            }
        }
        let name = str_of(vol, "name");
        let name_path = child(&p, "name");
        if name.is_empty() {
            errs.push(FieldError::required(&name_path, ""));
        } else {
            for m in is_dns1123_label(name) {
                errs.push(FieldError::invalid(&name_path, name, m));
            }
        }
        if !names.insert(name.to_string()) {
            errs.push(FieldError::duplicate(&name_path, name));
        }
    }
    names
}

fn validate_volume_source(kind: &str, src: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let required = |errs: &mut Vec<FieldError>, k: &str| {
        if str_of(src, k).is_empty() {
            errs.push(FieldError::required(child(path, k), ""));
        }
    };
    match kind {
        "hostPath" => {
            required(errs, "path");
            const TYPES: [&str; 8] = [
                "",
                "DirectoryOrCreate",
                "Directory",
                "FileOrCreate",
                "File",
                "Socket",
                "CharDevice",
                "BlockDevice",
            ];
            let t = str_of(src, "type");
            if !TYPES.contains(&t) {
                errs.push(FieldError::not_supported(child(path, "type"), t, &TYPES));
            }
        }
        "persistentVolumeClaim" => required(errs, "claimName"),
        "secret" => required(errs, "secretName"),
        "nfs" => {
            required(errs, "server");
            required(errs, "path");
        }
        "emptyDir" => {
            if let Some(q) = src.get("sizeLimit").and_then(Value::as_str) {
                validate_quantity(q, &child(path, "sizeLimit"), errs);
            }
        }
        _ => {}
    }
}

/// A quantity that must parse and be ≥ 0. Returns whether it parsed.
fn validate_quantity(q: &str, path: &str, errs: &mut Vec<FieldError>) -> bool {
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
fn validate_container(
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
        let sub_path = str_of(m, "subPath");
        if !sub_path.is_empty() {
            if sub_path.starts_with('/') {
                errs.push(FieldError::invalid(
                    child(&p, "subPath"),
                    sub_path,
                    "must be a relative path",
                ));
            }
            if sub_path.split('/').any(|seg| seg == "..") {
                errs.push(FieldError::invalid(
                    child(&p, "subPath"),
                    sub_path,
                    "must not contain '..'",
                ));
            }
        }
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

fn validate_tolerations(tolerations: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    const EFFECTS: [&str; 3] = ["NoExecute", "NoSchedule", "PreferNoSchedule"];
    for (i, t) in tolerations.iter().enumerate() {
        let p = index(path, i);
        let k = str_of(t, "key");
        if !k.is_empty() {
            for m in is_qualified_name(k) {
                errs.push(FieldError::invalid(child(&p, "key"), k, m));
            }
        }
        let op = str_of(t, "operator");
        if k.is_empty() && op != "Exists" {
            errs.push(FieldError::invalid(
                child(&p, "operator"),
                op,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        let effect = str_of(t, "effect");
        if get(t, "tolerationSeconds").is_some() && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                child(&p, "effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        let value = str_of(t, "value");
        match op {
            "" | "Equal" => {
                for m in is_valid_label_value(value) {
                    errs.push(FieldError::invalid(child(&p, "value"), value, m));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError::invalid(
                        child(&p, "operator"),
                        t.clone(),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            _ => errs.push(FieldError::not_supported(
                child(&p, "operator"),
                op,
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() && !EFFECTS.contains(&effect) {
            errs.push(FieldError::not_supported(
                child(&p, "effect"),
                effect,
                &EFFECTS,
            ));
        }
    }
}

const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// `ValidatePodUpdate`: only images, activeDeadlineSeconds and added tolerations may change.
pub(crate) fn validate_pod_update(spec: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    // activeDeadlineSeconds may be set when unset, or lowered, never removed or raised.
    if let Some(old_d) = int_of(old, "activeDeadlineSeconds") {
        match int_of(spec, "activeDeadlineSeconds") {
            None => errs.push(FieldError::invalid(
                "spec.activeDeadlineSeconds",
                Value::Null,
                "must not update from a positive integer to nil value",
            )),
            Some(d) if d > old_d => errs.push(FieldError::invalid(
                "spec.activeDeadlineSeconds",
                d,
                "must be less than or equal to previous value",
            )),
            _ => {}
        }
    }
    // Tolerations: the old ones must all still be there.
    let new_tol = arr_of(spec, "tolerations");
    for t in arr_of(old, "tolerations") {
        if !new_tol.contains(t) {
            errs.push(FieldError::forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            ));
            break;
        }
    }
    // Everything else must be unchanged: compare with the mutable fields blanked.
    let munge = |s: &Value| -> Value {
        let mut s = s.clone();
        if let Some(m) = s.as_object_mut() {
            m.remove("activeDeadlineSeconds");
            m.remove("tolerations");
            for list in ["containers", "initContainers"] {
                if let Some(cs) = m.get_mut(list).and_then(Value::as_array_mut) {
                    for c in cs {
                        if let Some(c) = c.as_object_mut() {
                            c.remove("image");
                        }
                    }
                }
            }
            let old_grace_negative = m
                .get("terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
                .is_some_and(|g| g < 0);
            if old_grace_negative {
                m.insert("terminationGracePeriodSeconds".into(), Value::from(1));
            }
        }
        s
    };
    let (a, b) = (munge(old), munge(spec));
    if a != b {
        let mut changed = Vec::new();
        diff_paths(&a, &b, "spec", &mut changed);
        let detail = format!("{POD_UPDATE_FORBIDDEN}\n  changed: {}", changed.join(", "));
        errs.push(FieldError::forbidden("spec", detail));
    }
}

/// The paths at which two JSON values differ (a short human diff).
fn diff_paths(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    if out.len() >= 10 {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                if va != vb {
                    diff_paths(va, vb, &child(path, k), out);
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                if va != vb {
                    diff_paths(va, vb, &index(path, i), out);
                }
            }
        }
        _ => out.push(path.to_string()),
    }
}
