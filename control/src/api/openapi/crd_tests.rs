use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::api::custom::{served_versions, CustomResources, CRD_PREFIX};
use crate::api::openapi::published;
use crate::store::Store;

fn widget_crd(spec_schema: Value) -> Value {
    json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size",
                    "statusReplicasPath": ".status.size"}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "A widget.",
                    "properties": {"spec": spec_schema, "status": {"type": "object",
                        "properties": {"size": {"type": "integer"}}}}}}}]},
        "status": {
            "acceptedNames": {"plural": "widgets", "kind": "Widget", "listKind": "WidgetList"},
            "conditions": [{"type": "Established", "status": "True"}]}
    })
}

fn spec() -> Value {
    json!({
        "type": "object",
        "description": "What the widget should be.",
        "required": ["size", "note"],
        "properties": {
            "size": {"type": "integer", "description": "How big.", "minimum": 1,
                "example": 3},
            "port": {"x-kubernetes-int-or-string": true},
            "note": {"type": "string", "nullable": true},
            "shape": {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "not": {"required": ["a", "b"]}},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"known": {"type": "string"}}},
            "list": {"type": "array", "nullable": true, "items": {"type": "string"}},
            "embedded": {"type": "object", "x-kubernetes-embedded-resource": true,
                "x-kubernetes-preserve-unknown-fields": true},
        },
    })
}

fn version(crd: &Value) -> CustomVersion {
    served_versions(crd).remove(0)
}

#[test]
fn definitions_are_named_by_reversed_group_and_marked_with_their_gvk() {
    let defs = definitions(&version(&widget_crd(spec())));
    let names: Vec<&String> = defs.keys().collect();
    assert_eq!(
        names,
        ["com.example.v1.Widget", "com.example.v1.WidgetList"]
    );
    let kind = &defs["com.example.v1.Widget"];
    assert_eq!(
        kind["x-kubernetes-group-version-kind"],
        json!([{"group": "example.com", "kind": "Widget", "version": "v1"}])
    );
    assert_eq!(kind["description"], "A widget.");
    assert_eq!(kind["properties"]["apiVersion"]["type"], "string");
    assert_eq!(kind["properties"]["kind"]["type"], "string");
    assert_eq!(
        kind["properties"]["metadata"]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    let list = &defs["com.example.v1.WidgetList"];
    assert_eq!(
        list["x-kubernetes-group-version-kind"][0]["kind"],
        "WidgetList"
    );
    assert_eq!(
        list["properties"]["items"]["items"]["$ref"],
        "#/components/schemas/com.example.v1.Widget"
    );
    assert_eq!(list["required"], json!(["items"]));
    assert_eq!(
        definition_name("a.b.example.io", "v2", "K"),
        "io.example.b.a.v2.K"
    );
}

#[test]
fn v3_keeps_the_structural_schema_with_int_or_string_unfolded() {
    let kind = kind_schema(&version(&widget_crd(spec())));
    let s = &kind["properties"]["spec"];
    assert_eq!(s["description"], "What the widget should be.");
    assert_eq!(s["properties"]["size"]["minimum"], 1);
    assert!(s["properties"]["size"].get("example").is_none(), "{s}");
    assert_eq!(
        s["properties"]["port"]["anyOf"],
        json!([{"type": "integer"}, {"type": "string"}])
    );
    assert_eq!(s["properties"]["note"]["nullable"], true);
    assert!(s["properties"]["shape"]["oneOf"].is_array());
    let embedded = &s["properties"]["embedded"];
    assert_eq!(embedded["properties"]["kind"]["type"], "string");
    assert_eq!(embedded["required"], json!(["apiVersion", "kind"]));
}

#[test]
fn v2_drops_what_swagger_2_cannot_say() {
    let v2 = to_v2(&kind_schema(&version(&widget_crd(spec()))));
    let s = &v2["properties"]["spec"];
    // anyOf/oneOf/not go.
    assert!(s["properties"]["port"].get("anyOf").is_none(), "{s}");
    assert_eq!(s["properties"]["port"]["x-kubernetes-int-or-string"], true);
    assert!(s["properties"]["shape"].get("oneOf").is_none());
    assert!(s["properties"]["shape"].get("not").is_none());
    assert_eq!(
        s["properties"]["shape"]["properties"]["a"]["type"],
        "string"
    );
    // A nullable field is untyped and no longer required.
    assert_eq!(s["properties"]["note"], json!({}));
    assert_eq!(s["required"], json!(["size"]));
    assert_eq!(s["properties"]["list"], json!({}));
    // Preserving unknown fields: no properties for kubectl to check.
    assert_eq!(
        s["properties"]["extra"],
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
    );
    assert_eq!(s["properties"]["size"]["description"], "How big.");
    assert_eq!(v2["x-kubernetes-group-version-kind"][0]["kind"], "Widget");

    // An array whose items are dropped is left untyped.
    let arr = to_v2(
        &json!({"type": "object", "properties": {"a": {"type": "array",
        "items": {"type": "string"}, "x-kubernetes-preserve-unknown-fields": true}}}),
    );
    assert!(arr["properties"]["a"].get("type").is_none(), "{arr}");

    // A root preserving unknown fields is an object of anything.
    let mut crd = widget_crd(spec());
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        ["x-kubernetes-preserve-unknown-fields"] = json!(true);
    let v2 = to_v2(&kind_schema(&version(&crd)));
    assert_eq!(
        v2,
        json!({"type": "object", "x-kubernetes-group-version-kind":
            [{"group": "example.com", "kind": "Widget", "version": "v1"}]})
    );
}

#[test]
fn a_version_without_a_structural_schema_is_any_object() {
    let mut crd = widget_crd(spec());
    crd["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("schema");
    let kind = kind_schema(&version(&crd));
    assert_eq!(kind["type"], "object");
    assert!(kind.get("properties").is_none(), "{kind}");
}

/// Follows the `$ref`s of a document and checks each resolves in it.
fn all_refs_resolve(doc: &Value, prefix: &str, at: &str) {
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r);
                }
                m.values().for_each(|c| refs(c, out));
            }
            Value::Array(a) => a.iter().for_each(|c| refs(c, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    refs(doc, &mut found);
    assert!(!found.is_empty());
    for r in found {
        let name = r.strip_prefix(prefix).expect(r);
        assert!(doc.pointer(at).unwrap().get(name).is_some(), "{r}");
    }
}

#[test]
fn published_documents_carry_the_crd_in_v3_and_v2() {
    let v = Arc::new(version(&widget_crd(spec())));
    let p = published::Published::build(0, vec![v]);
    let doc: Value =
        serde_json::from_slice(&p.v3_document("apis/example.com/v1").unwrap().body).unwrap();
    all_refs_resolve(&doc, "#/components/schemas/", "/components/schemas");
    let paths = doc["paths"].as_object().unwrap();
    let item = "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}";
    for path in [
        "/apis/example.com/v1/namespaces/{namespace}/widgets".to_string(),
        item.to_string(),
        format!("{item}/status"),
        format!("{item}/scale"),
    ] {
        assert!(paths.contains_key(&path), "{path}: {:?}", paths.keys());
    }
    let patch = &paths[item]["patch"];
    assert!(patch["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "fieldValidation"));
    assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Widget");
    assert_eq!(
        paths[&format!("{item}/scale")]["get"]["x-kubernetes-group-version-kind"]["kind"],
        "Scale"
    );
    // v3 keeps a field's description beside its $ref in an allOf.
    let metadata = &doc["components"]["schemas"]["com.example.v1.Widget"]["properties"]["metadata"];
    assert!(metadata["allOf"][0]["$ref"].is_string(), "{metadata}");

    let v2: Value = serde_json::from_slice(&p.v2_json().body).unwrap();
    all_refs_resolve(&v2, "#/definitions/", "/definitions");
    let widget = &v2["definitions"]["com.example.v1.Widget"];
    assert_eq!(
        widget["properties"]["spec"]["properties"]["note"],
        json!({})
    );
    assert!(v2["paths"].get(item).is_some());
    assert!(v2["definitions"]
        .get("io.k8s.api.apps.v1.Deployment")
        .is_some());
    let pb = &p.v2_protobuf().body;
    let has = |needle: &[u8]| pb.windows(needle.len()).any(|w| w == needle);
    assert!(has(b"com.example.v1.WidgetList"));
    assert!(has(b"io.k8s.api.apps.v1.Deployment"));
}

fn index_url(custom: &CustomResources) -> Option<String> {
    let p = published::current(custom);
    super::super::v3_index(&p)["paths"]["apis/example.com/v1"]["serverRelativeURL"]
        .as_str()
        .map(str::to_string)
}

/// The index follows the registry: a CRD established appears, a changed
/// schema changes its hash (kubectl's cache key), a deleted one goes.
#[tokio::test]
async fn the_index_follows_crds_established_changed_and_deleted() {
    let store: Arc<dyn Store> =
        Arc::new(crate::store::EmbeddedStore::in_memory(Default::default()).unwrap());
    let custom = CustomResources::new(store.clone());
    tokio::spawn(custom.clone().follow());
    let key = format!("{CRD_PREFIX}widgets.example.com");
    custom.caught_up().await;
    assert_eq!(index_url(&custom), None);
    let rev = store
        .create(&key, serde_json::to_vec(&widget_crd(spec())).unwrap())
        .await
        .unwrap();
    custom.caught_up().await;
    let first = index_url(&custom).expect("the CRD's group version is published");
    assert_eq!(
        index_url(&custom).as_ref(),
        Some(&first),
        "same until a change"
    );
    let mut changed = spec();
    changed["properties"]["size"]["description"] = json!("How big, now.");
    let rev = store
        .update(&key, rev, serde_json::to_vec(&widget_crd(changed)).unwrap())
        .await
        .unwrap();
    custom.caught_up().await;
    let second = index_url(&custom).expect("still published");
    assert_ne!(first, second);
    store.delete(&key, rev).await.unwrap();
    custom.caught_up().await;
    assert_eq!(index_url(&custom), None);
}

/// What building the documents costs with 50 CRDs (run with --ignored
/// --nocapture; debug build).
#[test]
#[ignore]
fn cost_of_fifty_crds() {
    let versions: Vec<Arc<CustomVersion>> = (0..50)
        .map(|i| {
            let mut crd = widget_crd(spec());
            crd["spec"]["group"] = json!(format!("g{i}.example.com"));
            Arc::new(version(&crd))
        })
        .collect();
    // The built-in parts are built once per process, not per change.
    let _ = published::empty().v2_protobuf();
    let started = std::time::Instant::now();
    let p = published::Published::build(1, versions);
    let v3 = started.elapsed();
    let _ = p.v2_json();
    let v2 = started.elapsed() - v3;
    let _ = p.v2_protobuf();
    let pb = started.elapsed() - v3 - v2;
    println!("50 CRDs: v3 {v3:?}, v2 JSON {v2:?}, v2 protobuf {pb:?}");
}
