//! Server-side apply over real HTTP, as kube-rs' `Patch::Apply` sends it:
//! creating by apply, a repeated apply changing nothing, conflicts with
//! other managers (appliers and updaters) named field by field, `force`
//! taking fields over, fields a manager stops applying removed, a missing
//! `fieldManager` refused with nothing written, `Update` operations
//! recorded for every other write, and apply through `/status`.

mod common;

use common::{dynamic_api, raw, ControlPlane};
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kube::Api;
use serde_json::{json, Value};

fn deployment(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "web", "image": image, "ports": [{"containerPort": 80}]}
            ]}}
        }
    })
}

async fn apply(
    api: &Api<DynamicObject>,
    manager: &str,
    force: bool,
    config: &Value,
) -> Result<Value, kube::Error> {
    let mut pp = PatchParams::apply(manager);
    pp.force = force;
    let name = config["metadata"]["name"].as_str().unwrap();
    api.patch(name, &pp, &Patch::Apply(config))
        .await
        .map(|o| serde_json::to_value(o).unwrap())
}

fn entry<'a>(obj: &'a Value, manager: &str) -> &'a Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .find(|e| e["manager"] == manager)
        .unwrap_or_else(|| panic!("no managedFields entry for {manager}: {obj:#}"))
}

fn owns_replicas(obj: &Value, manager: &str) -> bool {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["manager"] == manager)
        .any(|e| e["fieldsV1"]["f:spec"].get("f:replicas").is_some())
}

async fn get(api: &Api<DynamicObject>, name: &str) -> Value {
    serde_json::to_value(api.get(name).await.expect("get")).unwrap()
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn apply_creates_and_applying_again_changes_nothing() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let api = dynamic_api(&client, "deployments", Some("default"));
    let created = apply(&api, "alice", false, &deployment(2, "web:1"))
        .await
        .expect("apply creates");
    assert_eq!(created["spec"]["replicas"], 2);
    let e = entry(&created, "alice");
    assert_eq!(e["operation"], "Apply");
    assert_eq!(e["apiVersion"], "apps/v1");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert!(e["time"].is_string());
    let fields = &e["fieldsV1"];
    assert_eq!(fields["f:spec"]["f:replicas"], json!({}));
    assert_eq!(
        fields["f:spec"]["f:selector"],
        json!({}),
        "selectors are atomic"
    );
    assert_eq!(
        fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"]["f:ports"]
            ["k:{\"containerPort\":80,\"protocol\":\"TCP\"}"]["."],
        json!({})
    );
    // Defaults the server filled in belong to nobody.
    assert!(fields["f:spec"].get("f:revisionHistoryLimit").is_none());
    assert_eq!(
        created["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let again = apply(&api, "alice", false, &deployment(2, "web:1"))
        .await
        .unwrap();
    assert_eq!(
        again["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    assert_eq!(
        again["metadata"]["managedFields"],
        created["metadata"]["managedFields"]
    );
}

#[tokio::test]
async fn another_manager_conflicts_by_field_and_force_takes_it() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let api = dynamic_api(&client, "deployments", Some("default"));
    apply(&api, "alice", false, &deployment(2, "web:1"))
        .await
        .unwrap();
    let bob = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"}, "spec": {"replicas": 5}});
    let err = api_error(apply(&api, "bob", false, &bob).await.unwrap_err());
    assert_eq!(err.code, 409);
    assert_eq!(err.reason, "Conflict");
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"alice\" using apps/v1: .spec.replicas"
    );
    let (code, status) = raw(
        &client,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/web?fieldManager=bob",
        "application/apply-patch+yaml",
        serde_json::to_vec(&bob).unwrap(),
    )
    .await;
    assert_eq!(code, 409);
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldManagerConflict",
            "message": "conflict with \"alice\" using apps/v1", "field": ".spec.replicas"}])
    );
    assert_eq!(
        get(&api, "web").await["spec"]["replicas"],
        2,
        "nothing written"
    );

    // The same value is no conflict: both own it.
    let same = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"}, "spec": {"replicas": 2}});
    let shared = apply(&api, "carol", false, &same).await.unwrap();
    assert!(owns_replicas(&shared, "alice") && owns_replicas(&shared, "carol"));

    let forced = apply(&api, "bob", true, &bob).await.unwrap();
    assert_eq!(forced["spec"]["replicas"], 5);
    assert!(owns_replicas(&forced, "bob"));
    assert!(!owns_replicas(&forced, "alice"), "force took it from alice");
    assert!(!owns_replicas(&forced, "carol"));
    assert_eq!(
        entry(&forced, "alice")["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
            ["k:{\"name\":\"web\"}"]["f:image"],
        json!({}),
        "alice keeps the rest"
    );
}

#[tokio::test]
async fn fields_a_manager_stops_applying_are_removed_unless_another_holds_them() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let api = dynamic_api(&client, "configmaps", Some("default"));
    let cm = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": data});
    apply(
        &api,
        "alice",
        false,
        &cm(json!({"a": "1", "b": "2", "c": "3"})),
    )
    .await
    .unwrap();
    apply(&api, "bob", false, &cm(json!({"c": "3"})))
        .await
        .unwrap();
    let out = apply(&api, "alice", false, &cm(json!({"a": "1"})))
        .await
        .unwrap();
    assert_eq!(
        out["data"],
        json!({"a": "1", "c": "3"}),
        "b dropped, c held by bob"
    );
    assert_eq!(get(&api, "cfg").await["data"], json!({"a": "1", "c": "3"}));
}

#[tokio::test]
async fn apply_without_a_field_manager_is_refused_and_writes_nothing() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let (code, status) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/cfg",
        "application/apply-patch+yaml",
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  a: \"1\"\n".to_vec(),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "fieldManager");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("fieldManager: Required value"),
        "{status}"
    );
    let api = dynamic_api(&client, "configmaps", Some("default"));
    assert!(
        api.get_opt("cfg").await.unwrap().is_none(),
        "nothing written"
    );
    // force is only for apply.
    let (code, status) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/cfg?force=true",
        "application/merge-patch+json",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "force");
}

#[tokio::test]
async fn other_writes_are_recorded_as_updates_and_conflict_with_appliers() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let api = dynamic_api(&client, "deployments", Some("default"));
    let d: DynamicObject = serde_json::from_value(deployment(1, "web:1")).unwrap();
    let pp = PostParams {
        field_manager: Some("creator".into()),
        ..Default::default()
    };
    let created = serde_json::to_value(api.create(&pp, &d).await.unwrap()).unwrap();
    let e = entry(&created, "creator");
    assert_eq!(e["operation"], "Update");
    assert_eq!(e["fieldsV1"]["f:metadata"]["f:labels"]["f:app"], json!({}));
    assert!(owns_replicas(&created, "creator"));

    let scale = PatchParams {
        field_manager: Some("scaler".into()),
        ..Default::default()
    };
    let scaled = api
        .patch(
            "web",
            &scale,
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    let scaled = serde_json::to_value(scaled).unwrap();
    assert_eq!(entry(&scaled, "scaler")["operation"], "Update");
    assert!(owns_replicas(&scaled, "scaler"));
    assert!(
        !owns_replicas(&scaled, "creator"),
        "the update took it over"
    );

    // A write without fieldManager is known by its User-Agent's product.
    let (code, body) = raw(
        &client,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/web",
        "application/merge-patch+json",
        br#"{"metadata": {"labels": {"team": "a"}}}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let agent = body["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| {
            e["fieldsV1"]["f:metadata"]["f:labels"]
                .get("f:team")
                .is_some()
        })
        .expect("someone owns the new label")["manager"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!agent.is_empty() && !agent.contains('/'), "{agent}");

    let err = api_error(
        apply(&api, "alice", false, &deployment(4, "web:1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
    assert!(
        err.message
            .contains("conflict with \"scaler\" using apps/v1: .spec.replicas"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn apply_to_status_owns_status_only() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let api = dynamic_api(&client, "deployments", Some("default"));
    apply(&api, "alice", false, &deployment(2, "web:1"))
        .await
        .unwrap();
    let status = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"}, "spec": {"replicas": 9},
        "status": {"observedGeneration": 1, "replicas": 2}});
    let out = api
        .patch_status(
            "web",
            &PatchParams::apply("reporter"),
            &Patch::Apply(&status),
        )
        .await
        .unwrap();
    let out = serde_json::to_value(out).unwrap();
    assert_eq!(out["status"]["replicas"], 2);
    assert_eq!(
        out["spec"]["replicas"], 2,
        "spec does not move through /status"
    );
    let e = entry(&out, "reporter");
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["operation"], "Apply");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:status": {"f:observedGeneration": {}, "f:replicas": {}}})
    );
    assert!(owns_replicas(&out, "alice"));
}
