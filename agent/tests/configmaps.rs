//! ConfigMaps and Secrets in pods on real Docker: environment from
//! `env[].valueFrom` key references and `envFrom` (prefix, optional,
//! invalid names skipped with an event), a pod waiting with
//! CreateContainerConfigError until the ConfigMap it reads is created;
//! configMap and secret volumes (items, modes, subPath, secrets on tmpfs),
//! an edit reaching the running container's file, and a pod waiting in
//! ContainerCreating (FailedMount) until its volume's ConfigMap exists.

mod cluster;

use std::time::Duration;

use cluster::{Cluster, BUSYBOX};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(60);

fn is_running(p: &Value) -> bool {
    p["status"]["containerStatuses"][0]["state"]["running"].is_object()
}

async fn create_config_map(client: &Client, name: &str, data: Value) {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"}, "data": data,
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

async fn create_secret(client: &Client, name: &str, string_data: Value) {
    let s: Secret = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"}, "stringData": string_data,
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &s)
        .await
        .unwrap();
}

fn env_of(c: &Cluster, pod: &str) -> Vec<String> {
    c.exec(pod, "app", &["env"])
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn environment_from_config_maps_and_secrets() {
    let c = Cluster::start();
    let client = c.client().await;
    create_config_map(
        &client,
        "app",
        json!({"MODE": "fast", "LEVEL": "2", "1st": "x"}),
    )
    .await;
    create_secret(
        &client,
        "db",
        json!({"password": "s3cret", "user": "admin"}),
    )
    .await;
    c.create_pod(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "envs"},
        "spec": {"containers": [{"name": "app", "image": BUSYBOX,
            "command": ["sleep", "3600"],
            "envFrom": [
                {"configMapRef": {"name": "app"}},
                {"prefix": "DB_", "secretRef": {"name": "db"}},
                {"configMapRef": {"name": "absent", "optional": true}},
            ],
            "env": [
                {"name": "LEVEL", "value": "overridden"},
                {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                {"name": "GREETING", "value": "mode $(MODE)"},
                {"name": "MAYBE", "valueFrom": {"configMapKeyRef":
                    {"name": "app", "key": "nope", "optional": true}}},
            ]}]}}),
    )
    .await;
    c.wait_pod(&client, "envs", "Running", UP, is_running).await;
    let env = env_of(&c, "envs");
    for want in [
        "MODE=fast",
        "LEVEL=overridden",
        "DB_password=s3cret",
        "DB_user=admin",
        "PW=s3cret",
        "GREETING=mode fast",
    ] {
        assert!(env.iter().any(|l| l == want), "{want} in {env:?}");
    }
    assert!(!env.iter().any(|l| l.starts_with("MAYBE=")), "{env:?}");
    assert!(!env.iter().any(|l| l.starts_with("1st=")), "{env:?}");
    let event = c
        .poll("an InvalidEnvironmentVariableNames event", UP, || async {
            Api::<Event>::namespaced(client.clone(), "default")
                .list(&ListParams::default().fields("involvedObject.name=envs"))
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("InvalidEnvironmentVariableNames"))
        })
        .await;
    assert_eq!(
        event.message.as_deref(),
        Some("Keys [1st] from the EnvFrom configMap default/app were skipped since they are considered invalid environment variable names.")
    );
}

#[tokio::test]
async fn a_pod_waits_for_its_config_map_and_starts_once_it_is_created() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "waits"},
            "spec": {"containers": [{"name": "app", "image": BUSYBOX,
                "command": ["sleep", "3600"],
                "env": [{"name": "COLOR", "valueFrom": {"configMapKeyRef":
                    {"name": "later", "key": "color"}}}]}]}}),
    )
    .await;
    let waiting = c
        .wait_pod(&client, "waits", "CreateContainerConfigError", UP, |p| {
            p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                == "CreateContainerConfigError"
        })
        .await;
    assert_eq!(
        waiting["status"]["containerStatuses"][0]["state"]["waiting"]["message"],
        "configmap \"later\" not found"
    );
    create_config_map(&client, "later", json!({"color": "blue"})).await;
    // The agent reads the ConfigMap again on its next sync (within a
    // second while a container waits on one).
    c.wait_pod(
        &client,
        "waits",
        "Running",
        Duration::from_secs(20),
        is_running,
    )
    .await;
    assert!(env_of(&c, "waits").contains(&"COLOR=blue".to_string()));
}

async fn event(c: &Cluster, client: &Client, pod: &str, reason: &str) -> Event {
    let what = format!("a {reason} event on {pod}");
    c.poll(&what, UP, || async {
        Api::<Event>::namespaced(client.clone(), "default")
            .list(&ListParams::default().fields(&format!("involvedObject.name={pod}")))
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(reason))
    })
    .await
}

#[tokio::test]
async fn config_map_and_secret_volumes_follow_their_objects() {
    let c = Cluster::start();
    let client = c.client().await;
    create_config_map(
        &client,
        "web",
        json!({"index.html": "v1", "app.conf": "debug=false"}),
    )
    .await;
    create_secret(&client, "tls", json!({"tls.key": "private"})).await;
    c.create_pod(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vols"},
        "spec": {
            "volumes": [
                {"name": "cfg", "configMap": {"name": "web", "defaultMode": 0o640}},
                {"name": "items", "configMap": {"name": "web", "items": [
                    {"key": "app.conf", "path": "conf/app.conf", "mode": 0o600}]}},
                {"name": "sec", "secret": {"secretName": "tls"}},
                {"name": "opt", "secret": {"secretName": "absent", "optional": true}},
            ],
            "containers": [{"name": "app", "image": BUSYBOX,
                "command": ["sleep", "3600"],
                "volumeMounts": [
                    {"name": "cfg", "mountPath": "/etc/cfg"},
                    {"name": "items", "mountPath": "/etc/items"},
                    {"name": "sec", "mountPath": "/etc/sec"},
                    {"name": "opt", "mountPath": "/etc/opt"},
                    {"name": "cfg", "mountPath": "/srv/one.html", "subPath": "index.html"},
                ]}]}}),
    )
    .await;
    c.wait_pod(&client, "vols", "Running", UP, is_running).await;
    let sh = |cmd: &str| c.exec("vols", "app", &["sh", "-c", cmd]);
    assert_eq!(sh("cat /etc/cfg/index.html"), "v1");
    assert_eq!(sh("cat /etc/cfg/app.conf"), "debug=false");
    assert_eq!(sh("stat -L -c %a /etc/cfg/index.html").trim(), "640");
    assert_eq!(sh("cat /etc/items/conf/app.conf"), "debug=false");
    assert_eq!(sh("stat -L -c %a /etc/items/conf/app.conf").trim(), "600");
    assert_eq!(sh("ls /etc/items").trim(), "conf", "only the items");
    assert_eq!(sh("cat /etc/sec/tls.key"), "private");
    assert_eq!(sh("stat -L -c %a /etc/sec/tls.key").trim(), "644");
    assert_eq!(
        sh("ls /etc/opt | wc -l").trim(),
        "0",
        "optional and absent: empty"
    );
    assert_eq!(sh("cat /srv/one.html"), "v1");
    // The secret's files are on a tmpfs, never on the node's disk.
    let mounts = sh("cat /proc/mounts");
    assert!(
        mounts.lines().any(|l| l.contains(" /etc/sec tmpfs ")),
        "{mounts}"
    );
    assert!(
        !mounts.lines().any(|l| l.contains(" /etc/cfg tmpfs ")),
        "{mounts}"
    );
    // The kubelet's layout: a user-visible symlink into ..data.
    assert_eq!(
        sh("readlink /etc/cfg/index.html").trim(),
        "..data/index.html"
    );

    // An edit reaches the running container within seconds; the subPath
    // mount keeps the version it was made with, as in Kubernetes.
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"index.html": "v2"}})),
        )
        .await
        .unwrap();
    // The agent reads the object again every 2 s (its sync period is 10 s).
    c.poll(
        "the edit in the container's file",
        Duration::from_secs(8),
        || async { (sh("cat /etc/cfg/index.html") == "v2").then_some(()) },
    )
    .await;
    assert_eq!(sh("cat /srv/one.html"), "v1");
}

#[tokio::test]
async fn a_pod_waits_in_container_creating_for_its_volumes_config_map() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mountwait"},
            "spec": {
                "volumes": [{"name": "cfg", "configMap": {"name": "later"}}],
                "containers": [{"name": "app", "image": BUSYBOX,
                    "command": ["sleep", "3600"],
                    "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}]}]}}),
    )
    .await;
    c.wait_pod(&client, "mountwait", "ContainerCreating", UP, |p| {
        p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
    })
    .await;
    let failed = event(&c, &client, "mountwait", "FailedMount").await;
    assert_eq!(
        failed.message.as_deref(),
        Some("MountVolume.SetUp failed for volume \"cfg\" : configmap \"later\" not found")
    );
    create_config_map(&client, "later", json!({"color": "blue"})).await;
    c.wait_pod(
        &client,
        "mountwait",
        "Running",
        Duration::from_secs(20),
        is_running,
    )
    .await;
    assert_eq!(
        c.exec("mountwait", "app", &["cat", "/etc/cfg/color"]),
        "blue"
    );
}
