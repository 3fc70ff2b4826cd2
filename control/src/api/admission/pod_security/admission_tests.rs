//! Pod Security Admission through the real API handlers (in memory):
//! what is refused, what is warned about, and what passes.

use serde_json::{json, Value};

use crate::toolkit::testing::TestApi;

/// Sends a JSON request; the status code, the `Warning` headers' texts
/// (unquoted, as kubectl shows them) and the body.
async fn send(
    api: &TestApi,
    method: &str,
    path: &str,
    ct: &str,
    body: Value,
) -> (u16, Vec<String>, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, ct)
        .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap();
    let res = api.client.send(req).await.expect("response");
    let code = res.status().as_u16();
    let warnings = res
        .headers()
        .get_all("Warning")
        .iter()
        .map(|v| {
            let v = v.to_str().unwrap();
            let quoted = v.strip_prefix("299 - ").expect("299 - \"...\"");
            quoted[1..quoted.len() - 1]
                .replace("\\\"", "\"")
                .replace("\\\\", "\\")
        })
        .collect();
    let bytes = res.into_body().collect_bytes().await.expect("body");
    (
        code,
        warnings,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn post(api: &TestApi, path: &str, body: Value) -> (u16, Vec<String>, Value) {
    send(api, "POST", path, "application/json", body).await
}

async fn namespace(api: &TestApi, name: &str, labels: Value) -> (u16, Vec<String>, Value) {
    post(
        api,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels}}),
    )
    .await
}

fn pod(name: &str, privileged: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "bosun.local/busybox",
            "securityContext": {"privileged": privileged}}]}})
}

#[tokio::test]
async fn enforce_refuses_a_privileged_pod_with_upstreams_message() {
    let api = TestApi::start().await;
    let (code, _, _) = namespace(
        &api,
        "locked",
        json!({"pod-security.kubernetes.io/enforce": "baseline"}),
    )
    .await;
    assert_eq!(code, 201);
    let (code, warnings, body) =
        post(&api, "/api/v1/namespaces/locked/pods", pod("priv", true)).await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(body["reason"], "Forbidden");
    assert_eq!(
        body["message"],
        "pods \"priv\" is forbidden: violates PodSecurity \"baseline:latest\": privileged (container \"app\" must not set securityContext.privileged=true)"
    );
    assert!(
        warnings.is_empty(),
        "no warnings on a refusal: {warnings:?}"
    );
    let (code, warnings, _) =
        post(&api, "/api/v1/namespaces/locked/pods", pod("plain", false)).await;
    assert_eq!(code, 201);
    assert!(warnings.is_empty(), "{warnings:?}");
    // Without labels (and the default privileged) anything goes.
    let (code, _, _) = post(&api, "/api/v1/namespaces/default/pods", pod("priv", true)).await;
    assert_eq!(code, 201);
}

#[tokio::test]
async fn warn_returns_warnings_and_workloads_are_never_refused() {
    let api = TestApi::start().await;
    namespace(
        &api,
        "soft",
        json!({"pod-security.kubernetes.io/warn": "restricted"}),
    )
    .await;
    let (code, warnings, _) = post(&api, "/api/v1/namespaces/soft/pods", pod("plain", false)).await;
    assert_eq!(code, 201);
    assert_eq!(
        warnings,
        ["would violate PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false (container \"app\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"app\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \"app\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"app\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"]
    );

    namespace(
        &api,
        "locked",
        json!({"pod-security.kubernetes.io/enforce": "baseline"}),
    )
    .await;
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"hostNetwork": true, "containers": [{"name": "web", "image": "x"}]}}}});
    let (code, warnings, body) =
        post(&api, "/apis/apps/v1/namespaces/locked/deployments", deploy).await;
    assert_eq!(code, 201, "{body}");
    // The warn level follows the stricter enforce label.
    assert_eq!(
        warnings,
        ["would violate PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)"]
    );
}

#[tokio::test]
async fn bad_labels_are_refused_and_a_stricter_enforce_names_existing_pods() {
    let api = TestApi::start().await;
    let (code, _, body) = namespace(
        &api,
        "bad",
        json!({"pod-security.kubernetes.io/enforce": "strict"}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "Namespace \"bad\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"
    );

    namespace(&api, "apps", json!({})).await;
    for name in ["b-priv", "a-priv"] {
        post(&api, "/api/v1/namespaces/apps/pods", pod(name, true)).await;
    }
    post(&api, "/api/v1/namespaces/apps/pods", pod("plain", false)).await;
    let label = |level: &str| json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": level}}});
    let (code, warnings, _) = send(
        &api,
        "PATCH",
        "/api/v1/namespaces/apps",
        "application/merge-patch+json",
        label("baseline"),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        warnings,
        [
            "existing pods in namespace \"apps\" violate the new PodSecurity enforce level \"baseline:latest\"",
            "a-priv (and 1 other pod): privileged",
        ]
    );
    // Relaxing it warns about nothing; a bad value is refused.
    let (code, warnings, _) = send(
        &api,
        "PATCH",
        "/api/v1/namespaces/apps",
        "application/merge-patch+json",
        label("privileged"),
    )
    .await;
    assert_eq!((code, warnings.len()), (200, 0));
    let (code, _, _) = send(
        &api,
        "PATCH",
        "/api/v1/namespaces/apps",
        "application/merge-patch+json",
        label("bogus"),
    )
    .await;
    assert_eq!(code, 422);
}

#[tokio::test]
async fn pod_updates_are_checked_only_when_images_change() {
    let api = TestApi::start().await;
    namespace(&api, "apps", json!({})).await;
    post(&api, "/api/v1/namespaces/apps/pods", pod("priv", true)).await;
    send(
        &api,
        "PATCH",
        "/api/v1/namespaces/apps",
        "application/merge-patch+json",
        json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}}),
    )
    .await;
    let path = "/api/v1/namespaces/apps/pods/priv";
    let merge = "application/merge-patch+json";
    let (code, _, body) = send(
        &api,
        "PATCH",
        path,
        merge,
        json!({"metadata": {"labels": {"a": "b"}}}),
    )
    .await;
    assert_eq!(code, 200, "a label change passes: {body}");
    let (code, _, body) = send(
        &api,
        "PATCH",
        path,
        "application/strategic-merge-patch+json",
        json!({"spec": {"containers": [{"name": "app", "image": "bosun.local/web:2"}]}}),
    )
    .await;
    assert_eq!(code, 403, "{body}");
    // Validation comes first: an update that is invalid as well gets 422.
    let (code, _, body) = send(
        &api,
        "PATCH",
        path,
        merge,
        json!({"spec": {"containers": [
            {"name": "app", "image": "bosun.local/web:2", "securityContext": {"privileged": true}},
            {"name": "two", "image": "bosun.local/web:2"}]}}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let (code, _, body) = send(
        &api,
        "PATCH",
        path,
        "application/strategic-merge-patch+json",
        json!({"spec": {"containers": [{"name": "app", "image": "bosun.local/web:3"}]}}),
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("violates PodSecurity \"baseline:latest\": privileged"),
        "{body}"
    );
}
