//! core/v1 ReplicationController and PodTemplate defaults
//! (`SetDefaults_ReplicationController`, and the pod spec defaults a
//! template's spec gets).

use serde_json::{json, Map, Value};

use super::pod::{default_pod_spec, default_template};
use super::{object_at, set};

/// An RC's selector and labels default to its template's labels when
/// empty; its replicas to 1.
pub(super) fn default_replication_controller(root: &mut Map<String, Value>) {
    let spec = object_at(root, "spec");
    let template_labels = spec
        .get("template")
        .and_then(|t| t.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .filter(|l| !l.is_empty())
        .cloned();
    if let Some(labels) = &template_labels {
        let empty = spec
            .get("selector")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty);
        if empty {
            spec.insert("selector".into(), Value::Object(labels.clone()));
        }
    }
    set(spec, "replicas", json!(1));
    if spec.get("template").is_some_and(Value::is_object) {
        default_template(spec);
    }
    if let Some(labels) = template_labels {
        let md = object_at(root, "metadata");
        let empty = md
            .get("labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty);
        if empty {
            md.insert("labels".into(), Value::Object(labels));
        }
    }
}

/// A PodTemplate's `template.spec` gets a pod spec's defaults.
pub(super) fn default_pod_template(root: &mut Map<String, Value>) {
    let tpl = object_at(root, "template");
    default_pod_spec(object_at(tpl, "spec"));
}
