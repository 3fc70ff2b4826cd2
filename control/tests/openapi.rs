//! The OpenAPI documents as a client reads them over HTTP: the v3 index
//! points at one document per group version, each with the real schemas
//! of its kinds (upstream's names, descriptions and `$ref`s that resolve
//! in the document); the v2 document has them all; both are cached by
//! content hash and ETag.

mod common;

use bosun::resources::served;
use common::ControlPlane;
use kube::Client;
use serde_json::Value;

/// A GET with the client's auth: status, headers and the JSON body.
async fn get(
    client: &Client,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, http::HeaderMap, Value) {
    let (code, head, bytes) = get_bytes(client, path, headers).await;
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (code, head, value)
}

async fn get_bytes(
    client: &Client,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, http::HeaderMap, Vec<u8>) {
    let mut req = http::Request::builder().method("GET").uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = client
        .send(req.body(kube::client::Body::empty()).unwrap())
        .await
        .expect("response");
    let code = res.status().as_u16();
    let head = res.headers().clone();
    let bytes = res.into_body().collect_bytes().await.expect("body");
    (code, head, bytes.to_vec())
}

/// Follows a field's `$ref` (or its `allOf` of one) in the document.
fn resolve<'a>(defs: &'a Value, field: &Value, prefix: &str) -> &'a Value {
    let r = field
        .get("$ref")
        .or_else(|| field.pointer("/allOf/0/$ref"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{field} refers to a schema"));
    let name = r
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("{r} starts with {prefix}"));
    defs.get(name)
        .unwrap_or_else(|| panic!("{r} resolves in the document"))
}

/// The schema whose GVK extension names `group`/`version`/`kind`.
fn schema_of<'a>(defs: &'a Value, group: &str, version: &str, kind: &str) -> Option<&'a Value> {
    defs.as_object()?.values().find(|s| {
        s["x-kubernetes-group-version-kind"]
            .as_array()
            .is_some_and(|gvks| {
                gvks.iter()
                    .any(|g| g["group"] == group && g["version"] == version && g["kind"] == kind)
            })
    })
}

const STRATEGY: &str = "The deployment strategy to use to replace existing pods with new ones.";

#[tokio::test]
async fn v3_index_leads_to_group_version_documents_with_every_kinds_schema() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let (code, _, index) = get(&client, "/openapi/v3", &[]).await;
    assert_eq!(code, 200, "{index}");
    let url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .expect("apps/v1 is in the index");
    let hash = url.split_once("?hash=").expect("URL carries a hash").1;
    let (code, headers, doc) = get(&client, url, &[]).await;
    assert_eq!(code, 200);
    assert_eq!(headers["etag"], format!("\"{hash}\""));
    assert!(headers["cache-control"]
        .to_str()
        .unwrap()
        .contains("immutable"));
    let defs = &doc["components"]["schemas"];
    let deploy = &defs["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deploy["x-kubernetes-group-version-kind"],
        serde_json::json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
    );
    let spec = resolve(defs, &deploy["properties"]["spec"], "#/components/schemas/");
    let strategy = &spec["properties"]["strategy"];
    assert_eq!(strategy["description"], STRATEGY);
    let resolved = resolve(defs, strategy, "#/components/schemas/");
    assert!(resolved["properties"]["rollingUpdate"].is_object());

    // A client that has the document revalidates it for free.
    let etag = headers["etag"].to_str().unwrap().to_string();
    let (code, _, _) = get(&client, url, &[("If-None-Match", &etag)]).await;
    assert_eq!(code, 304);

    // Every served kind has its schema in its group version's document.
    for r in served() {
        let key = if r.group.is_empty() {
            format!("api/{}", r.version)
        } else {
            format!("apis/{}/{}", r.group, r.version)
        };
        let url = index["paths"][&key]["serverRelativeURL"]
            .as_str()
            .unwrap_or_else(|| panic!("{key} is in the index"));
        let (code, _, doc) = get(&client, url, &[]).await;
        assert_eq!(code, 200, "{url}");
        assert!(
            schema_of(&doc["components"]["schemas"], r.group, r.version, r.kind).is_some(),
            "{key} has no schema for {}",
            r.kind
        );
    }
    let (code, _, _) = get(&client, "/openapi/v3/apis/apps/v9", &[]).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn v2_document_has_every_kinds_schema_with_definitions_refs() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let (code, headers, doc) = get(&client, "/openapi/v2", &[("Accept", "application/json")]).await;
    assert_eq!(code, 200);
    assert!(headers.contains_key("etag"));
    assert_eq!(doc["swagger"], "2.0");
    let defs = &doc["definitions"];
    let deploy = schema_of(defs, "apps", "v1", "Deployment").expect("Deployment schema");
    let spec = resolve(defs, &deploy["properties"]["spec"], "#/definitions/");
    let strategy = &spec["properties"]["strategy"];
    assert_eq!(strategy["description"], STRATEGY);
    resolve(defs, strategy, "#/definitions/");
    let port = &defs["io.k8s.api.core.v1.ContainerPort"]["properties"]["containerPort"];
    assert_eq!(port["type"], "integer");
    let quantity = &defs["io.k8s.apimachinery.pkg.api.resource.Quantity"];
    assert_eq!(quantity["x-kubernetes-int-or-string"], true);
    for r in served() {
        assert!(
            schema_of(defs, r.group, r.version, r.kind).is_some(),
            "v2 has no schema for {} {}",
            r.api_version(),
            r.kind
        );
    }
    // kubectl asks for gnostic's protobuf (kubectl_explain.rs reads it);
    // the answer names the type in the form Go's mime parser takes.
    let pb = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
    let (code, headers, body) = get_bytes(&client, "/openapi/v2", &[("Accept", pb)]).await;
    assert_eq!(code, 200);
    assert_eq!(
        headers["content-type"],
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    let name = b"io.k8s.api.apps.v1.Deployment";
    assert!(body.windows(name.len()).any(|w| w == name));
    // Neither JSON nor protobuf: told so.
    let (code, _, status) = get(&client, "/openapi/v2", &[("Accept", "text/html")]).await;
    assert_eq!(code, 406, "{status}");
    assert_eq!(status["reason"], "NotAcceptable");
}
