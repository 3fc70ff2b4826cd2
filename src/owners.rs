//! Owner references: which object controls another, and the reference a
//! controller writes into what it makes (Kubernetes' `metav1.GetControllerOf`
//! and `NewControllerRef`). One home for the server, the controllers and the
//! CLI, which reads objects as JSON.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use serde_json::Value;

/// The owner reference with `controller: true`, if the object has one.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// [`controller_of`] for an object's `metadata` read as JSON.
pub fn controller_of_json(meta: &Value) -> Option<&Value> {
    meta.get("ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
}

/// The reference a controller puts on the objects it makes: controller,
/// and blocking the owner's foreground deletion until they are gone (kube's
/// `controller_owner_ref` leaves `blockOwnerDeletion` out).
pub fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    OwnerReference {
        block_owner_deletion: Some(true),
        ..owner.controller_owner_ref(&()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use serde_json::json;

    fn reference(uid: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: format!("rs-{uid}"),
            uid: uid.into(),
            controller,
            ..Default::default()
        }
    }

    #[test]
    fn the_controller_is_the_reference_marked_controller() {
        let meta = ObjectMeta {
            owner_references: Some(vec![
                reference("a", None),
                reference("b", Some(false)),
                reference("c", Some(true)),
            ]),
            ..Default::default()
        };
        assert_eq!(controller_of(&meta).map(|r| r.uid.as_str()), Some("c"));
        assert!(controller_of(&ObjectMeta::default()).is_none());

        let json = serde_json::to_value(&meta).unwrap();
        assert_eq!(controller_of_json(&json).unwrap()["uid"], "c");
        assert!(controller_of_json(&json!({"ownerReferences": [{"uid": "a"}]})).is_none());
        assert!(controller_of_json(&json!({})).is_none());
    }

    #[test]
    fn controller_refs_block_owner_deletion() {
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let r = controller_ref(&rs);
        assert_eq!(
            (r.kind.as_str(), r.name.as_str(), r.uid.as_str()),
            ("ReplicaSet", "web", "u1")
        );
        assert_eq!(r.controller, Some(true));
        assert_eq!(r.block_owner_deletion, Some(true));
    }
}
