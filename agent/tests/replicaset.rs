//! A ReplicaSet on real Docker, end to end, driven with `bosun` and
//! `kubectl` as the seeds drive it: apply, lose a pod, scale up and down,
//! relabel a pod out of the set, delete the set.

mod cluster;

use std::time::Duration;

use cluster::{ok, Cluster, BUSYBOX};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
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

fn owned_by(p: &Pod, rs: &ReplicaSet) -> bool {
    p.owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && Some(&r.uid) == rs.metadata.uid.as_ref())
}

async fn pods(client: &Client) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

/// The set's pods that are not terminating.
async fn live_pods_of(client: &Client, rs: &ReplicaSet) -> Vec<Pod> {
    pods(client)
        .await
        .into_iter()
        .filter(|p| owned_by(p, rs) && p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// Waits until the set has exactly `n` pods, all Running and Ready, and
/// no terminating pod of it is left; returns their names.
async fn wait_ready_pods(c: &Cluster, client: &Client, rs: &ReplicaSet, n: usize) -> Vec<String> {
    c.poll(
        &format!("{n} running, ready pods of the set and nothing else"),
        UP,
        || async {
            let all = pods(client).await;
            let of_set: Vec<&Pod> = all.iter().filter(|p| owned_by(p, rs)).collect();
            (of_set.len() == n && of_set.iter().all(|p| running_and_ready(p)))
                .then(|| of_set.iter().map(|p| p.name_any()).collect())
        },
    )
    .await
}

async fn ready_replicas(client: &Client) -> Option<i32> {
    Api::<ReplicaSet>::namespaced(client.clone(), "default")
        .get("web")
        .await
        .ok()?
        .status?
        .ready_replicas
}

fn containers_of(c: &Cluster, pod: &str) -> Vec<String> {
    c.docker_ids(&[&format!("io.bosun.pod.name={pod}")])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicaset_keeps_its_pods_on_docker() {
    let c = Cluster::start();
    let client = c.client().await;
    let manifest = c.dir.path().join("web-rs.yaml");
    std::fs::write(
        &manifest,
        format!(
            r#"apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web
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
    ok(c.bosun().arg("apply").arg("-f").arg(&manifest));
    let rs = c
        .poll("the ReplicaSet", UP, || async {
            Api::<ReplicaSet>::namespaced(client.clone(), "default")
                .get("web")
                .await
                .ok()
        })
        .await;

    // 3 pods Running and Ready, each with its containers on Docker.
    let first = wait_ready_pods(&c, &client, &rs, 3).await;
    for p in &first {
        assert!(p.starts_with("web-"), "{p}");
        assert!(!containers_of(&c, p).is_empty(), "no containers for {p}");
    }
    c.poll("status.readyReplicas 3", UP, || async {
        (ready_replicas(&client).await == Some(3)).then_some(())
    })
    .await;
    let listed = ok(c.bosun().args(["get", "rs", "web"]));
    assert!(listed.contains("web"), "{listed}");

    // A pod is deleted: the set makes a replacement with a new name.
    let lost = first[0].clone();
    ok(c.bosun().args(["delete", "pod", &lost]));
    let after = wait_ready_pods(&c, &client, &rs, 3).await;
    assert!(!after.contains(&lost), "{after:?}");
    assert!(
        containers_of(&c, &lost).is_empty(),
        "{lost} still on Docker"
    );

    // kubectl scales it through the scale subresource: up to 5, down to 1.
    let mut kubectl = c.kubectl();
    ok(kubectl.args(["scale", "rs/web", "--replicas=5"]));
    let five = wait_ready_pods(&c, &client, &rs, 5).await;
    c.poll("status.readyReplicas 5", UP, || async {
        (ready_replicas(&client).await == Some(5)).then_some(())
    })
    .await;
    let mut kubectl = c.kubectl();
    ok(kubectl.args(["scale", "rs/web", "--replicas=1"]));
    let one = wait_ready_pods(&c, &client, &rs, 1).await;
    let victims: Vec<&String> = five.iter().filter(|p| !one.contains(p)).collect();
    assert_eq!(victims.len(), 4, "{five:?} -> {one:?}");
    c.poll("the 4 victims' containers gone from Docker", UP, || async {
        victims
            .iter()
            .all(|v| containers_of(&c, v).is_empty())
            .then_some(())
    })
    .await;
    assert!(!containers_of(&c, &one[0]).is_empty());

    // Relabelled out of the set: released (no owner) and replaced.
    let relabelled = one[0].clone();
    ok(c.bosun()
        .args(["label", "pod", &relabelled, "app=other", "--overwrite"]));
    let released = c
        .poll("the relabelled pod released", UP, || async {
            let p = Api::<Pod>::namespaced(client.clone(), "default")
                .get(&relabelled)
                .await
                .ok()?;
            p.owner_references().is_empty().then_some(p)
        })
        .await;
    let replacement = wait_ready_pods(&c, &client, &rs, 1).await;
    assert_ne!(replacement[0], relabelled);
    assert!(
        running_and_ready(&released),
        "the released pod keeps running"
    );
    assert_eq!(live_pods_of(&client, &rs).await.len(), 1);

    // Deleting the set deletes its pods (garbage collector); the released
    // pod is no longer the set's and stays.
    ok(c.bosun().args(["delete", "rs", "web"]));
    c.poll("the set's pods and containers gone", UP, || async {
        let left: Vec<String> = pods(&client).await.iter().map(|p| p.name_any()).collect();
        (left == [relabelled.clone()] && containers_of(&c, &replacement[0]).is_empty())
            .then_some(())
    })
    .await;
    ok(c.bosun().args(["delete", "pod", &relabelled]));
    c.poll("no containers left on the node", UP, || async {
        c.docker_ids(&[]).is_empty().then_some(())
    })
    .await;
}
