//! Namespace lifecycle on real Docker: deleting a namespace that runs a
//! Deployment makes it Terminating, the namespace controller deletes the
//! Deployment, its ReplicaSet and pods (each stopped by its agent within
//! its grace period), and only then does the namespace go; nothing of it
//! is left on Docker.

mod cluster;

use std::time::Duration;

use cluster::Cluster;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams};

const UP: Duration = Duration::from_secs(90);

fn kubectl_ok(c: &Cluster, args: &[&str]) -> String {
    let out = c.kubectl().args(args).output().expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_namespace_is_terminating_until_its_pods_are_gone() {
    let c = Cluster::start();
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    kubectl_ok(&c, &["create", "namespace", "shop"]);
    kubectl_ok(
        &c,
        &[
            "create",
            "deployment",
            "web",
            "-n",
            "shop",
            "--replicas=2",
            "--image=bosun.local/web:1",
        ],
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "shop");
    c.poll("2 running web pods in shop", UP, || async {
        let list = pods.list(&ListParams::default()).await.unwrap();
        let running = list
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        (running == 2).then_some(())
    })
    .await;
    let on_docker = || c.docker_ids(&["io.bosun.pod.namespace=shop"]);
    assert_eq!(on_docker().len(), 4, "2 pods: a sandbox and an app each");

    let nss: Api<Namespace> = Api::all(client.clone());
    let deleting = nss
        .delete("shop", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("kept while it is emptied");
    assert_eq!(
        deleting.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    // Kept for as long as anything is left in it.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "shop");
    c.poll("the namespace gone", UP, || async {
        match nss.get_opt("shop").await.unwrap() {
            Some(_) => None,
            None => Some(()),
        }
    })
    .await;
    assert!(pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
    assert!(deployments
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
    c.poll("the containers removed", UP, || async {
        on_docker().is_empty().then_some(())
    })
    .await;
    let out = c
        .kubectl()
        .args(["get", "namespace", "shop"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("namespaces \"shop\" not found"),
        "{out:?}"
    );
}
