//! storage.k8s.io/v1's CSI kinds (`ValidateCSIDriver`, `ValidateCSINode`,
//! `ValidateCSIStorageCapacity`, `ValidateVolumeAttachment` and their
//! updates). bosun runs no CSI plugins: these are stored for clients and
//! tools that read or write them.

use std::collections::BTreeSet;

use serde_json::Value;

use super::container::validate_quantity;
use super::meta::validate_label_selector;
use super::{arr_of, child, get, index, int_of, str_of, sub, FieldError};
use crate::names::{is_dns1123_subdomain, is_qualified_name};

const FS_GROUP_POLICIES: [&str; 3] = ["File", "None", "ReadWriteOnceWithFSType"];
const LIFECYCLE_MODES: [&str; 2] = ["Ephemeral", "Persistent"];
/// `csiNodeIDMaxLength`.
const NODE_ID_MAX: usize = 192;

/// `ValidateCSIDriverName`: required, at most 63 characters, a DNS
/// subdomain (upper case allowed, as upstream's own pattern does).
fn validate_driver_name(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    if name.len() > 63 {
        errs.push(FieldError::too_long(path, 63));
    }
    for m in is_dns1123_subdomain(&name.to_lowercase()) {
        errs.push(FieldError::invalid(path, name, m));
    }
}

pub(crate) fn validate_csi_driver(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    validate_driver_name(str_of(sub(obj, "metadata"), "name"), "name", errs);
    let spec = sub(obj, "spec");
    for field in ["attachRequired", "podInfoOnMount"] {
        if get(spec, field).is_none_or(Value::is_null) {
            errs.push(FieldError::required(child("spec", field), ""));
        }
    }
    let policy = str_of(spec, "fsGroupPolicy");
    if !policy.is_empty() && !FS_GROUP_POLICIES.contains(&policy) {
        errs.push(FieldError::not_supported(
            "spec.fsGroupPolicy",
            policy,
            &FS_GROUP_POLICIES,
        ));
    }
    for (i, m) in arr_of(spec, "volumeLifecycleModes").iter().enumerate() {
        let mode = m.as_str().unwrap_or_default();
        if !LIFECYCLE_MODES.contains(&mode) {
            errs.push(FieldError::not_supported(
                index("spec.volumeLifecycleModes", i),
                mode,
                &LIFECYCLE_MODES,
            ));
        }
    }
    let mut audiences = BTreeSet::new();
    for (i, t) in arr_of(spec, "tokenRequests").iter().enumerate() {
        let audience = str_of(t, "audience");
        if !audiences.insert(audience) {
            errs.push(FieldError::duplicate(
                child(&index("spec.tokenRequests", i), "audience"),
                audience,
            ));
        }
        if int_of(t, "expirationSeconds").is_some_and(|s| s < 600) {
            errs.push(FieldError::invalid(
                child(&index("spec.tokenRequests", i), "expirationSeconds"),
                int_of(t, "expirationSeconds").unwrap_or(0),
                "may not specify a duration less than 10 minutes",
            ));
        }
    }
    if let Some(old) = old {
        let old_spec = sub(old, "spec");
        for field in ["fsGroupPolicy", "volumeLifecycleModes"] {
            if get(spec, field) != get(old_spec, field) {
                let value = get(spec, field).cloned().unwrap_or(Value::Null);
                errs.push(FieldError::immutable(child("spec", field), value));
            }
        }
    }
}

pub(crate) fn validate_csi_node(obj: &Value, errs: &mut Vec<FieldError>) {
    let mut names = BTreeSet::new();
    for (i, d) in arr_of(sub(obj, "spec"), "drivers").iter().enumerate() {
        let path = index("spec.drivers", i);
        let name = str_of(d, "name");
        validate_driver_name(name, &child(&path, "name"), errs);
        if !name.is_empty() && !names.insert(name) {
            errs.push(FieldError::duplicate(child(&path, "name"), name));
        }
        let node_id = str_of(d, "nodeID");
        if node_id.is_empty() {
            errs.push(FieldError::required(child(&path, "nodeID"), ""));
        } else if node_id.len() > NODE_ID_MAX {
            errs.push(FieldError::invalid(
                child(&path, "nodeID"),
                node_id,
                format!("must be {NODE_ID_MAX} characters or less"),
            ));
        }
        let mut keys = BTreeSet::new();
        for (j, k) in arr_of(d, "topologyKeys").iter().enumerate() {
            let key = k.as_str().unwrap_or_default();
            let kpath = index(&child(&path, "topologyKeys"), j);
            if key.is_empty() {
                errs.push(FieldError::required(&kpath, ""));
                continue;
            }
            if !keys.insert(key) {
                errs.push(FieldError::duplicate(&kpath, key));
            }
            for m in is_qualified_name(key) {
                errs.push(FieldError::invalid(&kpath, key, m));
            }
        }
        if let Some(count) = d.pointer("/allocatable/count").and_then(Value::as_i64) {
            if count < 0 {
                errs.push(FieldError::invalid(
                    child(&path, "allocatable.count"),
                    count,
                    super::IS_NEGATIVE,
                ));
            }
        }
    }
}

pub(crate) fn validate_csi_storage_capacity(obj: &Value, errs: &mut Vec<FieldError>) {
    let class = str_of(obj, "storageClassName");
    if class.is_empty() {
        errs.push(FieldError::required("storageClassName", ""));
    } else {
        for m in is_dns1123_subdomain(class) {
            errs.push(FieldError::invalid("storageClassName", class, m));
        }
    }
    for field in ["capacity", "maximumVolumeSize"] {
        if let Some(q) = get(obj, field).and_then(Value::as_str) {
            validate_quantity(q, field, errs);
        }
    }
    if let Some(sel) = get(obj, "nodeTopology").filter(|v| !v.is_null()) {
        validate_label_selector(sel, "nodeTopology", errs);
    }
}

pub(crate) fn validate_volume_attachment(
    obj: &Value,
    old: Option<&Value>,
    errs: &mut Vec<FieldError>,
) {
    let spec = sub(obj, "spec");
    validate_driver_name(str_of(spec, "attacher"), "spec.attacher", errs);
    let source = sub(spec, "source");
    let pv = str_of(source, "persistentVolumeName");
    let inline = get(source, "inlineVolumeSpec").is_some_and(|v| !v.is_null());
    match (pv.is_empty(), inline) {
        (true, false) => errs.push(FieldError::required(
            "spec.source",
            "must specify exactly one of inlineVolumeSpec and persistentVolumeName",
        )),
        (false, true) => errs.push(FieldError::forbidden(
            "spec.source",
            "must specify exactly one of inlineVolumeSpec and persistentVolumeName",
        )),
        _ => {}
    }
    if !pv.is_empty() {
        for m in is_dns1123_subdomain(pv) {
            errs.push(FieldError::invalid(
                "spec.source.persistentVolumeName",
                pv,
                m,
            ));
        }
    }
    let node = str_of(spec, "nodeName");
    if node.is_empty() {
        errs.push(FieldError::required("spec.nodeName", ""));
    } else {
        for m in is_dns1123_subdomain(node) {
            errs.push(FieldError::invalid("spec.nodeName", node, m));
        }
    }
    if old.is_some_and(|old| sub(old, "spec") != spec) {
        errs.push(FieldError::immutable("spec", spec.clone()));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn volume_attachments_need_attacher_node_and_one_source() {
        let mut errs = Vec::new();
        validate_volume_attachment(&json!({"spec": {"source": {}}}), None, &mut errs);
        let m = messages(errs);
        assert_eq!(m.len(), 3, "{m:?}");
        assert!(m[0].starts_with("spec.attacher: Required value"), "{m:?}");
        assert!(
            m[1].starts_with("spec.source: Required value: must specify exactly one"),
            "{m:?}"
        );
        assert!(m[2].starts_with("spec.nodeName: Required value"), "{m:?}");
        let ok = json!({"spec": {"attacher": "csi.example.com", "nodeName": "n1",
            "source": {"persistentVolumeName": "pv1"}}});
        let mut errs = Vec::new();
        validate_volume_attachment(&ok, Some(&ok), &mut errs);
        assert!(errs.is_empty());
        let mut moved = ok.clone();
        moved["spec"]["nodeName"] = json!("n2");
        validate_volume_attachment(&moved, Some(&ok), &mut errs);
        assert!(messages(errs)[0].starts_with("spec: Invalid value"));
    }

    #[test]
    fn csi_nodes_name_each_driver_once_with_a_node_id() {
        let mut errs = Vec::new();
        let node = json!({"spec": {"drivers": [
            {"name": "csi.example.com", "nodeID": "n1", "topologyKeys": ["zone", "zone"]},
            {"name": "csi.example.com", "nodeID": ""}]}});
        validate_csi_node(&node, &mut errs);
        let m = messages(errs);
        assert_eq!(m.len(), 3, "{m:?}");
        assert!(
            m[0].starts_with("spec.drivers[0].topologyKeys[1]: Duplicate value"),
            "{m:?}"
        );
        assert!(
            m[1].starts_with("spec.drivers[1].name: Duplicate value"),
            "{m:?}"
        );
        assert!(
            m[2].starts_with("spec.drivers[1].nodeID: Required value"),
            "{m:?}"
        );
    }

    #[test]
    fn csi_drivers_and_capacities() {
        let mut errs = Vec::new();
        validate_csi_driver(
            &json!({"metadata": {"name": "csi.example.com"},
                "spec": {"attachRequired": true, "podInfoOnMount": false,
                    "fsGroupPolicy": "Sometimes", "volumeLifecycleModes": ["Persistent", "Never"]}}),
            None,
            &mut errs,
        );
        let m = messages(errs);
        assert_eq!(m.len(), 2, "{m:?}");
        assert!(
            m[0].starts_with("spec.fsGroupPolicy: Unsupported value"),
            "{m:?}"
        );
        assert!(
            m[1].starts_with("spec.volumeLifecycleModes[1]: Unsupported value"),
            "{m:?}"
        );
        let mut errs = Vec::new();
        validate_csi_storage_capacity(&json!({"capacity": "-1Gi"}), &mut errs);
        let m = messages(errs);
        assert!(
            m[0].starts_with("storageClassName: Required value"),
            "{m:?}"
        );
        assert!(m[1].starts_with("capacity: Invalid value"), "{m:?}");
    }
}
