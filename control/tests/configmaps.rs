//! ConfigMaps and Secrets through the API server, as kube-rs sends them:
//! create/get/list, `stringData` folded into `data`, Kubernetes' validation
//! errors naming the field, and `immutable`; ServiceAccounts stored and
//! printed.

mod common;

use common::{dynamic_api, raw, ControlPlane};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kube::Client;
use serde_json::{json, Value};

fn dynamic(v: Value) -> DynamicObject {
    serde_json::from_value(v).expect("a DynamicObject")
}

/// Creates `obj` in `default` and returns the status code and body.
async fn post(client: &Client, plural: &str, obj: Value) -> (u16, Value) {
    raw(
        client,
        "POST",
        &format!("/api/v1/namespaces/default/{plural}"),
        "application/json",
        serde_json::to_vec(&obj).unwrap(),
    )
    .await
}

fn message(body: &Value) -> String {
    body["message"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn config_maps_and_secrets_are_stored_listed_and_printed() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let cms = dynamic_api(&client, "configmaps", Some("default"));
    cms.create(
        &PostParams::default(),
        &dynamic(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "app"},
            "data": {"greeting": "hello", "app.properties": "a=1\nb=2\n"},
            "binaryData": {"blob": "AAEC"}})),
    )
    .await
    .unwrap();
    let got = cms.get("app").await.unwrap();
    assert_eq!(got.data["data"]["greeting"], "hello");
    assert_eq!(got.data["binaryData"]["blob"], "AAEC");
    let listed = cms.list(&ListParams::default()).await.unwrap();
    assert!(listed
        .items
        .iter()
        .any(|o| o.metadata.name.as_deref() == Some("app")));

    let secrets = dynamic_api(&client, "secrets", Some("default"));
    let created = secrets
        .create(
            &PostParams::default(),
            &dynamic(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "db"},
                "data": {"user": "YWRtaW4="}})),
        )
        .await
        .unwrap();
    assert_eq!(created.data["type"], "Opaque", "type defaults to Opaque");

    // The Table kubectl asks for: NAME DATA AGE and NAME TYPE DATA AGE.
    let table = |path: &'static str| {
        let client = client.clone();
        async move {
            let req = http::Request::builder()
                .uri(path)
                .header(
                    http::header::ACCEPT,
                    "application/json;as=Table;v=v1;g=meta.k8s.io",
                )
                .body(kube::client::Body::empty())
                .unwrap();
            let res = client.send(req).await.unwrap();
            let bytes = res.into_body().collect_bytes().await.unwrap();
            serde_json::from_slice::<Value>(&bytes).unwrap()
        }
    };
    let t = table("/api/v1/namespaces/default/configmaps").await;
    let names: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Name", "Data", "Age"]);
    let row = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["cells"][0] == "app")
        .unwrap();
    assert_eq!(row["cells"][1], 3, "data and binaryData keys");
    let t = table("/api/v1/namespaces/default/secrets").await;
    assert_eq!(t["rows"][0]["cells"][1], "Opaque");
    assert_eq!(t["rows"][0]["cells"][2], 1);
}

#[tokio::test]
async fn string_data_is_folded_into_data_on_create_update_and_patch() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let (code, body) = post(
        &client,
        "secrets",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"a": "YQ==", "b": "YQ=="},
            "stringData": {"b": "bee", "c": "sea"}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["data"], json!({"a": "YQ==", "b": "YmVl", "c": "c2Vh"}));
    assert!(body.get("stringData").is_none(), "{body}");

    let secrets = dynamic_api(&client, "secrets", Some("default"));
    let stored = secrets.get("s").await.unwrap();
    assert!(stored.data.get("stringData").is_none());
    assert_eq!(stored.data["data"]["c"], "c2Vh");

    let patched = secrets
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"a": "new"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["data"]["a"], "bmV3");
    assert!(patched.data.get("stringData").is_none());

    let mut replaced = patched.clone();
    replaced.data["stringData"] = json!({"d": "dee"});
    let updated = secrets
        .replace("s", &PostParams::default(), &replaced)
        .await
        .unwrap();
    assert_eq!(updated.data["data"]["d"], "ZGVl");
    assert_eq!(updated.data["data"]["a"], "bmV3");
}

#[tokio::test]
async fn invalid_config_maps_and_secrets_name_the_field() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        (
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad-key"},
                "data": {"a/b": "x"}}),
            422,
            "ConfigMap \"bad-key\" is invalid: data[a/b]: Invalid value: \"a/b\": a valid config key must consist of alphanumeric characters",
        ),
        (
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dots"},
                "data": {"..": "x"}}),
            422,
            "data[..]: Invalid value: \"..\": must not be '..'",
        ),
        (
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dup"},
                "data": {"k": "x"}, "binaryData": {"k": "AA=="}}),
            422,
            "data[k]: Invalid value: \"k\": duplicate of key present in binaryData",
        ),
        (
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
                "data": {"k": "x".repeat(1024 * 1024 + 1)}}),
            422,
            "data: Too long: may not be more than 1048576 bytes",
        ),
        (
            "secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "notb64"},
                "data": {"k": "not base64!"}}),
            400,
            "Secret in version \"v1\" cannot be handled as a Secret",
        ),
        (
            "secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls"},
                "type": "kubernetes.io/tls", "stringData": {"tls.crt": "x"}}),
            422,
            "Secret \"tls\" is invalid: data[tls.key]: Required value",
        ),
        (
            "secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "reg"},
                "type": "kubernetes.io/dockerconfigjson"}),
            422,
            "data[.dockerconfigjson]: Required value",
        ),
        (
            "secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sa"},
                "type": "kubernetes.io/service-account-token"}),
            422,
            "metadata.annotations[kubernetes.io/service-account.name]: Required value",
        ),
        (
            "secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "strkey"},
                "stringData": {"no spaces": "x"}}),
            422,
            "data[no spaces]: Invalid value: \"no spaces\"",
        ),
    ];
    for (plural, obj, want_code, want) in cases {
        let name = obj["metadata"]["name"].clone();
        let (code, body) = post(&client, plural, obj).await;
        assert_eq!(code, want_code, "{plural}/{name}: {body}");
        assert!(
            message(&body).contains(want),
            "{plural}/{name}: {} does not contain {want}",
            message(&body)
        );
    }
    // Nothing was half-written.
    let (_, list) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/secrets",
        "application/json",
        vec![],
    )
    .await;
    assert_eq!(list["items"], json!([]));
}

#[tokio::test]
async fn immutable_config_maps_and_secrets_refuse_changes() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let cms = dynamic_api(&client, "configmaps", Some("default"));
    cms.create(
        &PostParams::default(),
        &dynamic(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "frozen"}, "immutable": true, "data": {"k": "v"}})),
    )
    .await
    .unwrap();
    let err = cms
        .patch(
            "frozen",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "changed"}})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        "ConfigMap \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    let err = cms
        .patch(
            "frozen",
            &PatchParams::default(),
            &Patch::Merge(json!({"immutable": false})),
        )
        .await
        .unwrap_err();
    assert!(err
        .to_string()
        .contains("immutable: Forbidden: field is immutable when `immutable` is set"));
    // Metadata still changes.
    cms.patch(
        "frozen",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await
    .unwrap();

    let secrets = dynamic_api(&client, "secrets", Some("default"));
    secrets
        .create(
            &PostParams::default(),
            &dynamic(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "frozen"}, "immutable": true,
                "stringData": {"k": "v"}})),
        )
        .await
        .unwrap();
    let err = secrets
        .patch(
            "frozen",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"k": "other"}})),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("data: Forbidden: field is immutable when `immutable` is set"),
        "{err}"
    );
    let err = secrets
        .patch(
            "frozen",
            &PatchParams::default(),
            &Patch::Merge(json!({"type": "kubernetes.io/tls"})),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("type: Invalid value: \"kubernetes.io/tls\": field is immutable"),
        "{err}"
    );

    // A mutable one changes, and may then be frozen.
    cms.create(
        &PostParams::default(),
        &dynamic(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "thawed"}, "data": {"k": "v"}})),
    )
    .await
    .unwrap();
    let changed = cms
        .patch(
            "thawed",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}, "immutable": true})),
        )
        .await
        .unwrap();
    assert_eq!(changed.data["data"]["k"], "w");
    assert_eq!(changed.data["immutable"], true);
}

#[tokio::test]
async fn service_accounts_are_stored_and_printed() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let (code, body) = post(
        &client,
        "serviceaccounts",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "builder"},
            "secrets": [{"name": "builder-token"}], "automountServiceAccountToken": false}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let sas = dynamic_api(&client, "sa", Some("default"));
    let got = sas.get("builder").await.unwrap();
    assert_eq!(got.data["automountServiceAccountToken"], false);
    let (code, body) = post(
        &client,
        "serviceaccounts",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "Bad_Name"}}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert!(
        message(&body).contains("metadata.name: Invalid value: \"Bad_Name\""),
        "{body}"
    );
}
