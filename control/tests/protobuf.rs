//! Request bodies in `application/vnd.kubernetes.protobuf`, as kubectl's
//! typed clients send them: create, update and the subresources (eviction,
//! binding, scale) store what the same object in JSON would, and bad
//! bodies get a 400 that says what is wrong.

mod common;

use bosun_control::api::protobuf::{encode_object, MAGIC, MEDIA_TYPE};
use common::{raw, ControlPlane};
use serde_json::{json, Value};

const JSON: &str = "application/json";

fn pb(obj: &Value) -> Vec<u8> {
    encode_object(obj).expect("encodes")
}

/// The object without what the server makes up per object.
fn comparable(mut obj: Value) -> Value {
    let md = obj["metadata"].as_object_mut().unwrap();
    for k in ["uid", "resourceVersion", "creationTimestamp", "name"] {
        md.remove(k);
    }
    // The write's time, like creationTimestamp.
    for entry in md
        .get_mut("managedFields")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        entry.as_object_mut().unwrap().remove("time");
    }
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        // Allocated per object.
        for k in ["clusterIP", "clusterIPs"] {
            spec.remove(k);
        }
        if let Some(sel) = spec.get_mut("selector").and_then(Value::as_object_mut) {
            sel.remove("matchLabels");
        }
        // A Job's pods are labelled with its name and uid.
        if let Some(labels) = spec
            .get_mut("template")
            .and_then(|t| t.pointer_mut("/metadata/labels"))
            .and_then(Value::as_object_mut)
        {
            labels.retain(|k, _| !k.contains("controller-uid") && !k.contains("job-name"));
        }
    }
    // A pod's service account token volume is named with five random
    // characters.
    let text = obj.to_string();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    const PREFIX: &str = "kube-api-access-";
    while let Some(i) = rest.find(PREFIX) {
        out.push_str(&rest[..i + PREFIX.len()]);
        out.push_str("xxxxx");
        rest = &rest[i + PREFIX.len() + 5..];
    }
    out.push_str(rest);
    serde_json::from_str(&out).unwrap()
}

#[tokio::test]
async fn protobuf_creates_store_what_json_creates() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let pod_spec = json!({"containers": [{"name": "app", "image": "bosun.local/web:1",
        "ports": [{"containerPort": 80}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}}}],
        "terminationGracePeriodSeconds": 0});
    let template = json!({"metadata": {"labels": {"app": "x"}}, "spec": pod_spec});
    let selector = json!({"matchLabels": {"app": "x"}});
    let cases = [
        (
            "/api/v1/namespaces/default/pods",
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"labels": {"a": "b"}}, "spec": pod_spec}),
        ),
        (
            "/api/v1/namespaces/default/services",
            json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {}, "spec": {"selector": {"app": "x"},
                "ports": [{"port": 80, "targetPort": "http"}]}}),
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            json!({"apiVersion": "apps/v1",
            "kind": "Deployment", "metadata": {}, "spec": {"replicas": 0, "selector": selector,
                "template": template,
                "strategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": "50%"}}}}),
        ),
        (
            "/apis/apps/v1/namespaces/default/statefulsets",
            json!({"apiVersion": "apps/v1",
            "kind": "StatefulSet", "metadata": {}, "spec": {"selector": selector,
                "serviceName": "x", "template": template}}),
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {}, "spec": {"backoffLimit": 0, "template": {"metadata": {},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "a", "image": "x"}]}}}}),
        ),
        (
            "/apis/batch/v1/namespaces/default/cronjobs",
            json!({"apiVersion": "batch/v1",
            "kind": "CronJob", "metadata": {}, "spec": {"schedule": "*/5 * * * *",
                "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                    "containers": [{"name": "a", "image": "x"}]}}}}}}),
        ),
        (
            "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers",
            json!({
            "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
                "maxReplicas": 3, "targetCPUUtilizationPercentage": 70}}),
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {},
            "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40,
                "renewTime": "2026-01-02T03:04:05.250000Z"}}),
        ),
        (
            "/api/v1/namespaces/default/persistentvolumeclaims",
            json!({"apiVersion": "v1",
            "kind": "PersistentVolumeClaim", "metadata": {}, "spec": {"storageClassName": "",
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        ),
    ];
    for (i, (path, obj)) in cases.into_iter().enumerate() {
        let mut as_json = obj.clone();
        as_json["metadata"]["name"] = json!(format!("json-{i}"));
        let mut as_pb = obj.clone();
        as_pb["metadata"]["name"] = json!(format!("pb-{i}"));
        let (code, from_json) = raw(
            &client,
            "POST",
            path,
            JSON,
            serde_json::to_vec(&as_json).unwrap(),
        )
        .await;
        assert_eq!(code, 201, "{from_json}");
        let (code, from_pb) = raw(&client, "POST", path, MEDIA_TYPE, pb(&as_pb)).await;
        assert_eq!(code, 201, "{path}: {from_pb}");
        assert_eq!(from_pb["metadata"]["name"], format!("pb-{i}"));
        assert_eq!(
            comparable(from_pb),
            comparable(from_json),
            "{path}: protobuf and JSON differ"
        );
    }
}

#[tokio::test]
async fn protobuf_update_eviction_binding_and_scale() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let deploy = "/apis/apps/v1/namespaces/default/deployments";
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "a", "image": "x:1"}]}}}});
    let (code, created) = raw(&client, "POST", deploy, MEDIA_TYPE, pb(&d)).await;
    assert_eq!(code, 201, "{created}");

    // Update (PUT) with the image changed.
    let mut next = created.clone();
    next["spec"]["template"]["spec"]["containers"][0]["image"] = json!("x:2");
    let (code, updated) = raw(
        &client,
        "PUT",
        &format!("{deploy}/web"),
        MEDIA_TYPE,
        pb(&next),
    )
    .await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(
        updated["spec"]["template"]["spec"]["containers"][0]["image"],
        "x:2"
    );
    assert_eq!(updated["metadata"]["generation"], 2);

    // Scale (PUT of autoscaling/v1 Scale) to zero.
    let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 0}});
    let (code, s) = raw(
        &client,
        "PUT",
        &format!("{deploy}/web/scale"),
        MEDIA_TYPE,
        pb(&scale),
    )
    .await;
    assert_eq!(code, 200, "{s}");
    assert_eq!(s["spec"]["replicas"], 0);

    // Binding and eviction of a pod.
    let pods = "/api/v1/namespaces/default/pods";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a", "image": "x"}]}});
    let (code, _) = raw(&client, "POST", pods, MEDIA_TYPE, pb(&pod)).await;
    assert_eq!(code, 201);
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
    let (code, _) = raw(&client, "POST", "/api/v1/nodes", MEDIA_TYPE, pb(&node)).await;
    assert_eq!(code, 201);
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p", "namespace": "default"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}});
    let (code, b) = raw(
        &client,
        "POST",
        &format!("{pods}/p/binding"),
        MEDIA_TYPE,
        pb(&binding),
    )
    .await;
    assert_eq!(code, 201, "{b}");
    let (_, p) = raw(&client, "GET", &format!("{pods}/p"), JSON, vec![]).await;
    assert_eq!(p["spec"]["nodeName"], "n1");

    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "p", "namespace": "default"},
        "deleteOptions": {"gracePeriodSeconds": 0}});
    let (code, st) = raw(
        &client,
        "POST",
        &format!("{pods}/p/eviction"),
        MEDIA_TYPE,
        pb(&eviction),
    )
    .await;
    assert_eq!(code, 201, "{st}");
    let (code, _) = raw(&client, "GET", &format!("{pods}/p"), JSON, vec![]).await;
    assert_eq!(code, 404, "a zero grace period deletes the pod at once");
}

#[tokio::test]
async fn bad_protobuf_bodies_get_400_and_unknown_media_types_415() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let path = "/api/v1/namespaces";

    let (code, st) = raw(&client, "POST", path, MEDIA_TYPE, b"{\"kind\":1}".to_vec()).await;
    assert_eq!(code, 400, "{st}");
    assert!(st["message"].as_str().unwrap().contains("magic"), "{st}");

    let ns = pb(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}));
    let (code, st) = raw(
        &client,
        "POST",
        path,
        MEDIA_TYPE,
        ns[..ns.len() - 3].to_vec(),
    )
    .await;
    assert_eq!(code, 400, "{st}");
    assert!(
        st["message"].as_str().unwrap().contains("truncated"),
        "{st}"
    );

    // A kind the envelope names that bosun has no message for.
    let mut widget = MAGIC.to_vec();
    widget.extend([0x0a, 0x0c, 0x0a, 0x02, b'v', b'1', 0x12, 0x06]);
    widget.extend(b"Widget");
    let (code, st) = raw(&client, "POST", path, MEDIA_TYPE, widget).await;
    assert_eq!(code, 400, "{st}");
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("no kind \"Widget\""),
        "{st}"
    );

    // A well-formed object of the wrong kind for the URL.
    let svc = pb(&json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}));
    let (code, st) = raw(&client, "POST", path, MEDIA_TYPE, svc).await;
    assert_eq!(code, 400, "{st}");
    assert!(
        st["message"].as_str().unwrap().contains("(Service)"),
        "{st}"
    );

    let (code, st) = raw(&client, "POST", path, "application/cbor", vec![0xa0]).await;
    assert_eq!(code, 415, "{st}");
    assert!(st["message"].as_str().unwrap().contains(MEDIA_TYPE), "{st}");
}

/// A GET with an Accept header: status, Content-Type and body bytes.
async fn get_as(client: &kube::Client, path: &str, accept: &str) -> (u16, String, Vec<u8>) {
    let req = http::Request::builder()
        .method("GET")
        .uri(path)
        .header(http::header::ACCEPT, accept)
        .body(kube::client::Body::empty())
        .unwrap();
    let res = client.send(req).await.expect("response");
    let code = res.status().as_u16();
    let ct = res
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let bytes = res.into_body().collect_bytes().await.expect("body");
    (code, ct, bytes.to_vec())
}

#[tokio::test]
async fn responses_are_protobuf_when_the_client_prefers_it() {
    use bosun_control::api::protobuf::decode_object;
    let cp = ControlPlane::start_with(&["--controllers=-deployment"]);
    let client = cp.client().await;
    let deploy = "/apis/apps/v1/namespaces/default/deployments";
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web",
            "labels": {"app": "web"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxUnavailable": 0}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "a", "image": "x:1",
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}}});
    let (code, _) = raw(
        &client,
        "POST",
        deploy,
        JSON,
        serde_json::to_vec(&d).unwrap(),
    )
    .await;
    assert_eq!(code, 201);
    let kubectl_accept = "application/vnd.kubernetes.protobuf,application/json";

    // One object: the same as its JSON form.
    let (code, ct, pb_body) = get_as(&client, &format!("{deploy}/web"), kubectl_accept).await;
    assert_eq!((code, ct.as_str()), (200, MEDIA_TYPE));
    let (_, ct, json_body) = get_as(&client, &format!("{deploy}/web"), JSON).await;
    assert_eq!(ct, JSON);
    let from_json: Value = serde_json::from_slice(&json_body).unwrap();
    assert_eq!(decode_object(&pb_body).unwrap(), from_json);

    // A list: the kind's List message.
    let (code, ct, body) = get_as(&client, deploy, kubectl_accept).await;
    assert_eq!((code, ct.as_str()), (200, MEDIA_TYPE));
    let list = decode_object(&body).unwrap();
    assert_eq!(list["kind"], "DeploymentList");
    assert_eq!(list["items"][0]["spec"], from_json["spec"]);

    // The scale subresource.
    let (_, ct, body) = get_as(&client, &format!("{deploy}/web/scale"), kubectl_accept).await;
    assert_eq!(ct, MEDIA_TYPE);
    assert_eq!(decode_object(&body).unwrap()["spec"]["replicas"], 2);

    // JSON first, or a Table, stays JSON.
    let (_, ct, _) = get_as(
        &client,
        deploy,
        "application/json,application/vnd.kubernetes.protobuf",
    )
    .await;
    assert_eq!(ct, JSON);
    let (_, ct, body) = get_as(
        &client,
        deploy,
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    )
    .await;
    assert_eq!(ct, JSON);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["kind"],
        "Table"
    );
}

#[tokio::test]
async fn watch_streams_length_prefixed_protobuf_events() {
    use bosun_control::api::protobuf::decode_watch_frame;
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let ns = "/api/v1/namespaces";
    for name in ["a", "b"] {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        let (code, _) = raw(&client, "POST", ns, MEDIA_TYPE, pb(&obj)).await;
        assert_eq!(code, 201);
    }
    // Without a resourceVersion the watch starts with every object ADDED;
    // it ends after timeoutSeconds.
    let (code, ct, body) = get_as(
        &client,
        &format!("{ns}?watch=1&timeoutSeconds=1"),
        "application/vnd.kubernetes.protobuf,application/json",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(ct, "application/vnd.kubernetes.protobuf;stream=watch");
    let mut rest = &body[..];
    let mut seen = Vec::new();
    while !rest.is_empty() {
        let (event_type, obj, used) = decode_watch_frame(rest).expect("a frame");
        let name = obj["metadata"]["name"].as_str().unwrap().to_string();
        assert_eq!(obj["kind"], "Namespace");
        if ["a", "b"].contains(&name.as_str()) {
            seen.push((event_type, name));
        }
        rest = &rest[used..];
    }
    assert_eq!(
        seen,
        [
            ("ADDED".to_string(), "a".to_string()),
            ("ADDED".to_string(), "b".to_string())
        ]
    );
}
