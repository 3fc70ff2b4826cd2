//! The seeds' DaemonSet on real Docker, end to end: fluentd-elasticsearch
//! (busybox tailing the node's /var/log in its place) on 3 agents, then a
//! 4th joining, cordons, a nodeSelector, a NoSchedule taint, and a rolling
//! update driven by `bosun set image` / `rollout status|history|undo`, and
//! kubectl's `rollout history|undo` against the same revisions.
//!
//! A watch records every change of the set's pods; the test checks from
//! it that no node ever ran two live pods of the set (maxSurge 0), and
//! that cordons and NoSchedule taints evicted nobody.

mod cluster;

use std::collections::BTreeMap;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster::{Cluster, BUSYBOX};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(90);
const NS: &str = "kube-system";
const DS: &str = "fluentd-elasticsearch";
const WEB: &str = "bosun.local/web:1";

/// The seed's manifest, but for the image and a command that stands in
/// for fluentd: it tails the node's /var/log and stops at once on TERM.
const SEED: &str = r#"apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: fluentd-elasticsearch
  namespace: kube-system
  labels:
    k8s-app: fluentd-logging
spec:
  selector:
    matchLabels:
      name: fluentd-elasticsearch
  template:
    metadata:
      labels:
        name: fluentd-elasticsearch
    spec:
      tolerations:
      - key: node-role.kubernetes.io/master
        effect: NoSchedule
      containers:
      - name: fluentd-elasticsearch
        image: bosun.local/busybox:1.35
        command: ["sh", "-c", "trap 'exit 0' TERM; tail -F /var/log/bosun-e2e-fluentd.log & wait"]
        resources:
          limits:
            memory: 200Mi
          requests:
            cpu: 100m
            memory: 200Mi
        volumeMounts:
        - name: varlog
          mountPath: /var/log
        - name: varlibdockercontainers
          mountPath: /var/lib/docker/containers
          readOnly: true
      terminationGracePeriodSeconds: 30
      volumes:
      - name: varlog
        hostPath:
          path: /var/log
      - name: varlibdockercontainers
        hostPath:
          path: /var/lib/docker/containers
"#;

/// A set that runs only on nodes labelled `e2e-daemon=yes`.
const LABELLED: &str = r#"apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: labelled
spec:
  selector:
    matchLabels: {app: labelled}
  template:
    metadata:
      labels: {app: labelled}
    spec:
      nodeSelector: {e2e-daemon: "yes"}
      terminationGracePeriodSeconds: 1
      containers:
      - name: sleeper
        image: bosun.local/busybox:1.35
        command: ["sh", "-c", "trap 'exit 0' TERM; sleep 86400 & wait"]
"#;

fn run(cmd: &mut std::process::Command) -> Output {
    cmd.output().expect("the CLI runs")
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn bosun(c: &Cluster, args: &[&str]) -> String {
    ok(
        run(c.bosun().args(args)),
        &format!("bosun {}", args.join(" ")),
    )
}

fn kubectl(c: &Cluster, args: &[&str]) -> String {
    ok(
        run(c.kubectl().args(args)),
        &format!("kubectl {}", args.join(" ")),
    )
}

/// The node a pod is for: its nodeName, else its metadata.name affinity.
fn node_of(p: &Pod) -> Option<String> {
    let spec = p.spec.as_ref()?;
    if let Some(n) = spec.node_name.clone() {
        return Some(n);
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == "metadata.name")
        .and_then(|r| r.values.as_ref()?.first().cloned())
}

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

fn image_of(p: &Pod) -> String {
    p.spec.as_ref().unwrap().containers[0]
        .image
        .clone()
        .unwrap_or_default()
}

/// One change of one pod, as the watch saw it.
#[derive(Debug, Clone)]
struct Change {
    uid: String,
    name: String,
    node: Option<String>,
    live: bool,
}

/// Every change of the pods matching `labels` in `ns`.
struct Recorder {
    changes: Arc<Mutex<Vec<Change>>>,
    ended: Arc<Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    fn start(client: &Client, ns: &str, labels: &str) -> Recorder {
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        let changes = Arc::new(Mutex::new(Vec::new()));
        let ended = Arc::new(Mutex::new(None));
        let (c, e) = (changes.clone(), ended.clone());
        let config = watcher::Config::default().labels(labels);
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, config).boxed();
            while let Some(event) = stream.next().await {
                let record = |p: &Pod, gone: bool| Change {
                    uid: p.uid().unwrap_or_default(),
                    name: p.name_any(),
                    node: node_of(p),
                    live: !gone && p.metadata.deletion_timestamp.is_none(),
                };
                match event {
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                        c.lock().unwrap().push(record(&p, false))
                    }
                    Ok(watcher::Event::Delete(p)) => c.lock().unwrap().push(record(&p, true)),
                    Ok(_) => {}
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

    fn changes(&self) -> Vec<Change> {
        if let Some(why) = self.ended.lock().unwrap().clone() {
            panic!("the pod recorder stopped early: {why}");
        }
        self.changes.lock().unwrap().clone()
    }

    /// Replays the changes: no node ever had two live pods at once.
    fn assert_never_two_per_node(&self) {
        let mut live: BTreeMap<String, (String, Option<String>)> = BTreeMap::new();
        for ch in self.changes() {
            if ch.live {
                live.insert(ch.uid.clone(), (ch.name.clone(), ch.node.clone()));
            } else {
                live.remove(&ch.uid);
            }
            let mut per_node: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for (name, node) in live.values() {
                if let Some(n) = node {
                    per_node.entry(n).or_default().push(name);
                }
            }
            for (node, pods) in per_node {
                assert!(pods.len() <= 1, "two live pods {pods:?} on {node} at once");
            }
        }
    }

    /// Whether the pod `uid` was ever seen terminating or gone.
    fn went(&self, uid: &str) -> bool {
        self.changes().iter().any(|c| c.uid == uid && !c.live)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pods(client: &Client, ns: &str, labels: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(labels))
        .await
        .unwrap()
        .items
}

/// Node -> its Running and Ready pods, when every node of `nodes` has
/// exactly one (on `image`, if given), and no other node has any.
async fn one_ready_each(
    client: &Client,
    ns: &str,
    labels: &str,
    nodes: &[String],
    image: Option<&str>,
) -> Option<BTreeMap<String, Pod>> {
    let all = pods(client, ns, labels).await;
    let live: Vec<&Pod> = all
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    if live.len() != nodes.len() {
        return None;
    }
    let mut out = BTreeMap::new();
    for p in live {
        if !running_and_ready(p) || image.is_some_and(|i| image_of(p) != i) {
            return None;
        }
        let node = p.spec.as_ref()?.node_name.clone()?;
        if !nodes.contains(&node) || out.insert(node, p.clone()).is_some() {
            return None;
        }
    }
    Some(out)
}

async fn wait_one_each(
    c: &Cluster,
    client: &Client,
    ns: &str,
    labels: &str,
    nodes: &[String],
    image: Option<&str>,
) -> BTreeMap<String, Pod> {
    c.poll(
        &format!("one ready pod ({labels}) on each of {nodes:?}"),
        UP,
        || one_ready_each(client, ns, labels, nodes, image),
    )
    .await
}

async fn ds_status(client: &Client, ns: &str, name: &str) -> Value {
    let ds = Api::<DaemonSet>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap();
    serde_json::to_value(ds.status).unwrap()
}

async fn patch_node(client: &Client, node: &str, patch: Value) {
    Api::<Node>::all(client.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

/// The rows of a table printed by `get`, split on whitespace.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_daemonset_runs_one_pod_per_node_through_joins_cordons_taints_and_rollouts() {
    let mut c = Cluster::start_nodes(3);
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let recorder = Recorder::start(&client, NS, "name=fluentd-elasticsearch");
    let selector = "name=fluentd-elasticsearch";

    let manifest = c.dir.path().join("fluentd.yaml");
    std::fs::write(&manifest, SEED).unwrap();
    let applied = bosun(&c, &["apply", "-f", manifest.to_str().unwrap()]);
    assert_eq!(applied, "daemonset.apps/fluentd-elasticsearch created\n");

    // One pod per node, each running on its own agent.
    let mut nodes = c.nodes();
    let placed = wait_one_each(&c, &client, NS, selector, &nodes, Some(BUSYBOX)).await;
    for (node, pod) in &placed {
        let ids = c.docker_ids_on(
            node,
            &[
                &format!("io.bosun.pod.name={}", pod.name_any()),
                "io.bosun.container=fluentd-elasticsearch",
            ],
        );
        assert!(
            !ids.is_empty(),
            "{} has no container on {node}",
            pod.name_any()
        );
    }
    c.poll("status 3/3 available", UP, || async {
        let s = ds_status(&client, NS, DS).await;
        (s["numberAvailable"] == 3 && s["desiredNumberScheduled"] == 3).then_some(())
    })
    .await;
    // `get ds` with both clients: kubectl's columns and numbers.
    for table in [
        bosun(&c, &["get", "ds", "-n", NS]),
        kubectl(&c, &["get", "ds", "-n", NS]),
    ] {
        let r = rows(&table);
        assert_eq!(
            r[0],
            [
                "NAME",
                "DESIRED",
                "CURRENT",
                "READY",
                "UP-TO-DATE",
                "AVAILABLE",
                "NODE",
                "SELECTOR",
                "AGE"
            ],
            "{table}"
        );
        assert_eq!(
            r[1][..7],
            [DS, "3", "3", "3", "3", "3", "<none>"],
            "{table}"
        );
    }
    // The seed's revision listing, with both clients.
    let args = [
        "get",
        "controllerrevision",
        "-n",
        NS,
        "-l",
        "name=fluentd-elasticsearch",
    ];
    for revisions in [bosun(&c, &args), kubectl(&c, &args)] {
        let r = rows(&revisions);
        assert_eq!(
            r[0],
            ["NAME", "CONTROLLER", "REVISION", "AGE"],
            "{revisions}"
        );
        assert_eq!(r.len(), 2, "{revisions}");
        assert!(r[1][0].starts_with("fluentd-elasticsearch-"), "{revisions}");
        assert_eq!(r[1][1..3], ["daemonset.apps/fluentd-elasticsearch", "1"]);
    }

    // A fourth node joins and gets its pod within seconds of being Ready.
    let joined = c.add_agent();
    nodes.push(joined.clone());
    c.wait_nodes_ready(&client).await;
    c.poll(
        "a pod made for the new node",
        Duration::from_secs(10),
        || async {
            pods(&client, NS, selector)
                .await
                .iter()
                .any(|p| node_of(p).as_deref() == Some(joined.as_str()))
                .then_some(())
        },
    )
    .await;
    let placed = wait_one_each(&c, &client, NS, selector, &nodes, None).await;

    // Cordoned nodes keep their pods, and a deleted one comes back there.
    for node in [&nodes[1], &nodes[2]] {
        patch_node(&client, node, json!({"spec": {"unschedulable": true}})).await;
    }
    let victim = placed[&nodes[1]].clone();
    Api::<Pod>::namespaced(client.clone(), NS)
        .delete(&victim.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    let placed = c
        .poll("the pod on the cordoned node replaced", UP, || async {
            let now = one_ready_each(&client, NS, selector, &nodes, None).await?;
            (now[&nodes[1]].uid() != victim.uid()).then_some(now)
        })
        .await;
    assert!(
        !recorder.went(&placed[&nodes[2]].uid().unwrap()),
        "a cordon evicted a daemon pod"
    );

    // A nodeSelector: the labelled set runs only where the label is; a
    // NoSchedule taint keeps it off a labelled node, and evicts no pod of
    // the first set already there.
    patch_node(
        &client,
        &joined,
        json!({"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}}),
    )
    .await;
    for node in [&nodes[0], &joined] {
        patch_node(
            &client,
            node,
            json!({"metadata": {"labels": {"e2e-daemon": "yes"}}}),
        )
        .await;
    }
    let labelled = c.dir.path().join("labelled.yaml");
    std::fs::write(&labelled, LABELLED).unwrap();
    bosun(&c, &["apply", "-f", labelled.to_str().unwrap()]);
    wait_one_each(&c, &client, "default", "app=labelled", &nodes[..1], None).await;
    // The set saw the tainted node and left it out.
    c.poll("labelled: 1 desired, 1 available", UP, || async {
        let s = ds_status(&client, "default", "labelled").await;
        (s["desiredNumberScheduled"] == 1 && s["numberAvailable"] == 1).then_some(())
    })
    .await;
    let s = c
        .poll("fluentd: the tainted node misscheduled", UP, || async {
            let s = ds_status(&client, NS, DS).await;
            (s["numberMisscheduled"] == 1).then_some(s)
        })
        .await;
    assert_eq!(s["desiredNumberScheduled"], 3);
    assert!(
        !recorder.went(&placed[&joined].uid().unwrap()),
        "a NoSchedule taint evicted a daemon pod"
    );
    assert!(one_ready_each(&client, NS, selector, &nodes, None)
        .await
        .is_some());
    // The taint lifted: the labelled set reaches the node.
    patch_node(&client, &joined, json!({"spec": {"taints": null}})).await;
    let two = [nodes[0].clone(), joined.clone()];
    wait_one_each(&c, &client, "default", "app=labelled", &two, None).await;

    // A rolling update with bosun, followed to the end by rollout status.
    bosun(
        &c,
        &[
            "set",
            "image",
            "ds/fluentd-elasticsearch",
            &format!("fluentd-elasticsearch={WEB}"),
            "-n",
            NS,
        ],
    );
    let status = bosun(
        &c,
        &[
            "rollout",
            "status",
            "ds/fluentd-elasticsearch",
            "-n",
            NS,
            "--timeout=180s",
        ],
    );
    assert!(
        status.ends_with("daemon set \"fluentd-elasticsearch\" successfully rolled out\n"),
        "{status}"
    );
    wait_one_each(&c, &client, NS, selector, &nodes, Some(WEB)).await;
    let history = bosun(
        &c,
        &["rollout", "history", "ds/fluentd-elasticsearch", "-n", NS],
    );
    let revisions: Vec<String> = rows(&history)
        .iter()
        .skip(2)
        .filter_map(|r| r.first().cloned())
        .collect();
    assert_eq!(revisions, ["1", "2"], "{history}");
    // kubectl reads the same history.
    let history = kubectl(
        &c,
        &[
            "rollout",
            "history",
            "daemonset/fluentd-elasticsearch",
            "-n",
            NS,
        ],
    );
    assert!(history.contains("REVISION"), "{history}");
    let numbers: Vec<String> = rows(&history)
        .iter()
        .filter_map(|r| r.first().cloned())
        .filter(|n| n.parse::<i64>().is_ok())
        .collect();
    assert_eq!(numbers, ["1", "2"], "{history}");

    // Undo with bosun returns to the seed's image...
    let undone = bosun(
        &c,
        &["rollout", "undo", "ds/fluentd-elasticsearch", "-n", NS],
    );
    assert_eq!(undone, "daemonset.apps/fluentd-elasticsearch rolled back\n");
    bosun(
        &c,
        &[
            "rollout",
            "status",
            "ds/fluentd-elasticsearch",
            "-n",
            NS,
            "--timeout=180s",
        ],
    );
    wait_one_each(&c, &client, NS, selector, &nodes, Some(BUSYBOX)).await;
    // ... and kubectl's undo goes back to revision 2's.
    let undone = kubectl(
        &c,
        &[
            "rollout",
            "undo",
            "daemonset/fluentd-elasticsearch",
            "-n",
            NS,
            "--to-revision=2",
        ],
    );
    assert!(undone.contains("rolled back"), "{undone}");
    kubectl(
        &c,
        &[
            "rollout",
            "status",
            "daemonset/fluentd-elasticsearch",
            "-n",
            NS,
            "--timeout=180s",
        ],
    );
    wait_one_each(&c, &client, NS, selector, &nodes, Some(WEB)).await;

    recorder.assert_never_two_per_node();

    // Deleting the set takes its pods and their containers with it.
    let in_kube_system = |n: &String| c.docker_ids_on(n, &["io.bosun.pod.namespace=kube-system"]);
    assert!(nodes.iter().all(|n| !in_kube_system(n).is_empty()));
    let deleted = bosun(&c, &["delete", "ds", DS, "-n", NS]);
    assert_eq!(
        deleted,
        "daemonset.apps \"fluentd-elasticsearch\" deleted\n"
    );
    c.poll("the set's pods and containers gone", UP, || async {
        let left = pods(&client, NS, selector).await.len()
            + nodes
                .iter()
                .map(|n| {
                    c.docker_ids_on(n, &["io.bosun.pod.namespace=kube-system"])
                        .len()
                })
                .sum::<usize>();
        (left == 0).then_some(())
    })
    .await;
}
