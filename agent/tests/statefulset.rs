//! The seeds' StatefulSet on real Docker, end to end: a headless service
//! `nginx` and a set `web` of `bosun.local/web:1` pods. A watch records
//! every pod change, and the test checks the order Kubernetes promises:
//! web-1 is created only once web-0 is Running and Ready, pods deleted
//! come back in order under the same names, and scale-down removes the
//! highest ordinal first, each gone before the next goes.
//!
//! (The seed's claim templates need the volume binder; this test's set has
//! none.)

mod cluster;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster::Cluster;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;

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

/// One pod change the watch saw.
#[derive(Debug, Clone)]
struct Change {
    at: Instant,
    name: String,
    uid: String,
    ready: bool,
    terminating: bool,
    gone: bool,
}

/// Every change of the set's pods, from a watch that must not end early.
struct Recorder {
    changes: Arc<Mutex<Vec<Change>>>,
    ended: Arc<Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    fn start(client: &Client) -> Recorder {
        let api: Api<Pod> = Api::namespaced(client.clone(), "default");
        let changes = Arc::new(Mutex::new(Vec::new()));
        let ended = Arc::new(Mutex::new(None));
        let (c, e) = (changes.clone(), ended.clone());
        let task = tokio::spawn(async move {
            let config = watcher::Config::default().labels("app=nginx");
            let mut stream = watcher(api, config).boxed();
            while let Some(event) = stream.next().await {
                let record = |p: &Pod, gone: bool| Change {
                    at: Instant::now(),
                    name: p.name_any(),
                    uid: p.uid().unwrap_or_default(),
                    ready: running_and_ready(p),
                    terminating: p.metadata.deletion_timestamp.is_some(),
                    gone,
                };
                match event {
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                        c.lock().unwrap().push(record(&p, false))
                    }
                    Ok(watcher::Event::Delete(p)) => c.lock().unwrap().push(record(&p, true)),
                    Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
                    Err(err) => {
                        *e.lock().unwrap() = Some(format!("watch error: {err}"));
                        return;
                    }
                }
            }
            *e.lock().unwrap() = Some("the watch ended".into());
        });
        Recorder {
            changes,
            ended,
            task,
        }
    }

    /// The changes so far; fails the test if the watch stopped.
    fn changes(&self) -> Vec<Change> {
        if let Some(why) = self.ended.lock().unwrap().clone() {
            panic!("the pod recorder stopped early: {why}");
        }
        self.changes.lock().unwrap().clone()
    }

    /// When `name` (of `uid`, if given) was first seen, or seen ready.
    fn first(&self, name: &str, uid: Option<&str>, ready: bool) -> Option<Instant> {
        self.changes()
            .iter()
            .find(|c| c.name == name && uid.is_none_or(|u| u == c.uid) && (!ready || c.ready))
            .map(|c| c.at)
    }

    /// When `name` (of `uid`) was first seen going: terminating or gone.
    fn going(&self, name: &str, uid: &str) -> Option<Instant> {
        self.changes()
            .iter()
            .find(|c| c.name == name && c.uid == uid && (c.terminating || c.gone))
            .map(|c| c.at)
    }

    /// When `name` (of `uid`) was seen gone.
    fn gone(&self, name: &str, uid: &str) -> Option<Instant> {
        self.changes()
            .iter()
            .find(|c| c.name == name && c.uid == uid && c.gone)
            .map(|c| c.at)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pod(client: &Client, name: &str) -> Option<Pod> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .get_opt(name)
        .await
        .unwrap()
}

/// Waits until `name` is Running and Ready, and returns its uid.
async fn ready_uid(c: &Cluster, client: &Client, name: &str) -> String {
    c.poll(&format!("{name} Running and Ready"), UP, || async {
        pod(client, name)
            .await
            .filter(running_and_ready)
            .and_then(|p| p.uid())
    })
    .await
}

/// Waits until `name` is Running and Ready with `image`.
async fn ready_on(c: &Cluster, client: &Client, name: &str, image: &str) {
    c.poll(&format!("{name} on {image}, ready"), UP, || async {
        pod(client, name)
            .await
            .filter(|p| {
                running_and_ready(p)
                    && p.spec
                        .as_ref()
                        .and_then(|s| s.containers[0].image.as_deref())
                        == Some(image)
            })
            .map(|_| ())
    })
    .await;
}

#[tokio::test]
async fn the_seeds_statefulset_starts_in_order_with_stable_names() {
    let c = Cluster::start();
    let client = c.client().await;
    let recorder = Recorder::start(&client);

    let service: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "nginx", "labels": {"app": "nginx"}},
        "spec": {"ports": [{"port": 80, "name": "web"}], "clusterIP": "None",
                 "selector": {"app": "nginx"}}
    }))
    .unwrap();
    Api::<Service>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let set: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web"},
        "spec": {
            "serviceName": "nginx", "replicas": 2,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{
                    "name": "nginx", "image": "bosun.local/web:1",
                    "ports": [{"containerPort": 80, "name": "web"}],
                    "readinessProbe": {"httpGet": {"path": "/", "port": 80},
                                       "periodSeconds": 1}
                }]}
            }
        }
    }))
    .unwrap();
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    sets.create(&PostParams::default(), &set).await.unwrap();

    // web-1 is created only after web-0 is Running and Ready.
    let web0 = ready_uid(&c, &client, "web-0").await;
    let web1 = ready_uid(&c, &client, "web-1").await;
    let web0_ready = recorder.first("web-0", Some(&web0), true).unwrap();
    let web1_seen = recorder.first("web-1", Some(&web1), false).unwrap();
    assert!(
        web0_ready <= web1_seen,
        "web-1 appeared before web-0 was ready: {:#?}",
        recorder.changes()
    );

    // Stable network identity: the hostname is the pod's name.
    let out = c
        .bosun()
        .args(["exec", "web-0", "--", "hostname"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "web-0");
    let out = c.exec("web-1", "nginx", &["hostname"]);
    assert_eq!(out.trim(), "web-1");

    // Both pods deleted: they come back under the same names, in order.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let deleted_at = Instant::now();
    for name in ["web-0", "web-1"] {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    let new0 = c
        .poll("a new web-0 Running and Ready", UP, || async {
            pod(&client, "web-0")
                .await
                .filter(|p| running_and_ready(p) && p.uid().as_deref() != Some(&web0))
                .and_then(|p| p.uid())
        })
        .await;
    let new1 = c
        .poll("a new web-1 Running and Ready", UP, || async {
            pod(&client, "web-1")
                .await
                .filter(|p| running_and_ready(p) && p.uid().as_deref() != Some(&web1))
                .and_then(|p| p.uid())
        })
        .await;
    let new0_ready = recorder.first("web-0", Some(&new0), true).unwrap();
    let new1_seen = recorder.first("web-1", Some(&new1), false).unwrap();
    assert!(
        new0_ready <= new1_seen,
        "the new web-1 appeared before the new web-0 was ready: {:#?}",
        recorder.changes()
    );
    // The old pods stopped promptly on SIGTERM (no 30 s grace period wait).
    let old0_gone = recorder.gone("web-0", &web0).unwrap();
    assert!(
        old0_gone.duration_since(deleted_at) < Duration::from_secs(10),
        "web-0 took {:?} to go",
        old0_gone.duration_since(deleted_at)
    );
    // The same identity never ran twice: the new web-0 came after the old
    // one was gone.
    assert!(recorder.first("web-0", Some(&new0), false).unwrap() >= old0_gone);
    let out = c.exec("web-0", "nginx", &["hostname"]);
    assert_eq!(out.trim(), "web-0");

    // Scale to 3 and back to 1: web-2 goes first, web-1 only once it is gone.
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    let web2 = ready_uid(&c, &client, "web-2").await;
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    c.poll("web-1 and web-2 gone", UP, || async {
        (pod(&client, "web-1").await.is_none() && pod(&client, "web-2").await.is_none())
            .then_some(())
    })
    .await;
    let web2_gone = recorder.gone("web-2", &web2).unwrap();
    let web1_going = recorder.going("web-1", &new1).unwrap();
    assert!(
        web2_gone <= web1_going,
        "web-1 went before web-2 was gone: {:#?}",
        recorder.changes()
    );
    assert!(pod(&client, "web-0")
        .await
        .is_some_and(|p| running_and_ready(&p)));
    // The controller writes status after it sees the pods go: wait for it.
    c.poll("status 1 replica, 1 ready", UP, || async {
        let status = sets.get("web").await.unwrap().status.unwrap();
        ((status.replicas, status.ready_replicas) == (1, Some(1))).then_some(())
    })
    .await;

    // A rolling update, followed and undone with bosun and kubectl.
    let bosun = |args: &[&str]| {
        let out = c.bosun().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "bosun {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(
        bosun(&["set", "image", "statefulset/web", "nginx=bosun.local/web:2"]).trim(),
        "statefulset.apps/web image updated"
    );
    let status = bosun(&["rollout", "status", "statefulset/web", "--timeout", "60s"]);
    assert!(
        status
            .trim_end()
            .ends_with("partitioned roll out complete: 1 new pods have been updated..."),
        "{status}"
    );
    let image_of = |p: Pod| p.spec.unwrap().containers[0].image.clone().unwrap();
    assert_eq!(
        image_of(pod(&client, "web-0").await.unwrap()),
        "bosun.local/web:2"
    );
    let history = bosun(&["rollout", "history", "sts/web"]);
    let out = c
        .kubectl()
        .args(["rollout", "history", "statefulset/web"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        history,
        "bosun and kubectl agree"
    );
    let rows: Vec<&str> = history
        .lines()
        .skip(2)
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(rows.len(), 2, "{history}");
    assert_eq!(
        bosun(&["rollout", "undo", "statefulset/web"]).trim(),
        "statefulset.apps/web rolled back"
    );
    ready_on(&c, &client, "web-0", "bosun.local/web:1").await;

    // A partitioned update (the seed's `partition: 2`): with 3 replicas,
    // only web-2 takes the new image; web-0 and web-1 keep theirs.
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3,
            "updateStrategy": {"rollingUpdate": {"partition": 2}}}})),
    )
    .await
    .unwrap();
    ready_uid(&c, &client, "web-2").await;
    let before: Vec<String> = {
        let mut uids = Vec::new();
        for n in ["web-0", "web-1"] {
            uids.push(ready_uid(&c, &client, n).await);
        }
        uids
    };
    bosun(&["set", "image", "statefulset/web", "nginx=bosun.local/web:2"]);
    let status = bosun(&["rollout", "status", "statefulset/web", "--timeout", "60s"]);
    assert!(
        status
            .trim_end()
            .ends_with("partitioned roll out complete: 1 new pods have been updated..."),
        "{status}"
    );
    ready_on(&c, &client, "web-2", "bosun.local/web:2").await;
    // Below the partition nothing moves: watched for 3 s after web-2 is
    // ready (the controller acts within milliseconds of that; without the
    // partition it deletes web-1 next).
    let settled = Instant::now();
    while settled.elapsed() < Duration::from_secs(3) {
        for (n, uid) in ["web-0", "web-1"].iter().zip(&before) {
            assert!(
                recorder.going(n, uid).is_none(),
                "{n} was replaced below the partition: {:#?}",
                recorder.changes()
            );
            let p = pod(&client, n).await.unwrap();
            assert_eq!(p.uid().as_ref(), Some(uid), "{n} was left alone");
            assert_eq!(image_of(p), "bosun.local/web:1", "{n}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();

    // Deleting the set takes its pod along.
    sets.delete("web", &DeleteParams::default()).await.unwrap();
    c.poll("web-0 gone with its set", UP, || async {
        pod(&client, "web-0").await.is_none().then_some(())
    })
    .await;
    recorder.changes();
}
