//! node.k8s.io/v1: RuntimeClass (`ValidateRuntimeClass`,
//! `ValidateRuntimeClassUpdate`): the handler a DNS label and immutable,
//! the overhead as a container's resource limits, the scheduling's node
//! selector as labels and its tolerations as a pod's.

use serde_json::Value;

use super::container::validate_overhead;
use super::meta::validate_labels;
use super::pod::validate_tolerations;
use super::{arr_of, child, get, str_of, sub, FieldError};
use crate::names::is_dns1123_label;

pub(crate) fn validate_runtime_class(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let handler = str_of(obj, "handler");
    if old.is_some_and(|old| handler != str_of(old, "handler")) {
        errs.push(FieldError::invalid(
            "handler",
            handler,
            "field is immutable",
        ));
    }
    for m in is_dns1123_label(handler) {
        errs.push(FieldError::invalid("handler", handler, m));
    }
    if let Some(overhead) = get(obj, "overhead") {
        validate_overhead(sub(overhead, "podFixed"), "overhead", errs);
    }
    if let Some(s) = get(obj, "scheduling") {
        let path = "scheduling";
        validate_labels(get(s, "nodeSelector"), &child(path, "nodeSelector"), errs);
        validate_tolerations(arr_of(s, "tolerations"), &child(path, "tolerations"), errs);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn errors(obj: Value, old: Option<Value>) -> Vec<String> {
        let mut errs = Vec::new();
        validate_runtime_class(&obj, old.as_ref(), &mut errs);
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn handler_is_a_dns_label_and_immutable() {
        assert!(errors(json!({"handler": "runc"}), None).is_empty());
        let bad = errors(json!({"handler": "Run_C"}), None);
        assert!(
            bad[0].starts_with("handler: Invalid value: \"Run_C\": a lowercase RFC 1123 label"),
            "{bad:?}"
        );
        assert_eq!(errors(json!({"handler": ""}), None).len(), 1);
        let changed = errors(json!({"handler": "kata"}), Some(json!({"handler": "runc"})));
        assert_eq!(
            changed,
            ["handler: Invalid value: \"kata\": field is immutable"]
        );
    }

    #[test]
    fn overhead_and_scheduling() {
        let errs = errors(
            json!({"handler": "runc",
                "overhead": {"podFixed": {"cpu": "-1", "memory": "10Mi"}},
                "scheduling": {"nodeSelector": {"bad key!": "v"},
                    "tolerations": [{"operator": "Equal", "value": "x"}]}}),
            None,
        );
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(errs[0].starts_with("overhead.limits[cpu]"), "{errs:?}");
        assert!(errs[1].starts_with("scheduling.nodeSelector"), "{errs:?}");
        assert!(
            errs[2].starts_with("scheduling.tolerations[0].operator"),
            "{errs:?}"
        );
    }
}
