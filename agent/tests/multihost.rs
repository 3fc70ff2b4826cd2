//! Several hosts on this machine (`scripts/hosts.sh`: network namespaces
//! joined by a bridge, each with its own Docker Engine), the control plane
//! on the bridge and one agent per host, as a user would run bosun on
//! three VMs. Pods on different hosts reach each other by pod IP through
//! the agents' host-gw routes, seeing each other's real addresses.
//!
//! One harness serves the whole binary (the hosts take a few seconds to
//! make); it needs root, iproute2, iptables, nsenter and dockerd, and
//! fails without them. Only one run per machine at a time (the namespace,
//! bridge and subnet names are fixed).

mod cluster;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use cluster::{
    bin_dir, control_binary, dies_with_test, ensure_images, kubectl_binary, repo_root, tail,
    wait_for,
};

const HOSTS: usize = 3;
const CONTROL_IP: &str = "172.31.250.1";
const WAIT: Duration = Duration::from_secs(90);

fn host_ip(i: usize) -> String {
    format!("172.31.250.{}", 10 + i)
}

fn hosts_sh() -> PathBuf {
    repo_root().join("scripts/hosts.sh")
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
}

fn ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn sh(script: &str) -> String {
    ok(Command::new("bash").args(["-c", script]))
}

/// What this machine has of the harness's making: namespaces, links,
/// routes, iptables rules and directories that name it.
fn traces() -> String {
    sh("ip netns list | grep '^bosun-h' || true; \
        ip -o link | grep -oE 'bosun-h[0-9]+|br-bosunhosts' || true; \
        ip route | grep -E '172\\.31\\.250|proto 235' || true; \
        iptables -w -S | grep -E 'BOSUN-HOSTS|br-bosunhosts' || true; \
        iptables -w -t nat -S | grep -E 'BOSUN|172\\.31\\.250' || true; \
        ls -d /tmp/bosun-hosts 2>/dev/null || true; \
        pgrep -f '[d]ockerd .*bosun-hosts' || true")
}

/// The hosts, the control plane and the agents; dropping it stops them
/// and takes the hosts down.
struct MultiHost {
    dir: tempfile::TempDir,
    control: Option<Child>,
    agents: Vec<Option<Child>>,
}

impl MultiHost {
    fn start() -> MultiHost {
        ensure_images();
        let mut m = MultiHost {
            dir: tempfile::tempdir().unwrap(),
            control: None,
            agents: (0..HOSTS).map(|_| None).collect(),
        };
        ok(Command::new("bash")
            .arg(hosts_sh())
            .args(["up", &HOSTS.to_string()]));
        let data = m.dir.path().join("control");
        let log = std::fs::File::create(m.dir.path().join("control.log")).unwrap();
        m.control = Some(
            dies_with_test(control_binary())
                .arg("--data-dir")
                .arg(&data)
                .args(["--bind", CONTROL_IP, "--port", "0"])
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("starting bosun-control"),
        );
        wait_for("bosun-control's kubeconfig", WAIT, || {
            data.join("admin.kubeconfig").exists().then_some(())
        });
        for i in 1..=HOSTS {
            m.start_agent(i);
        }
        m
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("control/admin.kubeconfig")
    }

    fn node(i: usize) -> String {
        format!("h{i}")
    }

    /// Starts host `i`'s agent in its namespace, on its engine, with no
    /// --pod-cidr: the control plane assigns it.
    fn start_agent(&mut self, i: usize) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("agent-{i}.log")))
            .unwrap();
        let child = dies_with_test("bash")
            .arg(hosts_sh())
            .args(["exec", &i.to_string()])
            .arg(bin_dir().join("bosun-agent"))
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(["--node-name", &Self::node(i), "--node-ip", &host_ip(i)])
            // Under the host's directory: `hosts.sh down` unmounts the
            // pods' tmpfs volumes there and removes it.
            .args(["--data-dir", &format!("/tmp/bosun-hosts/h{i}/agent")])
            .args(["--port", "0", "--heartbeat-period", "2"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting bosun-agent");
        self.agents[i - 1] = Some(child);
    }

    /// Stops host `i`'s agent as a user would (SIGTERM); its pods keep
    /// running.
    fn stop_agent(&mut self, i: usize) {
        if let Some(mut child) = self.agents[i - 1].take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = child.wait();
        }
    }

    fn logs(&self) -> String {
        let mut all = String::new();
        for name in ["control.log", "agent-1.log", "agent-2.log", "agent-3.log"] {
            let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
            all.push_str(&format!("--- {name}\n{}\n", tail(&text, 15)));
        }
        all
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        run(Command::new(kubectl_binary())
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args))
    }

    fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `docker` on host `i`'s engine.
    fn docker(&self, i: usize, args: &[&str]) -> String {
        ok(Command::new("bash")
            .arg(hosts_sh())
            .args(["exec", &i.to_string(), "docker"])
            .args(args))
    }

    fn stop_all(&mut self) {
        for i in 1..=HOSTS {
            if let Some(mut c) = self.agents[i - 1].take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        if let Some(mut c) = self.control.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("bash").arg(hosts_sh()).arg("down").status();
    }
}

impl Drop for MultiHost {
    fn drop(&mut self) {
        self.stop_all();
    }
}

// One web pod per host: a DaemonSet (bosun's scheduler has no inter-pod
// anti-affinity to spread a Deployment by).
const MANIFEST: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: bosun.local/web:1}
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  nodeName: h3
  containers:
  - {name: c, image: bosun.local/busybox:1.35, command: [sleep, "3600"]}
"#;

impl MultiHost {
    /// node → (pod name, pod IP) of the running web pods.
    fn web_pods(&self) -> Option<Vec<(String, String, String)>> {
        let out = self.kubectl_ok(&[
            "get", "pods", "-l", "app=web", "-o",
            "jsonpath={range .items[*]}{.spec.nodeName} {.metadata.name} {.status.podIP} {.status.phase}{'\\n'}{end}",
        ]);
        let pods: Vec<(String, String, String)> = out
            .lines()
            .filter(|l| l.ends_with(" Running"))
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.len() == 4).then(|| (w[0].into(), w[1].into(), w[2].into()))
            })
            .collect();
        (pods.len() == HOSTS).then_some(pods)
    }

    /// `wget` from the client pod on h3 to `ip`: the page, if it came.
    fn fetch_from_client(&self, ip: &str) -> Option<String> {
        let out = self.kubectl(&[
            "exec",
            "client",
            "--",
            "wget",
            "-qO-",
            &format!("http://{ip}/"),
        ]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

#[test]
fn pods_on_three_hosts_reach_each_other_by_pod_ip() {
    let before = traces();
    let mut m = MultiHost::start();

    // Every node gets a distinct /24 of the cluster CIDR from the control
    // plane.
    let cidrs = wait_for("three nodes with pod CIDRs", WAIT, || {
        let out = m.kubectl_ok(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.spec.podCIDR}{'\\n'}{end}",
        ]);
        let cidrs: Vec<(String, String)> = out
            .lines()
            .filter_map(|l| {
                l.split_once('=')
                    .map(|(n, c)| (n.to_string(), c.to_string()))
            })
            .filter(|(_, c)| !c.is_empty())
            .collect();
        (cidrs.len() == HOSTS).then_some(cidrs)
    });
    let cidr_of = |node: &str| cidrs.iter().find(|(n, _)| n == node).unwrap().1.clone();
    let cidrs: Vec<String> = cidrs.iter().map(|(_, c)| c.clone()).collect();
    let mut distinct = cidrs.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), HOSTS, "pod CIDRs collide: {cidrs:?}");
    for c in &cidrs {
        assert!(c.starts_with("10.244.") && c.ends_with(".0/24"), "{c}");
    }

    // A DaemonSet's web pod on every host, and a client on h3.
    let manifest = m.dir.path().join("web.yaml");
    std::fs::write(&manifest, MANIFEST).unwrap();
    m.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
    let pods = wait_for("a running web pod on each host", WAIT, || m.web_pods());
    wait_for("the client pod running", WAIT, || {
        let phase = m.kubectl_ok(&["get", "pod", "client", "-o", "jsonpath={.status.phase}"]);
        (phase == "Running").then_some(())
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
    for (node, _, ip) in [&a, &b] {
        let page = wait_for(
            &format!("the web pod on {node} ({ip}) from h3"),
            WAIT,
            || m.fetch_from_client(ip),
        );
        assert_eq!(page.trim(), "web v1", "from {node}");
    }

    // The server sees the client's own pod IP (no NAT between pods): hold a
    // connection open from h3 and look at it from the pod on h1.
    let mut hold = Command::new(kubectl_binary())
        .arg("--kubeconfig")
        .arg(m.kubeconfig())
        .args(["exec", "client", "--", "sh", "-c"])
        .arg(format!("sleep 6 | nc {} 80", a.2))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let peer = wait_for("the held connection seen on h1's pod", WAIT, || {
        let out = m.kubectl_ok(&["exec", &a.1, "--", "netstat", "-tn"]);
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
    // Give the restarted agent time to sync its pods; adoption means it
    // changed nothing.
    wait_for("h2's web pod served after the restart", WAIT, || {
        m.fetch_from_client(&b.2)
    });
    let log = std::fs::read_to_string(m.dir.path().join("agent-2.log")).unwrap();
    assert!(
        log.matches("bosun-agent starting").count() == 2,
        "{}",
        tail(&log, 20)
    );
    assert_eq!(ids(&m), before_restart, "h2's containers were replaced");
    assert_eq!(
        m.web_pods()
            .expect("web pods")
            .iter()
            .find(|p| p.0 == "h2")
            .unwrap()
            .1,
        b.1
    );

    // A node that leaves (its agent stopped, the Node deleted) takes its
    // route with it.
    let route_to = || {
        sh(&format!(
            "bash {} exec 1 ip route show proto 235",
            hosts_sh().display()
        ))
    };
    let h3_cidr = m.kubectl_ok(&["get", "node", "h3", "-o", "jsonpath={.spec.podCIDR}"]);
    assert!(route_to().contains(&h3_cidr), "{}", route_to());
    m.stop_agent(3);
    m.kubectl_ok(&["delete", "node", "h3", "--wait=false"]);
    wait_for("h1's route to h3's pods removed", WAIT, || {
        (!route_to().contains(&h3_cidr)).then_some(())
    });

    m.stop_all();
    assert_eq!(traces(), before, "hosts.sh down left something behind");
}
