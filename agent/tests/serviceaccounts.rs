//! Service accounts in pods on real Docker: every pod finds its account's
//! token, the cluster CA and its namespace at
//! `/var/run/secrets/kubernetes.io/serviceaccount` (the projected volume
//! the API adds), the API accepts that token while the pod lives and
//! refuses it once the pod is gone, a pod can opt out of the mount, and a
//! downwardAPI volume shows the pod's own labels and limits.

mod cluster;

use std::time::Duration;

use cluster::{Cluster, BUSYBOX};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(60);
const MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn is_running(p: &Value) -> bool {
    p["status"]["containerStatuses"][0]["state"]["running"].is_object()
}

/// `kubectl get pods` as the holder of `token`: its output, or its error.
fn kubectl_as(c: &Cluster, token: &str) -> Result<String, String> {
    let out = c
        .kubectl()
        .args(["--token", token, "get", "pods", "-o", "name"])
        .output()
        .expect("kubectl");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[tokio::test]
async fn pods_get_a_token_the_api_accepts_while_they_live() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "sa", "labels": {"app": "web", "tier": "front"}},
        "spec": {"containers": [{"name": "app", "image": BUSYBOX,
            "command": ["sleep", "3600"],
            "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}},
            "volumeMounts": [{"name": "info", "mountPath": "/etc/info"}]}],
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "info", "downwardAPI": {"items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                {"path": "cpu", "resourceFieldRef": {"containerName": "app",
                    "resource": "limits.cpu", "divisor": "1m"}},
            ]}}]}}),
    )
    .await;
    c.create_pod(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "optout"},
        "spec": {"automountServiceAccountToken": false,
            "containers": [{"name": "app", "image": BUSYBOX, "command": ["sleep", "3600"]}],
            "terminationGracePeriodSeconds": 1}}),
    )
    .await;
    c.wait_pod(&client, "sa", "Running", UP, is_running).await;
    c.wait_pod(&client, "optout", "Running", UP, is_running)
        .await;

    let token = c.exec("sa", "app", &["cat", &format!("{MOUNT}/token")]);
    assert_eq!(token.split('.').count(), 3, "a JWT: {token:?}");
    assert_eq!(
        c.exec("sa", "app", &["cat", &format!("{MOUNT}/namespace")]),
        "default"
    );
    let ca = std::fs::read_to_string(c.dir.path().join("control/ca.crt")).unwrap();
    assert_eq!(
        c.exec("sa", "app", &["cat", &format!("{MOUNT}/ca.crt")]),
        ca
    );
    assert_eq!(
        c.exec("sa", "app", &["cat", "/etc/info/labels"]),
        "app=\"web\"\ntier=\"front\""
    );
    assert_eq!(c.exec("sa", "app", &["cat", "/etc/info/name"]), "sa");
    assert_eq!(c.exec("sa", "app", &["cat", "/etc/info/cpu"]), "250");
    // The token lives on tmpfs, never on the node's disk.
    let mounts = c.exec("sa", "app", &["cat", "/proc/mounts"]);
    assert!(
        mounts
            .lines()
            .any(|l| l.starts_with("tmpfs ") && l.contains(MOUNT)),
        "{mounts}"
    );
    assert_eq!(
        c.exec("optout", "app", &["ls", MOUNT]),
        "",
        "no token for a pod that opts out"
    );

    let listed = kubectl_as(&c, token.trim()).expect("the API accepts the pod's token");
    assert!(listed.contains("pod/sa"), "{listed}");
    assert!(kubectl_as(&c, &token.trim().replace('.', "x")).is_err());

    Api::<Pod>::namespaced(client.clone(), "default")
        .delete("sa", &DeleteParams::default())
        .await
        .unwrap();
    c.poll("pod sa gone", UP, || async {
        Api::<Pod>::namespaced(client.clone(), "default")
            .get_opt("sa")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let refused = kubectl_as(&c, token.trim()).expect_err("a dead pod's token is refused");
    assert!(refused.contains("Unauthorized"), "{refused}");
}
