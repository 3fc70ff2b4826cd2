//! The registry's view of CRDs: what is served when, under which names,
//! and the Tables of custom resources.

use super::*;
use bosun::printers::IncludeObject;
use serde_json::json;

fn crd(established: bool) -> Value {
    let status = if established { "True" } else { "False" };
    json!({
        "metadata": {"name": "widgets.unit.example.com"},
        "spec": {"group": "unit.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false},
                {"name": "v1", "served": true, "storage": true,
                 "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas"}},
                 "selectableFields": [{"jsonPath": ".spec.color"}],
                 "additionalPrinterColumns": [
                    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
                    {"name": "Made", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]},
                {"name": "v1alpha1", "served": false, "storage": false}]},
        "status": {
            "acceptedNames": {"plural": "widgets", "kind": "Widget", "singular": "widget",
                "shortNames": ["wd"], "categories": ["all"]},
            "conditions": [{"type": "Established", "status": status}]}
    })
}

#[test]
fn only_established_crds_serve_their_served_versions_under_accepted_names() {
    assert!(served_versions(&crd(false)).is_empty());
    let versions = served_versions(&crd(true));
    let names: Vec<&str> = versions.iter().map(|v| v.res.version).collect();
    assert_eq!(names, ["v1beta1", "v1"]);
    let v1 = &versions[1];
    assert_eq!(v1.res.plural_group(), "widgets.unit.example.com");
    assert_eq!(v1.res.storage_version, "v1");
    assert_eq!(v1.res.categories, ["all"]);
    assert_eq!(v1.res.subresources, ["status", "scale"]);
    assert_eq!(v1.res.selectable_fields, ["spec.color"]);
    assert!(v1.res.namespaced && !v1.res.is_builtin());
    assert_eq!(v1.list_kind, "WidgetList");
    assert!(versions[0].res.subresources.is_empty());
    assert_eq!(crate::api::storage_resource(versions[0].res).version, "v1");
}

#[test]
fn versions_sort_as_kubernetes_sorts_them() {
    let mut v = vec!["v1alpha1", "foo", "v2beta1", "v1", "v2", "v1beta2", "v10"];
    v.sort_by(|a, b| version_priority(a, b));
    assert_eq!(
        v,
        ["v10", "v2", "v1", "v2beta1", "v1beta2", "v1alpha1", "foo"]
    );
}

#[tokio::test]
async fn the_registry_follows_crds_in_the_store() {
    let store: Arc<dyn Store> =
        Arc::new(crate::store::EmbeddedStore::in_memory(Default::default()).unwrap());
    let custom = CustomResources::new(store.clone());
    tokio::spawn(custom.clone().follow());
    let key = format!("{CRD_PREFIX}widgets.unit.example.com");
    let rev = store
        .create(&key, serde_json::to_vec(&crd(false)).unwrap())
        .await
        .unwrap();
    custom.caught_up().await;
    assert!(custom
        .by_path("unit.example.com", "v1", "widgets")
        .is_none());
    store
        .update(&key, rev, serde_json::to_vec(&crd(true)).unwrap())
        .await
        .unwrap();
    custom.caught_up().await;
    let v1 = custom.by_path("unit.example.com", "v1", "widgets").unwrap();
    assert_eq!(v1.res.kind, "Widget");
    assert!(custom
        .by_kind("unit.example.com/v1beta1", "Widget")
        .is_some());
    assert!(custom
        .by_path("unit.example.com", "v1alpha1", "widgets")
        .is_none());
    let rev = store.current_revision();
    store.delete(&key, rev).await.unwrap();
    custom.caught_up().await;
    assert!(custom.all().is_empty());
}

#[test]
fn tables_print_the_printer_columns() {
    let versions = served_versions(&crd(true));
    let now = chrono::Utc::now();
    let made = (now - chrono::Duration::minutes(5)).to_rfc3339();
    let obj = json!({"metadata": {"name": "w1", "creationTimestamp": made},
        "spec": {"replicas": 3, "color": {"r": 1}}});
    let t = table::table(
        &versions[1],
        std::slice::from_ref(&obj),
        "7",
        IncludeObject::None,
        now,
    );
    let names: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Name", "Replicas", "Color", "Made"]);
    assert_eq!(t["columnDefinitions"][2]["priority"], 1);
    assert_eq!(t["rows"][0]["cells"], json!(["w1", 3, "{\"r\":1}", "5m"]));
    // Without columns of its own a version prints Name and Age; a missing
    // field is an empty cell.
    let t = table::table(&versions[0], &[obj], "7", IncludeObject::None, now);
    assert_eq!(t["rows"][0]["cells"], json!(["w1", "5m"]));
    assert_eq!(table::find(&json!({"spec": {}}), ".spec.replicas"), None);
    assert_eq!(
        table::find(&json!({"a": [{"b": 2}]}), ".a[0].b"),
        Some(json!(2))
    );
}

#[tokio::test]
async fn versions_share_one_storage_version_and_status_moves_only_through_status() {
    use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
    let api = crate::toolkit::testing::TestApi::start().await;
    let key = format!("{CRD_PREFIX}widgets.unit.example.com");
    api.store
        .create(&key, serde_json::to_vec(&crd(true)).unwrap())
        .await
        .unwrap();
    let at = |version: &str| {
        let ar = ApiResource {
            group: "unit.example.com".into(),
            version: version.into(),
            api_version: format!("unit.example.com/{version}"),
            kind: "Widget".into(),
            plural: "widgets".into(),
        };
        Api::<DynamicObject>::namespaced_with(api.client.clone(), "default", &ar)
    };
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "unit.example.com/v1beta1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"replicas": 1}}))
    .unwrap();
    let made = at("v1beta1")
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
    assert_eq!(made.types.unwrap().api_version, "unit.example.com/v1beta1");
    // Kept in the storage version, served in the one asked for.
    let stored = api
        .store
        .get("/registry/widgets.unit.example.com/default/w")
        .await
        .unwrap()
        .unwrap();
    let stored: Value = serde_json::from_slice(&stored.value[..]).unwrap();
    assert_eq!(stored["apiVersion"], "unit.example.com/v1");
    let v1 = at("v1");
    let got = v1.get("w").await.unwrap();
    assert_eq!(got.types.unwrap().api_version, "unit.example.com/v1");
    assert_eq!(got.data["spec"]["replicas"], 1);
    assert_eq!(got.metadata.generation, Some(1));

    // v1 has a status subresource: the main resource keeps the old status
    // and its generation; /status keeps the old spec.
    let patch = Patch::Merge(json!({"status": {"replicas": 5}}));
    let out = v1
        .patch("w", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert!(out.data.get("status").is_none());
    assert_eq!(out.metadata.generation, Some(1));
    let patch = Patch::Merge(json!({"spec": {"replicas": 9}, "status": {"replicas": 5}}));
    let out = v1
        .patch_status("w", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(out.data["status"]["replicas"], 5);
    assert_eq!(out.data["spec"]["replicas"], 1);
    assert_eq!(out.metadata.generation, Some(1));
    let patch = Patch::Merge(json!({"spec": {"replicas": 2}}));
    let out = v1
        .patch("w", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(out.metadata.generation, Some(2));
    // Any change but metadata and status is a new generation, not only spec.
    let patch = Patch::Merge(json!({"data": {"x": 1}}));
    let out = v1
        .patch("w", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(out.metadata.generation, Some(3));
}

#[test]
fn a_custom_kind_named_like_a_built_in_one_gets_none_of_its_rules() {
    let pod_like = intern::resource(&intern::Description {
        group: "unit.example.com".into(),
        version: "v1".into(),
        kind: "Pod".into(),
        plural: "pods".into(),
        storage_version: "v1".into(),
        namespaced: true,
        ..Default::default()
    });
    let builtin = bosun::resources::by_name("pods").unwrap();
    let strategy = crate::api::strategy::for_res;
    assert!(strategy(builtin).initial_status(&json!({})).is_some());
    assert!(strategy(pod_like).initial_status(&json!({})).is_none());
    assert!(crate::api::items::selectable(pod_like).is_empty());
}
