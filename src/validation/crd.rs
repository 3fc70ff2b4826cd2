//! apiextensions.k8s.io/v1: CustomResourceDefinition, a minimal
//! `ValidateCustomResourceDefinition`: the names, the scope, the versions
//! and the scale subresource's paths, each error naming its field as
//! upstream names it. The schemas themselves are checked elsewhere (the
//! structural-schema library), so a CRD passing here may still be refused
//! for its schema.

use serde_json::Value;

use super::{arr_of, child, get, index, str_of, FieldError};
use crate::names::{is_dns1035_label, is_dns1123_subdomain};

/// The scopes a CRD may have.
pub const SCOPES: [&str; 2] = ["Namespaced", "Cluster"];
/// The conversion strategies a CRD may have.
pub const CONVERSION_STRATEGIES: [&str; 2] = ["None", "Webhook"];

/// Checks a CustomResourceDefinition on create (`old` None) and update.
pub(crate) fn validate_crd(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let spec = get(obj, "spec").unwrap_or(&Value::Null);
    let group = str_of(spec, "group");
    let names = get(spec, "names").unwrap_or(&Value::Null);
    let plural = str_of(names, "plural");
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else {
        let bad = is_dns1123_subdomain(group);
        if !bad.is_empty() {
            errs.push(FieldError::invalid("spec.group", group, bad.join("; ")));
        } else if group.split('.').count() < 2 {
            errs.push(FieldError::invalid(
                "spec.group",
                group,
                "should be a domain with at least one dot",
            ));
        }
    }
    let scope = str_of(spec, "scope");
    if scope.is_empty() {
        errs.push(FieldError::required("spec.scope", ""));
    } else if !SCOPES.contains(&scope) {
        errs.push(FieldError::not_supported("spec.scope", scope, &SCOPES));
    }
    validate_names(names, "spec.names", errs);
    validate_versions(spec, errs);
    let strategy = spec
        .pointer("/conversion/strategy")
        .and_then(Value::as_str)
        .unwrap_or("None");
    if !CONVERSION_STRATEGIES.contains(&strategy) {
        errs.push(FieldError::not_supported(
            "spec.conversion.strategy",
            strategy,
            &CONVERSION_STRATEGIES,
        ));
    }
    if let Some(old) = old {
        let old_spec = get(old, "spec").unwrap_or(&Value::Null);
        if str_of(old_spec, "group") != group {
            errs.push(FieldError::immutable("spec.group", group));
        }
        // Every version still holding objects must stay listed.
        let versions: Vec<&str> = arr_of(spec, "versions")
            .iter()
            .map(|v| str_of(v, "name"))
            .collect();
        let stored = old
            .pointer("/status/storedVersions")
            .and_then(Value::as_array);
        for (i, v) in stored.into_iter().flatten().enumerate() {
            let v = v.as_str().unwrap_or("");
            if !versions.contains(&v) {
                errs.push(FieldError::invalid(
                    index("status.storedVersions", i),
                    v,
                    "must appear in spec.versions",
                ));
            }
        }
    }
}

/// `spec.names` (also `status.acceptedNames`): lowercase DNS labels for
/// the plural, singular and short names, a DNS-1035-like kind and list
/// kind.
fn validate_names(names: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let mut label = |field: &str, value: &str, required: bool| {
        let p = child(path, field);
        if value.is_empty() {
            if required {
                errs.push(FieldError::required(p, ""));
            }
            return;
        }
        let bad = is_dns1035_label(value);
        if !bad.is_empty() {
            errs.push(FieldError::invalid(p, value, bad.join("; ")));
        }
    };
    label("plural", str_of(names, "plural"), true);
    label("singular", str_of(names, "singular"), false);
    for (i, s) in arr_of(names, "shortNames").iter().enumerate() {
        label(&index("shortNames", i), s.as_str().unwrap_or(""), true);
    }
    for (i, s) in arr_of(names, "categories").iter().enumerate() {
        label(&index("categories", i), s.as_str().unwrap_or(""), true);
    }
    for field in ["kind", "listKind"] {
        let value = str_of(names, field);
        let p = child(path, field);
        if value.is_empty() {
            if field == "kind" {
                errs.push(FieldError::required(p, ""));
            }
            continue;
        }
        let bad = is_dns1035_label(&value.to_ascii_lowercase());
        if !bad.is_empty() {
            errs.push(FieldError::invalid(
                p,
                value,
                "may have mixed case, but should otherwise match: ".to_string() + &bad.join("; "),
            ));
        }
    }
    let kind = str_of(names, "kind");
    if !kind.is_empty() && str_of(names, "listKind") == kind {
        errs.push(FieldError::invalid(
            child(path, "listKind"),
            kind,
            "kind and listKind may not be the same",
        ));
    }
}

fn validate_versions(spec: &Value, errs: &mut Vec<FieldError>) {
    let versions = arr_of(spec, "versions");
    if versions.is_empty() {
        errs.push(FieldError::invalid(
            "spec.versions",
            Value::Array(Vec::new()),
            "must have exactly one version marked as storage version",
        ));
        return;
    }
    let mut seen: Vec<&str> = Vec::new();
    let mut storage = 0;
    for (i, v) in versions.iter().enumerate() {
        let path = index("spec.versions", i);
        let name = str_of(v, "name");
        if name.is_empty() {
            errs.push(FieldError::required(child(&path, "name"), ""));
        } else {
            let bad = is_dns1035_label(name);
            if !bad.is_empty() {
                errs.push(FieldError::invalid(
                    child(&path, "name"),
                    name,
                    bad.join("; "),
                ));
            }
            if seen.contains(&name) {
                errs.push(FieldError::invalid(
                    "spec.versions",
                    Value::Array(versions.to_vec()),
                    "must contain unique version names",
                ));
            }
            seen.push(name);
        }
        if get(v, "storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        if let Some(scale) = v.pointer("/subresources/scale") {
            validate_scale(scale, &child(&path, "subresources.scale"), errs);
        }
    }
    if storage != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            Value::Array(versions.to_vec()),
            "must have exactly one version marked as storage version",
        ));
    }
    if !versions
        .iter()
        .any(|v| get(v, "served").and_then(Value::as_bool) == Some(true))
    {
        errs.push(FieldError::invalid(
            "spec.versions",
            Value::Array(versions.to_vec()),
            "must have at least one version marked as served",
        ));
    }
}

/// A scale subresource's paths: `.spec.x` for the desired replicas,
/// `.status.x` for the others.
fn validate_scale(scale: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for (field, prefix, required) in [
        ("specReplicasPath", ".spec.", true),
        ("statusReplicasPath", ".status.", true),
        ("labelSelectorPath", "", false),
    ] {
        let value = str_of(scale, field);
        let p = child(path, field);
        if value.is_empty() {
            if required {
                errs.push(FieldError::required(p, ""));
            }
            continue;
        }
        let ok = if prefix.is_empty() {
            value.starts_with(".spec.") || value.starts_with(".status.")
        } else {
            value.starts_with(prefix)
        };
        if !ok || value.ends_with('.') || value.contains("..") || value.contains('[') {
            let why = if prefix.is_empty() {
                "should be a json path under either .spec or .status".to_string()
            } else {
                format!(
                    "should be a json path under {}",
                    prefix.trim_end_matches('.')
                )
            };
            errs.push(FieldError::invalid(p, value, why));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd() -> Value {
        json!({"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                      "listKind": "WidgetList", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"scale": {"specReplicasPath": ".spec.replicas",
                                           "statusReplicasPath": ".status.replicas"}}}]}})
    }

    fn fields(obj: &Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate_crd(obj, None, &mut errs);
        errs.into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn a_good_crd_passes() {
        assert!(fields(&crd()).is_empty());
    }

    #[test]
    fn errors_name_their_fields() {
        let mut c = crd();
        c["metadata"]["name"] = json!("widgets.other.com");
        c["spec"]["names"]["plural"] = json!("Widgets");
        c["spec"]["scope"] = json!("Global");
        assert_eq!(
            fields(&c),
            ["metadata.name", "spec.scope", "spec.names.plural"]
        );
        let mut c = crd();
        c["spec"]["group"] = json!("example");
        c["metadata"]["name"] = json!("widgets.example");
        assert_eq!(fields(&c), ["spec.group"]);
        let mut c = crd();
        c["spec"]["versions"][0]["storage"] = json!(false);
        assert_eq!(fields(&c), ["spec.versions"]);
        let mut c = crd();
        let v = c["spec"]["versions"][0].clone();
        c["spec"]["versions"].as_array_mut().unwrap().push(v);
        assert_eq!(fields(&c), ["spec.versions", "spec.versions"]);
        let mut c = crd();
        c["spec"]["versions"][0]["subresources"]["scale"]["specReplicasPath"] =
            json!(".status.replicas");
        assert_eq!(
            fields(&c),
            ["spec.versions[0].subresources.scale.specReplicasPath"]
        );
    }
}
