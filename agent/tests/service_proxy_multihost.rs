//! The service proxy across hosts (`scripts/hosts.sh`: network namespaces
//! joined by a bridge, each with its own Docker Engine; the control plane
//! on the bridge, one agent per host), in each proxy mode:
//!
//! - a pod on host 2 reaches a service whose only endpoint is on host 1 by
//!   its cluster IP, and the endpoint sees the pod's own address;
//! - that endpoint reaches its own service (hairpin), with the agent in
//!   the host's network namespace but this machine's /sys;
//! - a NodePort with `externalTrafficPolicy: Local` answers on host 1 (the
//!   endpoint's) to a client on host 2, and the endpoint sees host 2's
//!   address; host 2, without a local endpoint, does not serve it.
//!
//! The hosts' FORWARD policy is DROP, as Docker sets it on a host whose
//! forwarding it turns on: node ports from other hosts then need the
//! agent's accept of forwarded service traffic.
//!
//! It needs root, iproute2, iptables, nsenter and dockerd and fails
//! without them. The harness's names are fixed: run it under
//! `flock /tmp/hosts-harness.lock cargo test ...` so two runs never
//! overlap; the modes run one after the other in one test.

mod cluster;

use std::process::Command;
use std::time::Duration;

use cluster::hosts::{on_host, Hosts, HOSTS};
use cluster::{host_ip, hosts_sh, http_get, ok, run, wait_for, Mode};

const WAIT: Duration = Duration::from_secs(90);
const HTML: &str = "/usr/share/nginx/html";

/// Runs `f` on a thread in host `i`'s network namespace (its path from
/// `hosts.sh env`): the test's own sockets, as a process on that host.
fn in_host<T: Send + 'static>(i: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    let env = ok(Command::new("bash")
        .arg(hosts_sh())
        .args(["env", &i.to_string()]));
    let netns = env
        .lines()
        .find_map(|l| l.strip_prefix("NETNS="))
        .expect("hosts.sh env prints NETNS")
        .to_string();
    std::thread::spawn(move || {
        let ns = std::fs::File::open(&netns).unwrap_or_else(|e| panic!("{netns}: {e}"));
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .expect("the thread in the host's namespace panicked")
}

impl Mode {
    /// Host `i`'s agent's DNAT rules, as text that names the endpoints.
    fn rules(self, i: usize) -> String {
        match self {
            Mode::Nftables => {
                let out = run(Command::new("bash")
                    .arg(hosts_sh())
                    .args(["exec", &i.to_string(), "nft", "list", "table", "ip"])
                    .arg(format!("bosun-h{i}")));
                String::from_utf8_lossy(&out.stdout).into_owned()
            }
            Mode::Iptables => on_host(i, &["iptables-save", "-t", "nat"]),
        }
    }
}

impl Hosts {
    /// The address the web pod saw a request come from, asked by `pod`
    /// through `vip`; "" (with the reason on stderr) if it got no answer.
    fn address_seen_from(&self, pod: &str, vip: &str) -> String {
        let url = format!("http://{vip}/cgi-bin/ip");
        // `timeout`, not wget's -T: Debian's busybox-static crashes on it.
        let out = self.kubectl(&["exec", pod, "--", "timeout", "10", "wget", "-qO-", &url]);
        if !out.status.success() {
            eprintln!(
                "{pod} -> {url}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return String::new();
        }
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

/// The web pod (on h1) serves the address it sees a request come from
/// at /cgi-bin/ip (busybox httpd's CGI `REMOTE_ADDR`); a client pod on h2.
fn manifest() -> String {
    let script = format!(
        "mkdir -p {HTML}/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho $REMOTE_ADDR\\n' >{HTML}/cgi-bin/ip && chmod +x {HTML}/cgi-bin/ip && exec httpd -f -p 80 -h {HTML}"
    );
    serde_json::to_string(&serde_json::json!({
        "apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "web", "labels": {"app": "web"}},
             "spec": {"nodeName": "h1", "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "web", "image": "bosun.local/web:1",
                    "command": ["sh", "-c", script],
                    "ports": [{"name": "http", "containerPort": 80}],
                    "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1}}]}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client"},
             "spec": {"nodeName": "h2", "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "c", "image": "bosun.local/busybox:1.35",
                    "command": ["sleep", "3600"]}]}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
             "spec": {"selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web-local"},
             "spec": {"type": "NodePort", "externalTrafficPolicy": "Local",
                "selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}
        ]
    }))
    .unwrap()
}

fn across_hosts(mode: Mode) {
    let mut h = Hosts::start(&["--proxy-mode", mode.flag()]);
    let file = h.dir.path().join("web.json");
    std::fs::write(&file, manifest()).unwrap();
    h.kubectl_ok(&["apply", "-f", file.to_str().unwrap()]);
    for pod in ["web", "client"] {
        wait_for(&format!("pod {pod} ready"), WAIT, || {
            let ready = h.jsonpath(
                &["pod", pod],
                "{.status.conditions[?(@.type=='Ready')].status}",
            );
            (ready == "True").then_some(())
        });
    }
    let web_ip = h.jsonpath(&["pod", "web"], "{.status.podIP}");
    let client_ip = h.jsonpath(&["pod", "client"], "{.status.podIP}");
    let vip = h.jsonpath(&["svc", "web"], "{.spec.clusterIP}");
    let node_port = h.jsonpath(&["svc", "web-local"], "{.spec.ports[0].nodePort}");
    // Both hosts' rules send the services to the endpoint on h1.
    for i in 1..=HOSTS {
        wait_for(&format!("h{i}'s rules for {web_ip}"), WAIT, || {
            mode.rules(i)
                .contains(&format!("{web_ip}:80"))
                .then_some(())
        });
    }

    // The pod on h2 reaches the service by its cluster IP; the endpoint
    // on h1 sees the pod's own address.
    let seen = h.address_seen_from("client", &vip);
    assert!(
        seen.contains(&client_ip),
        "{mode:?}: from h2's pod through {vip}: {seen:?} (want {client_ip})\n{}",
        h.logs()
    );

    // Hairpin on a node with others: the web pod on h1 reaches its own
    // service and gets its own answer.
    let seen = h.address_seen_from("web", &vip);
    assert!(
        !seen.is_empty(),
        "{mode:?}: h1's web pod through its own service {vip}: no answer\n{}",
        h.logs()
    );

    // The Local NodePort answers on h1 to h2 (the host itself), keeping
    // h2's address.
    let h1 = format!("{}:{node_port}", host_ip(1));
    let seen = in_host(2, move || http_get(&h1, "/cgi-bin/ip"));
    let seen = seen.unwrap_or_else(|e| {
        panic!(
            "{mode:?}: h1's NodePort {node_port} from h2: {e}\n{}",
            h.logs()
        )
    });
    assert!(
        seen.contains(&host_ip(2)),
        "{mode:?}: the endpoint saw {seen:?}, not h2's {}",
        host_ip(2)
    );
    // h2 has no local endpoint: asked from h1, it does not serve it.
    let h2 = format!("{}:{node_port}", host_ip(2));
    let refused = in_host(1, move || http_get(&h2, "/cgi-bin/ip"));
    assert!(
        refused.is_err(),
        "{mode:?}: h2 served its Local NodePort without a local endpoint: {refused:?}"
    );

    // An agent stopped as a user would removes its rules.
    h.stop_agent(2);
    assert!(
        !mode.rules(2).contains(&format!("{web_ip}:80")),
        "{mode:?}: h2's rules outlived its agent"
    );
    h.stop_all();
}

#[test]
fn services_across_hosts_by_cluster_ip_and_local_node_port() {
    for mode in [Mode::Nftables, Mode::Iptables] {
        across_hosts(mode);
    }
}
