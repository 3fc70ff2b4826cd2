//! NetworkPolicies across hosts (`scripts/hosts.sh`: network namespaces
//! joined by a bridge, each with its own Docker Engine; the control plane
//! on the bridge, one agent per host; host-gw routes keep the pods'
//! source addresses). `web` runs on h1 behind a Service, `client` on h2:
//!
//! - without a policy the client reaches web by its pod IP and by the
//!   service's cluster IP (DNAT-ed on h2 before h1's filter sees it);
//! - a deny-all ingress policy cuts both off, enforced by h1's agent,
//!   while web stays Ready (its probe comes from h1 itself);
//! - an ingress rule from pods labelled app=client of namespaces with
//!   kubernetes.io/metadata.name=default reopens it;
//! - an egress deny on the client, enforced by h2's agent, cuts it off
//!   again, and deleting it reopens.
//!
//! It needs root, iproute2, iptables, nsenter and dockerd and fails
//! without them. The harness's names are fixed: run it under
//! `flock /tmp/hosts-harness.lock cargo test ...` so two runs never
//! overlap.

mod cluster;

use std::process::Command;
use std::time::{Duration, Instant};

use cluster::hosts::Hosts;
use cluster::{hosts_sh, run};

/// How soon the clients must see a policy change: the agents follow
/// within a second; a check that meets a dropped connection takes 3 s,
/// and the machine may be loaded.
const FOLLOW: Duration = Duration::from_secs(15);

impl Hosts {
    /// Applies `doc` (JSON) with kubectl.
    fn apply(&self, doc: &serde_json::Value) {
        let path = self.dir.path().join("apply.json");
        std::fs::write(&path, doc.to_string()).unwrap();
        self.kubectl_ok(&["apply", "-f", path.to_str().unwrap()]);
    }

    /// Whether `client` gets web's page from `addr` (a dropped
    /// connection gives up after 3 s).
    fn reaches(&self, addr: &str) -> bool {
        let out = self.kubectl(&[
            "exec",
            "client",
            "--",
            "timeout",
            "3",
            "wget",
            "-qO-",
            &format!("http://{addr}/"),
        ]);
        out.status.success() && !out.stdout.is_empty()
    }

    /// Waits until the client reaches (or not) both web's pod IP and its
    /// cluster IP.
    fn wait_reach(&self, addrs: &[&str], want: bool, what: &str) {
        let start = Instant::now();
        loop {
            // Both at once: a dropped connection takes its whole timeout.
            let got: Vec<bool> = std::thread::scope(|sc| {
                let checks: Vec<_> = addrs.iter().map(|a| sc.spawn(|| self.reaches(a))).collect();
                checks.into_iter().map(|c| c.join().unwrap()).collect()
            });
            if got.iter().all(|g| *g == want) {
                eprintln!("{what}: seen after {:?}", start.elapsed());
                return;
            }
            assert!(
                start.elapsed() < FOLLOW,
                "{what}: the client reaches {addrs:?}: {got:?}, want {want}\nh1:\n{}\nh2:\n{}\n{}",
                policy_table(1),
                policy_table(2),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Host `i`'s agent's network-policy table.
fn policy_table(i: usize) -> String {
    let out = run(Command::new("bash")
        .arg(hosts_sh())
        .args(["exec", &i.to_string(), "nft", "list", "table", "ip"])
        .arg(format!("bosun-np-h{i}")));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn policy(name: &str, spec: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

#[test]
fn network_policies_across_hosts() {
    let h = Hosts::start(&[]);
    h.apply(&serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"}},
         "spec": {"nodeName": "h1", "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "web", "image": "bosun.local/web:1",
                "ports": [{"name": "http", "containerPort": 80}],
                "readinessProbe": {"httpGet": {"path": "/", "port": "http"},
                    "periodSeconds": 1, "failureThreshold": 1}}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client", "labels": {"app": "client"}},
         "spec": {"nodeName": "h2", "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": "bosun.local/busybox:1.35",
                "command": ["sleep", "3600"]}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
         "spec": {"selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}]}));
    h.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "pod/web",
        "pod/client",
        "--timeout=120s",
    ]);
    let pod_ip = h.jsonpath(&["pod", "web"], "{.status.podIP}");
    let vip = h.jsonpath(&["service", "web"], "{.spec.clusterIP}");
    let addrs = [pod_ip.as_str(), vip.as_str()];
    // The service's endpoint may take a moment to reach h2's proxy.
    h.wait_reach(&addrs, true, "no policy");

    h.apply(&policy("deny-all", serde_json::json!({"podSelector": {}})));
    h.wait_reach(&addrs, false, "deny-all ingress");
    assert!(
        policy_table(1).contains("ing-default/web"),
        "{}",
        policy_table(1)
    );
    // web's probe (from h1 itself) keeps passing: one miss would make it
    // unready, and it runs every second.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(4) {
        let ready = h.jsonpath(
            &["pod", "web"],
            r#"{.status.conditions[?(@.type=="Ready")].status}"#,
        );
        assert_eq!(ready, "True", "web lost Ready under deny-all\n{}", h.logs());
        std::thread::sleep(Duration::from_millis(500));
    }

    h.apply(&policy(
        "from-clients",
        serde_json::json!({
        "podSelector": {"matchLabels": {"app": "web"}},
        "ingress": [{"from": [{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "default"}},
            "podSelector": {"matchLabels": {"app": "client"}}}],
            "ports": [{"port": "http"}]}]}),
    ));
    h.wait_reach(&addrs, true, "allow from app=client in default");

    h.apply(&policy(
        "client-no-egress",
        serde_json::json!({
        "podSelector": {"matchLabels": {"app": "client"}}, "policyTypes": ["Egress"]}),
    ));
    h.wait_reach(&addrs, false, "egress deny on the client");
    assert!(
        policy_table(2).contains("egr-default/client"),
        "{}",
        policy_table(2)
    );
    h.kubectl_ok(&["delete", "networkpolicy", "client-no-egress"]);
    h.wait_reach(&addrs, true, "egress deny deleted");
}
