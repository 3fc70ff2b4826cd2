//! The files a pod asks the agent to write into a volume, and the paths it
//! names inside one: `configMap`, `secret`, `downwardAPI` and `projected`
//! volume sources (upstream's `validateConfigMapVolumeSource`,
//! `validateSecretVolumeSource`, `validateDownwardAPIVolumeSource`,
//! `validateProjectedVolumeSource`), and `validateLocalDescendingPath` /
//! `ValidateLocalNonReservedPath`, which keep every such path relative and
//! free of `..` elements so that it stays inside its volume.
//!
//! The field paths are upstream's, quirks included: a downwardAPI item's
//! path is reported at `<volume>.downwardAPI.path` and a token's at
//! `<volume>.projected.path`, without the item's index, as kube-apiserver
//! reports them.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{arr_of, child, get, index, int_of, str_of, FieldError};

/// Upstream's `fileModeErrorMsg`.
pub(crate) const FILE_MODE: &str = "must be a number between 0 and 0777 (octal), both inclusive";

/// `validateLocalDescendingPath`: not absolute, no `..` element.
pub(crate) fn validate_local_descending_path(p: &str, field: &str, errs: &mut Vec<FieldError>) {
    if p.starts_with('/') {
        errs.push(FieldError::invalid(field, p, "must be a relative path"));
    }
    // Even for `../../..`, one error makes the point.
    if p.split('/').any(|item| item == "..") {
        errs.push(FieldError::invalid(field, p, "must not contain '..'"));
    }
}

/// `ValidateLocalNonReservedPath`: as [`validate_local_descending_path`],
/// and not starting with `..` (the atomic writer's own names, `..data` and
/// the timestamped dirs, start so).
pub(crate) fn validate_local_non_reserved_path(p: &str, field: &str, errs: &mut Vec<FieldError>) {
    validate_local_descending_path(p, field, errs);
    // Not reported again when the `..` element check caught it.
    if p.starts_with("..") && !p.starts_with("../") {
        errs.push(FieldError::invalid(field, p, "must not start with '..'"));
    }
}

/// A `defaultMode` or `mode` within 0..=0777.
fn validate_mode(src: &Value, k: &str, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(m) = int_of(src, k) {
        if !(0..=0o777).contains(&m) {
            errs.push(FieldError::invalid(child(path, k), m, FILE_MODE));
        }
    }
}

/// `validateKeyToPath`: an item of a ConfigMap's or Secret's keys.
fn validate_key_to_path(kp: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if str_of(kp, "key").is_empty() {
        errs.push(FieldError::required(child(path, "key"), ""));
    }
    let p = str_of(kp, "path");
    if p.is_empty() {
        errs.push(FieldError::required(child(path, "path"), ""));
    }
    validate_local_non_reserved_path(p, &child(path, "path"), errs);
    validate_mode(kp, "mode", path, errs);
}

/// The `items` of a configMap or secret source, each checked; returns
/// their paths.
fn validate_items<'a>(src: &'a Value, path: &str, errs: &mut Vec<FieldError>) -> Vec<&'a str> {
    let items_path = child(path, "items");
    arr_of(src, "items")
        .iter()
        .enumerate()
        .map(|(i, kp)| {
            validate_key_to_path(kp, &index(&items_path, i), errs);
            str_of(kp, "path")
        })
        .collect()
}

/// `validateConfigMapVolumeSource` (`name` is checked with the other
/// required names) and `validateSecretVolumeSource`.
pub(super) fn validate_object_source(src: &Value, path: &str, errs: &mut Vec<FieldError>) {
    validate_mode(src, "defaultMode", path, errs);
    validate_items(src, path, errs);
}

/// `validateDownwardAPIVolumeFile`, reporting at `path` (upstream passes
/// the source's path, not the item's).
fn validate_downward_api_file(file: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let p = str_of(file, "path");
    if p.is_empty() {
        errs.push(FieldError::required(child(path, "path"), ""));
    }
    validate_local_non_reserved_path(p, &child(path, "path"), errs);
    match (get(file, "fieldRef"), get(file, "resourceFieldRef")) {
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            path,
            "resource",
            "fieldRef and resourceFieldRef can not be specified simultaneously",
        )),
        (None, None) => errs.push(FieldError::required(
            path,
            "one of fieldRef and resourceFieldRef is required",
        )),
        _ => {}
    }
    validate_mode(file, "mode", path, errs);
}

/// `validateDownwardAPIVolumeSource`.
pub(super) fn validate_downward_api(src: &Value, path: &str, errs: &mut Vec<FieldError>) {
    validate_mode(src, "defaultMode", path, errs);
    for file in arr_of(src, "items") {
        validate_downward_api_file(file, path, errs);
    }
}

/// `validateProjectedVolumeSource`: each source has one kind, the paths
/// are safe and no two name the same file.
pub(super) fn validate_projected(src: &Value, path: &str, errs: &mut Vec<FieldError>) {
    validate_mode(src, "defaultMode", path, errs);
    let mut all_paths = BTreeSet::new();
    let sources_path = child(path, "sources");
    for (i, source) in arr_of(src, "sources").iter().enumerate() {
        let src_path = index(&sources_path, i);
        let mut kinds = 0;
        for kind in ["secret", "configMap"] {
            let Some(obj) = get(source, kind) else {
                continue;
            };
            kinds += 1;
            let proj_path = child(&src_path, kind);
            let name = str_of(obj, "name");
            if name.is_empty() {
                errs.push(FieldError::required(child(&proj_path, "name"), ""));
            }
            for p in validate_items(obj, &proj_path, errs) {
                if !p.is_empty() && !all_paths.insert(p.to_string()) {
                    errs.push(FieldError::invalid(
                        path,
                        name,
                        "conflicting duplicate paths",
                    ));
                }
            }
        }
        if let Some(d) = get(source, "downwardAPI") {
            kinds += 1;
            let proj_path = child(&src_path, "downwardAPI");
            for file in arr_of(d, "items") {
                validate_downward_api_file(file, &proj_path, errs);
                let p = str_of(file, "path");
                if !p.is_empty() && !all_paths.insert(p.to_string()) {
                    errs.push(FieldError::invalid(path, p, "conflicting duplicate paths"));
                }
            }
        }
        if let Some(t) = get(source, "serviceAccountToken") {
            kinds += 1;
            let p = str_of(t, "path");
            if p.is_empty() {
                errs.push(FieldError::required(child(path, "path"), ""));
            } else {
                validate_local_non_reserved_path(p, &child(path, "path"), errs);
            }
        }
        if kinds > 1 {
            errs.push(FieldError::forbidden(
                &src_path,
                "may not specify more than 1 volume type",
            ));
        }
    }
}

/// A volume mount's `subPath` and `subPathExpr` (part of upstream's
/// `ValidateVolumeMounts`; `mounts_path` is the list's path, which
/// upstream names without the mount's index for these two checks).
pub(super) fn validate_sub_paths(
    mount: &Value,
    mounts_path: &str,
    mount_path: &str,
    errs: &mut Vec<FieldError>,
) {
    let sub_path = str_of(mount, "subPath");
    if !sub_path.is_empty() {
        validate_local_descending_path(sub_path, &child(mounts_path, "subPath"), errs);
    }
    let expr = str_of(mount, "subPathExpr");
    if !expr.is_empty() {
        if !sub_path.is_empty() {
            errs.push(FieldError::invalid(
                child(mount_path, "subPathExpr"),
                expr,
                "subPathExpr and subPath are mutually exclusive",
            ));
        }
        validate_local_descending_path(expr, &child(mounts_path, "subPathExpr"), errs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(f: impl FnOnce(&mut Vec<FieldError>)) -> Vec<String> {
        let mut errs = Vec::new();
        f(&mut errs);
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn descending_paths_as_upstream() {
        let check = |p: &str| messages(|e| validate_local_non_reserved_path(p, "f", e));
        for ok in ["a", "a/b", "a..b", "a/..b", "x/y/z"] {
            assert!(check(ok).is_empty(), "{ok}: {:?}", check(ok));
        }
        assert_eq!(
            check("/etc/x"),
            [r#"f: Invalid value: "/etc/x": must be a relative path"#]
        );
        assert_eq!(
            check("../x"),
            [r#"f: Invalid value: "../x": must not contain '..'"#]
        );
        assert_eq!(
            check("a/../../x"),
            [r#"f: Invalid value: "a/../../x": must not contain '..'"#]
        );
        assert_eq!(
            check(".."),
            [
                r#"f: Invalid value: "..": must not contain '..'"#,
                r#"f: Invalid value: "..": must not start with '..'"#,
            ]
        );
        assert_eq!(
            check("..data"),
            [r#"f: Invalid value: "..data": must not start with '..'"#]
        );
        assert_eq!(check("/../x").len(), 2, "absolute and ..");
        // subPath allows a leading `..name` (only the element `..` is refused).
        assert!(messages(|e| validate_local_descending_path("..data", "f", e)).is_empty());
    }

    #[test]
    fn volume_sources_report_upstreams_fields() {
        let got = messages(|e| {
            validate_object_source(
                &json!({"name": "c", "defaultMode": 0o1000, "items": [
                    {"key": "a", "path": "../../../../tmp/x"},
                    {"key": "", "path": "", "mode": -1}]}),
                "spec.volumes[0].configMap",
                e,
            )
        });
        assert_eq!(got, [
            "spec.volumes[0].configMap.defaultMode: Invalid value: 512: must be a number between 0 and 0777 (octal), both inclusive",
            r#"spec.volumes[0].configMap.items[0].path: Invalid value: "../../../../tmp/x": must not contain '..'"#,
            "spec.volumes[0].configMap.items[1].key: Required value",
            "spec.volumes[0].configMap.items[1].path: Required value",
            "spec.volumes[0].configMap.items[1].mode: Invalid value: -1: must be a number between 0 and 0777 (octal), both inclusive",
        ]);
        let got = messages(|e| {
            validate_downward_api(
                &json!({"items": [{"path": "/etc/passwd", "fieldRef": {"fieldPath": "metadata.name"}},
                    {"path": "n"}]}),
                "spec.volumes[1].downwardAPI",
                e,
            )
        });
        assert_eq!(got, [
            r#"spec.volumes[1].downwardAPI.path: Invalid value: "/etc/passwd": must be a relative path"#,
            "spec.volumes[1].downwardAPI: Required value: one of fieldRef and resourceFieldRef is required",
        ]);
        let got = messages(|e| {
            validate_projected(
                &json!({"sources": [
                    {"serviceAccountToken": {"path": "../token", "expirationSeconds": 3600}},
                    {"secret": {"name": "s", "items": [{"key": "k", "path": "a/../../b"}]}},
                    {"configMap": {"name": "c", "items": [{"key": "k", "path": "a/../../b"}]},
                     "downwardAPI": {"items": [{"path": "..x", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                    {"serviceAccountToken": {"path": ""}},
                ]}),
                "spec.volumes[2].projected",
                e,
            )
        });
        assert_eq!(got, [
            r#"spec.volumes[2].projected.path: Invalid value: "../token": must not contain '..'"#,
            r#"spec.volumes[2].projected.sources[1].secret.items[0].path: Invalid value: "a/../../b": must not contain '..'"#,
            r#"spec.volumes[2].projected.sources[2].configMap.items[0].path: Invalid value: "a/../../b": must not contain '..'"#,
            r#"spec.volumes[2].projected: Invalid value: "c": conflicting duplicate paths"#,
            r#"spec.volumes[2].projected.sources[2].downwardAPI.path: Invalid value: "..x": must not start with '..'"#,
            "spec.volumes[2].projected.sources[2]: Forbidden: may not specify more than 1 volume type",
            "spec.volumes[2].projected.path: Required value",
        ]);
    }

    #[test]
    fn sub_paths_as_upstream() {
        let got = messages(|e| {
            validate_sub_paths(
                &json!({"subPath": "../x", "subPathExpr": "/$(POD)"}),
                "spec.containers[0].volumeMounts",
                "spec.containers[0].volumeMounts[1]",
                e,
            )
        });
        assert_eq!(
            got,
            [
                r#"spec.containers[0].volumeMounts.subPath: Invalid value: "../x": must not contain '..'"#,
                r#"spec.containers[0].volumeMounts[1].subPathExpr: Invalid value: "/$(POD)": subPathExpr and subPath are mutually exclusive"#,
                r#"spec.containers[0].volumeMounts.subPathExpr: Invalid value: "/$(POD)": must be a relative path"#,
            ]
        );
        assert!(
            messages(|e| validate_sub_paths(&json!({"subPath": "a/b.txt"}), "m", "m[0]", e))
                .is_empty()
        );
    }

    #[test]
    fn a_pod_writing_outside_its_volume_is_refused() {
        let res = crate::resources::by_name("pods").unwrap();
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"volumes": [{"name": "v", "configMap": {"name": "c",
                "items": [{"key": "k", "path": "../../../../../../../../tmp/x"}]}}],
                "containers": [{"name": "c", "image": "busybox",
                    "volumeMounts": [{"name": "v", "mountPath": "/v", "subPath": "a/../.."}]}]}});
        let mut pod = super::super::normalize(res, pod).unwrap();
        crate::defaults::apply_defaults(res, &mut pod);
        let got: Vec<String> = super::super::validate(res, &pod, None)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            got,
            [
                r#"spec.volumes[0].configMap.items[0].path: Invalid value: "../../../../../../../../tmp/x": must not contain '..'"#,
                r#"spec.containers[0].volumeMounts.subPath: Invalid value: "a/../..": must not contain '..'"#,
            ]
        );
    }
}
