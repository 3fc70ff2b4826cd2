//! Bad input gets a clear error naming the field, and writes nothing.

mod common;

use common::{raw, ControlPlane};
use kube::Client;
use serde_json::{json, Value};

/// What a user would list to see whether anything was written: every
/// object (kind, namespace/name and resourceVersion) of the collections the
/// bad requests aim at. Not the store's revision, which also moves with
/// what the control plane writes in the background (its Leases).
async fn objects(client: &Client) -> Vec<(String, String, String)> {
    const COLLECTIONS: &[&str] = &[
        "/api/v1/namespaces",
        "/api/v1/persistentvolumes",
        "/api/v1/namespaces/default/pods",
        "/api/v1/namespaces/default/services",
        "/api/v1/namespaces/default/persistentvolumeclaims",
        "/apis/apps/v1/namespaces/default/deployments",
        "/apis/apps/v1/namespaces/default/statefulsets",
        "/apis/batch/v1/namespaces/default/cronjobs",
        "/apis/batch/v1/namespaces/default/jobs",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
    ];
    let mut all = vec![];
    for path in COLLECTIONS {
        let (code, list) = raw(client, "GET", path, "application/json", vec![]).await;
        assert_eq!(code, 200, "listing {path}: {list}");
        for item in list["items"].as_array().expect("items") {
            let meta = &item["metadata"];
            all.push((
                path.to_string(),
                format!(
                    "{}/{}",
                    meta["namespace"].as_str().unwrap_or(""),
                    meta["name"].as_str().unwrap()
                ),
                meta["resourceVersion"].as_str().unwrap().to_string(),
            ));
        }
    }
    all
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment", "labels": {"app": "nginx"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "busybox",
                    "ports": [{"containerPort": 80}]}]}
            }
        }
    })
}

fn with(mut base: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = base
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("no {parent}"));
    if value.is_null() {
        target.as_object_mut().unwrap().remove(key);
    } else if let Ok(i) = key.parse::<usize>() {
        target[i] = value;
    } else {
        target[key] = value;
    }
    base
}

struct Case {
    what: &'static str,
    path: &'static str,
    content_type: &'static str,
    body: Vec<u8>,
    code: u16,
    /// Text the error must contain: the field path, for 422s.
    names: &'static str,
}

fn case(
    what: &'static str,
    path: &'static str,
    body: Value,
    code: u16,
    names: &'static str,
) -> Case {
    Case {
        what,
        path,
        content_type: "application/json",
        body: serde_json::to_vec(&body).unwrap(),
        code,
        names,
    }
}

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

fn cases() -> Vec<Case> {
    let d = deployment;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]}});
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job1"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "job1", "image": "busybox"}]}}}});
    vec![
        case(
            "missing selector",
            DEPLOYMENTS,
            with(d(), "/spec/selector", Value::Null),
            422,
            "spec.selector",
        ),
        case(
            "selector does not match template",
            DEPLOYMENTS,
            with(d(), "/spec/selector/matchLabels", json!({"app": "other"})),
            422,
            "spec.template.metadata.labels",
        ),
        case(
            "negative replicas",
            DEPLOYMENTS,
            with(d(), "/spec/replicas", json!(-1)),
            422,
            "spec.replicas",
        ),
        case(
            "container without image",
            DEPLOYMENTS,
            with(d(), "/spec/template/spec/containers/0/image", Value::Null),
            422,
            "spec.template.spec.containers[0].image",
        ),
        case(
            "bad object name",
            DEPLOYMENTS,
            with(d(), "/metadata/name", json!("Nginx_Deployment")),
            422,
            "metadata.name",
        ),
        case(
            "no name at all",
            DEPLOYMENTS,
            with(d(), "/metadata/name", Value::Null),
            422,
            "metadata.name",
        ),
        case(
            "deployment restartPolicy Never",
            DEPLOYMENTS,
            with(d(), "/spec/template/spec/restartPolicy", json!("Never")),
            422,
            "spec.template.spec.restartPolicy",
        ),
        case(
            "port out of range",
            DEPLOYMENTS,
            with(
                d(),
                "/spec/template/spec/containers/0/ports/0/containerPort",
                json!(70000),
            ),
            422,
            "spec.template.spec.containers[0].ports[0].containerPort",
        ),
        case(
            "bad cpu quantity",
            DEPLOYMENTS,
            with(
                d(),
                "/spec/template/spec/containers/0/resources",
                json!({"requests": {"cpu": "lots"}}),
            ),
            422,
            "spec.template.spec.containers[0].resources.requests",
        ),
        case(
            "bad label value",
            DEPLOYMENTS,
            with(d(), "/metadata/labels", json!({"app": "a b"})),
            422,
            "metadata.labels",
        ),
        case(
            "both surge and unavailable zero",
            DEPLOYMENTS,
            with(
                d(),
                "/spec/strategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}),
            ),
            422,
            "spec.strategy.rollingUpdate.maxUnavailable",
        ),
        case(
            "duplicate container names",
            DEPLOYMENTS,
            with(
                d(),
                "/spec/template/spec/containers",
                json!([{"name": "a", "image": "busybox"}, {"name": "a", "image": "busybox"}]),
            ),
            422,
            "spec.template.spec.containers[1].name",
        ),
        case(
            "unknown strategy type",
            DEPLOYMENTS,
            with(d(), "/spec/strategy", json!({"type": "Sometimes"})),
            422,
            "spec.strategy.type",
        ),
        case(
            "job restartPolicy Always",
            "/apis/batch/v1/namespaces/default/jobs",
            with(
                job.clone(),
                "/spec/template/spec/restartPolicy",
                json!("Always"),
            ),
            422,
            "spec.template.spec.restartPolicy",
        ),
        case(
            "cronjob schedule",
            "/apis/batch/v1/namespaces/default/cronjobs",
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "hello"},
                "spec": {"schedule": "every minute", "jobTemplate": {"spec": job["spec"].clone()}}}),
            422,
            "spec.schedule",
        ),
        case(
            "cronjob time zone",
            "/apis/batch/v1/namespaces/default/cronjobs",
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "hello"},
                "spec": {"schedule": "0 9 * * *", "timeZone": "Mars/Olympus_Mons",
                    "jobTemplate": {"spec": job["spec"].clone()}}}),
            422,
            "spec.timeZone",
        ),
        case(
            "service port zero",
            "/api/v1/namespaces/default/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nginx"},
                "spec": {"ports": [{"port": 0}], "selector": {"app": "nginx"}}}),
            422,
            "spec.ports[0].port",
        ),
        case(
            "hpa max below min",
            "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
                "spec": {"minReplicas": 5, "maxReplicas": 2,
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}}),
            422,
            "spec.maxReplicas",
        ),
        case(
            "pod without containers",
            "/api/v1/namespaces/default/pods",
            with(pod.clone(), "/spec/containers", json!([])),
            422,
            "spec.containers",
        ),
        case(
            "mount of an undeclared volume",
            "/api/v1/namespaces/default/pods",
            with(
                pod.clone(),
                "/spec/containers/0/volumeMounts",
                json!([{"name": "data", "mountPath": "/data"}]),
            ),
            422,
            "spec.containers[0].volumeMounts[0].name",
        ),
        case(
            "pv without capacity",
            "/api/v1/persistentvolumes",
            json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
                "spec": {"accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/pv1"}}}),
            422,
            "spec.capacity",
        ),
        case(
            "pvc without access modes",
            "/api/v1/namespaces/default/persistentvolumeclaims",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "www"},
                "spec": {"resources": {"requests": {"storage": "1Gi"}}}}),
            422,
            "spec.accessModes",
        ),
        case(
            "string where a number belongs",
            DEPLOYMENTS,
            with(d(), "/spec/replicas", json!("three")),
            400,
            "spec.replicas",
        ),
        case(
            "apiVersion of another group",
            DEPLOYMENTS,
            with(d(), "/apiVersion", json!("batch/v1")),
            400,
            "batch/v1",
        ),
        case(
            "kind that is not the resource's",
            DEPLOYMENTS,
            with(d(), "/kind", json!("StatefulSet")),
            400,
            "StatefulSet",
        ),
        case(
            "namespace other than the URL's",
            DEPLOYMENTS,
            with(d(), "/metadata/namespace", json!("kube-system")),
            400,
            "namespace",
        ),
        case(
            "no such namespace",
            "/apis/apps/v1/namespaces/nowhere/deployments",
            d(),
            404,
            "namespaces \"nowhere\" not found",
        ),
        case(
            "no such resource",
            "/apis/apps/v1/namespaces/default/widgets",
            d(),
            404,
            "could not find",
        ),
        Case {
            what: "malformed JSON",
            path: DEPLOYMENTS,
            content_type: "application/json",
            body: b"{\"apiVersion\": \"apps/v1\", \"kind\": ".to_vec(),
            code: 400,
            names: "json",
        },
        Case {
            what: "malformed YAML",
            path: DEPLOYMENTS,
            content_type: "application/yaml",
            body: b"apiVersion: apps/v1\nkind: [Deployment\n".to_vec(),
            code: 400,
            names: "YAML",
        },
        Case {
            what: "body over the limit",
            path: DEPLOYMENTS,
            content_type: "application/json",
            body: vec![b' '; 4 * 1024 * 1024],
            code: 413,
            names: "limit",
        },
    ]
}

#[tokio::test]
async fn invalid_manifests_are_refused_naming_the_field_and_write_nothing() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let before = objects(&client).await;
    let all = cases();
    assert!(all.len() >= 20);
    for c in all {
        let (code, status) = raw(&client, "POST", c.path, c.content_type, c.body).await;
        assert_eq!(code, c.code, "{}: {status}", c.what);
        assert_eq!(
            status["kind"], "Status",
            "{}: the error is a Status",
            c.what
        );
        assert_eq!(status["code"], c.code, "{}", c.what);
        let message = status["message"].as_str().unwrap_or("");
        assert!(
            message.contains(c.names),
            "{}: {message:?} should name {:?}",
            c.what,
            c.names
        );
        if c.code == 422 {
            let causes = status["details"]["causes"].as_array().expect("causes");
            assert!(
                causes
                    .iter()
                    .any(|cause| cause["field"].as_str().unwrap_or("").starts_with(c.names)),
                "{}: a cause names {}: {causes:?}",
                c.what,
                c.names
            );
        }
    }
    assert_eq!(
        objects(&client).await,
        before,
        "a refused request writes nothing"
    );
}

#[tokio::test]
async fn every_problem_is_reported_at_once() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let bad = with(
        with(deployment(), "/spec/replicas", json!(-2)),
        "/spec/template/spec/containers/0/image",
        Value::Null,
    );
    let (code, status) = raw(
        &client,
        "POST",
        DEPLOYMENTS,
        "application/json",
        serde_json::to_vec(&bad).unwrap(),
    )
    .await;
    assert_eq!(code, 422);
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with("Deployment.apps \"nginx-deployment\" is invalid: ["),
        "{message}"
    );
    assert!(
        message.contains("spec.replicas: Invalid value: -2"),
        "{message}"
    );
    assert!(
        message.contains("spec.template.spec.containers[0].image: Required value"),
        "{message}"
    );
}

#[tokio::test]
async fn immutable_fields_and_strict_field_validation() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let (code, created) = raw(
        &client,
        "POST",
        DEPLOYMENTS,
        "application/json",
        serde_json::to_vec(&deployment()).unwrap(),
    )
    .await;
    assert_eq!(code, 201);
    let before = objects(&client).await;

    let mut changed = created.clone();
    changed["spec"]["selector"]["matchLabels"] = json!({"app": "other"});
    changed["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    let (code, status) = raw(
        &client,
        "PUT",
        &format!("{DEPLOYMENTS}/nginx-deployment"),
        "application/json",
        serde_json::to_vec(&changed).unwrap(),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("spec.selector"),
        "{status}"
    );
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("field is immutable"),
        "{status}"
    );

    let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
        "spec": {"serviceName": "nginx", "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "busybox"}]}}}});
    let path = "/apis/apps/v1/namespaces/default/statefulsets";
    let (code, _) = raw(
        &client,
        "POST",
        path,
        "application/json",
        serde_json::to_vec(&sts).unwrap(),
    )
    .await;
    assert_eq!(code, 201);
    let (code, status) = raw(
        &client,
        "PATCH",
        &format!("{path}/web"),
        "application/merge-patch+json",
        serde_json::to_vec(&json!({"spec": {"serviceName": "other"}})).unwrap(),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"].as_str().unwrap().contains("spec"),
        "{status}"
    );
    let after_sts = objects(&client).await;
    assert_ne!(after_sts, before, "the statefulset was created");

    let mut typo = deployment();
    typo["metadata"]["name"] = json!("typo");
    typo["spec"]["replicass"] = json!(2);
    let (code, status) = raw(
        &client,
        "POST",
        &format!("{DEPLOYMENTS}?fieldValidation=Strict"),
        "application/json",
        serde_json::to_vec(&typo).unwrap(),
    )
    .await;
    assert_eq!(code, 400);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"spec.replicass\""),
        "{status}"
    );
    assert_eq!(
        objects(&client).await,
        after_sts,
        "refused updates and creates wrote nothing"
    );
}
