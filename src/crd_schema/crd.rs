//! Validation of a CustomResourceDefinition (`apiextensions.k8s.io/v1`) as
//! upstream's `ValidateCustomResourceDefinition` and its update rules.

use serde_json::Value;

use super::Structural;
use crate::names::{is_dns1035_label, is_dns1123_subdomain};
use crate::validation::FieldError;

const COLUMN_TYPES: &[&str] = &["integer", "number", "string", "boolean", "date"];
const COLUMN_FORMATS: &[&str] = &[
    "int32",
    "int64",
    "float",
    "double",
    "byte",
    "date",
    "date-time",
    "password",
];

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or_default()
}

fn arr<'a>(v: &'a Value, k: &str) -> &'a [Value] {
    v.get(k)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Full validation of a CRD (plus the update rules when `old` is given),
/// each error naming its field.
pub fn validate_crd(crd: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let null = Value::Null;
    let spec = crd.get("spec").unwrap_or(&null);
    let group = s(spec, "group");
    let names = spec.get("names").unwrap_or(&null);
    let plural = s(names, "plural");
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else {
        for msg in is_dns1123_subdomain(group) {
            errs.push(FieldError::invalid("spec.group", group, msg));
        }
        if group.split('.').count() < 2 {
            errs.push(FieldError::invalid(
                "spec.group",
                group,
                "should be a domain with at least one dot",
            ));
        }
    }
    match s(spec, "scope") {
        "" => errs.push(FieldError::required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => errs.push(FieldError::not_supported(
            "spec.scope",
            other,
            &["Cluster", "Namespaced"],
        )),
    }
    validate_names(names, "spec.names", &mut errs);
    if spec.get("preserveUnknownFields").and_then(Value::as_bool) == Some(true) {
        errs.push(FieldError::invalid(
            "spec.preserveUnknownFields",
            true,
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }
    let versions = arr(spec, "versions");
    if versions.is_empty() {
        errs.push(FieldError::required(
            "spec.versions",
            "must have at least one version",
        ));
    }
    let storage = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if !versions.is_empty() && storage != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            Value::Array(versions.to_vec()),
            "must have exactly one version marked as storage version",
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let p = format!("spec.versions[{i}]");
        let vname = s(v, "name");
        if vname.is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        } else {
            for msg in is_dns1035_label(vname) {
                errs.push(FieldError::invalid(format!("{p}.name"), vname, msg));
            }
        }
        if seen.contains(&vname) {
            errs.push(FieldError::invalid(
                "spec.versions",
                Value::Array(versions.to_vec()),
                "must contain unique version names",
            ));
        }
        seen.push(vname);
        validate_version(v, &p, &mut errs);
    }
    validate_conversion(spec.get("conversion"), &mut errs);
    if let Some(old) = old {
        let ospec = old.get("spec").unwrap_or(&null);
        if s(ospec, "group") != group {
            errs.push(FieldError::immutable("spec.group", group));
        }
        let oplural = s(ospec.get("names").unwrap_or(&null), "plural");
        if oplural != plural {
            errs.push(FieldError::immutable("spec.names.plural", plural));
        }
        // Scope and kind shape the storage once the CRD is established.
        let established = arr(old.get("status").unwrap_or(&null), "conditions")
            .iter()
            .any(|c| s(c, "type") == "Established" && s(c, "status") == "True");
        if established {
            if s(ospec, "scope") != s(spec, "scope") {
                errs.push(FieldError::immutable("spec.scope", s(spec, "scope")));
            }
            let okind = s(ospec.get("names").unwrap_or(&null), "kind");
            if okind != s(names, "kind") {
                errs.push(FieldError::immutable("spec.names.kind", s(names, "kind")));
            }
        }
        for (i, sv) in arr(old.get("status").unwrap_or(&null), "storedVersions")
            .iter()
            .enumerate()
        {
            let sv = sv.as_str().unwrap_or_default();
            if !seen.contains(&sv) {
                errs.push(FieldError::invalid(
                    format!("status.storedVersions[{i}]"),
                    sv,
                    "must appear in spec.versions",
                ));
            }
        }
    }
    errs
}

fn validate_names(names: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for k in ["plural", "singular"] {
        let v = s(names, k);
        if v.is_empty() {
            if k == "plural" {
                errs.push(FieldError::required(format!("{path}.{k}"), ""));
            }
            continue;
        }
        for msg in is_dns1035_label(v) {
            errs.push(FieldError::invalid(format!("{path}.{k}"), v, msg));
        }
    }
    for k in ["kind", "listKind"] {
        let v = s(names, k);
        if v.is_empty() {
            errs.push(FieldError::required(format!("{path}.{k}"), ""));
        } else if !is_dns1035_label(&v.to_lowercase()).is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.{k}"),
                v,
                "may have mixed case, but should otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?",
            ));
        }
    }
    if !s(names, "kind").is_empty() && s(names, "kind") == s(names, "listKind") {
        errs.push(FieldError::invalid(
            format!("{path}.listKind"),
            s(names, "listKind"),
            "kind and listKind may not be the same",
        ));
    }
    for k in ["shortNames", "categories"] {
        for (i, v) in arr(names, k).iter().enumerate() {
            let v = v.as_str().unwrap_or_default();
            for msg in is_dns1035_label(v) {
                errs.push(FieldError::invalid(format!("{path}.{k}[{i}]"), v, msg));
            }
        }
    }
}

fn validate_version(v: &Value, p: &str, errs: &mut Vec<FieldError>) {
    let schema = v.pointer("/schema/openAPIV3Schema");
    let base = format!("{p}.schema.openAPIV3Schema");
    let compiled = match schema {
        None | Some(Value::Null) => {
            errs.push(FieldError::required(&base, "schemas are required"));
            None
        }
        Some(sch) => match Structural::new(sch, &base) {
            Ok(c) => Some(c),
            Err(e) => {
                errs.extend(e);
                None
            }
        },
    };
    if let Some(sub) = v.get("subresources").filter(|x| !x.is_null()) {
        if let Some(scale) = sub.get("scale").filter(|x| !x.is_null()) {
            let sp = format!("{p}.subresources.scale");
            let spec_path = s(scale, "specReplicasPath");
            if spec_path.is_empty() {
                errs.push(FieldError::required(format!("{sp}.specReplicasPath"), ""));
            } else if !spec_path.starts_with(".spec.") {
                errs.push(FieldError::invalid(
                    format!("{sp}.specReplicasPath"),
                    spec_path,
                    "should be a json path under .spec",
                ));
            }
            let status_path = s(scale, "statusReplicasPath");
            if status_path.is_empty() {
                errs.push(FieldError::required(format!("{sp}.statusReplicasPath"), ""));
            } else if !status_path.starts_with(".status.") {
                errs.push(FieldError::invalid(
                    format!("{sp}.statusReplicasPath"),
                    status_path,
                    "should be a json path under .status",
                ));
            }
            let sel = s(scale, "labelSelectorPath");
            if !sel.is_empty() && !sel.starts_with(".spec.") && !sel.starts_with(".status.") {
                errs.push(FieldError::invalid(
                    format!("{sp}.labelSelectorPath"),
                    sel,
                    "should be a json path under either .spec or .status",
                ));
            }
        }
    }
    for (i, col) in arr(v, "additionalPrinterColumns").iter().enumerate() {
        let cp = format!("{p}.additionalPrinterColumns[{i}]");
        if s(col, "name").is_empty() {
            errs.push(FieldError::required(format!("{cp}.name"), ""));
        }
        match s(col, "type") {
            "" => errs.push(FieldError::required(format!("{cp}.type"), "")),
            t if !COLUMN_TYPES.contains(&t) => errs.push(FieldError::not_supported(
                format!("{cp}.type"),
                t,
                COLUMN_TYPES,
            )),
            _ => {}
        }
        let f = s(col, "format");
        if !f.is_empty() && !COLUMN_FORMATS.contains(&f) {
            errs.push(FieldError::not_supported(
                format!("{cp}.format"),
                f,
                COLUMN_FORMATS,
            ));
        }
        if s(col, "jsonPath").is_empty() {
            errs.push(FieldError::required(format!("{cp}.jsonPath"), ""));
        }
        if col
            .get("priority")
            .and_then(Value::as_i64)
            .is_some_and(|x| x < 0)
        {
            errs.push(FieldError::invalid(
                format!("{cp}.priority"),
                col["priority"].clone(),
                crate::validation::IS_NEGATIVE,
            ));
        }
    }
    let fields = arr(v, "selectableFields");
    if fields.len() > 8 {
        errs.push(FieldError {
            field: format!("{p}.selectableFields"),
            kind: crate::validation::ErrorKind::TooMany,
            bad_value: Some(Value::from(fields.len())),
            detail: "must have at most 8 items".into(),
        });
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let fp = format!("{p}.selectableFields[{i}].jsonPath");
        let jp = s(f, "jsonPath");
        if jp.is_empty() {
            errs.push(FieldError::required(fp, ""));
            continue;
        }
        if seen.contains(&jp) {
            errs.push(FieldError::duplicate(&fp, jp));
        }
        seen.push(jp);
        if let Some(c) = &compiled {
            if let Some(ty) = c.type_at(jp) {
                if !matches!(ty.as_str(), "string" | "integer" | "boolean") {
                    errs.push(FieldError::invalid(
                        fp,
                        jp,
                        "selectable field type must be one of: string, integer, boolean",
                    ));
                }
            } else {
                errs.push(FieldError::invalid(
                    fp,
                    jp,
                    "is an invalid path: does not refer to a valid field",
                ));
            }
        }
    }
}

fn validate_conversion(conv: Option<&Value>, errs: &mut Vec<FieldError>) {
    let Some(conv) = conv.filter(|c| !c.is_null()) else {
        return;
    };
    let strategy = s(conv, "strategy");
    let webhook = conv.get("webhook").filter(|w| !w.is_null());
    match strategy {
        "None" | "" => {
            if webhook.is_some() {
                errs.push(FieldError::forbidden(
                    "spec.conversion.webhook",
                    "should not be set when strategy is not set to Webhook",
                ));
            }
        }
        "Webhook" => match webhook {
            None => errs.push(FieldError::required(
                "spec.conversion.webhook",
                "required when strategy is set to Webhook",
            )),
            Some(w) => {
                let cc = w.get("clientConfig").filter(|c| !c.is_null());
                let has_url = cc.is_some_and(|c| !s(c, "url").is_empty());
                let has_service =
                    cc.is_some_and(|c| c.get("service").is_some_and(|x| !x.is_null()));
                if has_url == has_service {
                    errs.push(FieldError::required(
                        "spec.conversion.webhook.clientConfig",
                        "exactly one of url or service is required",
                    ));
                }
                let versions = arr(w, "conversionReviewVersions");
                if !versions
                    .iter()
                    .any(|v| matches!(v.as_str(), Some("v1" | "v1beta1")))
                {
                    errs.push(FieldError::invalid(
                        "spec.conversion.webhook.conversionReviewVersions",
                        Value::Array(versions.to_vec()),
                        "must include at least one of v1, v1beta1",
                    ));
                }
            }
        },
        other => errs.push(FieldError::not_supported(
            "spec.conversion.strategy",
            other,
            &["None", "Webhook"],
        )),
    }
}
