//! core/v1 PodTemplate and ReplicationController (`ValidatePodTemplate`,
//! `ValidateReplicationController`): an RC is a ReplicaSet over an
//! equality selector (a map of labels).

use serde_json::Value;

use super::meta::validate_labels;
use super::pod::{template_labels, template_labels_value, validate_pod_template};
use super::{get, nonnegative, str_of, sub, FieldError};

const SELECTOR_MISMATCH: &str = "`selector` does not match template `labels`";

/// A PodTemplate: its `template` as any pod template.
pub(crate) fn validate_pod_template_object(obj: &Value, errs: &mut Vec<FieldError>) {
    validate_pod_template(sub(obj, "template"), "template", errs);
}

/// A ReplicationController's spec (`ValidateReplicationControllerSpec`);
/// its selector is immutable only in that it must keep matching the
/// template, as upstream (an RC's selector may change).
pub(crate) fn validate_replication_controller(spec: &Value, errs: &mut Vec<FieldError>) {
    nonnegative(errs, spec, "replicas", "spec");
    nonnegative(errs, spec, "minReadySeconds", "spec");
    let selector = get(spec, "selector").and_then(Value::as_object);
    if selector.is_none_or(|s| s.is_empty()) {
        errs.push(FieldError::required("spec.selector", ""));
    }
    validate_labels(get(spec, "selector"), "spec.selector", errs);
    let Some(tpl) = get(spec, "template").filter(|t| !t.is_null()) else {
        errs.push(FieldError::required("spec.template", ""));
        return;
    };
    if let Some(selector) = selector.filter(|s| !s.is_empty()) {
        let labels = template_labels(tpl);
        let matches = selector
            .iter()
            .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str());
        if !matches {
            errs.push(FieldError::invalid(
                "spec.template.metadata.labels",
                template_labels_value(tpl),
                SELECTOR_MISMATCH,
            ));
        }
    }
    validate_pod_template(tpl, "spec.template", errs);
    let pod = sub(tpl, "spec");
    let restart = str_of(pod, "restartPolicy");
    if restart != "Always" {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            restart,
            &["Always"],
        ));
    }
    if get(pod, "activeDeadlineSeconds").is_some() {
        errs.push(FieldError::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in ReplicationController is not Supported",
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn errors(spec: Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate_replication_controller(&spec, &mut errs);
        errs.iter().map(|e| e.message()).collect()
    }

    fn template(labels: Value) -> Value {
        json!({"metadata": {"labels": labels}, "spec": {"restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst", "containers": [{"name": "c", "image": "i",
            "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File"}]}})
    }

    #[test]
    fn a_selector_must_be_there_and_select_the_template() {
        let ok = json!({"replicas": 1, "selector": {"app": "web"},
            "template": template(json!({"app": "web", "tier": "x"}))});
        assert!(errors(ok).is_empty());
        let none = json!({"replicas": 1, "template": template(json!({"app": "web"}))});
        assert!(errors(none)
            .iter()
            .any(|e| e.contains("spec.selector: Required value")));
        let other = json!({"selector": {"app": "db"}, "template": template(json!({"app": "web"}))});
        assert!(errors(other)
            .iter()
            .any(|e| e.contains("spec.template.metadata.labels") && e.contains(SELECTOR_MISMATCH)));
        let no_tpl = json!({"selector": {"app": "db"}});
        assert!(errors(no_tpl)
            .iter()
            .any(|e| e.contains("spec.template: Required value")));
        let negative = json!({"replicas": -1, "selector": {"app": "web"},
            "template": template(json!({"app": "web"}))});
        assert!(errors(negative).iter().any(|e| e.contains("spec.replicas")));
    }
}
