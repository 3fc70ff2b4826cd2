//! The service proxy on real Docker: a 3-replica `bosun.local/web`
//! deployment (each pod serves its own name at `/name`) behind Services.
//! From a busybox pod, 300 requests to the service's name (node-local DNS
//! → cluster IP → DNAT) reach all three pods; a pod whose
//! readiness fails, and pods scaled away, stop getting connections within
//! a second of their EndpointSlice saying so; a pod reaches its own
//! service (hairpin); a NodePort answers on the node's address from the
//! host; ClientIP affinity sends one client to one pod, also after other
//! changes to the rules; a UDP service port answers through its cluster
//! IP; an address of the
//! service range nothing is behind is refused; deleting the services
//! leaves the agent's rules as they were before them, and a stopped agent
//! leaves no rule (the host's iptables rules are as before the test, but
//! for Docker's own).
//!
//! The same test runs once per proxy mode (`--proxy-mode nftables` and
//! `iptables`), one after the other.

mod cluster;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use bosun_agent::proxy::render_iptables::chain_prefix;
use cluster::{http_get, Cluster, Mode, BUSYBOX};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;

const UP: Duration = Duration::from_secs(90);
/// How soon the rules must follow an EndpointSlice.
const FOLLOW: Duration = Duration::from_secs(1);
const HTML: &str = "/usr/share/nginx/html";

/// This host's one global IPv4 address outside Docker's bridges: the
/// node's address (a NodePort answers on it; loopback is not served).
fn host_address() -> String {
    bosun_agent::network::address::host_addresses()
        .expect("listing this host's addresses")
        .into_iter()
        .filter(|(dev, ip)| {
            let docker =
                dev.starts_with("docker") || dev.starts_with("br-") || dev.starts_with("veth");
            !docker && !ip.is_loopback() && !ip.is_link_local()
        })
        .map(|(_, ip)| ip.to_string())
        .next()
        .expect("this host has no global IPv4 address outside Docker's bridges")
}

fn run(program: &str, args: &[&str]) -> std::process::Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} is needed by this test: {e}"))
}

/// `iptables-save` of the filter and nat tables.
fn iptables_save() -> String {
    ["filter", "nat"]
        .iter()
        .map(|t| {
            let out = run("iptables-save", &["-t", t]);
            assert!(out.status.success(), "iptables-save -t {t} failed");
            String::from_utf8_lossy(&out.stdout).into_owned()
        })
        .collect()
}

/// The host's iptables rules but for Docker's own (its chains and its
/// bridges' rules change as other tests make and remove networks), the
/// multi-host harness's (`BOSUN-HOSTS`, scripts/hosts.sh, run by other
/// tests), iptables-save's dated comments and the policies' counters.
fn host_iptables() -> String {
    iptables_save()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            // Not the runtime's pod-to-pod chain either: it stays while
            // pods may run and goes with purge (tests/purge.rs).
            !["DOCKER", " br-", "docker0", "BOSUN-HOSTS", "BOSUN-FORWARD "]
                .iter()
                .any(|docker| l.contains(docker))
        })
        .map(|l| match l.split_once(" [") {
            Some((chain, _)) if l.starts_with(':') => format!("{chain}\n"),
            _ => format!("{l}\n"),
        })
        .collect()
}

/// The agent's rules, or None when it has none: its nftables table, or
/// the iptables lines of its chains and the jumps to them.
fn table(mode: Mode, node: &str) -> Option<String> {
    match mode {
        Mode::Nftables => {
            let out = run("nft", &["list", "table", "ip", &format!("bosun-{node}")]);
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        }
        Mode::Iptables => {
            let prefix = chain_prefix(&format!("bosun-{node}"));
            let lines: String = iptables_save()
                .lines()
                .filter(|l| l.contains(&prefix))
                .map(|l| format!("{l}\n"))
                .collect();
            (!lines.is_empty()).then_some(lines)
        }
    }
}

/// The endpoints the rules send `default/svc/http/tcp` to.
fn endpoint_chains(mode: Mode, table: &str, svc: &str) -> Vec<String> {
    let mut eps: Vec<String> = match mode {
        Mode::Nftables => {
            let prefix = format!("chain ep-default/{svc}/http/tcp/");
            table
                .lines()
                .filter_map(|l| l.trim().strip_prefix(&prefix))
                .map(|rest| rest.split('/').next().unwrap_or("").to_string())
                .collect()
        }
        Mode::Iptables => {
            // iptables-save quotes the comment.
            let comment = format!("--comment \"default/{svc}/http/tcp\" ");
            table
                .lines()
                .filter(|l| l.contains("SEP-") && l.contains(&comment))
                .filter_map(|l| l.split("--to-destination ").nth(1))
                .map(|dest| dest.split(':').next().unwrap_or("").to_string())
                .collect()
        }
    };
    eps.sort();
    eps
}

/// The ready endpoint IPs the API lists for `svc`.
async fn ready_ips(client: &Client, svc: &str) -> Vec<String> {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let list = slices
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={svc}")))
        .await
        .unwrap();
    let mut ips: Vec<String> = list
        .items
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
        .flat_map(|e| e.addresses.clone())
        .collect();
    ips.sort();
    ips
}

/// Waits until the API's ready endpoints of `svc` are `want` (sorted),
/// then until the table's are; returns how long the table took after the
/// API.
async fn rules_follow(
    mode: Mode,
    c: &Cluster,
    client: &Client,
    svc: &str,
    want: &[String],
) -> Duration {
    let api_at = c
        .poll("the EndpointSlice to list the endpoints", UP, || async {
            (ready_ips(client, svc).await == want).then(Instant::now)
        })
        .await;
    loop {
        let now = table(mode, &c.node).map(|t| endpoint_chains(mode, &t, svc));
        if now.as_deref() == Some(want) {
            return api_at.elapsed();
        }
        assert!(
            api_at.elapsed() < Duration::from_secs(10),
            "the table never followed {want:?}: {now:?}\n{}",
            cluster::tail(&c.agent_log(), 30)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `n` requests for `url` from `pod`: how many each responder answered
/// (failures count under "FAILED: <wget's error>").
fn requests(
    c: &Cluster,
    pod: &str,
    container: &str,
    url: &str,
    n: usize,
) -> BTreeMap<String, usize> {
    let script = format!(
        "i=0; while [ $i -lt {n} ]; do timeout 3 wget -q -O- {url} 2>/tmp/err || echo FAILED: $(cat /tmp/err); i=$((i+1)); done"
    );
    let out = c.exec(pod, container, &["sh", "-c", &script]);
    let mut counts = BTreeMap::new();
    for line in out.lines() {
        *counts.entry(line.trim().to_string()).or_insert(0) += 1;
    }
    counts
}

/// The failures among `counts`.
fn failures(counts: &BTreeMap<String, usize>) -> Vec<&String> {
    counts.keys().filter(|k| k.starts_with("FAILED")).collect()
}

fn services_api(client: &Client) -> Api<Service> {
    Api::namespaced(client.clone(), "default")
}

async fn create_service(client: &Client, name: &str, spec: serde_json::Value) -> Service {
    let mut spec = spec;
    spec["selector"] = json!({"app": "web"});
    spec["ports"] = json!([{"name": "http", "port": 80, "targetPort": "http"}]);
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec
    }))
    .unwrap();
    Api::<Service>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &svc)
        .await
        .unwrap()
}

/// Name → IP of the running, not deleted `app=web` pods.
async fn web_pods(client: &Client) -> BTreeMap<String, String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            let ip = p.status?.pod_ip?;
            Some((p.metadata.name?, ip))
        })
        .collect()
}

/// One mode at a time: both agents' rules would see the other's traffic.
static ONE_MODE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_reach_ready_pods_through_cluster_ips_and_node_ports() {
    let _one = ONE_MODE_AT_A_TIME.lock().await;
    services_through_the_proxy(Mode::Nftables).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_reach_ready_pods_through_cluster_ips_and_node_ports_in_iptables_mode() {
    let _one = ONE_MODE_AT_A_TIME.lock().await;
    services_through_the_proxy(Mode::Iptables).await;
}

async fn services_through_the_proxy(mode: Mode) {
    let node_ip = host_address();
    let host_rules_before = host_iptables();
    let mut c = Cluster::start_with(&["--node-ip", &node_ip, "--proxy-mode", mode.flag()]);
    let client = c.client().await;
    // The rules (with the reject of the service range) are there before
    // any service or pod, with the control plane's own `kubernetes`
    // Service (10.96.0.1, always there, as in Kubernetes).
    let before = c
        .poll(
            "the agent's rules with the kubernetes Service",
            UP,
            || async {
                table(mode, &c.node)
                    .filter(|t| t.contains("10.96.0.1 ") || t.contains("-d 10.96.0.1/32"))
            },
        )
        .await;
    let reject = match mode {
        Mode::Nftables => "ip daddr 10.96.0.0/12 reject",
        Mode::Iptables => "-d 10.96.0.0/12 -j REJECT",
    };
    assert!(before.contains(reject), "{before}");
    let log = c.agent_log();
    assert!(
        log.lines()
            .any(|l| l.contains("rules installed") && l.contains(mode.flag())),
        "{}",
        cluster::tail(&log, 20)
    );

    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "web", "image": "bosun.local/web:1",
                    "command": ["sh", "-c", format!(
                        "hostname >{HTML}/name; touch {HTML}/ready; exec httpd -f -p 80 -h {HTML}")],
                    "ports": [{"name": "http", "containerPort": 80}],
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"},
                        "periodSeconds": 1, "failureThreshold": 1}}]}}}
    }))
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let web_ip = create_service(&client, "web", json!({}))
        .await
        .spec
        .unwrap()
        .cluster_ip
        .unwrap();
    let np = create_service(&client, "web-np", json!({"type": "NodePort"})).await;
    let node_port = np.spec.unwrap().ports.unwrap()[0].node_port.unwrap();
    create_service(
        &client,
        "web-sticky",
        json!({"sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}),
    )
    .await;
    c.create_pod(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client"},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "app",
                "image": BUSYBOX, "command": ["sleep", "3600"]}]}}),
    )
    .await;
    c.wait_pod(&client, "client", "Running", UP, |p| {
        p["status"]["phase"] == "Running"
    })
    .await;
    let pods = c
        .poll("3 web pods with IPs", UP, || async {
            let p = web_pods(&client).await;
            (p.len() == 3).then_some(p)
        })
        .await;
    let mut all_ips: Vec<String> = pods.values().cloned().collect();
    all_ips.sort();
    rules_follow(mode, &c, &client, "web", &all_ips).await;

    // 300 requests to the service's name, from a pod: all three answer.
    let counts = requests(&c, "client", "app", "http://web/name", 300);
    assert!(failures(&counts).is_empty(), "failed requests: {counts:?}");
    assert_eq!(counts.values().sum::<usize>(), 300, "{counts:?}");
    for name in pods.keys() {
        assert!(
            counts.get(name).is_some_and(|n| *n > 0),
            "{name} got none: {counts:?}"
        );
    }
    eprintln!("300 requests through the service: {counts:?}");

    // Hairpin: a web pod reaches its own service, itself included.
    let (first, _) = pods.iter().next().unwrap();
    let from_pod = requests(&c, first, "web", "http://web/name", 30);
    assert!(
        failures(&from_pod).is_empty(),
        "hairpin failures: {from_pod:?}"
    );
    assert!(
        from_pod.contains_key(first),
        "never reached itself: {from_pod:?}"
    );

    // ClientIP affinity: one client, one pod.
    let sticky = requests(&c, "client", "app", "http://web-sticky/name", 30);
    assert_eq!(sticky.len(), 1, "affinity spread the client: {sticky:?}");
    // Four clients (the web pods too), each kept to one pod.
    let mut clients = vec![("client".to_string(), "app")];
    clients.extend(pods.keys().map(|p| (p.clone(), "web")));
    let stuck: Vec<String> = clients
        .iter()
        .map(|(pod, container)| {
            let got = requests(&c, pod, container, "http://web-sticky/name", 10);
            assert_eq!(got.len(), 1, "affinity spread {pod}: {got:?}");
            got.into_keys().next().unwrap()
        })
        .collect();
    // Another service changes the rules; every client still sticks to its
    // pod (by chance: (1/3)^4).
    create_service(&client, "other", json!({})).await;
    rules_follow(mode, &c, &client, "other", &all_ips).await;
    for ((pod, container), was) in clients.iter().zip(&stuck) {
        let again = requests(&c, pod, container, "http://web-sticky/name", 10);
        assert_eq!(
            again.keys().collect::<Vec<_>>(),
            [was],
            "{pod}'s affinity lost over a sync: {again:?}"
        );
    }

    // The NodePort answers on the node's address, from the host.
    let answered = http_get(&format!("{node_ip}:{node_port}"), "/name").unwrap();
    assert!(
        pods.contains_key(&answered),
        "NodePort answered {answered:?}"
    );
    let listed = String::from_utf8_lossy(
        &c.bosun()
            .args(["get", "svc", "web-np"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    assert!(listed.contains(&format!("80:{node_port}/TCP")), "{listed}");

    // UDP through a cluster IP: a service without a selector whose one
    // endpoint is the node-local DNS server (UDP 53 on the pod bridge's
    // gateway); busybox's nslookup asks it through the cluster IP. (The
    // images' busybox nc has no UDP.)
    let gateway = c.pod_cidr.replace(".0/24", ".1");
    let dns_svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "dns-udp"},
        "spec": {"ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]}
    }))
    .unwrap();
    let dns_ip = services_api(&client)
        .create(&PostParams::default(), &dns_svc)
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .unwrap();
    let slice: EndpointSlice = serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "dns-udp-1", "labels": {"kubernetes.io/service-name": "dns-udp"}},
        "addressType": "IPv4",
        "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}],
        "endpoints": [{"addresses": [gateway], "conditions": {"ready": true}}]
    }))
    .unwrap();
    Api::<EndpointSlice>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &slice)
        .await
        .unwrap();
    let udp_rule = match mode {
        Mode::Nftables => format!("{dns_ip} . udp . 53 : goto"),
        Mode::Iptables => format!("-d {dns_ip}/32 -p udp -m udp --dport 53"),
    };
    c.poll("the UDP service's rules", UP, || async {
        table(mode, &c.node)
            .is_some_and(|t| t.contains(&udp_rule))
            .then_some(())
    })
    .await;
    for _ in 0..5 {
        let answer = c.exec(
            "client",
            "app",
            &["nslookup", "web.default.svc.cluster.local", &dns_ip],
        );
        assert!(
            answer.contains(&format!("Address: {web_ip}")),
            "no answer through the UDP cluster IP {dns_ip}:\n{answer}"
        );
    }

    // A service address nothing is behind is refused at once.
    let refused = c.exec(
        "client",
        "app",
        &[
            "sh",
            "-c",
            "timeout 5 wget -q -O- http://10.96.0.3/ 2>&1; echo rc=$?",
        ],
    );
    assert!(refused.contains("refused"), "{refused}");

    // A pod whose readiness fails gets no new connections.
    let (unready, unready_ip) = pods.iter().nth(1).unwrap();
    c.exec(unready, "web", &["rm", &format!("{HTML}/ready")]);
    let others: Vec<String> = all_ips
        .iter()
        .filter(|ip| *ip != unready_ip)
        .cloned()
        .collect();
    let took = rules_follow(mode, &c, &client, "web", &others).await;
    eprintln!("unready pod out of the rules {took:?} after its EndpointSlice");
    assert!(
        took < FOLLOW,
        "the unready pod left the rules {took:?} after its slice said so"
    );
    let counts = requests(&c, "client", "app", "http://web/name", 60);
    assert!(
        !counts.contains_key(unready),
        "the unready pod got connections: {counts:?}"
    );
    assert!(failures(&counts).is_empty(), "{counts:?}");
    // Ready again: it is back.
    c.exec(unready, "web", &["touch", &format!("{HTML}/ready")]);
    rules_follow(mode, &c, &client, "web", &all_ips).await;

    // Scaled to one: everything goes to the survivor.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    let survivor = c
        .poll("one web pod left", UP, || async {
            let p = web_pods(&client).await;
            (p.len() == 1).then(|| p.into_iter().next().unwrap())
        })
        .await;
    let took = rules_follow(mode, &c, &client, "web", std::slice::from_ref(&survivor.1)).await;
    eprintln!("scaled-away pods out of the rules {took:?} after their EndpointSlice");
    assert!(
        took < FOLLOW,
        "the scaled-away pods left the rules {took:?} after their slice said so"
    );
    let counts = requests(&c, "client", "app", "http://web/name", 50);
    assert_eq!(counts.get(&survivor.0), Some(&50), "{counts:?}");

    // Deleting the services leaves the rules as they were before them.
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    for name in ["web", "web-np", "web-sticky", "other", "dns-udp"] {
        services
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    c.poll("the rules as before the services", UP, || async {
        (table(mode, &c.node).as_deref() == Some(before.as_str())).then_some(())
    })
    .await;
    let ruleset = match mode {
        Mode::Nftables => {
            String::from_utf8_lossy(&run("nft", &["list", "ruleset"]).stdout).into_owned()
        }
        // Not other agents' chains (a killed test's, until swept).
        Mode::Iptables => {
            let ours = chain_prefix(&format!("bosun-{}", c.node));
            iptables_save()
                .lines()
                .filter(|l| !l.contains("BOSUN-") || l.contains(&ours))
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    assert!(
        !ruleset.contains("default/web"),
        "a rule of a deleted service is left:\n{ruleset}"
    );

    // A stopped agent leaves no rule, and the host's iptables rules are
    // as before (but for Docker's own).
    c.stop_agent();
    assert_eq!(table(mode, &c.node), None, "the agent's rules outlived it");
    drop(c);
    assert_eq!(
        host_iptables(),
        host_rules_before,
        "the host's iptables rules changed"
    );
}
