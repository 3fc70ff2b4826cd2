//! Persistent volumes on real Docker, end to end: the seeds' static
//! hostPath volumes (`examples/pv.yaml`) bind to the smallest claim that
//! fits and mount into a pod; a pod waits in ContainerCreating until its
//! claim is bound; a `local-path` claim is provisioned on the node its
//! pod is scheduled to, keeps its data across pods, is kept while a pod
//! uses it, and takes its volume and directory with it when it goes.

mod cluster;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cluster::{ok, Cluster, BUSYBOX};
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(60);

/// The seeds' PersistentVolumes, `examples/pv.yaml`, as parsed.
fn seed_volumes() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/pv.yaml");
    let text = std::fs::read_to_string(&path).expect("examples/pv.yaml");
    serde_yaml::Deserializer::from_str(&text)
        .map(serde_yaml::with::singleton_map_recursive::deserialize::<Value, _>)
        .map(|v| v.expect("a YAML document"))
        .filter(|v| !v.is_null())
        .collect()
}

fn claims(client: &Client) -> Api<PersistentVolumeClaim> {
    Api::namespaced(client.clone(), "default")
}

fn volumes(client: &Client) -> Api<PersistentVolume> {
    Api::all(client.clone())
}

fn pods(client: &Client) -> Api<Pod> {
    Api::namespaced(client.clone(), "default")
}

async fn create_claim(client: &Client, name: &str, class: Option<&str>) -> PersistentVolumeClaim {
    let mut v = json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    });
    if let Some(class) = class {
        v["spec"]["storageClassName"] = json!(class);
    }
    claims(client)
        .create(&PostParams::default(), &serde_json::from_value(v).unwrap())
        .await
        .unwrap()
}

/// A busybox pod running `script` with claim `claim` mounted at /data.
fn pod_with_claim(name: &str, claim: &str, script: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": BUSYBOX, "command": ["sh", "-c", script],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        },
    })
}

fn is_running(p: &Value) -> bool {
    p["status"]["phase"] == "Running"
        && p["status"]["containerStatuses"][0]["state"]["running"].is_object()
}

async fn claim_bound_to(c: &Cluster, client: &Client, name: &str) -> String {
    c.poll(&format!("claim {name} Bound"), UP, || async {
        let pvc = claims(client).get_opt(name).await.ok()??;
        (pvc.status?.phase.as_deref() == Some("Bound"))
            .then(|| pvc.spec?.volume_name)
            .flatten()
    })
    .await
}

async fn delete_pod_and_wait(c: &Cluster, client: &Client, name: &str) {
    pods(client)
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    c.poll(&format!("pod {name} gone"), UP, || async {
        pods(client)
            .get_opt(name)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn the_seeds_static_volumes_bind_the_smallest_fit_and_mount_into_pods() {
    let c = Cluster::start();
    let client = c.client().await;
    // The seed's /tmp/pv1 and /tmp/pv2, as temp dirs of this test (removed
    // when it ends, also on failure); pv2 made bigger, so the smallest fit
    // is a choice.
    let dirs = tempfile::tempdir().unwrap();
    let mut paths: Vec<PathBuf> = Vec::new();
    for mut pv in seed_volumes() {
        let name = pv["metadata"]["name"].as_str().unwrap().to_string();
        let dir = dirs.path().join(&name);
        std::fs::create_dir(&dir).unwrap();
        pv["spec"]["hostPath"]["path"] = json!(dir.to_string_lossy());
        if name == "pv2" {
            pv["spec"]["capacity"]["storage"] = json!("5Gi");
        }
        volumes(&client)
            .create(&PostParams::default(), &serde_json::from_value(pv).unwrap())
            .await
            .unwrap();
        paths.push(dir);
    }
    assert_eq!(paths.len(), 2, "pv.yaml has pv1 and pv2");

    // A pod bound to the node whose claim does not exist yet waits.
    c.create_pod(
        &client,
        pod_with_claim(
            "web",
            "www-web-0",
            "echo hello > /data/index.html && sleep 3600",
        ),
    )
    .await;
    let waiting = c
        .wait_pod(&client, "web", "ContainerCreating", UP, |p| {
            p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
        })
        .await;
    assert!(
        waiting["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
            .as_str()
            .unwrap()
            .contains("persistentvolumeclaim \"www-web-0\" not found"),
        "{}",
        waiting["status"]
    );
    let events = c
        .poll("a FailedMount event", UP, || async {
            let evs = Api::<Event>::namespaced(client.clone(), "default")
                .list(&ListParams::default().fields("involvedObject.name=web"))
                .await
                .ok()?;
            evs.items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("FailedMount"))
        })
        .await;
    assert!(events.message.unwrap().contains("unmounted volumes=[data]"));

    // The claim (no class: static volumes only) binds to pv1, the
    // smallest that fits; the pod then starts and writes into pv1's dir.
    create_claim(&client, "www-web-0", Some("")).await;
    assert_eq!(claim_bound_to(&c, &client, "www-web-0").await, "pv1");
    c.wait_pod(&client, "web", "Running", UP, is_running).await;
    let written = c
        .poll("the pod's file in pv1's directory", UP, || async {
            std::fs::read_to_string(paths[0].join("index.html")).ok()
        })
        .await;
    assert_eq!(written, "hello\n");

    let out = ok(c.bosun().args(["get", "pv,pvc"]));
    let pv1 = out
        .lines()
        .find(|l| l.starts_with("persistentvolume/pv1 "))
        .unwrap_or_else(|| panic!("{out}"));
    let cols: Vec<&str> = pv1.split_whitespace().collect();
    assert_eq!(
        cols[1..6],
        ["1Gi", "RWO", "Retain", "Bound", "default/www-web-0"],
        "{out}"
    );
    let pv2 = out
        .lines()
        .find(|l| l.starts_with("persistentvolume/pv2 "))
        .unwrap();
    assert!(pv2.contains("Available"), "{out}");
    let pvc = out
        .lines()
        .find(|l| l.starts_with("persistentvolumeclaim/www-web-0 "))
        .unwrap_or_else(|| panic!("{out}"));
    let cols: Vec<&str> = pvc.split_whitespace().collect();
    assert_eq!(cols[1..5], ["Bound", "pv1", "1Gi", "RWO"], "{out}");

    delete_pod_and_wait(&c, &client, "web").await;
    // The data stays in pv1's directory after the pod.
    assert!(paths[0].join("index.html").exists());
    // The claim goes: pv1 is Released (Retain) and keeps its data.
    claims(&client)
        .delete("www-web-0", &DeleteParams::default())
        .await
        .unwrap();
    c.poll("pv1 Released", UP, || async {
        let pv = volumes(&client).get("pv1").await.ok()?;
        (pv.status?.phase.as_deref() == Some("Released")).then_some(())
    })
    .await;
    assert!(paths[0].join("index.html").exists());
}

#[tokio::test]
async fn a_local_path_claim_keeps_its_data_across_pods_and_goes_with_its_volume() {
    let c = Cluster::start();
    let client = c.client().await;
    // The default class, as `get sc` prints it, with either client.
    let clients = vec![c.bosun(), c.kubectl()];
    for mut cli in clients {
        let out = ok(cli.args(["get", "sc"]));
        let rows: Vec<Vec<&str>> = out
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows[0],
            [
                "NAME",
                "PROVISIONER",
                "RECLAIMPOLICY",
                "VOLUMEBINDINGMODE",
                "ALLOWVOLUMEEXPANSION",
                "AGE"
            ],
            "{out}"
        );
        assert_eq!(
            rows[1][..6],
            [
                "local-path",
                "(default)",
                "bosun.io/local-path",
                "Delete",
                "WaitForFirstConsumer",
                "false"
            ],
            "{out}"
        );
    }
    // No class: the default class, local-path (WaitForFirstConsumer).
    let claim = create_claim(&client, "www", None).await;
    assert_eq!(
        claim.spec.unwrap().storage_class_name.as_deref(),
        Some("local-path")
    );
    let make_pod = |name: &str, script: &str| -> Pod {
        serde_json::from_value(pod_with_claim(name, "www", script)).unwrap()
    };
    // Scheduled by the scheduler (no nodeName): it picks the node, the
    // claim learns it, a volume is made there and bound.
    pods(&client)
        .create(
            &PostParams::default(),
            &make_pod("writer", "echo persisted > /data/greeting && sleep 3600"),
        )
        .await
        .unwrap();
    let volume = claim_bound_to(&c, &client, "www").await;
    let pvc = claims(&client).get("www").await.unwrap();
    assert_eq!(
        pvc.annotations()
            .get("volume.kubernetes.io/selected-node")
            .map(String::as_str),
        Some(c.node.as_str())
    );
    let pv = volumes(&client).get(&volume).await.unwrap();
    let dir = PathBuf::from(&pv.spec.as_ref().unwrap().host_path.as_ref().unwrap().path);
    assert!(
        dir.starts_with(c.dir.path().join("agent").join("local-path")),
        "{} is in the agent's data dir",
        dir.display()
    );
    c.wait_pod(&client, "writer", "Running", UP, is_running)
        .await;
    let greeting = c
        .poll("the greeting on the node", UP, || async {
            std::fs::read_to_string(dir.join("greeting")).ok()
        })
        .await;
    assert_eq!(greeting, "persisted\n");

    // A new pod with the same claim reads what the first one wrote.
    delete_pod_and_wait(&c, &client, "writer").await;
    pods(&client)
        .create(&PostParams::default(), &make_pod("reader", "sleep 3600"))
        .await
        .unwrap();
    let p = c
        .wait_pod(&client, "reader", "Running", UP, is_running)
        .await;
    assert_eq!(p["spec"]["nodeName"], c.node.as_str());
    assert_eq!(
        c.exec("reader", "c", &["cat", "/data/greeting"]),
        "persisted\n"
    );

    // A claim in use is not deleted until its pod is gone.
    claims(&client)
        .delete("www", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pvc = claims(&client).get("www").await.expect("kept while in use");
    assert!(pvc.metadata.deletion_timestamp.is_some());
    assert!(dir.exists());
    delete_pod_and_wait(&c, &client, "reader").await;
    c.poll("the claim gone", UP, || async {
        claims(&client)
            .get_opt("www")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    // Delete reclaim: the volume goes, and its node removed the directory.
    c.poll("the volume gone", UP, || async {
        volumes(&client)
            .get_opt(&volume)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(!dir.exists(), "{} removed", dir.display());
}

#[tokio::test]
async fn the_seeds_statefulset_gets_a_local_path_volume_per_pod_that_outlives_the_pod() {
    let c = Cluster::start();
    let client = c.client().await;
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/statefulset.yaml");
    ok(c.bosun().arg("apply").arg("-f").arg(&manifest));
    let mut volume_of = Vec::new();
    for ordinal in 0..2 {
        let pod = format!("web-{ordinal}");
        c.wait_pod(&client, &pod, "Running", UP, is_running).await;
        volume_of.push(claim_bound_to(&c, &client, &format!("www-{pod}")).await);
    }
    let out = ok(c.bosun().args(["get", "pv"]));
    for (ordinal, volume) in volume_of.iter().enumerate() {
        let row = out
            .lines()
            .find(|l| l.starts_with(volume.as_str()))
            .unwrap_or_else(|| panic!("{out}"));
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cols[1..7],
            [
                "1Gi",
                "RWO",
                "Delete",
                "Bound",
                &format!("default/www-web-{ordinal}"),
                "local-path"
            ],
            "{out}"
        );
    }

    // Write into web-0's volume, delete web-0: the new web-0 has the file.
    let first = pods(&client).get("web-0").await.unwrap();
    c.exec(
        "web-0",
        "nginx",
        &[
            "sh",
            "-c",
            "echo stateful > /usr/share/nginx/html/index.html",
        ],
    );
    pods(&client)
        .delete("web-0", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    c.poll("a new web-0, running", UP, || async {
        let p = pods(&client).get_opt("web-0").await.ok()??;
        let v = serde_json::to_value(&p).unwrap();
        (p.metadata.uid != first.metadata.uid && is_running(&v)).then_some(())
    })
    .await;
    assert_eq!(
        claim_bound_to(&c, &client, "www-web-0").await,
        volume_of[0],
        "the same claim, the same volume"
    );
    assert_eq!(
        c.exec(
            "web-0",
            "nginx",
            &["cat", "/usr/share/nginx/html/index.html"]
        ),
        "stateful\n"
    );
}
