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

/// What the pod watch saw of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PodSeen {
    /// Its `pod-template-hash`: which ReplicaSet's template it runs.
    hash: String,
    /// It has a deletionTimestamp but still exists.
    terminating: bool,
    /// Ready, and not terminating.
    ready: bool,
}

fn seen(p: &Pod) -> PodSeen {
    PodSeen {
        hash: p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("pod-template-hash"))
            .cloned()
            .unwrap_or_default(),
        terminating: p.metadata.deletion_timestamp.is_some(),
        ready: is_ready(p),
    }
}

/// One entry of a pod timeline, in the order the watch delivered them.
#[derive(Debug, Clone)]
enum Seen {
    /// A list begins (the first one, or a re-list): the pods it lists
    /// replace what was known once it is done.
    ListStart,
    Listed(String, PodSeen),
    ListDone,
    Changed(String, PodSeen),
    Gone(String),
}

/// The pods at one moment, by name.
type PodState = BTreeMap<String, PodSeen>;

/// Extremes over a stretch of a timeline.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    /// Fewest ready pods.
    min_ready: usize,
    /// Most pods that were not terminating.
    max_live: usize,
    /// Most pods, terminating ones included.
    max_all: usize,
}

/// Replays a timeline: the pods at entry `from` and at the end, and the
/// extremes from `from` on (moments inside a list do not count: the state
/// is known again when the list is done).
fn replay(timeline: &[Seen], from: usize) -> (PodState, PodState, Bounds) {
    let mut state = PodState::new();
    let mut listing: Option<PodState> = None;
    let mut at_from = PodState::new();
    let mut b = Bounds {
        min_ready: usize::MAX,
        max_live: 0,
        max_all: 0,
    };
    for (i, entry) in timeline.iter().enumerate() {
        if i == from {
            at_from = state.clone();
        }
        match entry {
            Seen::ListStart => listing = Some(PodState::new()),
            Seen::Listed(name, pod) => {
                listing
                    .as_mut()
                    .expect("a listed pod inside a list")
                    .insert(name.clone(), pod.clone());
            }
            Seen::ListDone => state = listing.take().expect("the end of a list it began"),
            Seen::Changed(name, pod) => {
                state.insert(name.clone(), pod.clone());
            }
            Seen::Gone(name) => {
                state.remove(name);
            }
        }
        if i >= from && listing.is_none() {
            b.min_ready = b.min_ready.min(state.values().filter(|p| p.ready).count());
            b.max_live = b
                .max_live
                .max(state.values().filter(|p| !p.terminating).count());
            b.max_all = b.max_all.max(state.len());
        }
    }
    if from >= timeline.len() {
        at_from = state.clone();
    }
    (at_from, state, b)
}

/// Records every pod change of one app, from before a rollout to after
/// the last, and fails the test if its watch ends or fails on the way (a
/// gap in the timeline would hide what the bounds are about).
struct Recorder {
    timeline: Arc<Mutex<Vec<Seen>>>,
    ended: Arc<Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Recorder {
    /// Starts watching the pods of `app` and waits for the first list.
    async fn start(c: &Cluster, client: &Client, app: &str) -> Recorder {
        let timeline = Arc::new(Mutex::new(Vec::new()));
        let ended = Arc::new(Mutex::new(None));
        let api: Api<Pod> = Api::namespaced(client.clone(), "default");
        let cfg = watcher::Config::default().labels(&format!("app={app}"));
        let (t, e) = (timeline.clone(), ended.clone());
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(api, cfg));
            let why = loop {
                let event = match stream.next().await {
                    None => break "the pod watch ended".to_string(),
                    Some(Err(err)) => break format!("the pod watch failed: {err}"),
                    Some(Ok(event)) => event,
                };
                let name = |p: &Pod| p.metadata.name.clone().unwrap();
                t.lock().unwrap().push(match event {
                    watcher::Event::Init => Seen::ListStart,
                    watcher::Event::InitApply(p) => Seen::Listed(name(&p), seen(&p)),
                    watcher::Event::InitDone => Seen::ListDone,
                    watcher::Event::Apply(p) => Seen::Changed(name(&p), seen(&p)),
                    watcher::Event::Delete(p) => Seen::Gone(name(&p)),
                });
            };
            *e.lock().unwrap() = Some(why);
        });
        let r = Recorder {
            timeline,
            ended,
            task,
        };
        c.poll("the pod watch to list the pods", LONG, || async {
            r.alive();
            r.timeline
                .lock()
                .unwrap()
                .iter()
                .any(|e| matches!(e, Seen::ListDone))
                .then_some(())
        })
        .await;
        r
    }

    /// Fails the test if the watch has ended.
    fn alive(&self) {
        if let Some(why) = self.ended.lock().unwrap().as_ref() {
            panic!("the pod timeline is incomplete: {why}");
        }
    }

    /// Where the next rollout's stretch of the timeline begins.
    fn mark(&self) -> usize {
        self.alive();
        self.timeline.lock().unwrap().len()
    }

    /// Checks the rollout recorded since `from`: it began from `replicas`
    /// settled pods of one template; the replayed timeline ends in exactly
    /// the pods the API lists once the rollout is over (`replicas` ready
    /// pods of one other template, none terminating); and at no moment on
    /// the way were fewer than `replicas - max_unavailable` pods ready or
    /// more than `replicas + max_surge` pods not terminating. Returns the
    /// new template's hash.
    async fn check_rollout(
        &self,
        c: &Cluster,
        client: &Client,
        what: &str,
        from: usize,
        (replicas, max_surge, max_unavailable): (usize, usize, usize),
    ) -> String {
        let (start, _, _) = replay(&self.timeline.lock().unwrap(), from);
        let start_hashes: BTreeSet<&str> = start.values().map(|p| p.hash.as_str()).collect();
        assert!(
            start.len() == replicas
                && start_hashes.len() == 1
                && start.values().all(|p| p.ready && !p.terminating),
            "{what}: the recording did not start from {replicas} settled pods: {start:?}"
        );
        let listed = c
            .poll(
                &format!("{what}: the pod timeline to end in the pods the API lists"),
                LONG,
                || async {
                    self.alive();
                    let listed: PodState = pods_of(client, "web")
                        .await
                        .iter()
                        .map(|p| (p.metadata.name.clone().unwrap(), seen(p)))
                        .collect();
                    let hashes: BTreeSet<&str> = listed.values().map(|p| p.hash.as_str()).collect();
                    let settled = listed.len() == replicas
                        && hashes.len() == 1
                        && listed.values().all(|p| p.ready && !p.terminating);
                    let (_, end, _) = replay(&self.timeline.lock().unwrap(), from);
                    (settled && end == listed).then_some(listed)
                },
            )
            .await;
        let new_hash = listed.values().next().unwrap().hash.clone();
        assert!(
            !start_hashes.contains(new_hash.as_str()),
            "{what}: the pods still run the template they started with ({new_hash})"
        );
        let (_, _, b) = replay(&self.timeline.lock().unwrap(), from);
        eprintln!("{what}: {b:?}");
        assert!(
            b.min_ready >= replicas - max_unavailable,
            "{what}: at some moment only {} pods were ready ({b:?})",
            b.min_ready
        );
        assert!(
            b.max_live <= replicas + max_surge,
            "{what}: at some moment {} pods were not terminating ({b:?})",
            b.max_live
        );
        new_hash
    }
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

    // Every rollout from here on is watched pod by pod: the set image, both
    // undos, the resume and the restart each keep within maxSurge 1 and
    // maxUnavailable 1 of 3 replicas, and end in 3 ready pods of the new
    // template.
    c.poll("the scaled-down pods to go", LONG, || async {
        let pods = pods_of(&client, "web").await;
        (pods.len() == 3 && pods.iter().all(is_ready)).then_some(())
    })
    .await;
    let recorder = Recorder::start(&c, &client, "web").await;
    const BOUNDS: (usize, usize, usize) = (3, 1, 1);
    let from = recorder.mark();
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
    let v2_hash = recorder
        .check_rollout(&c, &client, "set image", from, BOUNDS)
        .await;

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
    let from = recorder.mark();
    ok(&c, &["rollout", "undo", "deployment/web"]);
    ok(
        &c,
        &["rollout", "status", "deployment/web", "--timeout=120s"],
    );
    ready_pods_serving(&c, &client, "web", 3, "v1").await;
    recorder
        .check_rollout(&c, &client, "undo", from, BOUNDS)
        .await;
    let h = history(&c, "web");
    assert_eq!(
        h.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
        vec![2, 3],
        "{h:?}"
    );
    let from = recorder.mark();
    ok(
        &c,
        &["rollout", "undo", "deployment/web", "--to-revision=2"],
    );
    ok(
        &c,
        &["rollout", "status", "deployment/web", "--timeout=120s"],
    );
    ready_pods_serving(&c, &client, "web", 3, "v2").await;
    let hash = recorder
        .check_rollout(&c, &client, "undo --to-revision=2", from, BOUNDS)
        .await;
    assert_eq!(
        hash, v2_hash,
        "undo to revision 2 brings back its pods' template"
    );
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
    let from = recorder.mark();
    ok(&c, &["rollout", "resume", "deployment/web"]);
    ok(
        &c,
        &["rollout", "status", "deployment/web", "--timeout=120s"],
    );
    recorder
        .check_rollout(&c, &client, "resume", from, BOUNDS)
        .await;
    assert_eq!(
        sets_of(&client, "web").await.len(),
        3,
        "one new set for both edits"
    );
    ready_pods_serving(&c, &client, "web", 3, "v1").await;

    // revisionHistoryLimit 2 keeps at most 2 old sets.
    let from = recorder.mark();
    ok(&c, &["rollout", "restart", "deployment/web"]);
    ok(
        &c,
        &["rollout", "status", "deployment/web", "--timeout=120s"],
    );
    recorder
        .check_rollout(&c, &client, "restart", from, BOUNDS)
        .await;
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
    // with the old pods still serving, and within the same bounds.
    let from = recorder.mark();
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
    recorder.alive();
    let (_, _, b) = replay(&recorder.timeline.lock().unwrap(), from);
    assert!(
        b.min_ready >= 2 && b.max_live <= 4,
        "the stalled rollout left its bounds: {b:?}"
    );
    drop(recorder);

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
