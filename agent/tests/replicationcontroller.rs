//! A ReplicationController on real Docker, end to end, driven with
//! `kubectl` as a user drives one: apply, read kubectl's columns, scale up
//! and down through the scale subresource, delete it and see its pods
//! collected.

mod cluster;

use std::time::Duration;

use cluster::{ok, Cluster, BUSYBOX};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

const UP: Duration = Duration::from_secs(90);

fn running_and_ready(p: &Pod) -> bool {
    let Some(status) = p.status.as_ref() else {
        return false;
    };
    p.metadata.deletion_timestamp.is_none()
        && status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn owned_by(p: &Pod, rc: &ReplicationController) -> bool {
    p.owner_references().iter().any(|r| {
        r.controller == Some(true)
            && r.kind == "ReplicationController"
            && Some(&r.uid) == rc.metadata.uid.as_ref()
    })
}

async fn pods(client: &Client) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

/// Waits until the RC has exactly `n` pods, all Running and Ready, and no
/// terminating pod of it is left; returns their names.
async fn wait_ready_pods(
    c: &Cluster,
    client: &Client,
    rc: &ReplicationController,
    n: usize,
) -> Vec<String> {
    c.poll(
        &format!("{n} running, ready pods of the RC and nothing else"),
        UP,
        || async {
            let all = pods(client).await;
            let of_rc: Vec<&Pod> = all.iter().filter(|p| owned_by(p, rc)).collect();
            (of_rc.len() == n && of_rc.iter().all(|p| running_and_ready(p)))
                .then(|| of_rc.iter().map(|p| p.name_any()).collect())
        },
    )
    .await
}

fn containers_of(c: &Cluster, pod: &str) -> Vec<String> {
    c.docker_ids(&[&format!("io.bosun.pod.name={pod}")])
}

/// `kubectl get rc web`'s row, once its READY column reads `ready`.
async fn rc_row(c: &Cluster, ready: usize) -> Vec<String> {
    c.poll(
        &format!("kubectl get rc shows {ready} ready"),
        UP,
        || async {
            let out = ok(c.kubectl().args(["get", "rc", "web", "--no-headers"]));
            let row: Vec<String> = out.split_whitespace().map(str::to_string).collect();
            (row.get(3) == Some(&ready.to_string())).then_some(row)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replication_controller_keeps_its_pods_on_docker() {
    let c = Cluster::start();
    let client = c.client().await;
    let manifest = c.dir.path().join("web-rc.yaml");
    std::fs::write(
        &manifest,
        format!(
            r#"apiVersion: v1
kind: ReplicationController
metadata:
  name: web
spec:
  replicas: 2
  template:
    metadata:
      labels:
        app: web
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: app
        image: {BUSYBOX}
        command: ["sleep", "3600"]
"#
        ),
    )
    .unwrap();
    ok(c.kubectl().arg("apply").arg("-f").arg(&manifest));
    let rc = c
        .poll("the ReplicationController", UP, || async {
            Api::<ReplicationController>::namespaced(client.clone(), "default")
                .get("web")
                .await
                .ok()
        })
        .await;
    // The selector defaulted from the template's labels, as upstream's.
    let selector = rc.spec.as_ref().and_then(|s| s.selector.clone());
    assert_eq!(
        selector.unwrap_or_default().get("app").map(String::as_str),
        Some("web")
    );

    // 2 pods Running and Ready, each with its containers on Docker, and
    // kubectl's NAME DESIRED CURRENT READY AGE columns.
    let first = wait_ready_pods(&c, &client, &rc, 2).await;
    for p in &first {
        assert!(p.starts_with("web-"), "{p}");
        assert!(!containers_of(&c, p).is_empty(), "no containers for {p}");
    }
    let header = ok(c.kubectl().args(["get", "rc", "web"]));
    assert!(
        header
            .lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .eq(["NAME", "DESIRED", "CURRENT", "READY", "AGE"]),
        "{header}"
    );
    assert_eq!(rc_row(&c, 2).await[..4], ["web", "2", "2", "2"]);

    // kubectl scales it through the scale subresource: up to 3, down to 1.
    ok(c.kubectl().args(["scale", "rc", "web", "--replicas=3"]));
    wait_ready_pods(&c, &client, &rc, 3).await;
    assert_eq!(rc_row(&c, 3).await[..4], ["web", "3", "3", "3"]);
    ok(c.kubectl().args(["scale", "rc", "web", "--replicas=1"]));
    let one = wait_ready_pods(&c, &client, &rc, 1).await;
    assert_eq!(rc_row(&c, 1).await[..4], ["web", "1", "1", "1"]);

    // Deleting the RC deletes its pod (garbage collector) and so its
    // containers.
    ok(c.kubectl().args(["delete", "rc", "web"]));
    c.poll("the RC's pods and containers gone", UP, || async {
        (pods(&client).await.is_empty() && containers_of(&c, &one[0]).is_empty()).then_some(())
    })
    .await;
    c.poll("no containers left on the node", UP, || async {
        c.docker_ids(&[]).is_empty().then_some(())
    })
    .await;
}
