//! The seeds' Deployment flow end to end on real Docker, with two agents on
//! one engine: the scheduler spreads the pods, the ReplicaSet and
//! Deployment controllers scale and roll them, the garbage collector
//! cleans up, and `bosun` drives it all as a user would.

mod cluster;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster::Cluster;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use kube::Client;

const V1: &str = "bosun.local/web:1";
const V2: &str = "bosun.local/web:2";
const LONG: Duration = Duration::from_secs(120);

fn run(c: &Cluster, args: &[&str]) -> Output {
    c.bosun().args(args).output().expect("bosun runs")
}

fn ok(c: &Cluster, args: &[&str]) -> String {
    let out = run(c, args);
    assert!(
        out.status.success(),
        "bosun {} failed:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn deployment_yaml(name: &str, replicas: u32, extra_spec: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: {name}}}
  strategy:
    type: RollingUpdate
    rollingUpdate: {{maxSurge: 1, maxUnavailable: 1}}
{extra_spec}  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: {V1}
        readinessProbe:
          httpGet: {{path: /, port: 80}}
          periodSeconds: 1
"#
    )
}

fn apply(c: &Cluster, yaml: &str) {
    let path = c.dir.path().join("manifest.yaml");
    std::fs::write(&path, yaml).unwrap();
    ok(c, &["apply", "-f", path.to_str().unwrap()]);
}

async fn pods_of(client: &Client, app: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
}

fn is_ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn sets_of(client: &Client, app: &str) -> Vec<ReplicaSet> {
    Api::<ReplicaSet>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
}

/// What a web pod serves, fetched from inside it.
fn served(c: &Cluster, pod: &str) -> String {
    ok(
        c,
        &["exec", pod, "--", "wget", "-qO-", "http://127.0.0.1:80/"],
    )
    .trim()
    .to_string()
}

async fn ready_pods_serving(c: &Cluster, client: &Client, app: &str, n: usize, version: &str) {
    let pods = c
        .poll(
            &format!("{n} ready pods of {app} serving {version}"),
            LONG,
            || async {
                let pods: Vec<Pod> = pods_of(client, app).await;
                let all: Vec<&Pod> = pods
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .collect();
                let ready: Vec<&Pod> = all.iter().copied().filter(|p| is_ready(p)).collect();
                (all.len() == n && ready.len() == n).then(|| {
                    ready
                        .iter()
                        .map(|p| p.metadata.name.clone().unwrap())
                        .collect::<Vec<_>>()
                })
            },
        )
        .await;
    for p in pods {
        assert_eq!(served(c, &p), format!("web {version}"), "pod {p}");
    }
}

/// One entry of a pod timeline: (pod name, live (exists and not
/// terminating), ready). `None` marks the end of the watch's initial list.
type Change = Option<(String, bool, bool)>;

/// Records every pod change of one app, in the order the watch saw them.
fn record_pods(
    client: &Client,
    app: &str,
) -> (Arc<Mutex<Vec<Change>>>, tokio::task::JoinHandle<()>) {
    let timeline = Arc::new(Mutex::new(Vec::new()));
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let cfg = watcher::Config::default().labels(&format!("app={app}"));
    let t = timeline.clone();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(watcher(api, cfg));
        while let Some(Ok(event)) = stream.next().await {
            let mut t = t.lock().unwrap();
            match event {
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                    let live = p.metadata.deletion_timestamp.is_none();
                    t.push(Some((p.metadata.name.clone().unwrap(), live, is_ready(&p))))
                }
                watcher::Event::Delete(p) => {
                    t.push(Some((p.metadata.name.clone().unwrap(), false, false)))
                }
                watcher::Event::InitDone => t.push(None),
                watcher::Event::Init => {}
            }
        }
    });
    (timeline, task)
}

/// Replays a timeline: the fewest ready and the most live pods at any
/// moment after the initial list.
fn bounds(timeline: &[Change]) -> (usize, usize) {
    let mut state: BTreeMap<&str, bool> = BTreeMap::new();
    let mut listed = false;
    let mut min_ready = usize::MAX;
    let mut max_live = 0;
    for change in timeline {
        match change {
            None => listed = true,
            Some((name, true, ready)) => {
                state.insert(name, *ready);
            }
            Some((name, false, _)) => {
                state.remove(name.as_str());
            }
        }
        if listed {
            max_live = max_live.max(state.len());
            min_ready = min_ready.min(state.values().filter(|r| **r).count());
        }
    }
    (min_ready, max_live)
}

fn history(c: &Cluster, name: &str) -> Vec<(u32, String)> {
    ok(c, &["rollout", "history", &format!("deployment/{name}")])
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(2, char::is_whitespace);
            let rev = parts.next()?.parse().ok()?;
            Some((rev, parts.next().unwrap_or("").trim().to_string()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seeds_deployment_flow_on_two_nodes() {
    let c = Cluster::start_nodes(2);
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;

    // Create: 3/3 ready, spread over both nodes.
    apply(&c, &deployment_yaml("web", 3, ""));
    let status = ok(
        &c,
        &["rollout", "status", "deployment/web", "--timeout=120s"],
    );
    assert!(
        status.contains("deployment \"web\" successfully rolled out"),
        "{status}"
    );
    ready_pods_serving(&c, &client, "web", 3, "v1").await;
    let nodes: BTreeSet<String> = pods_of(&client, "web")
        .await
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    assert_eq!(nodes.len(), 2, "pods spread over both nodes: {nodes:?}");
    let get = ok(&c, &["get", "deploy", "web"]);
    assert!(get.contains("3/3"), "{get}");

    // Scale up and down; scaling starts no rollout.
    ok(&c, &["scale", "deployment/web", "--replicas=4"]);
    ready_pods_serving(&c, &client, "web", 4, "v1").await;
    ok(&c, &["scale", "deployment/web", "--replicas=2"]);
    ready_pods_serving(&c, &client, "web", 2, "v1").await;
    assert_eq!(
        sets_of(&client, "web").await.len(),
        1,
        "scaling made no new ReplicaSet"
    );
    ok(&c, &["scale", "deployment/web", "--replicas=3"]);
    ready_pods_serving(&c, &client, "web", 3, "v1").await;

    // Rolling update with a recorded change-cause, watched pod by pod.
    let (timeline, recorder) = record_pods(&client, "web");
    c.poll("the pod watch to list the 3 pods", LONG, || async {
        timeline.lock().unwrap().contains(&None).then_some(())
    })
    .await;
    ok(
        &c,
        &[
            "set",
            "image",
            "deployment/web",
            &format!("web={V2}"),
            "--record",
        ],
    );
    let status = ok(
        &c,
        &["rollout", "status", "deployment/web", "--timeout=120s"],
    );
    assert!(status.contains("successfully rolled out"), "{status}");
    ready_pods_serving(&c, &client, "web", 3, "v2").await;
    recorder.abort();
    let (min_ready, max_live) = bounds(&timeline.lock().unwrap());
    assert!(
        min_ready >= 2,
        "at some moment only {min_ready} pods were available"
    );
    assert!(max_live <= 4, "at some moment {max_live} pods existed");

    let h = history(&c, "web");
    assert_eq!(
        h.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
        vec![1, 2],
        "{h:?}"
    );
    assert!(
        h[1].1.contains("set image deployment/web"),
        "change-cause: {h:?}"
    );

    // Undo goes back to v1 as revision 3; --to-revision=2 back to v2 as 4.
    ok(&c, &["rollout", "undo", "deployment/web"]);
    ok(
        &c,
        &["rollout", "status", "deployment/web", "--timeout=120s"],
    );
    ready_pods_serving(&c, &client, "web", 3, "v1").await;
    let h = history(&c, "web");
    assert_eq!(
        h.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
        vec![2, 3],
        "{h:?}"
    );
    ok(
        &c,
        &["rollout", "undo", "deployment/web", "--to-revision=2"],
    );
    ok(
        &c,
        &["rollout", "status", "deployment/web", "--timeout=120s"],
    );
    ready_pods_serving(&c, &client, "web", 3, "v2").await;
    assert_eq!(
        sets_of(&client, "web").await.len(),
        2,
        "undo reuses the old sets"
    );

    // Pause, two edits, resume: one new ReplicaSet.
    ok(&c, &["rollout", "pause", "deployment/web"]);
    ok(
        &c,
        &["set", "image", "deployment/web", &format!("web={V1}")],
    );
    ok(
        &c,
        &[
            "patch",
            "deployment/web",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"GREETING","value":"hello"}]}]}}}}"#,
        ],
    );
    c.poll("the controller to observe both edits", LONG, || async {
        let d = Api::<Deployment>::namespaced(client.clone(), "default")
            .get("web")
            .await
            .ok()?;
        (d.status?.observed_generation == d.metadata.generation).then_some(())
    })
    .await;
    assert_eq!(
        sets_of(&client, "web").await.len(),
        2,
        "no rollout while paused"
    );
    ok(&c, &["rollout", "resume", "deployment/web"]);
    ok(
        &c,
        &["rollout", "status", "deployment/web", "--timeout=120s"],
    );
    assert_eq!(
        sets_of(&client, "web").await.len(),
        3,
        "one new set for both edits"
    );
    ready_pods_serving(&c, &client, "web", 3, "v1").await;

    // revisionHistoryLimit 2 keeps at most 2 old sets.
    ok(&c, &["rollout", "restart", "deployment/web"]);
    ok(
        &c,
        &["rollout", "status", "deployment/web", "--timeout=120s"],
    );
    ok(
        &c,
        &[
            "patch",
            "deployment/web",
            "-p",
            r#"{"spec":{"revisionHistoryLimit":2}}"#,
        ],
    );
    c.poll("at most 2 old sets", LONG, || async {
        let d = Api::<Deployment>::namespaced(client.clone(), "default")
            .get("web")
            .await
            .ok()?;
        let revision = d
            .metadata
            .annotations?
            .get("deployment.kubernetes.io/revision")?
            .clone();
        let sets = sets_of(&client, "web").await;
        let old = sets
            .iter()
            .filter(|s| {
                s.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("deployment.kubernetes.io/revision"))
                    != Some(&revision)
            })
            .count();
        (old <= 2).then_some(())
    })
    .await;

    // A template that never becomes ready stalls at the progress deadline,
    // with the old pods still serving.
    ok(
        &c,
        &[
            "patch",
            "deployment/web",
            "-p",
            r#"{"spec":{"progressDeadlineSeconds":10,"template":{"spec":{"containers":[{"name":"web","readinessProbe":{"httpGet":{"path":"/","port":81}}}]}}}}"#,
        ],
    );
    let out = run(
        &c,
        &["rollout", "status", "deployment/web", "--timeout=90s"],
    );
    assert!(
        !out.status.success(),
        "rollout status must fail at the deadline"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exceeded its progress deadline"), "{err}");
    let ready = pods_of(&client, "web")
        .await
        .iter()
        .filter(|p| is_ready(p))
        .count();
    assert!(ready >= 2, "old pods keep serving: {ready} ready");

    // Deleting the deployment deletes its sets and pods.
    ok(&c, &["delete", "deployment", "web"]);
    c.poll("the sets and pods of web to go", LONG, || async {
        (sets_of(&client, "web").await.is_empty() && pods_of(&client, "web").await.is_empty())
            .then_some(())
    })
    .await;

    // With --cascade=orphan they stay.
    apply(&c, &deployment_yaml("keep", 2, ""));
    ok(
        &c,
        &["rollout", "status", "deployment/keep", "--timeout=120s"],
    );
    ok(&c, &["delete", "deployment", "keep", "--cascade=orphan"]);
    c.poll("the deployment keep to go", LONG, || async {
        Api::<Deployment>::namespaced(client.clone(), "default")
            .get_opt("keep")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let sets = sets_of(&client, "keep").await;
    assert_eq!(sets.len(), 1);
    assert!(sets[0]
        .metadata
        .owner_references
        .as_ref()
        .is_none_or(|o| o.is_empty()));
    assert_eq!(
        pods_of(&client, "keep").await.len(),
        2,
        "orphaned pods stay"
    );
    // Clean up the orphans (the cluster's drop removes their containers too).
    ok(&c, &["delete", "rs", "-l", "app=keep"]);
}
