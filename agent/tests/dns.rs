//! The node-local cluster DNS on real Docker: a busybox pod resolves a
//! ClusterIP service, a relative `<svc>.<ns>` name (autopath), its own pod
//! name and an outside name (forwarded to a resolver this test runs on
//! 127.0.0.1, so nothing leaves the host), a service made while the agent
//! was down (from the initial lists) once it is back, and keeps resolving
//! while the control plane is down. Headless services and their endpoints' names
//! (the StatefulSet pattern) need EndpointSlices served by the API.

mod cluster;

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster::{Cluster, BUSYBOX};
use hickory_server::proto::op::{Message, OpCode};
use hickory_server::proto::rr::rdata::A;
use hickory_server::proto::rr::{RData, Record, RecordType};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

const UP: Duration = Duration::from_secs(60);
/// What the test resolver answers for every A question.
const OUTSIDE_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 77);

/// A resolver on 127.0.0.1 that answers every A question with
/// [`OUTSIDE_IP`] and records the names it was asked; it stops when
/// dropped.
struct TestResolver {
    addr: SocketAddr,
    asked: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl TestResolver {
    async fn start() -> TestResolver {
        let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = sock.local_addr().unwrap();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok((n, from)) = sock.recv_from(&mut buf).await {
                let Ok(q) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                let mut r = Message::response(q.metadata.id, OpCode::Query);
                r.metadata.recursion_available = true;
                for query in &q.queries {
                    log.lock().unwrap().push(query.name().to_string());
                    r.add_query(query.clone());
                    if query.query_type() == RecordType::A {
                        r.add_answer(Record::from_rdata(
                            query.name().clone(),
                            60,
                            RData::A(A(OUTSIDE_IP)),
                        ));
                    }
                }
                let _ = sock.send_to(&r.to_vec().unwrap(), from).await;
            }
        });
        TestResolver { addr, asked, task }
    }
}

impl Drop for TestResolver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn sleeper(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": BUSYBOX, "command": ["sleep", "3600"]}]}})
}

async fn create_service(client: &kube::Client, name: &str) -> String {
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80}]}
    }))
    .unwrap();
    let api: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc = api.create(&PostParams::default(), &svc).await.unwrap();
    svc.spec.unwrap().cluster_ip.expect("a ClusterIP")
}

/// `nslookup <name>` in the pod's app container: (exit ok, output).
fn nslookup(c: &Cluster, pod: &str, name: &str) -> String {
    c.exec(pod, "app", &["nslookup", name])
}

/// The address lines busybox's nslookup prints for the answer (after
/// the `Name:` line; the server's own address comes before it).
fn answered(out: &str) -> Vec<String> {
    out.split_once("Name:")
        .map(|(_, rest)| rest)
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Address:"))
        .map(|a| a.trim().to_string())
        .collect()
}

/// Polls `nslookup name` until it answers `want`, failing with the last
/// output and the agent's log after `deadline`; returns how long it took.
async fn resolves_to(
    c: &Cluster,
    pod: &str,
    name: &str,
    want: &str,
    deadline: Duration,
) -> Duration {
    let start = Instant::now();
    loop {
        let out = nslookup(c, pod, name);
        if answered(&out).iter().any(|a| a == want) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < deadline,
            "nslookup {name} did not give {want} within {deadline:?}; last output:\n{out}\nagent log tail:\n{}",
            cluster::tail(&c.agent_log(), 30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_resolve_cluster_and_outside_names_through_the_node_dns() {
    let upstream = TestResolver::start().await;
    let mut c = Cluster::start_with(&["--dns-upstream", &upstream.addr.to_string()]);
    let client = c.client().await;
    let web_ip = create_service(&client, "web").await;
    c.create_pod(&client, sleeper("client")).await;
    let p = c
        .wait_pod(&client, "client", "Running", UP, |p| {
            p["status"]["phase"] == "Running"
        })
        .await;
    let pod_ip = p["status"]["podIP"].as_str().unwrap().to_string();

    // The pod's resolver: Docker's embedded one (127.0.0.11) in
    // resolv.conf, forwarding to the node DNS on the bridge's gateway.
    let gateway = format!("{}1", c.pod_cidr.trim_end_matches("0/24"));
    let sandbox = c.docker_ids(&["io.bosun.pod.name=client", "io.bosun.role=sandbox"]);
    let out = Command::new("docker")
        .args(["inspect", "-f", "{{json .HostConfig.Dns}}", &sandbox[0]])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("[\"{gateway}\"]"),
        "the sandbox's DNS server is the node DNS"
    );
    let resolv = c.exec("client", "app", &["cat", "/etc/resolv.conf"]);
    assert!(
        resolv.contains("search default.svc.cluster.local svc.cluster.local cluster.local"),
        "{resolv}"
    );
    assert!(resolv.contains("ndots:5"), "{resolv}");

    // A ClusterIP service, by its short name (busybox walks the search
    // list for single labels).
    resolves_to(&c, "client", "web", &web_ip, Duration::from_secs(10)).await;
    // A relative two-label name busybox sends as is: autopath.
    resolves_to(&c, "client", "web.default", &web_ip, Duration::from_secs(5)).await;
    // The pod's own name in the pod zone.
    let pod_name = format!("{}.default.pod.cluster.local", pod_ip.replace('.', "-"));
    resolves_to(&c, "client", &pod_name, &pod_ip, Duration::from_secs(5)).await;
    // A service made while the agent is down resolves once it is back:
    // the DNS server starts on it, from the watches' initial lists.
    c.stop_agent();
    let early_ip = create_service(&client, "early").await;
    c.start_agent();
    let took = resolves_to(&c, "client", "early", &early_ip, Duration::from_secs(30)).await;
    eprintln!("a service made before the agent started resolved {took:?} after the start");
    resolves_to(&c, "client", "web", &web_ip, Duration::from_secs(5)).await;
    // A new service resolves soon after it is made.
    let late_ip = create_service(&client, "late").await;
    let took = resolves_to(&c, "client", "late", &late_ip, Duration::from_secs(5)).await;
    eprintln!("a new service resolved in a pod {took:?} after it was created");
    // An unknown cluster name is NXDOMAIN, not an upstream's business.
    let out = nslookup(&c, "client", "nope.default.svc.cluster.local");
    assert!(answered(&out).is_empty(), "{out}");

    // Outside names go to the upstream.
    resolves_to(
        &c,
        "client",
        "outside.example",
        &OUTSIDE_IP.to_string(),
        Duration::from_secs(5),
    )
    .await;
    assert!(
        upstream
            .asked
            .lock()
            .unwrap()
            .iter()
            .any(|n| n == "outside.example."),
        "the test resolver was asked: {:?}",
        upstream.asked.lock().unwrap()
    );
    assert!(
        !upstream
            .asked
            .lock()
            .unwrap()
            .iter()
            .any(|n| n.contains("cluster.local")),
        "cluster names never go upstream: {:?}",
        upstream.asked.lock().unwrap()
    );

    // With the control plane down, names still resolve from the cache.
    c.stop_control();
    resolves_to(&c, "client", "web", &web_ip, Duration::from_secs(5)).await;
    resolves_to(&c, "client", "late", &late_ip, Duration::from_secs(5)).await;
}

fn member(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "nginx"}},
        "spec": {"hostname": name, "subdomain": "nginx", "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": BUSYBOX, "command": ["sleep", "3600"]}]}})
}

fn is_ready(p: &serde_json::Value) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// The pod's IP once it is Running and Ready.
async fn ready_ip(c: &Cluster, client: &kube::Client, name: &str) -> String {
    let p = c
        .wait_pod(client, name, "Running and Ready", UP, |p| {
            p["status"]["phase"] == "Running" && is_ready(p) && p["status"]["podIP"].is_string()
        })
        .await;
    p["status"]["podIP"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_service_members_resolve_by_their_stable_names() {
    let c = Cluster::start();
    let client = c.client().await;
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "nginx"},
        "spec": {"clusterIP": "None", "selector": {"app": "nginx"},
            "ports": [{"name": "web", "port": 80}]}
    }))
    .unwrap();
    Api::<Service>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
    c.create_pod(&client, sleeper("client")).await;
    c.create_pod(&client, member("web-0")).await;
    c.create_pod(&client, member("web-1")).await;
    ready_ip(&c, &client, "client").await;
    let ip0 = ready_ip(&c, &client, "web-0").await;
    let ip1 = ready_ip(&c, &client, "web-1").await;

    // busybox sends `web-0.nginx` as is; the server expands it.
    resolves_to(&c, "client", "web-0.nginx", &ip0, Duration::from_secs(10)).await;
    resolves_to(&c, "client", "web-1.nginx", &ip1, Duration::from_secs(5)).await;
    // The service's name gives every member.
    let start = Instant::now();
    loop {
        let got = answered(&nslookup(&c, "client", "nginx"));
        if got.contains(&ip0) && got.contains(&ip1) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "nslookup nginx gave {got:?}, not {ip0} and {ip1}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // SRV names each member; PTR names a member by its stable name.
    let srv = c.exec(
        "client",
        "app",
        &[
            "nslookup",
            "-type=SRV",
            "_web._tcp.nginx.default.svc.cluster.local",
        ],
    );
    assert!(
        srv.contains("web-0.nginx.default.svc.cluster.local")
            && srv.contains("web-1.nginx.default.svc.cluster.local"),
        "{srv}"
    );
    // Docker's embedded resolver answers reverse lookups of the
    // network's containers itself (with the container's name), so the PTR
    // is asked of the node DNS directly, on the gateway.
    let gateway = format!("{}1", c.pod_cidr.trim_end_matches("0/24"));
    let ptr = c.exec("client", "app", &["nslookup", &ip0, &gateway]);
    assert!(
        ptr.contains("web-0.nginx.default.svc.cluster.local"),
        "{ptr}"
    );

    // A member made again answers at its new address within 2 s of Ready.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.delete("web-0", &DeleteParams::default())
        .await
        .unwrap();
    c.poll("web-0 gone", UP, || {
        let pods = pods.clone();
        async move { pods.get_opt("web-0").await.unwrap().is_none().then_some(()) }
    })
    .await;
    // Docker hands a freed address out again: a filler pod takes it, so
    // the new web-0 gets another one.
    c.create_pod(&client, sleeper("filler")).await;
    ready_ip(&c, &client, "filler").await;
    c.create_pod(&client, member("web-0")).await;
    let new_ip = ready_ip(&c, &client, "web-0").await;
    assert_ne!(new_ip, ip0, "web-0 came back at another address");
    let took = resolves_to(&c, "client", "web-0.nginx", &new_ip, Duration::from_secs(2)).await;
    eprintln!("web-0 ({ip0} -> {new_ip}) resolved {took:?} after Ready was seen");
}
