//! Service accounts in pods on real Docker: every pod finds its account's
//! token, the cluster CA and its namespace at
//! `/var/run/secrets/kubernetes.io/serviceaccount` (the projected volume
//! the API adds), the API accepts that token while the pod lives and
//! refuses it once the pod is gone, a pod can opt out of the mount, and a
//! downwardAPI volume shows the pod's own labels and limits. An in-cluster
//! client (kube-rs `Client::try_default()`) finds the API through the
//! `kubernetes` Service and the variables every container gets, and lists
//! its namespace's pods with its token.

mod cluster;

use std::time::Duration;

use cluster::{repo_root, Cluster, BUSYBOX};
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use kube::api::{Api, DeleteParams, LogParams};
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

    // The token is the service account's, which may do only what RBAC
    // grants it: nothing until a binding says so.
    let refused = kubectl_as(&c, token.trim()).expect_err("no binding yet");
    assert!(
        refused.contains(
            "User \"system:serviceaccount:default:default\" cannot list resource \"pods\""
        ),
        "{refused}"
    );
    grant_view(&c, "default");
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

/// Binds the `view` ClusterRole to the `default` service account of
/// `namespace` there, as a user lets an in-cluster reader read.
fn grant_view(c: &Cluster, namespace: &str) {
    let account = format!("{namespace}:default");
    let out = c
        .kubectl()
        .args([
            "create",
            "rolebinding",
            "default-view",
            "--clusterrole=view",
        ])
        .args(["--serviceaccount", &account, "-n", namespace])
        .output()
        .expect("kubectl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The image of the agent's `in_cluster_client` example, (re)built by
/// `scripts/build-images.sh --in-cluster-client` when the binary changed.
fn in_cluster_client_image() -> &'static str {
    let status = std::process::Command::new("bash")
        .arg(repo_root().join("scripts/build-images.sh"))
        .arg("--in-cluster-client")
        .env("CARGO", env!("CARGO"))
        .status()
        .expect("scripts/build-images.sh");
    assert!(status.success(), "building the in-cluster client image");
    "bosun.local/in-cluster-client:1"
}

/// The field managers of an object's managedFields entries, with their
/// subresource (`/status`) if any.
fn managers(obj: &Value) -> Vec<String> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let sub = e["subresource"].as_str().unwrap_or("");
            let manager = e["manager"].as_str().unwrap_or("");
            if sub.is_empty() {
                manager.to_string()
            } else {
                format!("{manager}/{sub}")
            }
        })
        .collect()
}

#[tokio::test]
async fn an_in_cluster_client_reaches_the_api_through_the_kubernetes_service() {
    let image = in_cluster_client_image();
    // Listening beyond loopback, so the advertised address (the default
    // route's interface, as kube-apiserver picks it) takes pods' calls.
    let c = Cluster::start_nodes_with_control(1, &[], &["--bind", "0.0.0.0"]);
    let client = c.client().await;

    // The kubernetes Service, as kubectl shows it, with the control plane
    // as its endpoint.
    let svc = c
        .poll("the kubernetes Service", UP, || async {
            Api::<Service>::namespaced(client.clone(), "default")
                .get_opt("kubernetes")
                .await
                .unwrap()
        })
        .await;
    let spec = svc.spec.clone().unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("10.96.0.1"));
    assert_eq!(spec.ports.as_ref().unwrap()[0].port, 443);
    let endpoint = c
        .poll("the kubernetes Endpoints", UP, || async {
            let e = Api::<Endpoints>::namespaced(client.clone(), "default")
                .get_opt("kubernetes")
                .await
                .unwrap()?;
            let subset = e.subsets?.into_iter().next()?;
            Some((
                subset.addresses?.first()?.ip.clone(),
                subset.ports?.first()?.port,
            ))
        })
        .await;
    let port: i32 = std::fs::read_to_string(c.dir.path().join("control/address"))
        .unwrap()
        .trim()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(endpoint.1, port, "the endpoint is the secure port");
    let ip: std::net::IpAddr = endpoint.0.parse().unwrap();
    assert!(!ip.is_loopback(), "pods cannot reach {ip}");
    // The Service's writes are kube-apiserver's, as upstream records them.
    assert_eq!(
        managers(&serde_json::to_value(&svc).unwrap()),
        ["kube-apiserver"]
    );

    // Every container gets the kubelet's variables for the Service.
    c.create_pod(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "env"},
        "spec": {"containers": [{"name": "app", "image": BUSYBOX,
            "command": ["sleep", "3600"]}], "terminationGracePeriodSeconds": 1}}),
    )
    .await;
    c.wait_pod(&client, "env", "Running", UP, is_running).await;
    let env = c.exec("env", "app", &["env"]);
    for want in [
        "KUBERNETES_SERVICE_HOST=10.96.0.1",
        "KUBERNETES_SERVICE_PORT=443",
        "KUBERNETES_SERVICE_PORT_HTTPS=443",
        "KUBERNETES_PORT=tcp://10.96.0.1:443",
        "KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443",
        "KUBERNETES_PORT_443_TCP_PROTO=tcp",
        "KUBERNETES_PORT_443_TCP_PORT=443",
        "KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1",
    ] {
        assert!(
            env.lines().any(|l| l == want),
            "{want} missing from:\n{env}"
        );
    }

    // kube-rs Client::try_default() inside a pod, on its own token, which
    // may read the namespace once bound to `view`.
    grant_view(&c, "default");
    c.create_pod(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "api-client"},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "client", "image": image}]}}),
    )
    .await;
    let done = c
        .wait_pod(&client, "api-client", "finished", UP, |p| {
            matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
        })
        .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let logs = pods
        .logs("api-client", &LogParams::default())
        .await
        .unwrap();
    assert_eq!(done["status"]["phase"], "Succeeded", "{logs}");
    let facts: std::collections::BTreeMap<&str, &str> =
        logs.lines().filter_map(|l| l.split_once('=')).collect();
    assert_eq!(facts.get("server"), Some(&"https://10.96.0.1/"), "{logs}");
    assert_eq!(facts.get("namespace"), Some(&"default"), "{logs}");
    assert_eq!(
        facts.get("subject"),
        Some(&"system:serviceaccount:default:default"),
        "{logs}"
    );
    let listed: Vec<&str> = facts.get("pods").unwrap_or(&"").split(',').collect();
    assert!(
        listed.contains(&"api-client") && listed.contains(&"env"),
        "{logs}"
    );

    // The agent's status writes are the kubelet's.
    let env_pod = serde_json::to_value(pods.get("env").await.unwrap()).unwrap();
    assert!(
        managers(&env_pod).contains(&"kubelet/status".to_string()),
        "{:?}",
        managers(&env_pod)
    );
    // And the scheduler's are kube-scheduler's: a pod no node fits gets
    // PodScheduled=False from it.
    let unfit: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "unfit"},
        "spec": {"nodeSelector": {"no-such": "label"},
            "containers": [{"name": "app", "image": BUSYBOX}]}}))
    .unwrap();
    pods.create(&Default::default(), &unfit).await.unwrap();
    c.poll("the scheduler's status write", UP, || async {
        let p = serde_json::to_value(pods.get("unfit").await.ok()?).unwrap();
        managers(&p)
            .contains(&"kube-scheduler/status".to_string())
            .then_some(())
    })
    .await;
}
