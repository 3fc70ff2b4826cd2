//! core/v1 beyond pods: Service, Endpoints, Node, PersistentVolume, PersistentVolumeClaim.

use std::collections::BTreeSet;

use serde_json::Value;

use super::container::{validate_port_num_or_name, PROTOCOLS};
use super::meta::{validate_label_selector, validate_labels};
use super::{arr_of, child, get, index, int_of, key, obj_of, str_of, sub, FieldError};
use crate::names::*;
use crate::quantity::parse_quantity;

const SERVICE_TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
const VOLUME_MODES: [&str; 2] = ["Block", "Filesystem"];

pub(crate) fn validate_service(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let spec = sub(obj, "spec");
    let svc_type = str_of(spec, "type");
    let cluster_ip = str_of(spec, "clusterIP");
    let headless = cluster_ip == "None";
    if !SERVICE_TYPES.contains(&svc_type) {
        errs.push(FieldError::not_supported(
            "spec.type",
            svc_type,
            &SERVICE_TYPES,
        ));
    }
    let ports = arr_of(spec, "ports");
    if ports.is_empty() && !headless && svc_type != "ExternalName" {
        errs.push(FieldError::required("spec.ports", ""));
    }
    let require_name = ports.len() > 1;
    let mut names = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let path = index("spec.ports", i);
        let name = str_of(p, "name");
        if require_name && name.is_empty() {
            errs.push(FieldError::required(child(&path, "name"), ""));
        } else if !name.is_empty() {
            for m in is_dns1123_label(name) {
                errs.push(FieldError::invalid(child(&path, "name"), name, m));
            }
            if !names.insert(name.to_string()) {
                errs.push(FieldError::duplicate(child(&path, "name"), name));
            }
        }
        let port = int_of(p, "port").unwrap_or(0);
        for m in is_valid_port_num(port) {
            errs.push(FieldError::invalid(child(&path, "port"), port, m));
        }
        let proto = str_of(p, "protocol");
        if proto.is_empty() {
            errs.push(FieldError::required(child(&path, "protocol"), ""));
        } else if !PROTOCOLS.contains(&proto) {
            errs.push(FieldError::not_supported(
                child(&path, "protocol"),
                proto,
                &PROTOCOLS,
            ));
        }
        validate_port_num_or_name(get(p, "targetPort"), &child(&path, "targetPort"), errs);
        let node_port = int_of(p, "nodePort").unwrap_or(0);
        if node_port != 0 {
            if svc_type == "ClusterIP" {
                errs.push(FieldError::forbidden(
                    child(&path, "nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            } else {
                for m in is_valid_port_num(node_port) {
                    errs.push(FieldError::invalid(child(&path, "nodePort"), node_port, m));
                }
            }
        }
        if !seen.insert((port, proto.to_string())) {
            errs.push(FieldError::duplicate(
                path.clone(),
                serde_json::json!({"port": port, "protocol": proto}),
            ));
        }
    }
    if !cluster_ip.is_empty() && !headless && !is_valid_ip(cluster_ip) {
        errs.push(FieldError::invalid(
            "spec.clusterIP",
            cluster_ip,
            "must be empty, 'None', or a valid IP address",
        ));
    }
    if headless && svc_type != "ClusterIP" && !svc_type.is_empty() {
        errs.push(FieldError::invalid(
            "spec.clusterIP",
            cluster_ip,
            "may only be set to 'None' for ClusterIP services",
        ));
    }
    if svc_type == "ExternalName" {
        let ext = str_of(spec, "externalName");
        if ext.is_empty() {
            errs.push(FieldError::required("spec.externalName", ""));
        } else {
            for m in is_dns1123_subdomain(ext.trim_end_matches('.')) {
                errs.push(FieldError::invalid("spec.externalName", ext, m));
            }
        }
    }
    let affinity = str_of(spec, "sessionAffinity");
    if !affinity.is_empty() && affinity != "ClientIP" && affinity != "None" {
        errs.push(FieldError::not_supported(
            "spec.sessionAffinity",
            affinity,
            &["ClientIP", "None"],
        ));
    }
    validate_labels(get(spec, "selector"), "spec.selector", errs);
    if let Some(old) = old {
        // Once allocated the cluster IP stays; an empty new value means "keep it".
        let was = str_of(sub(old, "spec"), "clusterIP");
        if !was.is_empty() && !cluster_ip.is_empty() && was != cluster_ip {
            errs.push(FieldError::immutable("spec.clusterIP", cluster_ip));
        }
    }
}

pub(crate) fn validate_endpoints(obj: &Value, errs: &mut Vec<FieldError>) {
    for (i, subset) in arr_of(obj, "subsets").iter().enumerate() {
        let sp = index("subsets", i);
        for list in ["addresses", "notReadyAddresses"] {
            for (j, a) in arr_of(subset, list).iter().enumerate() {
                let ap = index(&child(&sp, list), j);
                let ip = str_of(a, "ip");
                if !is_valid_ip(ip) {
                    errs.push(FieldError::invalid(
                        child(&ap, "ip"),
                        ip,
                        "must be a valid IP address",
                    ));
                }
            }
        }
        let ports = arr_of(subset, "ports");
        for (j, p) in ports.iter().enumerate() {
            let pp = index(&child(&sp, "ports"), j);
            let name = str_of(p, "name");
            if ports.len() > 1 && name.is_empty() {
                errs.push(FieldError::required(child(&pp, "name"), ""));
            } else if !name.is_empty() {
                for m in is_dns1123_label(name) {
                    errs.push(FieldError::invalid(child(&pp, "name"), name, m));
                }
            }
            let port = int_of(p, "port").unwrap_or(0);
            for m in is_valid_port_num(port) {
                errs.push(FieldError::invalid(child(&pp, "port"), port, m));
            }
            let proto = str_of(p, "protocol");
            if !proto.is_empty() && !PROTOCOLS.contains(&proto) {
                errs.push(FieldError::not_supported(
                    child(&pp, "protocol"),
                    proto,
                    &PROTOCOLS,
                ));
            }
        }
    }
}

pub(crate) fn validate_node(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = sub(obj, "spec");
    let mut seen = std::collections::HashSet::new();
    for (i, t) in arr_of(spec, "taints").iter().enumerate() {
        let p = index("spec.taints", i);
        // `validateNodeTaints`: one taint per key and effect.
        if !seen.insert((str_of(t, "key"), str_of(t, "effect"))) {
            let mut e = FieldError::duplicate(
                p.clone(),
                format!("{}:{}", str_of(t, "key"), str_of(t, "effect")),
            );
            e.detail = "taints must be unique by key and effect pair".into();
            errs.push(e);
        }
        let k = str_of(t, "key");
        if k.is_empty() {
            errs.push(FieldError::required(child(&p, "key"), ""));
        }
        for m in is_qualified_name(k).into_iter().filter(|_| !k.is_empty()) {
            errs.push(FieldError::invalid(child(&p, "key"), k, m));
        }
        const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
        let effect = str_of(t, "effect");
        if effect.is_empty() {
            errs.push(FieldError::required(child(&p, "effect"), ""));
        } else if !EFFECTS.contains(&effect) {
            errs.push(FieldError::not_supported(
                child(&p, "effect"),
                effect,
                &EFFECTS,
            ));
        }
    }
}

/// A quantity that must parse and be > 0.
fn positive_quantity(q: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let s = q.as_str().unwrap_or_default();
    match parse_quantity(s) {
        Err(e) => errs.push(FieldError::invalid(path, s, e.to_string())),
        Ok(v) if v.signum() <= 0 => {
            errs.push(FieldError::invalid(path, s, "must be greater than zero"))
        }
        Ok(_) => {}
    }
}

fn validate_access_modes(
    spec: &Value,
    path: &str,
    required_detail: &str,
    errs: &mut Vec<FieldError>,
) {
    let modes = arr_of(spec, "accessModes");
    if modes.is_empty() {
        errs.push(FieldError::required(
            child(path, "accessModes"),
            required_detail,
        ));
    }
    for m in modes {
        let m = m.as_str().unwrap_or_default();
        if !ACCESS_MODES.contains(&m) {
            errs.push(FieldError::not_supported(
                child(path, "accessModes"),
                m,
                &ACCESS_MODES,
            ));
        }
    }
}

fn validate_volume_mode(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(mode) = get(spec, "volumeMode").and_then(Value::as_str) {
        if !VOLUME_MODES.contains(&mode) {
            errs.push(FieldError::not_supported(
                child(path, "volumeMode"),
                mode,
                &VOLUME_MODES,
            ));
        }
    }
}

pub(crate) fn validate_pv(spec: &Value, errs: &mut Vec<FieldError>) {
    validate_access_modes(spec, "spec", "", errs);
    let capacity = obj_of(spec, "capacity");
    if capacity.is_none_or(|c| c.is_empty()) {
        errs.push(FieldError::required("spec.capacity", ""));
    }
    if capacity.is_none_or(|c| !c.contains_key("storage") || c.len() > 1) {
        errs.push(FieldError::not_supported(
            "spec.capacity",
            capacity
                .map(|c| Value::Object(c.clone()))
                .unwrap_or(Value::Null),
            &["storage"],
        ));
    }
    for (r, q) in capacity.into_iter().flatten() {
        positive_quantity(q, &key("spec.capacity", r), errs);
    }
    let policy = str_of(spec, "persistentVolumeReclaimPolicy");
    if !policy.is_empty() && !["Delete", "Recycle", "Retain"].contains(&policy) {
        errs.push(FieldError::not_supported(
            "spec.persistentVolumeReclaimPolicy",
            policy,
            &["Delete", "Recycle", "Retain"],
        ));
    }
    validate_volume_mode(spec, "spec", errs);
    let class = str_of(spec, "storageClassName");
    if !class.is_empty() {
        for m in is_dns1123_subdomain(class) {
            errs.push(FieldError::invalid("spec.storageClassName", class, m));
        }
    }
    const NOT_SOURCES: [&str; 9] = [
        "accessModes",
        "capacity",
        "claimRef",
        "persistentVolumeReclaimPolicy",
        "storageClassName",
        "mountOptions",
        "volumeMode",
        "nodeAffinity",
        "volumeAttributesClassName",
    ];
    let sources: Vec<&String> = spec
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, v)| !NOT_SOURCES.contains(&k.as_str()) && !v.is_null())
                .map(|(k, _)| k)
                .collect()
        })
        .unwrap_or_default();
    match sources.len() {
        0 => errs.push(FieldError::required("spec", "must specify a volume type")),
        1 => {
            if sources[0] == "hostPath" && str_of(sub(spec, "hostPath"), "path").is_empty() {
                errs.push(FieldError::required("spec.hostPath.path", ""));
            }
        }
        _ => {
            for extra in &sources[1..] {
                errs.push(FieldError::forbidden(
                    child("spec", extra),
                    "may not specify more than 1 volume type",
                ));
            }
        }
    }
}

/// `ValidatePersistentVolumeClaimSpec` (also used for StatefulSet volumeClaimTemplates).
pub(crate) fn validate_pvc_spec(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    validate_access_modes(spec, path, "at least 1 access mode is required", errs);
    if let Some(sel) = get(spec, "selector") {
        validate_label_selector(sel, &child(path, "selector"), errs);
    }
    let storage_path = key(&child(path, "resources"), "storage");
    match get(sub(sub(spec, "resources"), "requests"), "storage") {
        None => errs.push(FieldError::required(storage_path, "")),
        Some(q) => positive_quantity(q, &storage_path, errs),
    }
    validate_volume_mode(spec, path, errs);
    if let Some(class) = get(spec, "storageClassName").and_then(Value::as_str) {
        if !class.is_empty() {
            for m in is_dns1123_subdomain(class) {
                errs.push(FieldError::invalid(
                    child(path, "storageClassName"),
                    class,
                    m,
                ));
            }
        }
    }
}

pub(crate) fn validate_pvc(spec: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    validate_pvc_spec(spec, "spec", errs);
    if let Some(old) = old {
        // Only the requested size (growing) may change once a claim exists.
        let strip = |s: &Value| -> Value {
            let mut s = s.clone();
            if let Some(req) = s
                .pointer_mut("/resources/requests")
                .and_then(Value::as_object_mut)
            {
                req.remove("storage");
            }
            if let Some(m) = s.as_object_mut() {
                // The binder fills volumeName in once.
                if old.get("volumeName").is_none() {
                    m.remove("volumeName");
                }
            }
            s
        };
        let mut old_stripped = strip(old);
        if let Some(m) = old_stripped.as_object_mut() {
            if old.get("volumeName").is_none() {
                m.remove("volumeName");
            }
        }
        if strip(spec) != old_stripped {
            errs.push(FieldError::forbidden(
                "spec",
                "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
            ));
        }
    }
}
