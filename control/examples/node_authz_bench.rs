//! A benchmark of the Node authorizer: nodes GETting Secrets their pods
//! reference, through the real API handlers in process, with many pods in
//! the store, answered from the node graph; and what keeping the graph
//! costs per pod write, reading of each pod only the fields that name
//! other objects (`PodRefs`, as the graph does) beside decoding the whole
//! pod into a JSON tree (the first step of what it did before), in the
//! same run.
//!
//! `cargo run --release -p bosun-control --example node_authz_bench -- [PODS] [NODES]`
//! (defaults 5000 pods on 50 nodes). Prints one line per mode: requests,
//! latency p50/p99 and the process's CPU per request (client and server
//! share the process; the `admin` line, which skips the Node authorizer,
//! is the rest of a GET's cost). (A list of every pod, the way main
//! answered before the graph, is no longer a path the server takes.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_control::api::{self, ApiState};
use bosun_control::auth::NodeGraph;
use bosun_control::store::{EmbeddedStore, Store, StoreOptions};
use serde_json::json;

const TOKEN: &str = "bench-admin";

/// User plus system CPU of this process, from /proc/self/stat.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("stat")
        .1
        .split_whitespace()
        .collect();
    // utime and stime are fields 14 and 15 (1-based), 11 and 12 after the
    // command's closing parenthesis.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as u64;
    Duration::from_micros(ticks * 1_000_000 / hz)
}

async fn state(store: Arc<dyn Store>, graph: Arc<NodeGraph>) -> Arc<ApiState> {
    Arc::new(ApiState {
        store: store.clone(),
        token: TOKEN.into(),
        tokens: Arc::new(bosun_control::tokens::TokenIssuer::ephemeral()),
        options: Default::default(),
        shutdown: tokio::sync::watch::channel(false).1,
        node_signer: None,
        snapshots: None,
        rbac: bosun_control::auth::rbac::Rbac::new(store.clone())
            .await
            .expect("rbac"),
        node_graph: graph,
        aggregator: Arc::new(bosun_control::api::aggregator::Aggregator::empty(
            store.clone(),
            None,
        )),
        custom: bosun_control::api::custom::CustomResources::new(store.clone()),
        // No flow-control configuration: requests are not held to a level.
        flowcontrol: bosun_control::api::flowcontrol::FlowControl::new(store.clone(), 600),
        webhooks: bosun_control::api::admission::webhook::Webhooks::new(store.clone())
            .await
            .expect("webhooks"),
        policies: bosun_control::api::admission::policy::Policies::new(store)
            .await
            .expect("policies"),
    })
}

async fn call(client: &kube::Client, req: http::Request<Vec<u8>>) {
    client.request_text(req).await.expect("request");
}

/// `requests` GETs of `secret-<n>` by node `node-<n>` (or by the admin),
/// n cycling over the nodes.
async fn run(mode: &str, client: &kube::Client, nodes: usize, min_requests: usize) {
    let mut latencies = Vec::new();
    let started = Instant::now();
    let cpu_before = cpu();
    let mut i = 0;
    while i < min_requests || started.elapsed() < Duration::from_secs(3) {
        let n = i % nodes;
        let mut req = http::Request::get(format!("/api/v1/namespaces/default/secrets/secret-{n}"));
        if mode != "admin" {
            req = req
                .header("Impersonate-User", format!("system:node:node-{n}"))
                .header("Impersonate-Group", "system:nodes");
        }
        let t = Instant::now();
        call(client, req.body(Vec::new()).unwrap()).await;
        latencies.push(t.elapsed());
        i += 1;
    }
    let cpu_used = cpu() - cpu_before;
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    println!(
        "{mode}: {} GETs of a referenced Secret, p50 {:.0} µs, p99 {:.0} µs, CPU {:.0} µs/request",
        latencies.len(),
        pct(0.50).as_secs_f64() * 1e6,
        pct(0.99).as_secs_f64() * 1e6,
        cpu_used.as_secs_f64() * 1e6 / latencies.len() as f64,
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let pods: usize = args.next().map_or(5000, |a| a.parse().expect("PODS"));
    let nodes: usize = args.next().map_or(50, |a| a.parse().expect("NODES"));
    let store: Arc<dyn Store> =
        Arc::new(EmbeddedStore::in_memory(StoreOptions::default()).expect("in-memory store"));
    bosun_control::server::bootstrap(store.as_ref())
        .await
        .expect("bootstrap");
    let graph = NodeGraph::new(store.clone());
    tokio::spawn(graph.clone().follow());
    let with_graph = api::router(state(store.clone(), graph.clone()).await);
    let client = bosun_control::manager::in_process_client(with_graph, TOKEN);

    let post = |path: &str, body: serde_json::Value| {
        http::Request::post(path)
            .header("Content-Type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap()
    };
    for n in 0..nodes {
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("secret-{n}")}, "stringData": {"k": "v"}});
        call(&client, post("/api/v1/namespaces/default/secrets", secret)).await;
    }
    let t = Instant::now();
    for i in 0..pods {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("web-{i}"), "labels": {"app": "web"}},
        "spec": {
            "nodeName": format!("node-{}", i % nodes),
            "containers": [{"name": "c", "image": "nginx:1.27",
                "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}]}],
            "volumes": [{"name": "s", "secret": {"secretName": format!("secret-{}", i % nodes)}}],
        }});
        call(&client, post("/api/v1/namespaces/default/pods", pod)).await;
    }
    let (listed, _) = store.list("/registry/pods/").await.unwrap();
    let bytes: usize = listed.iter().map(|kv| kv.value.len()).sum();
    println!(
        "{pods} pods on {nodes} nodes created in {:.1} s ({} bytes a pod as stored)",
        t.elapsed().as_secs_f64(),
        bytes / listed.len().max(1)
    );
    // What following costs: applying every stored pod to a graph, as the
    // graph reads a pod write, and the same pods decoded whole first.
    let per_pod = |d: Duration| d.as_secs_f64() * 1e6 / listed.len().max(1) as f64;
    for round in 0..2 {
        let t = Instant::now();
        let cpu_before = cpu();
        let mut built = bosun_control::auth::node::graph::Graph::default();
        for kv in &listed {
            built.apply(
                bosun_control::store::EventType::Modified,
                &kv.key,
                &kv.value,
            );
        }
        println!(
            "graph (round {round}): {:.1} µs (CPU {:.1} µs) to apply one pod's write ({} bound pods)",
            per_pod(t.elapsed()),
            per_pod(cpu() - cpu_before),
            built.bound_pods()
        );
        let t = Instant::now();
        let cpu_before = cpu();
        let mut bound = 0;
        for kv in &listed {
            // The decode alone, a lower bound of what the graph paid per
            // pod write before (it then walked the tree for references).
            let pod: serde_json::Value = serde_json::from_slice(&kv.value).expect("a pod");
            bound += usize::from(pod["spec"]["nodeName"].is_string());
        }
        println!(
            "whole pod decoded as a JSON tree (round {round}): {:.1} µs (CPU {:.1} µs) a pod ({bound} bound pods)",
            per_pod(t.elapsed()),
            per_pod(cpu() - cpu_before),
        );
    }
    let at = store.current_revision();
    while graph.applied() < at {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    run("admin", &client, nodes, 2000).await;
    run("node, graph", &client, nodes, 2000).await;
}
