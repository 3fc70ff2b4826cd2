use std::sync::Arc;

use serde_json::json;

use super::rule::Request;
use super::Rbac;
use crate::auth::user::UserInfo;
use crate::store::{EmbeddedStore, Store, StoreOptions};

async fn store_with(objects: &[(&str, serde_json::Value)]) -> Arc<dyn Store> {
    let store: Arc<dyn Store> =
        Arc::new(EmbeddedStore::in_memory(StoreOptions::default()).expect("store"));
    for (plural, obj) in objects {
        let res = bosun::resources::by_path(super::GROUP, "v1", plural).unwrap();
        let key = res.storage_key(
            obj["metadata"]["namespace"].as_str(),
            obj["metadata"]["name"].as_str().unwrap(),
        );
        store
            .create(&key, serde_json::to_vec(obj).unwrap())
            .await
            .unwrap();
    }
    store
}

fn get_secrets(name: &str) -> Request<'_> {
    Request::Resource {
        verb: "get",
        group: "",
        resource: "secrets",
        subresource: None,
        name,
    }
}

#[tokio::test]
async fn bindings_grant_their_roles_rules_to_their_subjects_only() {
    let store = store_with(&[
        ("roles", json!({"metadata": {"name": "reader", "namespace": "a"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}]})),
        ("clusterroles", json!({"metadata": {"name": "one-secret"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["s1"]}]})),
        ("rolebindings", json!({"metadata": {"name": "b", "namespace": "a"},
            "roleRef": {"apiGroup": super::GROUP, "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot"},
                         {"kind": "Group", "name": "readers", "apiGroup": super::GROUP}]})),
        ("clusterrolebindings", json!({"metadata": {"name": "c"},
            "roleRef": {"apiGroup": super::GROUP, "kind": "ClusterRole", "name": "one-secret"},
            "subjects": [{"kind": "User", "name": "alice", "apiGroup": super::GROUP}]})),
    ])
    .await;
    let rbac = Rbac::new(store).await.unwrap();
    let robot = UserInfo::service_account("a", "robot", "");
    let other_robot = UserInfo::service_account("b", "robot", "");
    let reader = UserInfo::authenticated("bob", &["readers"]);
    let alice = UserInfo::authenticated("alice", &[]);
    assert!(rbac.allows(&robot, &get_secrets("x"), Some("a")).await);
    assert!(!rbac.allows(&robot, &get_secrets("x"), Some("b")).await);
    assert!(
        !rbac
            .allows(&other_robot, &get_secrets("x"), Some("a"))
            .await
    );
    assert!(rbac.allows(&reader, &get_secrets("x"), Some("a")).await);
    assert!(rbac.allows(&alice, &get_secrets("s1"), Some("z")).await);
    assert!(!rbac.allows(&alice, &get_secrets("s2"), Some("z")).await);
    let list = Request::Resource {
        verb: "list",
        group: "",
        resource: "secrets",
        subresource: None,
        name: "",
    };
    assert!(!rbac.allows(&robot, &list, Some("a")).await);
}

#[tokio::test]
async fn a_binding_written_after_the_index_counts_at_once() {
    let store = store_with(&[]).await;
    let rbac = Rbac::new(store.clone()).await.unwrap();
    let alice = UserInfo::authenticated("alice", &[]);
    assert!(!rbac.allows(&alice, &get_secrets("x"), Some("a")).await);
    let res = bosun::resources::by_path(super::GROUP, "v1", "clusterrolebindings").unwrap();
    let binding = json!({"metadata": {"name": "c"},
        "roleRef": {"apiGroup": super::GROUP, "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": super::GROUP}]});
    store
        .create(
            &res.storage_key(None, "c"),
            serde_json::to_vec(&binding).unwrap(),
        )
        .await
        .unwrap();
    let roles = bosun::resources::by_path(super::GROUP, "v1", "clusterroles").unwrap();
    let admin = json!({"metadata": {"name": "cluster-admin"},
        "rules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]});
    store
        .create(
            &roles.storage_key(None, "cluster-admin"),
            serde_json::to_vec(&admin).unwrap(),
        )
        .await
        .unwrap();
    // No follow() running: the denial's fresh read finds the binding.
    assert!(rbac.allows(&alice, &get_secrets("x"), Some("a")).await);
}
