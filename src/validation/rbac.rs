//! rbac.authorization.k8s.io/v1: Role, ClusterRole, RoleBinding and
//! ClusterRoleBinding, as upstream's `pkg/apis/rbac/validation`.

use serde_json::Value;

use super::{child, index, FieldError};

const GROUP: &str = "rbac.authorization.k8s.io";

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `ValidatePolicyRule` for each of `rules`; a namespaced role's rules
/// cannot name URLs.
pub(crate) fn validate_rules(obj: &Value, namespaced: bool, errs: &mut Vec<FieldError>) {
    for (i, rule) in obj["rules"].as_array().into_iter().flatten().enumerate() {
        let path = index("rules", i);
        if strings(&rule["verbs"]).is_empty() {
            errs.push(FieldError::required(
                child(&path, "verbs"),
                "verbs must contain at least one value",
            ));
        }
        let urls = strings(&rule["nonResourceURLs"]);
        let groups = strings(&rule["apiGroups"]);
        let resources = strings(&rule["resources"]);
        if !urls.is_empty() {
            if namespaced {
                errs.push(FieldError::invalid(
                    child(&path, "nonResourceURLs"),
                    rule["nonResourceURLs"].clone(),
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if !groups.is_empty() || !resources.is_empty() {
                errs.push(FieldError::invalid(
                    child(&path, "nonResourceURLs"),
                    rule["nonResourceURLs"].clone(),
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if groups.is_empty() && rule["apiGroups"].as_array().is_none() {
            errs.push(FieldError::required(
                child(&path, "apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if resources.is_empty() {
            errs.push(FieldError::required(
                child(&path, "resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
}

/// A RoleBinding's or ClusterRoleBinding's roleRef and subjects; on an
/// update, roleRef cannot change.
pub(crate) fn validate_binding(
    obj: &Value,
    old: Option<&Value>,
    namespaced: bool,
    errs: &mut Vec<FieldError>,
) {
    let role_ref = &obj["roleRef"];
    let api_group = role_ref["apiGroup"].as_str().unwrap_or("");
    if api_group != GROUP {
        errs.push(FieldError::not_supported(
            "roleRef.apiGroup",
            api_group,
            &[GROUP],
        ));
    }
    let kind = role_ref["kind"].as_str().unwrap_or("");
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&kind) {
        errs.push(FieldError::not_supported("roleRef.kind", kind, kinds));
    }
    match role_ref["name"].as_str().unwrap_or("") {
        "" => errs.push(FieldError::required("roleRef.name", "")),
        name if name.contains('/') || name == "." || name == ".." => {
            errs.push(FieldError::invalid(
                "roleRef.name",
                name,
                "may not contain '/'",
            ));
        }
        _ => {}
    }
    for (i, s) in obj["subjects"].as_array().into_iter().flatten().enumerate() {
        let path = index("subjects", i);
        let name = s["name"].as_str().unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(child(&path, "name"), ""));
        }
        let group = s["apiGroup"].as_str().unwrap_or("");
        match s["kind"].as_str().unwrap_or("") {
            "ServiceAccount" => {
                if !group.is_empty() {
                    errs.push(FieldError::not_supported(
                        child(&path, "apiGroup"),
                        group,
                        &[""],
                    ));
                }
                if !namespaced && s["namespace"].as_str().unwrap_or("").is_empty() {
                    errs.push(FieldError::required(child(&path, "namespace"), ""));
                }
            }
            "User" | "Group" => {
                if group != GROUP {
                    errs.push(FieldError::not_supported(
                        child(&path, "apiGroup"),
                        group,
                        &[GROUP],
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(
                child(&path, "kind"),
                other,
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
    if let Some(old) = old {
        if old["roleRef"] != obj["roleRef"] {
            errs.push(FieldError::invalid(
                "roleRef",
                obj["roleRef"].clone(),
                "cannot change roleRef",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_need_verbs_groups_and_resources() {
        let mut errs = Vec::new();
        let role = json!({"rules": [
            {"verbs": [], "apiGroups": [""], "resources": ["pods"]},
            {"verbs": ["get"], "resources": ["pods"]},
            {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
        ]});
        validate_rules(&role, true, &mut errs);
        let fields: Vec<_> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "rules[0].verbs",
                "rules[1].apiGroups",
                "rules[2].nonResourceURLs"
            ]
        );
        let mut errs = Vec::new();
        let cluster_role = json!({"rules": [role["rules"][2].clone()]});
        validate_rules(&cluster_role, false, &mut errs);
        assert!(errs.is_empty());
    }

    #[test]
    fn bindings_check_their_role_and_subjects_and_keep_their_role() {
        let b = json!({
            "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"},
            "subjects": [
                {"kind": "User", "name": "alice", "apiGroup": GROUP},
                {"kind": "ServiceAccount", "name": "robot"},
                {"kind": "Robot", "name": "x"},
            ]
        });
        let mut errs = Vec::new();
        validate_binding(&b, None, true, &mut errs);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, "subjects[2].kind");
        let mut errs = Vec::new();
        validate_binding(&b, None, false, &mut errs);
        let fields: Vec<_> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            ["roleRef.kind", "subjects[1].namespace", "subjects[2].kind"]
        );
        let b = json!({
            "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "alice", "apiGroup": GROUP}]
        });
        let mut changed = b.clone();
        changed["roleRef"]["name"] = json!("other");
        let mut errs = Vec::new();
        validate_binding(&changed, Some(&b), true, &mut errs);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, "roleRef");
        assert!(
            errs[0].message().ends_with(": cannot change roleRef"),
            "{errs:?}"
        );
        let mut errs = Vec::new();
        validate_binding(&b, Some(&b), true, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
    }
}
