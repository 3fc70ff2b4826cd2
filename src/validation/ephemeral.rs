//! Ephemeral containers (`validateEphemeralContainers` and
//! `ValidatePodEphemeralContainersUpdate`): debugging containers added to a
//! running pod through `pods/ephemeralcontainers`, never at creation, never
//! changed or removed, and without the fields that make a container part of
//! the workload (ports, probes, lifecycle, resources).

use std::collections::BTreeSet;

use serde_json::Value;

use super::container::validate_container;
use super::{arr_of, child, index, key, str_of, sub, FieldError};

/// The fields upstream's `allowedEphemeralContainerFields` marks false, as
/// their JSON names, in the struct's order.
const NOT_FOR_EPHEMERAL: [&str; 8] = [
    "ports",
    "resources",
    "resizePolicy",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "restartPolicy",
];
const CANNOT_BE_SET: &str = "cannot be set for an Ephemeral Container";

/// Set as Go's `reflect.Value.IsZero` sees a decoded field: absent, null,
/// `{}` (an empty `resources`, which kubectl debug sends) or `[]` are not.
fn is_set(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Object(m)) => !m.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(_) => true,
    }
}

/// `validateEphemeralContainers`: each one as a container, with a name unique
/// across every container of the pod (`names` holds the app and init
/// containers' already), a `targetContainerName` naming an app or init
/// container, and none of the fields an ephemeral container may not have.
pub(super) fn validate_ephemeral_containers(
    spec: &Value,
    path: &str,
    volumes: &BTreeSet<String>,
    names: &mut BTreeSet<String>,
    host_network: bool,
    errs: &mut Vec<FieldError>,
) {
    let others: BTreeSet<String> = ["containers", "initContainers"]
        .iter()
        .flat_map(|list| arr_of(spec, list))
        .map(|c| str_of(c, "name").to_string())
        .collect();
    let list_path = child(path, "ephemeralContainers");
    for (i, ec) in arr_of(spec, "ephemeralContainers").iter().enumerate() {
        let idx = index(&list_path, i);
        // The common container checks, without the forbidden fields (which
        // get their own error below rather than a regular container's).
        let mut common = ec.clone();
        if let Some(m) = common.as_object_mut() {
            for f in NOT_FOR_EPHEMERAL {
                m.remove(f);
            }
        }
        validate_container(&common, &idx, volumes, names, false, host_network, errs);
        let target = str_of(ec, "targetContainerName");
        if !target.is_empty() && !others.contains(target) {
            errs.push(FieldError::not_found(
                child(&idx, "targetContainerName"),
                target,
            ));
        }
        for f in NOT_FOR_EPHEMERAL {
            if is_set(ec.get(f)) {
                errs.push(FieldError::forbidden(child(&idx, f), CANNOT_BE_SET));
            }
        }
        for (j, vm) in arr_of(ec, "volumeMounts").iter().enumerate() {
            for f in ["subPath", "subPathExpr"] {
                if !str_of(vm, f).is_empty() {
                    let p = child(&index(&child(&idx, "volumeMounts"), j), f);
                    errs.push(FieldError::forbidden(p, CANNOT_BE_SET));
                }
            }
        }
    }
}

/// `ValidatePodCreate`'s rule: a new pod has no ephemeral containers.
pub(super) fn forbid_on_create(spec: &Value, errs: &mut Vec<FieldError>) {
    if !arr_of(spec, "ephemeralContainers").is_empty() {
        errs.push(FieldError::forbidden(
            "spec.ephemeralContainers",
            "cannot have ephemeral containers on Pod creation",
        ));
    }
}

/// `ValidatePodTemplateSpec`'s rule: a template has none either.
pub(super) fn forbid_in_template(tpl: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if !arr_of(sub(tpl, "spec"), "ephemeralContainers").is_empty() {
        errs.push(FieldError::forbidden(
            child(&child(path, "spec"), "ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
}

/// `ValidatePodEphemeralContainersUpdate`'s second part: existing ephemeral
/// containers stay, unchanged (matched by name: a patch may reorder them).
pub(super) fn validate_update(pod: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    if super::get(sub(old, "metadata"), "annotations")
        .and_then(|a| a.get("kubernetes.io/config.mirror"))
        .is_some()
    {
        errs.clear();
        errs.push(FieldError::forbidden(
            "",
            "static pods do not support ephemeral containers",
        ));
        return;
    }
    let path = "spec.ephemeralContainers";
    let new_list = arr_of(sub(pod, "spec"), "ephemeralContainers");
    for o in arr_of(sub(old, "spec"), "ephemeralContainers") {
        let name = str_of(o, "name");
        match new_list.iter().find(|n| str_of(n, "name") == name) {
            None => errs.push(FieldError::forbidden(
                path,
                format!("existing ephemeral containers {name:?} may not be removed\n"),
            )),
            Some(n) if n != o => {
                let changed = changed_fields(o, n);
                errs.push(FieldError::forbidden(
                    key(path, name),
                    format!(
                        "existing ephemeral containers {name:?} may not be changed\n  changed: {}",
                        changed.join(", ")
                    ),
                ));
            }
            Some(_) => {}
        }
    }
}

/// The top-level fields two containers differ in (a short human diff).
fn changed_fields(a: &Value, b: &Value) -> Vec<String> {
    let (Some(x), Some(y)) = (a.as_object(), b.as_object()) else {
        return Vec::new();
    };
    let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
    keys.into_iter()
        .filter(|k| x.get(*k) != y.get(*k))
        .map(|k| k.to_string())
        .collect()
}

#[cfg(test)]
#[path = "ephemeral_tests.rs"]
mod tests;
