//! DaemonSets: the apiserver keeps the template's generation (apps/v1
//! shows it as the `deprecated.daemonset.template.generation`
//! annotation): 1 on create, one more each time the pod template changes,
//! whatever the client sent. The DaemonSet controller stamps it on pods as
//! `pod-template-generation`.

use serde_json::{json, Value};

use super::Strategy;
use crate::api::ApiOptions;

pub const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

pub struct DaemonSetStrategy;

fn set_template_generation(obj: &mut Value, generation: i64) {
    let Some(md) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let annotations = md.entry("annotations").or_insert_with(|| json!({}));
    if !annotations.is_object() {
        *annotations = json!({});
    }
    annotations[TEMPLATE_GENERATION] = json!(generation.to_string());
}

fn template_generation(obj: &Value) -> i64 {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(TEMPLATE_GENERATION))
        .and_then(Value::as_str)
        .and_then(|g| g.parse().ok())
        .unwrap_or(0)
}

impl Strategy for DaemonSetStrategy {
    fn prepare_for_create(&self, _options: &ApiOptions, obj: &mut Value) {
        set_template_generation(obj, 1);
    }

    fn prepare_for_update(&self, current: &Value, next: &mut Value) {
        let mut generation = template_generation(current).max(1);
        if current.pointer("/spec/template") != next.pointer("/spec/template") {
            generation += 1;
        }
        set_template_generation(next, generation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_generation_counts_template_changes_only() {
        let ds = |image: &str, generation: Option<&str>| {
            let mut d = json!({"metadata": {"name": "fluentd"},
                "spec": {"minReadySeconds": 0,
                         "template": {"spec": {"containers": [{"image": image}]}}}});
            if let Some(g) = generation {
                d["metadata"]["annotations"] = json!({TEMPLATE_GENERATION: g});
            }
            d
        };
        let mut created = ds("a", Some("7"));
        DaemonSetStrategy.prepare_for_create(&ApiOptions::default(), &mut created);
        assert_eq!(
            template_generation(&created),
            1,
            "the client's value is ignored"
        );

        let mut same = ds("a", None);
        same["spec"]["minReadySeconds"] = json!(5);
        DaemonSetStrategy.prepare_for_update(&created, &mut same);
        assert_eq!(template_generation(&same), 1);

        let mut changed = ds("b", Some("40"));
        DaemonSetStrategy.prepare_for_update(&same, &mut changed);
        assert_eq!(template_generation(&changed), 2);
    }
}
