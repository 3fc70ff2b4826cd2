//! The `pod-template-hash`: what names a Deployment's ReplicaSets and
//! keeps their selectors apart (kube-controller-manager's
//! `controller.ComputeHash` and `deploymentutil.EqualIgnoreHash`).
//!
//! The hash itself (FNV-32a of the canonical JSON, with
//! `status.collisionCount` mixed in) is the toolkit's [`hash_value`].

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::Value;

use super::POD_TEMPLATE_HASH;
use crate::toolkit::hash::hash_value;

/// The hash of `template` (as the Deployment has it, without a hash
/// label) and the collision count.
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let value = serde_json::to_value(template).unwrap_or(Value::Null);
    hash_value(&value, collision_count)
}

/// `template` as compared for "is this the same template": without the
/// hash label, with no labels the same as empty labels.
fn comparable(template: &PodTemplateSpec) -> Value {
    let mut t = template.clone();
    let md = t.metadata.get_or_insert_with(Default::default);
    if let Some(labels) = md.labels.as_mut() {
        labels.remove(POD_TEMPLATE_HASH);
        if labels.is_empty() {
            md.labels = None;
        }
    }
    if md.annotations.as_ref().is_some_and(|a| a.is_empty()) {
        md.annotations = None;
    }
    serde_json::to_value(&t).unwrap_or(Value::Null)
}

/// Whether two templates are the same but for the `pod-template-hash`
/// label (which only ReplicaSet templates carry).
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    comparable(a) == comparable(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(image: &str) -> PodTemplateSpec {
        serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web", "tier": "front"}},
            "spec": {"containers": [{"name": "web", "image": image}]}
        }))
        .unwrap()
    }

    #[test]
    fn hash_is_stable_safe_encoded_and_depends_on_template_and_collisions() {
        let a = compute_hash(&template("web:1"), None);
        assert_eq!(a, compute_hash(&template("web:1"), None));
        assert!(
            (1..=10).contains(&a.len())
                && a.bytes()
                    .all(|b| crate::toolkit::hash::ALPHABET.contains(&b)),
            "{a}"
        );
        assert_ne!(a, compute_hash(&template("web:2"), None));
        assert_ne!(a, compute_hash(&template("web:1"), Some(1)));
        assert_ne!(
            compute_hash(&template("web:1"), Some(1)),
            compute_hash(&template("web:1"), Some(2))
        );
    }

    #[test]
    fn label_order_does_not_change_the_hash() {
        let reordered: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "spec": {"containers": [{"image": "web:1", "name": "web"}]},
            "metadata": {"labels": {"tier": "front", "app": "web"}}
        }))
        .unwrap();
        assert_eq!(
            compute_hash(&template("web:1"), None),
            compute_hash(&reordered, None)
        );
    }

    #[test]
    fn equality_ignores_only_the_hash_label() {
        let mut with_hash = template("web:1");
        with_hash
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert(POD_TEMPLATE_HASH.into(), "abc".into());
        assert!(equal_ignore_hash(&template("web:1"), &with_hash));
        assert!(!equal_ignore_hash(&template("web:2"), &with_hash));
    }
}
