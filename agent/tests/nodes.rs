//! Nodes coming and going, on real Docker with two agents: a node whose
//! agent stops is marked Unknown and tainted after the grace period, its
//! Deployment pods are replaced elsewhere while its StatefulSet pod is
//! not (the identity must never run twice), deleting the node frees the
//! identity, and the agent coming back cleans up. And the maintenance
//! verbs: cordon, drain, taint, with bosun and kubectl.

mod cluster;

use std::time::Duration;

use cluster::{Cluster, BUSYBOX};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(60);

fn sleeper(labels: Value) -> Value {
    json!({
        "metadata": {"labels": labels},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": BUSYBOX, "command": ["sleep", "3600"]}]
        }
    })
}

async fn create_deployment(client: &Client, name: &str, replicas: i32) {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": sleeper(json!({"app": name}))}
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
}

fn running_ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status.as_ref().is_some_and(|s| {
            s.phase.as_deref() == Some("Running")
                && s.conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

fn node_of(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

async fn pods(client: &Client, selector: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items
}

/// Waits until `n` pods matching `selector` run ready on `node`, none
/// elsewhere but terminating ones; returns them.
async fn running_on(
    c: &Cluster,
    client: &Client,
    selector: &str,
    n: usize,
    node: &str,
) -> Vec<Pod> {
    c.poll(
        &format!("{n} pods {selector} running on {node}"),
        UP,
        || async {
            let all = pods(client, selector).await;
            let live: Vec<Pod> = all
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            (live.len() == n && live.iter().all(|p| running_ready(p) && node_of(p) == node))
                .then_some(live)
        },
    )
    .await
}

fn run(cmd: &mut std::process::Command) -> (bool, String, String) {
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(cmd: &mut std::process::Command) -> String {
    let (success, stdout, stderr) = run(cmd);
    assert!(success, "{cmd:?}: {stderr}");
    stdout
}

fn ready_status(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone())
        .unwrap_or_default()
}

fn taints(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect()
}

#[tokio::test]
async fn a_lost_node_is_tainted_its_pods_move_and_a_statefulset_identity_never_runs_twice() {
    let mut c = Cluster::start_nodes_with_control(
        2,
        &[],
        &[
            "--node-monitor-grace-period",
            "6s",
            "--node-monitor-period",
            "1s",
            "--default-unreachable-toleration-seconds",
            "3",
        ],
    );
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let (n0, n1) = (c.nodes()[0].clone(), c.nodes()[1].clone());
    let nodes: Api<Node> = Api::all(client.clone());

    // Each agent heartbeats through its Lease.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    for n in [&n0, &n1] {
        c.poll(&format!("{n}'s lease"), UP, || async {
            let lease = leases.get_opt(n).await.unwrap()?;
            (lease.spec?.holder_identity.as_deref() == Some(n.as_str())).then_some(())
        })
        .await;
    }

    // Everything starts on n1: n0 is cordoned meanwhile.
    assert_eq!(
        ok(c.bosun().args(["cordon", &n0])).trim(),
        format!("node/{n0} cordoned")
    );
    assert_eq!(
        ok(c.bosun().args(["cordon", &n0])).trim(),
        format!("node/{n0} already cordoned")
    );
    create_deployment(&client, "app", 2).await;
    let set: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"serviceName": "db", "replicas": 1, "selector": {"matchLabels": {"app": "db"}},
                 "template": sleeper(json!({"app": "db"}))}
    }))
    .unwrap();
    Api::<StatefulSet>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &set)
        .await
        .unwrap();
    let old_app = running_on(&c, &client, "app=app", 2, &n1).await;
    let db = running_on(&c, &client, "app=db", 1, &n1).await.remove(0);
    assert_eq!(
        ok(c.bosun().args(["uncordon", &n0])).trim(),
        format!("node/{n0} uncordoned")
    );

    // n1's agent stops; its containers keep running, as when a kubelet dies.
    c.stop_agent_at(1);
    // The agent's last sign of life: its Lease's last renewal.
    let last_renewal = leases
        .get(&n1)
        .await
        .unwrap()
        .spec
        .unwrap()
        .renew_time
        .unwrap()
        .0;
    let marked = c
        .poll("n1 Unknown and tainted unreachable", UP, || async {
            let n = nodes.get(&n1).await.unwrap();
            let unreachable =
                taints(&n).contains(&"node.kubernetes.io/unreachable:NoExecute".to_string());
            let ready = n
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "Ready")?;
            (ready.status == "Unknown" && unreachable).then_some(ready.last_transition_time?.0)
        })
        .await;
    // Not before the 6 s grace period after that renewal (the condition's
    // time has whole seconds).
    let silent = marked.duration_since(last_renewal).as_secs_f64();
    assert!(
        silent > 5.0,
        "marked Unknown {silent:.1} s after the last renewal"
    );
    // Its pods are no longer Ready (endpoints and DNS drop them).
    c.poll("db-0 not Ready", UP, || async {
        let p = Api::<Pod>::namespaced(client.clone(), "default")
            .get("db-0")
            .await
            .unwrap();
        let ready = p
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Ready")?;
        (ready.status == "False").then_some(())
    })
    .await;

    // After the 3 s toleration the Deployment's pods are replaced on n0.
    let new_app = running_on(&c, &client, "app=app", 2, &n0).await;
    for old in &old_app {
        assert!(new_app.iter().all(|p| p.uid() != old.uid()));
    }
    // db-0 was evicted too, but stays Terminating while nobody can say
    // its container stopped: no second db-0 anywhere.
    let now_db = Api::<Pod>::namespaced(client.clone(), "default")
        .get("db-0")
        .await
        .unwrap();
    assert_eq!(now_db.uid(), db.uid());
    assert!(now_db.metadata.deletion_timestamp.is_some());
    assert!(c.docker_ids_on(&n0, &["io.bosun.pod.name=db-0"]).is_empty());
    let old_db_containers = c.docker_ids_on(&n1, &["io.bosun.pod.name=db-0"]);
    assert!(
        !old_db_containers.is_empty(),
        "the old db-0 keeps running on n1"
    );

    // Deleting the node says it is gone for good: pod GC removes its pods
    // and db-0 starts again, on n0.
    assert_eq!(
        ok(c.bosun().args(["delete", "node", &n1])).trim(),
        format!("node \"{n1}\" deleted")
    );
    let new_db = running_on(&c, &client, "app=db", 1, &n0).await.remove(0);
    assert_ne!(new_db.uid(), db.uid());
    assert!(pods(&client, "app").await.iter().all(|p| node_of(p) != n1));

    // The agent comes back: its node registers again, Ready and untainted,
    // and the containers of its deleted pods are removed.
    c.start_agent_at(1);
    c.poll("n1 back, Ready, untainted", UP, || async {
        let n = nodes.get_opt(&n1).await.unwrap()?;
        (ready_status(&n) == "True" && taints(&n).is_empty()).then_some(())
    })
    .await;
    c.poll("n1's old containers removed", UP, || async {
        c.docker_ids_on(&n1, &["io.bosun.pod.namespace=default"])
            .is_empty()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn drain_evicts_all_but_daemon_pods_and_taints_keep_pods_off() {
    let c = Cluster::start_nodes(2);
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let (n0, n1) = (c.nodes()[0].clone(), c.nodes()[1].clone());

    ok(c.bosun().args(["cordon", &n0]));
    create_deployment(&client, "app", 2).await;
    let solo: Pod = serde_json::from_value(json!({
        "metadata": {"name": "solo"},
        "spec": {"nodeName": n1, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": BUSYBOX, "command": ["sleep", "3600"]}]}
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &solo)
        .await
        .unwrap();
    running_on(&c, &client, "app=app", 2, &n1).await;
    ok(c.bosun().args(["uncordon", &n0]));
    // A DaemonSet: one pod on each node.
    let daemons: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agentd"},
        "spec": {"selector": {"matchLabels": {"app": "agentd"}},
                 "template": sleeper(json!({"app": "agentd"}))}
    }))
    .unwrap();
    Api::<DaemonSet>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &daemons)
        .await
        .unwrap();
    let daemon_on_n1 = c
        .poll("a daemon pod on each node", UP, || async {
            let ps = pods(&client, "app=agentd").await;
            let ready: Vec<&Pod> = ps.iter().filter(|p| running_ready(p)).collect();
            if ready.len() == 2 && ready.iter().any(|p| node_of(p) == n0) {
                ready.into_iter().find(|p| node_of(p) == n1).cloned()
            } else {
                None
            }
        })
        .await;
    let daemon = format!("default/{}", daemon_on_n1.name_any());

    // A daemon pod, and a pod no controller replaces, stop the drain
    // (after cordoning).
    let (success, stdout, stderr) = run(c.bosun().args(["drain", &n1]));
    assert!(!success);
    assert_eq!(stdout.trim(), format!("node/{n1} cordoned"));
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 4, "{stderr}");
    assert!(lines[0].starts_with(&format!(
        "error: unable to drain node \"{n1}\" due to error: ["
    )));
    assert!(lines[0].ends_with("], continuing command..."), "{stderr}");
    for why in [
        format!(
            "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): {daemon}"
        ),
        "cannot delete Pods that declare no controller (use --force to override): default/solo"
            .to_string(),
    ] {
        assert!(
            lines[0].contains(&why) && lines[3].contains(&why),
            "{stderr}"
        );
    }
    assert_eq!(lines[1], "There are pending nodes to be drained:");
    assert_eq!(lines[2], format!(" {n1}"));
    assert!(lines[3].starts_with("error: ["), "{stderr}");
    assert!(pods(&client, "app=app")
        .await
        .iter()
        .all(|p| p.metadata.deletion_timestamp.is_none()));

    // --ignore-daemonsets --force: everything but the daemon pod is
    // evicted, and drain waits until it is gone.
    let (success, stdout, stderr) = run(c.bosun().args([
        "drain",
        &n1,
        "--ignore-daemonsets",
        "--force",
        "--timeout",
        "60s",
    ]));
    assert!(success, "{stderr}");
    assert_eq!(
        stderr.trim(),
        format!(
            "Warning: ignoring DaemonSet-managed Pods: {daemon}; \
             deleting Pods that declare no controller: default/solo"
        )
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], format!("node/{n1} already cordoned"));
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("evicting pod default/"))
            .count(),
        3,
        "{stdout}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.ends_with(" evicted")).count(),
        3,
        "{stdout}"
    );
    assert_eq!(*lines.last().unwrap(), format!("node/{n1} drained"));
    let on_n1 = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={n1}")))
        .await
        .unwrap();
    // Only the daemon pod is left, still running: cordons do not move it.
    let left: Vec<String> = on_n1.items.iter().map(|p| p.name_any()).collect();
    assert_eq!(left, [daemon_on_n1.name_any()]);
    assert!(on_n1.items.iter().all(running_ready));
    running_on(&c, &client, "app=app", 2, &n0).await;

    // kubectl's node verbs against bosun; a NoSchedule taint keeps new
    // pods off n1 once it is schedulable again.
    let (success, stdout, stderr) = run(c.kubectl().args(["uncordon", &n1]));
    assert!(success, "{stderr}");
    assert_eq!(stdout.trim(), format!("node/{n1} uncordoned"));
    let (success, stdout, stderr) =
        run(c
            .kubectl()
            .args(["taint", "nodes", &n1, "dedicated=db:NoSchedule"]));
    assert!(success, "{stderr}");
    assert_eq!(stdout.trim(), format!("node/{n1} tainted"));
    let (success, stdout, _) =
        run(c
            .bosun()
            .args(["taint", "nodes", &n0, "dedicated=db:NoSchedule"]));
    assert!(success);
    assert_eq!(stdout.trim(), format!("node/{n0} tainted"));
    // Both nodes tainted: a new pod without a toleration stays Pending.
    let (success, _, stderr) =
        run(c
            .bosun()
            .args(["taint", "nodes", &n0, "dedicated=web:NoSchedule"]));
    assert!(!success);
    assert_eq!(
        stderr.trim(),
        format!("error: node {n0} already has dedicated taint(s) with same effect(s) and --overwrite is false")
    );
    create_deployment(&client, "late", 1).await;
    let pending = c
        .poll("late's pod unschedulable", UP, || async {
            let p = pods(&client, "app=late").await.into_iter().next()?;
            let cond = p
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "PodScheduled")?
                .clone();
            (cond.status == "False").then_some(cond)
        })
        .await;
    assert!(
        pending
            .message
            .as_deref()
            .unwrap_or("")
            .contains("untolerated taint {dedicated: db}"),
        "{pending:?}"
    );
    // Removing the taint from n0 lets it run there.
    assert_eq!(
        ok(c.bosun()
            .args(["taint", "nodes", &n0, "dedicated:NoSchedule-"]))
        .trim(),
        format!("node/{n0} untainted")
    );
    running_on(&c, &client, "app=late", 1, &n0).await;
}

/// A node whose heartbeats were late has its pods marked not Ready by the
/// node lifecycle controller (Ready=False in their status). When the
/// agent is heard from again, its pods must not stay that way: the agent
/// writes again what it sees, as the kubelet's status manager reconciles
/// a status someone else changed. (Seen with hollow nodes: 22-29 pods
/// kept Ready=False with their containers ready after a heartbeat lapse.)
#[tokio::test]
async fn a_pod_marked_not_ready_by_another_writer_is_made_ready_again_by_its_agent() {
    let c = Cluster::start_nodes(1);
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let node = c.nodes()[0].clone();
    create_deployment(&client, "steady", 1).await;
    let pod = running_on(&c, &client, "app=steady", 1, &node)
        .await
        .remove(0);
    let name = pod.name_any();
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    // What the node lifecycle controller writes (its MarkPodsNotReady).
    let not_ready = json!({"status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "NodeNotReady",
         "message": "Node is not ready"}]}});
    api.patch_status(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Strategic(not_ready),
    )
    .await
    .unwrap();
    let ready = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone())
    };
    assert_eq!(
        ready(&api.get(&name).await.unwrap()).as_deref(),
        Some("False")
    );
    c.poll("the agent's Ready=True written again", UP, || async {
        let p = api.get(&name).await.unwrap();
        (ready(&p).as_deref() == Some("True") && p.uid() == pod.uid()).then_some(())
    })
    .await;
}
