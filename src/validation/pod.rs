//! Pod specs and pod templates (`ValidatePodSpec`, `ValidatePodTemplateSpec`, `ValidatePodUpdate`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::container::{validate_container, validate_quantity};
use super::meta::{validate_annotations, validate_labels};
use super::volume_files;
use super::{arr_of, child, get, index, int_of, nonnegative, obj_of, str_of, sub, FieldError};
use crate::names::*;

pub(crate) const RESTART_POLICIES: [&str; 3] = ["Always", "OnFailure", "Never"];
const DNS_POLICIES: [&str; 4] = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];

/// `ValidatePodTemplateSpec`: the template's labels and annotations (Kubernetes
/// reports them at `<path>.labels`), then its pod spec.
pub(crate) fn validate_pod_template(tpl: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let meta = sub(tpl, "metadata");
    validate_labels(get(meta, "labels"), &child(path, "labels"), errs);
    validate_annotations(get(meta, "annotations"), &child(path, "annotations"), errs);
    validate_pod_spec(sub(tpl, "spec"), &child(path, "spec"), errs);
    super::ephemeral::forbid_in_template(tpl, path, errs);
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

/// The template's labels as an error reports them: `{}` when it has none.
pub(crate) fn template_labels_value(tpl: &Value) -> Value {
    match sub(sub(tpl, "metadata"), "labels") {
        Value::Null => Value::Object(Default::default()),
        labels => labels.clone(),
    }
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
    super::ephemeral::validate_ephemeral_containers(
        spec,
        path,
        &volumes,
        &mut names,
        host_network,
        errs,
    );

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
        ("runtimeClassName", is_dns1123_subdomain),
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
    if let Some(overhead) = get(spec, "overhead") {
        super::container::validate_overhead(overhead, &child(path, "overhead"), errs);
    }
    if let Some(policy) = get(spec, "preemptionPolicy").and_then(Value::as_str) {
        super::scheduling::validate_preemption_policy(
            policy,
            &child(path, "preemptionPolicy"),
            errs,
        );
    }
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
        "secret" => {
            required(errs, "secretName");
            volume_files::validate_object_source(src, path, errs);
        }
        "configMap" => {
            required(errs, "name");
            volume_files::validate_object_source(src, path, errs);
        }
        "downwardAPI" => volume_files::validate_downward_api(src, path, errs),
        "projected" => volume_files::validate_projected(src, path, errs),
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

pub(super) fn validate_tolerations(tolerations: &[Value], path: &str, errs: &mut Vec<FieldError>) {
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
