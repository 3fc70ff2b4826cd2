//! NetworkPolicies enforced by the agents on real Docker, two nodes on
//! this engine (each its own bridge; pod traffic between them is routed
//! through the host, as between hosts).
//!
//! `default/web` (busybox httpd on its named port `http`, 8080, with a
//! readiness probe every second that fails at the first miss) runs on
//! node 0; clients are `default/near` on node 0 (same bridge) and
//! `np-team/client` (namespace labelled team=blue) and
//! `np-other/client` on node 1. With kubectl:
//!
//! 1. Before any policy every client reaches web.
//! 2. A deny-all ingress policy in `default` cuts every client off within
//!    a second or so, while web stays Ready (its probe comes from its own
//!    node). `kubectl get netpol` shows NAME POD-SELECTOR AGE.
//! 3. An ingress rule from namespaces with team=blue to port `http`
//!    (named) reopens web for `np-team` only.
//! 4. Labelling `np-other` team=blue lets it in too (namespace labels
//!    count); removing the label shuts it out again.
//! 5. An egress deny in `np-team` cuts its client off (the egress side);
//!    deleting it reopens.
//! 6. The agent of node 0 restarted: the policy holds while it is down
//!    and after it is back.
//! 7. Deleting the policies opens web to all again, and the node's table
//!    `bosun-np-<node>` isolates no pod.

mod cluster;

use std::process::Command;
use std::time::{Duration, Instant};

use cluster::{Cluster, BUSYBOX};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::Client;
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(90);
/// How soon a change must show in what the pods can reach: the agent
/// follows within a second; the rest is the watch and a loaded machine.
const FOLLOW: Duration = Duration::from_secs(5);

/// `kubectl apply -f -` of `manifest`.
fn apply(c: &Cluster, manifest: &Value) {
    let mut child = c
        .kubectl()
        .args(["apply", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        &mut child.stdin.take().unwrap(),
        serde_json::to_string(manifest).unwrap().as_bytes(),
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn kubectl(c: &Cluster, args: &[&str]) -> String {
    let out = c.kubectl().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A pod bound to `node`.
async fn pod(client: &Client, ns: &str, node: &str, spec: Value) {
    let mut p = spec;
    p["spec"]["nodeName"] = json!(node);
    let p: Pod = serde_json::from_value(p).unwrap();
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &p)
        .await
        .unwrap();
}

async fn ready_pod(c: &Cluster, client: &Client, ns: &str, name: &str) -> Value {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    c.poll(&format!("pod {ns}/{name} Ready"), UP, || {
        let api = api.clone();
        async move {
            let p = serde_json::to_value(api.get(name).await.ok()?).unwrap();
            let ready = p["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            (ready && p["status"]["podIP"].is_string()).then_some(p)
        }
    })
    .await
}

/// The id of the running app container of pod `ns/name`.
fn container(ns: &str, name: &str) -> String {
    let out = Command::new("docker")
        .args([
            "ps",
            "-q",
            "--filter",
            &format!("label=io.bosun.pod.namespace={ns}"),
            "--filter",
            &format!("label=io.bosun.pod.name={name}"),
            "--filter",
            "label=io.bosun.container=main",
        ])
        .output()
        .unwrap();
    let ids = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        !ids.is_empty() && !ids.contains('\n'),
        "container of {ns}/{name}: {ids:?}"
    );
    ids
}

/// Whether the client pod's HTTP GET of `ip:8080` gets web's page (a
/// dropped connection times out after 2 s).
fn reaches(client: &str, ip: &str) -> bool {
    let out = Command::new("docker")
        .args([
            "exec",
            client,
            "sh",
            "-c",
            &format!("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 {ip} 8080"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("hello from web")
}

struct Clients {
    near: String,
    team: String,
    other: String,
}

impl Clients {
    /// Which of near, team, other reach web.
    fn reach(&self, ip: &str) -> [bool; 3] {
        std::thread::scope(|s| {
            let a = s.spawn(|| reaches(&self.near, ip));
            let b = s.spawn(|| reaches(&self.team, ip));
            let c = s.spawn(|| reaches(&self.other, ip));
            [a.join().unwrap(), b.join().unwrap(), c.join().unwrap()]
        })
    }
}

/// Waits until exactly the clients `want` (near, team, other) reach web;
/// returns how long that took.
async fn wait_reach(
    c: &Cluster,
    clients: &Clients,
    ip: &str,
    want: [bool; 3],
    what: &str,
) -> Duration {
    let start = Instant::now();
    let mut last = [false; 3];
    while start.elapsed() < FOLLOW {
        last = clients.reach(ip);
        if last == want {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{what}: after {FOLLOW:?} near/team/other reach web: {last:?}, want {want:?}\nnode tables:\n{}\nagent log:\n{}",
        tables(c),
        cluster::tail(&c.agent_log(), 30)
    );
}

fn table(node: &str) -> Option<String> {
    let out = Command::new("nft")
        .args(["list", "table", "ip", &format!("bosun-np-{node}")])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn tables(c: &Cluster) -> String {
    c.nodes()
        .iter()
        .map(|n| format!("{n}: {}", table(n).unwrap_or_else(|| "none".into())))
        .collect::<Vec<_>>()
        .join("\n")
}

/// web stays Ready through `span` (its probe runs every second and one
/// miss makes it unready).
async fn stays_ready(client: &Client, span: Duration) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let start = Instant::now();
    while start.elapsed() < span {
        let p = serde_json::to_value(api.get("web").await.unwrap()).unwrap();
        let ready = p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        assert!(
            ready,
            "web lost Ready under a deny-all policy: {}",
            p["status"]
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn policy(ns: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

#[tokio::test(flavor = "multi_thread")]
async fn network_policies_isolate_pods_across_nodes() {
    let mut c = Cluster::start_nodes(2);
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let nodes = c.nodes();
    for (ns, labels) in [
        ("np-team", json!({"team": "blue"})),
        ("np-other", json!({})),
    ] {
        apply(
            &c,
            &json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": labels}}),
        );
    }
    pod(&client, "default", &nodes[0], json!({
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "main", "image": BUSYBOX,
            "command": ["sh", "-c", "mkdir /www && echo hello from web > /www/index.html && exec httpd -f -p 8080 -h /www"],
            "ports": [{"name": "http", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"path": "/", "port": "http"},
                "periodSeconds": 1, "failureThreshold": 1}}]}})).await;
    let sleeper = |name: &str| {
        json!({
        "metadata": {"name": name, "labels": {"app": "client"}},
        "spec": {"containers": [{"name": "main", "image": BUSYBOX, "command": ["sleep", "3600"]}]}})
    };
    pod(&client, "default", &nodes[0], sleeper("near")).await;
    pod(&client, "np-team", &nodes[1], sleeper("client")).await;
    pod(&client, "np-other", &nodes[1], sleeper("client")).await;
    let web = ready_pod(&c, &client, "default", "web").await;
    let ip = web["status"]["podIP"].as_str().unwrap().to_string();
    for (ns, name) in [
        ("default", "near"),
        ("np-team", "client"),
        ("np-other", "client"),
    ] {
        ready_pod(&c, &client, ns, name).await;
    }
    let clients = Clients {
        near: container("default", "near"),
        team: container("np-team", "client"),
        other: container("np-other", "client"),
    };

    // 1. No policy: everyone reaches web.
    wait_reach(&c, &clients, &ip, [true; 3], "no policy").await;

    // 2. Deny all ingress in default.
    apply(
        &c,
        &policy("default", "deny-all", json!({"podSelector": {}})),
    );
    let took = wait_reach(&c, &clients, &ip, [false; 3], "deny-all ingress").await;
    eprintln!("deny-all applied and seen by the clients in {took:?}");
    stays_ready(&client, Duration::from_secs(4)).await;
    let got = kubectl(&c, &["get", "netpol", "-n", "default"]);
    let header: Vec<&str> = got.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "POD-SELECTOR", "AGE"], "{got}");
    assert!(got.lines().nth(1).unwrap().starts_with("deny-all"), "{got}");
    let got = kubectl(
        &c,
        &[
            "get",
            "netpol",
            "deny-all",
            "-o",
            "jsonpath={.spec.policyTypes}",
        ],
    );
    assert_eq!(got, r#"["Ingress"]"#, "policyTypes defaulted");

    // 3. Allow namespaces labelled team=blue, to the named port.
    apply(
        &c,
        &policy(
            "default",
            "from-blue",
            json!({
        "podSelector": {"matchLabels": {"app": "web"}},
        "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "blue"}}}],
            "ports": [{"port": "http"}]}]}),
        ),
    );
    wait_reach(
        &c,
        &clients,
        &ip,
        [false, true, false],
        "allow from team=blue",
    )
    .await;
    let got = kubectl(&c, &["get", "netpol", "from-blue"]);
    assert!(got.contains("app=web"), "{got}");

    // 4. Namespace labels count.
    kubectl(&c, &["label", "namespace", "np-other", "team=blue"]);
    wait_reach(
        &c,
        &clients,
        &ip,
        [false, true, true],
        "np-other labelled team=blue",
    )
    .await;
    kubectl(&c, &["label", "namespace", "np-other", "team-"]);
    wait_reach(
        &c,
        &clients,
        &ip,
        [false, true, false],
        "np-other unlabelled",
    )
    .await;

    // 5. Egress deny on the client's side.
    apply(
        &c,
        &policy(
            "np-team",
            "no-egress",
            json!({"podSelector": {}, "policyTypes": ["Egress"]}),
        ),
    );
    wait_reach(&c, &clients, &ip, [false; 3], "egress deny in np-team").await;
    assert!(
        table(&nodes[1]).is_some_and(|t| t.contains("egr-np-team/client")),
        "{}",
        tables(&c)
    );
    kubectl(&c, &["delete", "netpol", "no-egress", "-n", "np-team"]);
    wait_reach(
        &c,
        &clients,
        &ip,
        [false, true, false],
        "egress deny deleted",
    )
    .await;

    // 6. The rules hold while the agent is down and after it is back.
    c.stop_agent_at(0);
    assert!(
        table(&nodes[0]).is_some_and(|t| t.contains("ing-default/web")),
        "the table went with the agent: {}",
        tables(&c)
    );
    assert_eq!(clients.reach(&ip), [false, true, false], "agent down");
    c.start_agent_at(0);
    c.wait_nodes_ready(&client).await;
    assert_eq!(clients.reach(&ip), [false, true, false], "agent back");

    // 7. No policy: open again, and no pod isolated.
    kubectl(&c, &["delete", "netpol", "deny-all", "from-blue"]);
    wait_reach(&c, &clients, &ip, [true; 3], "policies deleted").await;
    let t = table(&nodes[0]).expect("the table of a running agent");
    assert!(!t.contains("ing-") && !t.contains("drop"), "{t}");
}
