//! Several hosts on this machine (`scripts/hosts.sh`: network namespaces
//! joined by a bridge, each with its own Docker Engine), joined the way a
//! user joins VMs: `bosun up --no-agent --advertise-address` on this
//! machine prints the join command, and each host runs it through
//! `scripts/hosts.sh join`, which calls `scripts/node-join.sh`, the same
//! script the Vagrant workers run (`bosun join` with a bootstrap token: each
//! agent holds a certificate of its own node, never the admin token). Pods on
//! different hosts reach each other by pod IP through the agents' host-gw
//! routes, seeing each other's real addresses, and find each other by DNS.
//!
//! One harness serves the whole binary (the hosts take a few seconds to
//! make); it needs root, iproute2, iptables, nsenter and dockerd, and
//! fails without them. Only one run per machine at a time (the namespace,
//! bridge and subnet names are fixed): run it under
//! `flock /tmp/hosts-harness.lock`.
//!
//! Commands inside pods go through each host's engine (`docker exec`), so
//! what a pod reaches is tested apart from the API's exec (which
//! `tests/join.rs` and `service_proxy_multihost.rs` use across hosts).

mod cluster;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use cluster::{
    bosun_binary, control_binary, ensure_images, hosts_sh, kubectl_binary, kubectl_stdout, ok,
    repo_root, run, tail, wait_for,
};

const HOSTS: usize = 3;
const CONTROL_IP: &str = cluster::HOSTS_CONTROL_IP;
const WAIT: Duration = Duration::from_secs(90);
/// Where `scripts/hosts.sh` keeps the hosts (its default).
const HOSTS_DIR: &str = "/tmp/bosun-hosts";

/// Host `i`'s `bosun join` data dir (`hosts.sh env`'s JOIN_DIR).
fn join_dir(i: usize) -> PathBuf {
    Path::new(HOSTS_DIR).join(format!("h{i}/join"))
}

fn sh(script: &str) -> String {
    ok(Command::new("bash").args(["-c", script]))
}

/// What this machine has of the harness's making: namespaces, links,
/// routes, iptables rules, directories and processes that name it.
fn traces() -> String {
    sh("ip netns list | grep '^bosun-h' || true; \
        ip -o link | grep -oE 'bosun-h[0-9]+|br-bosunhosts' || true; \
        ip route | grep -E '172\\.31\\.250|proto 235' || true; \
        iptables -w -S | grep -E 'BOSUN-HOSTS|br-bosunhosts' || true; \
        iptables -w -t nat -S | grep -E '172\\.31\\.250|bosun-h' || true; \
        ls -d /tmp/bosun-hosts 2>/dev/null || true; \
        pgrep -f '[d]ockerd .*bosun-hosts' || true; \
        pgrep -f '[b]osun-agent .*bosun-hosts' || true")
}

/// The hosts, the control plane and the joined agents; dropping it stops
/// them and takes the hosts down.
struct MultiHost {
    dir: tempfile::TempDir,
    /// The control plane's etcd with BOSUN_TEST_STORE=etcd (on this
    /// machine's loopback, beside the control plane); dropped, so
    /// stopped, after `drop` has stopped the control plane.
    etcd: Option<bosun_test_support::etcd::Etcd>,
}

impl MultiHost {
    fn start() -> MultiHost {
        ensure_images();
        control_binary();
        let m = MultiHost {
            dir: tempfile::tempdir().unwrap(),
            etcd: bosun_test_support::etcd::for_test_store(),
        };
        ok(Command::new("bash")
            .arg(hosts_sh())
            .args(["up", &HOSTS.to_string()]));
        // The first host's part: the control plane only (this machine is
        // no node), reachable from the hosts' bridge; `bosun up` prints
        // the join command, which the hosts read from a file as the
        // Vagrant workers read it from the shared folder.
        let store: Vec<String> = m
            .etcd
            .iter()
            .flat_map(|e| ["--store".to_string(), e.store_url()])
            .collect();
        let up = m.bosun(
            &[
                "up",
                "--no-agent",
                "--port",
                "0",
                "--advertise-address",
                CONTROL_IP,
                "--data-dir",
                m.control_dir().to_str().unwrap(),
            ]
            .into_iter()
            .chain(store.iter().map(String::as_str))
            .collect::<Vec<&str>>(),
        );
        assert!(
            up.contains(&format!("bosun join https://{CONTROL_IP}:")),
            "bosun up printed no join command for {CONTROL_IP}:\n{up}"
        );
        std::fs::write(m.join_command(), &up).unwrap();
        for i in 1..=HOSTS {
            m.start_agent(i);
        }
        m
    }

    fn control_dir(&self) -> PathBuf {
        self.dir.path().join("control")
    }

    fn join_command(&self) -> PathBuf {
        self.dir.path().join("join-command")
    }

    /// The kubeconfig `bosun up` wrote for the user (the admin's).
    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    fn bosun(&self, args: &[&str]) -> String {
        ok(Command::new(bosun_binary())
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args))
    }

    fn node(i: usize) -> String {
        format!("h{i}")
    }

    /// Joins host `i` (or rejoins it with the credential it has): `bosun
    /// join` in its namespace, on its engine, as node h`i` with its eth0's
    /// address and no --pod-cidr (the control plane assigns it).
    fn start_agent(&self, i: usize) {
        let out = ok(Command::new("bash")
            .arg(hosts_sh())
            .args(["join", &i.to_string()])
            .arg(self.join_command())
            .stdin(Stdio::null()));
        assert!(out.contains(&format!("as node {}", Self::node(i))), "{out}");
    }

    /// Stops host `i`'s agent as a user would (`bosun down` on its data
    /// dir: SIGTERM); its pods keep running.
    fn stop_agent(&self, i: usize) {
        ok(Command::new(bosun_binary())
            .args(["down", "--data-dir"])
            .arg(join_dir(i)));
    }

    fn agent_log(i: usize) -> String {
        std::fs::read_to_string(join_dir(i).join("agent.log")).unwrap_or_default()
    }

    fn logs(&self) -> String {
        let mut all = String::new();
        let control =
            std::fs::read_to_string(self.control_dir().join("control.log")).unwrap_or_default();
        all.push_str(&format!("--- control.log\n{}\n", tail(&control, 15)));
        for i in 1..=HOSTS {
            all.push_str(&format!(
                "--- h{i}'s agent.log\n{}\n",
                tail(&Self::agent_log(i), 15)
            ));
        }
        all
    }

    fn kubectl_as(&self, kubeconfig: &Path, args: &[&str]) -> Output {
        run(Command::new(kubectl_binary())
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args))
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_as(&self.kubeconfig(), args)
    }

    fn kubectl_ok(&self, args: &[&str]) -> String {
        kubectl_stdout(self.kubectl(args), args, || self.logs())
    }

    /// `docker` on host `i`'s engine.
    fn docker(&self, i: usize, args: &[&str]) -> String {
        ok(Command::new("bash")
            .arg(hosts_sh())
            .args(["exec", &i.to_string(), "docker"])
            .args(args))
    }

    /// `cmd` in container `container` of pod `pod` (namespace default) on
    /// host `i`, through that host's engine; None while the container is
    /// not there.
    fn pod_run(&self, i: usize, pod: &str, container: &str, cmd: &[&str]) -> Option<Output> {
        let id = self.docker(
            i,
            &[
                "ps",
                "-q",
                "--filter",
                "label=io.bosun.pod.namespace=default",
                "--filter",
                &format!("label=io.bosun.pod.name={pod}"),
                "--filter",
                &format!("label=io.bosun.container={container}"),
            ],
        );
        let id = id.lines().next()?.to_string();
        Some(run(Command::new("bash")
            .arg(hosts_sh())
            .args(["exec", &i.to_string(), "docker", "exec", &id])
            .args(cmd)))
    }

    /// [`MultiHost::pod_run`]'s stdout if the command succeeded.
    fn pod_exec(&self, i: usize, pod: &str, container: &str, cmd: &[&str]) -> Option<String> {
        let out = self.pod_run(i, pod, container, cmd)?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn stop_all(&mut self) {
        // The control plane first: its connections to agents killed with
        // their hosts would otherwise linger (unacknowledged) and keep a
        // deleted host's network namespace, and so its link, alive for
        // minutes.
        let _ = Command::new(bosun_binary())
            .args(["down", "--data-dir"])
            .arg(self.control_dir())
            .stdout(Stdio::null())
            .status();
        // `down` kills whatever runs in the namespaces (the joined agents).
        let _ = Command::new("bash").arg(hosts_sh()).arg("down").status();
    }
}

impl Drop for MultiHost {
    fn drop(&mut self) {
        self.stop_all();
    }
}

// Busybox pods to run commands from: one on h3 (the HTTP client), one on
// h1 (the DNS client when the StatefulSet's pod lands on h3).
const CLIENTS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  nodeName: h3
  containers:
  - {name: c, image: bosun.local/busybox:1.35, command: [sleep, "3600"]}
---
apiVersion: v1
kind: Pod
metadata: {name: client-h1}
spec:
  nodeName: h1
  containers:
  - {name: c, image: bosun.local/busybox:1.35, command: [sleep, "3600"]}
"#;

impl MultiHost {
    /// (node, pod name, pod IP) of the Running pods labelled `selector`.
    fn running(&self, selector: &str) -> Vec<(String, String, String)> {
        let out = self.kubectl_ok(&[
            "get", "pods", "-l", selector, "-o",
            "jsonpath={range .items[*]}{.spec.nodeName} {.metadata.name} {.status.podIP} {.status.phase} {.metadata.deletionTimestamp}{'\\n'}{end}",
        ]);
        out.lines()
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.len() == 4 && w[3] == "Running").then(|| (w[0].into(), w[1].into(), w[2].into()))
            })
            .collect()
    }

    fn phase(&self, pod: &str) -> String {
        self.kubectl_ok(&["get", "pod", pod, "-o", "jsonpath={.status.phase}"])
    }

    /// `wget` from the client pod on h3 to `ip`: the page, if it came.
    fn fetch_from_client(&self, ip: &str) -> Option<String> {
        self.pod_exec(
            3,
            "client",
            "c",
            &["wget", "-qO-", &format!("http://{ip}/")],
        )
    }

    fn apply(&self, manifest: &Path) {
        self.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
    }
}

#[test]
fn pods_on_three_joined_hosts_reach_each_other_by_pod_ip_and_name() {
    let before = traces();
    let mut m = MultiHost::start();

    // Every node gets a distinct /24 of the cluster CIDR from the control
    // plane, and is Ready (the scheduler spreads over Ready nodes).
    let cidrs = wait_for("three Ready nodes with pod CIDRs", WAIT, || {
        let out = m.kubectl_ok(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.spec.podCIDR}={.status.conditions[?(@.type=='Ready')].status}{'\\n'}{end}",
        ]);
        let cidrs: Vec<(String, String)> = out
            .lines()
            .filter_map(|l| {
                let w: Vec<&str> = l.split('=').collect();
                (w.len() == 3 && !w[1].is_empty() && w[2] == "True")
                    .then(|| (w[0].to_string(), w[1].to_string()))
            })
            .collect();
        (cidrs.len() == HOSTS).then_some(cidrs)
    });
    let cidr_of = |node: &str| cidrs.iter().find(|(n, _)| n == node).unwrap().1.clone();
    let all: Vec<String> = cidrs.iter().map(|(_, c)| c.clone()).collect();
    let mut distinct = all.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), HOSTS, "pod CIDRs collide: {all:?}");
    // Each a /24 of the range `bosun up` chose for this cluster (the
    // default 10.244.0.0/16 unless another cluster on this machine holds
    // it, as a user's own `bosun up` does).
    let cluster: serde_json::Value = serde_json::from_slice(
        &std::fs::read(m.control_dir().join("cluster.json")).expect("cluster.json"),
    )
    .unwrap();
    let range: ipnet::Ipv4Net = cluster["clusterCIDR"].as_str().unwrap().parse().unwrap();
    for c in &all {
        let net: ipnet::Ipv4Net = c.parse().unwrap();
        assert!(
            net.prefix_len() == 24 && range.contains(&net),
            "{c} is not a /24 of {range}"
        );
    }
    // Each node's address is its host's eth0 (`bosun join --node-interface
    // eth0`), the one the other hosts route its pods through.
    for i in 1..=HOSTS {
        let ip = m.kubectl_ok(&[
            "get",
            "node",
            &MultiHost::node(i),
            "-o",
            "jsonpath={.status.addresses[?(@.type=='InternalIP')].address}",
        ]);
        assert_eq!(ip, format!("172.31.250.{}", 10 + i), "h{i}'s InternalIP");
    }

    // Each host joined with a certificate of its own node, not the admin
    // token, and that credential is confined to its node.
    let admin_token = std::fs::read_to_string(m.control_dir().join("admin-token")).unwrap();
    let h1_credential = join_dir(1).join("node.kubeconfig");
    let text = std::fs::read_to_string(&h1_credential).unwrap();
    assert!(text.contains("client-certificate-data"), "{text}");
    assert!(
        !text.contains(admin_token.trim()),
        "h1 holds the admin token"
    );
    let denied = m.kubectl_as(&h1_credential, &["get", "secrets", "-n", "kube-system"]);
    assert!(
        !denied.status.success() && String::from_utf8_lossy(&denied.stderr).contains("forbidden"),
        "h1's credential listed secrets: {}{}",
        String::from_utf8_lossy(&denied.stdout),
        String::from_utf8_lossy(&denied.stderr)
    );

    // The seeds' Deployment (three replicas) on three empty nodes: one pod
    // per host (the scheduler scores spreading of one owner's pods), and
    // busybox clients on h3 and h1.
    m.apply(&repo_root().join("examples/nginx-deployment.yaml"));
    let pods = wait_for("three running nginx pods", WAIT, || {
        let p = m.running("app=nginx");
        (p.len() == HOSTS).then_some(p)
    });
    let mut placed: Vec<&str> = pods.iter().map(|p| p.0.as_str()).collect();
    placed.sort();
    assert_eq!(placed, ["h1", "h2", "h3"], "not one per host: {pods:?}");
    let clients = m.dir.path().join("clients.yaml");
    std::fs::write(&clients, CLIENTS).unwrap();
    m.apply(&clients);
    wait_for("the client pods running", WAIT, || {
        (m.phase("client") == "Running" && m.phase("client-h1") == "Running").then_some(())
    });
    let client_ip = m.kubectl_ok(&["get", "pod", "client", "-o", "jsonpath={.status.podIP}"]);
    let on = |node: &str| pods.iter().find(|p| p.0 == node).cloned().unwrap();
    let (a, b) = (on("h1"), on("h2"));
    // Each agent made its pod network with the CIDR it was given.
    for (node, name, ip) in &pods {
        let prefix = cidr_of(node).trim_end_matches("0/24").to_string();
        assert!(
            ip.starts_with(&prefix),
            "{name} on {node} has {ip}, outside {}",
            cidr_of(node)
        );
    }
    // HTTP from h3's client to the Deployment's pods on h1 and h2.
    for (node, _, ip) in [&a, &b] {
        let page = wait_for(
            &format!("the nginx pod on {node} ({ip}) from h3"),
            WAIT,
            || m.fetch_from_client(ip),
        );
        assert_eq!(page.trim(), "web v1", "from {node}");
    }

    // The server sees the client's own pod IP (no NAT between pods): hold a
    // connection open from h3 and look at it from the pod on h1.
    let mut hold = Command::new("bash")
        .arg(hosts_sh())
        .args(["exec", "3", "sh", "-c"])
        .arg(format!(
            "docker exec $(docker ps -q --filter label=io.bosun.pod.name=client \
             --filter label=io.bosun.container=c) sh -c 'sleep 6 | nc {} 80'",
            a.2
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let peer = wait_for("the held connection seen on h1's pod", WAIT, || {
        let out = m.pod_exec(1, &a.1, "nginx", &["netstat", "-tn"])?;
        out.lines()
            .find(|l| l.contains("ESTABLISHED") && l.contains(":80 "))
            .map(String::from)
    });
    let _ = hold.wait();
    assert!(
        peer.contains(&client_ip),
        "h1's pod saw {peer:?}, not the client's {client_ip}"
    );

    // h2's agent restarted adopts its containers: the same ids run, and the
    // pod still answers across hosts.
    let ids = |m: &MultiHost| {
        let mut v: Vec<String> = m
            .docker(
                2,
                &[
                    "ps",
                    "-q",
                    "--no-trunc",
                    "--filter",
                    "label=io.bosun.node=h2",
                ],
            )
            .lines()
            .map(String::from)
            .collect();
        v.sort();
        v
    };
    let before_restart = ids(&m);
    assert!(before_restart.len() >= 2, "{before_restart:?}");
    m.stop_agent(2);
    m.start_agent(2);
    wait_for("h2 Ready again after its agent restarted", WAIT, || {
        let out = m.kubectl_ok(&[
            "get",
            "node",
            "h2",
            "-o",
            "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
        ]);
        (out == "True").then_some(())
    });
    wait_for("h2's pod served after the restart", WAIT, || {
        m.fetch_from_client(&b.2)
    });
    let log = MultiHost::agent_log(2);
    assert!(
        log.matches("bosun-agent starting").count() == 2,
        "{}",
        tail(&log, 20)
    );
    assert_eq!(ids(&m), before_restart, "h2's containers were replaced");

    // The seeds' headless Service and StatefulSet: `nslookup web-0.nginx`
    // from a pod on another host (its agent's DNS server answers from its
    // own watch) gives web-0's pod IP.
    m.kubectl_ok(&["delete", "deployment", "nginx-deployment", "--wait=false"]);
    m.apply(&repo_root().join("examples/statefulset.yaml"));
    // (web-0 does not exist until the StatefulSet controller makes it.)
    let (web0_node, web0_ip) = wait_for("web-0 running", WAIT, || {
        let out = m.kubectl(&[
            "get",
            "pod",
            "web-0",
            "-o",
            "jsonpath={.spec.nodeName} {.status.podIP} {.status.phase}",
        ]);
        let out = String::from_utf8_lossy(&out.stdout);
        let w: Vec<&str> = out.split_whitespace().collect();
        (w.len() == 3 && w[2] == "Running").then(|| (w[0].to_string(), w[1].to_string()))
    });
    let (asker_host, asker) = if web0_node == "h3" {
        (1, "client-h1")
    } else {
        (3, "client")
    };
    let deadline = std::time::Instant::now() + WAIT;
    let answer = loop {
        let out = m
            .pod_run(asker_host, asker, "c", &["nslookup", "web-0.nginx"])
            .map(|o| {
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                )
            })
            .unwrap_or_default();
        if out
            .split_once("Name:")
            .is_some_and(|(_, rest)| rest.contains(&web0_ip))
        {
            break out;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nslookup web-0.nginx from h{asker_host} did not give {web0_ip} (web-0 on {web0_node}) within {WAIT:?}; last output:\n{out}\n{}",
            m.logs()
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(
        answer.contains("web-0.nginx.default.svc.cluster.local"),
        "{answer}"
    );

    // A node that leaves (its agent stopped, the Node deleted) takes its
    // route with it.
    let route_to = || {
        sh(&format!(
            "bash {} exec 1 ip route show proto 235",
            hosts_sh().display()
        ))
    };
    let h3_cidr = cidr_of("h3");
    assert!(route_to().contains(&h3_cidr), "{}", route_to());
    m.stop_agent(3);
    m.kubectl_ok(&["delete", "node", "h3", "--wait=false"]);
    wait_for("h1's route to h3's pods removed", WAIT, || {
        (!route_to().contains(&h3_cidr)).then_some(())
    });

    m.stop_all();
    assert_eq!(traces(), before, "hosts.sh down left something behind");
}
