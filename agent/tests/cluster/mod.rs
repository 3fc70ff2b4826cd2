//! A cluster for end-to-end tests on real Docker: a `bosun-control` and
//! one or more `bosun-agent`s on this Docker Engine in a temp dir, each
//! agent a node with a name, pod subnet and data dir of its own. Dropping
//! it (also on panic) stops them all and removes every container, network
//! and volume dir the nodes made. What the three packages' tests share is
//! in `bosun-test-support`, re-exported here.

#![allow(dead_code, unused_imports)]

pub mod hosts;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub use bosun_test_support::binaries::{bin_dir, kubectl_binary, repo_root};
pub use bosun_test_support::images::{ensure_images, BUSYBOX};
pub use bosun_test_support::process::dies_with_test;
pub use bosun_test_support::text::tail;
pub use bosun_test_support::wait_for;
use bosun_test_support::{
    binaries::workspace_binary,
    control::{start_control, STARTUP_TIMEOUT},
    docker, process,
};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use kube::Client;
use serde_json::Value;

/// Runs `cmd`, panicking only if it cannot start.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
}

/// Runs `cmd` and returns its stdout; panics with both outputs unless it
/// succeeds.
pub fn ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The stdout of a kubectl run that must have succeeded; otherwise fails
/// with its arguments, its stderr and `logs` (the cluster's log tails).
pub fn kubectl_stdout(out: Output, args: &[&str], logs: impl FnOnce() -> String) -> String {
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        logs()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Which of the agent's service proxy backends a test runs
/// (`--proxy-mode`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    Nftables,
    Iptables,
}

impl Mode {
    pub fn flag(self) -> &'static str {
        match self {
            Mode::Nftables => "nftables",
            Mode::Iptables => "iptables",
        }
    }
}

/// An HTTP/1.0 GET of `path` from `addr`; the body.
pub fn http_get(addr: &str, path: &str) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut s =
        std::net::TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(3))?;
    s.set_read_timeout(Some(Duration::from_secs(3)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    // A CGI's own headers end in bare newlines.
    let out = out.replace("\r\n", "\n");
    Ok(out
        .split_once("\n\n")
        .map(|(_, b)| b.trim().to_string())
        .unwrap_or(out))
}

/// The namespace-hosts harness (`scripts/hosts.sh`): the control plane
/// listens on this machine's address on the hosts' bridge.
pub const HOSTS_CONTROL_IP: &str = "172.31.250.1";

/// `scripts/hosts.sh`.
pub fn hosts_sh() -> PathBuf {
    repo_root().join("scripts/hosts.sh")
}

/// Harness host `i`'s address on the hosts' bridge.
pub fn host_ip(i: usize) -> String {
    format!("172.31.250.{}", 10 + i)
}

/// `bosun-control`, built next to the agent if it is not there yet.
pub fn control_binary() -> PathBuf {
    workspace_binary("bosun-control")
}

/// The `bosun` CLI, built next to the agent if it is not there yet.
pub fn bosun_binary() -> PathBuf {
    workspace_binary("bosun")
}

/// Starts `bosun-control` for the namespace-hosts harness, listening on
/// [`HOSTS_CONTROL_IP`] with its data in `dir/control` and its log in
/// `dir/control.log`; returns once its admin kubeconfig is there. On
/// `etcd` if given (the caller keeps it running until the control plane
/// is stopped).
pub fn start_hosts_control(
    dir: &Path,
    wait: Duration,
    etcd: Option<&bosun_test_support::etcd::Etcd>,
) -> Child {
    let data = dir.join("control");
    let log = std::fs::File::create(dir.join("control.log")).unwrap();
    let mut cmd = dies_with_test(control_binary());
    cmd.arg("--data-dir")
        .arg(&data)
        .args(["--bind", HOSTS_CONTROL_IP, "--port", "0"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    if let Some(etcd) = etcd {
        cmd.args(["--store", &etcd.store_url()]);
    }
    start_control(cmd, &data, wait).0
}

/// A pod subnet no Docker network uses yet.
fn free_subnet() -> String {
    let out = Command::new("docker")
        .args(["network", "ls", "-q"])
        .output()
        .expect("docker network ls");
    let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(String::from)
        .collect();
    let mut used = String::new();
    if !ids.is_empty() {
        let out = Command::new("docker")
            .args([
                "network",
                "inspect",
                "-f",
                "{{range .IPAM.Config}}{{.Subnet}} {{end}}",
            ])
            .args(&ids)
            .output()
            .expect("docker network inspect");
        used = String::from_utf8_lossy(&out.stdout).into_owned();
    }
    // Clusters of one test binary take consecutive subnets (they start
    // concurrently, before their networks exist); the runtime tests use
    // 10.244.128-254, so these stay below.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let nth = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let start = std::process::id() as usize * 7 + nth;
    for i in 0..120 {
        let n = 1 + (start + i) % 120;
        let subnet = format!("10.244.{n}.0/24");
        if !used.contains(&subnet) {
            return subnet;
        }
    }
    panic!("no free 10.244.x.0/24 subnet below 10.244.121.0");
}

/// One agent of the cluster: its node name, pod subnet, data dir and log.
struct AgentProc {
    node: String,
    pod_cidr: String,
    /// Relative to the cluster's dir: `agent` for the first node,
    /// `agent-<i>` for the others (their logs are named alike).
    name: String,
    child: Option<Child>,
}

pub struct Cluster {
    pub dir: tempfile::TempDir,
    /// The first node's name.
    pub node: String,
    /// The first node's pod subnet.
    pub pod_cidr: String,
    control: Option<Child>,
    /// The control plane's port, kept across restarts so the agents'
    /// kubeconfig stays right.
    port: u16,
    agents: Vec<AgentProc>,
    agent_args: Vec<String>,
    control_args: Vec<String>,
    /// The etcd the control plane keeps its objects in, if any (dropped,
    /// so stopped, after the control plane).
    etcd: Option<bosun_test_support::etcd::Etcd>,
}

impl Cluster {
    pub fn start() -> Cluster {
        Self::start_with(&[])
    }

    /// Starts a control plane and one agent (extra agent flags allowed).
    pub fn start_with(agent_args: &[&str]) -> Cluster {
        Self::start_nodes_with(1, agent_args)
    }

    /// Starts a control plane and `n` agents on this Docker Engine, each
    /// with its own node name, pod subnet and data dir.
    pub fn start_nodes(n: usize) -> Cluster {
        Self::start_nodes_with(n, &[])
    }

    pub fn start_nodes_with(n: usize, agent_args: &[&str]) -> Cluster {
        Self::start_nodes_with_control(n, agent_args, &[])
    }

    /// As [`Cluster::start_nodes_with`], with extra `bosun-control` flags.
    pub fn start_nodes_with_control(
        n: usize,
        agent_args: &[&str],
        control_args: &[&str],
    ) -> Cluster {
        let etcd = bosun_test_support::etcd::for_test_store();
        Self::start_on(n, agent_args, control_args, etcd)
    }

    /// A control plane on a throwaway etcd and one agent; None (the
    /// reason printed) when etcd is not installed.
    pub fn start_on_etcd() -> Option<Cluster> {
        let etcd = bosun_test_support::etcd::Etcd::start()?;
        Some(Self::start_on(1, &[], &[], Some(etcd)))
    }

    fn start_on(
        n: usize,
        agent_args: &[&str],
        control_args: &[&str],
        etcd: Option<bosun_test_support::etcd::Etcd>,
    ) -> Cluster {
        assert!(n >= 1, "a cluster has at least one node");
        ensure_images();
        let dir = tempfile::tempdir().expect("temp dir");
        let node = format!(
            "e2e-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_micros()
        );
        let mut c = Cluster {
            dir,
            node,
            pod_cidr: String::new(),
            control: None,
            port: 0,
            agents: Vec::new(),
            agent_args: agent_args.iter().map(|s| s.to_string()).collect(),
            control_args: control_args.iter().map(|s| s.to_string()).collect(),
            etcd,
        };
        c.start_control();
        for _ in 0..n {
            c.add_agent();
        }
        c.pod_cidr = c.agents[0].pod_cidr.clone();
        c
    }

    /// Starts one more agent (a new node) and returns its node name.
    pub fn add_agent(&mut self) -> String {
        let i = self.agents.len();
        let (node, name) = if i == 0 {
            (self.node.clone(), "agent".to_string())
        } else {
            (format!("{}-{i}", self.node), format!("agent-{i}"))
        };
        self.agents.push(AgentProc {
            node: node.clone(),
            pod_cidr: free_subnet(),
            name,
            child: None,
        });
        self.start_agent_at(i);
        node
    }

    /// Every node's name, the first one first.
    pub fn nodes(&self) -> Vec<String> {
        self.agents.iter().map(|a| a.node.clone()).collect()
    }

    /// Polls `check` every 200 ms until it gives a value, or fails after
    /// `deadline` with the tails of the control plane's and agents' logs.
    pub async fn poll<T, F, Fut>(&self, what: &str, deadline: Duration, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let start = Instant::now();
        loop {
            if let Some(v) = check().await {
                return v;
            }
            assert!(
                start.elapsed() < deadline,
                "timed out after {deadline:?} waiting for {what}\ncontrol log tail:\n{}\nagent log tail:\n{}",
                tail(&self.control_log(), 20),
                tail(&self.agent_log(), 20)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until every node of the cluster is Ready (as `bosun get
    /// nodes` would show), so the scheduler can choose among all of them.
    /// On a timeout it names the nodes that are not, with their Ready
    /// condition, whether their agent still runs, and their log tails.
    pub async fn wait_nodes_ready(&self, client: &Client) {
        let nodes: Api<Node> = Api::all(client.clone());
        let want = self.nodes();
        let started = Instant::now();
        let deadline = started + Duration::from_secs(30);
        loop {
            let mut not_ready = Vec::new();
            for (i, name) in want.iter().enumerate() {
                let ready = match nodes.get_opt(name).await {
                    Ok(Some(n)) => n
                        .status
                        .and_then(|s| s.conditions)
                        .and_then(|cs| cs.into_iter().find(|c| c.type_ == "Ready"))
                        .map(|c| format!("{} {:?} {:?}", c.status, c.reason, c.message)),
                    Ok(None) => Some("not registered".into()),
                    Err(e) => Some(format!("get failed: {e}")),
                };
                if ready.as_deref().is_none_or(|r| !r.starts_with("True")) {
                    not_ready.push((i, name, ready));
                }
            }
            if not_ready.is_empty() {
                eprintln!("nodes {want:?} Ready after {:?}", started.elapsed());
                return;
            }
            if Instant::now() >= deadline {
                let mut report = String::new();
                for (i, name, ready) in not_ready {
                    let running = self.agents[i].child.as_ref().is_some_and(|c| {
                        // A zombie (state Z) has exited but not been reaped.
                        std::fs::read_to_string(format!("/proc/{}/stat", c.id())).is_ok_and(
                            |stat| {
                                stat.rsplit(')')
                                    .next()
                                    .and_then(|r| r.split_whitespace().next())
                                    != Some("Z")
                            },
                        )
                    });
                    report.push_str(&format!(
                        "\n== node {name}: Ready {ready:?}; agent {}\n{}",
                        if running { "running" } else { "exited" },
                        tail(&self.node_log(i), 25)
                    ));
                }
                panic!(
                    "nodes {want:?} not all Ready after {:?}{report}\ncontrol log:\n{}",
                    started.elapsed(),
                    tail(&self.control_log(), 30)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn log(&self, name: &str) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{name}.log")))
            .unwrap()
    }

    pub fn start_control(&mut self) {
        let data = self.dir.path().join("control");
        let mut cmd = dies_with_test(control_binary());
        cmd.arg("--data-dir")
            .arg(&data)
            .args(["--port", &self.port.to_string()])
            .args(
                self.etcd
                    .iter()
                    .flat_map(|e| ["--store".to_string(), e.store_url()]),
            )
            .args(&self.control_args)
            .stdout(Stdio::null())
            .stderr(self.log("control"));
        let (child, addr) = start_control(cmd, &data, STARTUP_TIMEOUT);
        self.control = Some(child);
        self.port = addr.rsplit(':').next().unwrap().parse().unwrap();
    }

    /// (Re)starts the first node's agent.
    pub fn start_agent(&mut self) {
        self.start_agent_at(0);
    }

    /// (Re)starts the agent of node `i`.
    pub fn start_agent_at(&mut self, i: usize) {
        let a = &self.agents[i];
        // 127.0.0.1 unless the test names the node's address.
        let node_ip: &[&str] = if self.agent_args.iter().any(|a| a == "--node-ip") {
            &[]
        } else {
            &["--node-ip", "127.0.0.1"]
        };
        // No ingress listeners on the host's 80/443 unless the test asks
        // for ports: tests run side by side, and a user's cluster may
        // hold them.
        let ingress: &[&str] = if self.agent_args.iter().any(|a| a.starts_with("--ingress-")) {
            &[]
        } else {
            &["--ingress-http-port", "0", "--ingress-https-port", "0"]
        };
        let child = dies_with_test(env!("CARGO_BIN_EXE_bosun-agent"))
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(["--node-name", &a.node, "--pod-cidr", &a.pod_cidr])
            .args(node_ip)
            .args(ingress)
            .arg("--data-dir")
            .arg(self.dir.path().join(&a.name))
            .args([
                "--backoff-base",
                "1",
                "--relist-period",
                "0.5",
                "--heartbeat-period",
                "2",
                // The stream API on a free port: tests run side by side.
                "--port",
                "0",
            ])
            .args(&self.agent_args)
            .env("BOSUN_LOG", "info,bosun_agent=debug")
            .stdout(Stdio::null())
            .stderr(self.log(&a.name))
            .spawn()
            .expect("bosun-agent");
        self.agents[i].child = Some(child);
    }

    /// Sends `sig` and waits for the process to exit: how long that took,
    /// or None if it was still running after 20 s (then it is killed).
    fn signal(child: &mut Child, sig: nix::sys::signal::Signal) -> Option<Duration> {
        process::signal_and_wait(child, sig, Duration::from_secs(20))
    }

    /// Whether node `i`'s agent process has exited (or was never started).
    pub fn agent_exited(&mut self, i: usize) -> bool {
        match self.agents[i].child.as_mut() {
            Some(c) => c.try_wait().ok().flatten().is_some(),
            None => true,
        }
    }

    /// Stops the first node's agent with SIGTERM (its pods keep running);
    /// how long it took to exit, None if it had to be killed after 20 s.
    pub fn stop_agent(&mut self) -> Option<Duration> {
        self.stop_agent_at(0)
    }

    /// Stops node `i`'s agent with SIGTERM (its pods keep running).
    pub fn stop_agent_at(&mut self, i: usize) -> Option<Duration> {
        let mut a = self.agents[i].child.take()?;
        Self::signal(&mut a, nix::sys::signal::Signal::SIGTERM)
    }

    /// Stops the control plane with SIGTERM; how long it took to exit,
    /// None if it had to be killed after 20 s.
    pub fn stop_control(&mut self) -> Option<Duration> {
        let mut c = self.control.take()?;
        Self::signal(&mut c, nix::sys::signal::Signal::SIGTERM)
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("control/admin.kubeconfig")
    }

    pub async fn client(&self) -> Client {
        bosun_test_support::client::client(&self.kubeconfig()).await
    }

    /// `bosun --kubeconfig <this cluster's admin kubeconfig>`.
    pub fn bosun(&self) -> Command {
        let mut cmd = Command::new(bosun_binary());
        cmd.arg("--kubeconfig").arg(self.kubeconfig());
        cmd
    }

    /// `kubectl --kubeconfig <this cluster's admin kubeconfig>`; fails the
    /// test if kubectl is not installed.
    pub fn kubectl(&self) -> Command {
        let mut cmd = Command::new(kubectl_binary());
        cmd.arg("--kubeconfig").arg(self.kubeconfig());
        cmd
    }

    /// The first node's agent log.
    pub fn agent_log(&self) -> String {
        self.node_log(0)
    }

    /// Node `i`'s agent log.
    pub fn node_log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{}.log", self.agents[i].name)))
            .unwrap_or_default()
    }

    pub fn control_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("control.log")).unwrap_or_default()
    }

    /// Creates a pod bound to the first node.
    pub async fn create_pod(&self, client: &Client, mut pod: Value) -> Pod {
        pod["spec"]["nodeName"] = Value::String(self.node.clone());
        let pod: Pod = serde_json::from_value(pod).unwrap();
        let api: Api<Pod> = Api::namespaced(client.clone(), "default");
        api.create(&PostParams::default(), &pod).await.unwrap()
    }

    /// Polls the pod until `check` holds, with a deadline.
    pub async fn wait_pod(
        &self,
        client: &Client,
        name: &str,
        what: &str,
        deadline: Duration,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        let api: Api<Pod> = Api::namespaced(client.clone(), "default");
        let start = Instant::now();
        loop {
            if let Ok(Some(p)) = api.get_opt(name).await {
                let v = serde_json::to_value(&p).unwrap();
                if check(&v) {
                    return v;
                }
                if start.elapsed() > deadline {
                    panic!(
                        "timed out waiting for pod {name}: {what}\nstatus: {}\nagent log tail:\n{}",
                        serde_json::to_string_pretty(&v["status"]).unwrap(),
                        tail(&self.agent_log(), 40)
                    );
                }
            } else if start.elapsed() > deadline {
                panic!(
                    "timed out waiting for pod {name} ({what}): it does not exist\ncontrol log tail:\n{}",
                    tail(&self.control_log(), 30)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `docker ps` ids of the first node's containers (all states)
    /// matching a label filter.
    pub fn docker_ids(&self, filter: &[&str]) -> Vec<String> {
        self.docker_ids_on(&self.node, filter)
    }

    /// `docker ps` ids of `node`'s containers (all states) matching a
    /// label filter.
    pub fn docker_ids_on(&self, node: &str, filter: &[&str]) -> Vec<String> {
        docker::node_containers(node, filter)
    }

    /// Runs `docker exec` in a pod's app container; returns stdout.
    pub fn exec(&self, pod: &str, container: &str, cmd: &[&str]) -> String {
        let ids = self.docker_ids(&[
            &format!("io.bosun.pod.name={pod}"),
            &format!("io.bosun.container={container}"),
        ]);
        let running: Vec<String> = ids
            .into_iter()
            .filter(|id| {
                let out = Command::new("docker")
                    .args(["inspect", "-f", "{{.State.Running}}", id])
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&out.stdout).trim() == "true"
            })
            .collect();
        let id = running
            .first()
            .unwrap_or_else(|| panic!("no running container {container} in {pod}"));
        let out = Command::new("docker")
            .arg("exec")
            .arg(id)
            .args(cmd)
            .output()
            .expect("docker exec");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// Removes the iptables chains of `node`'s service proxy (its iptables
/// mode's, or the nftables mode's forward accept), found as
/// `scripts/test.sh`'s sweep finds them: by the comment `bosun-<node>` on
/// the jumps to them. The jumps go and the chains are flushed, then the
/// chains are deleted (iptables-nft cannot do both in one transaction).
fn remove_iptables_chains(node: &str) {
    let comment = format!("bosun-{node}");
    let mut flush = String::new();
    let mut delete = String::new();
    for table in ["filter", "nat"] {
        let Ok(out) = Command::new("iptables-save").args(["-t", table]).output() else {
            return;
        };
        let save = String::from_utf8_lossy(&out.stdout);
        let jumps: Vec<&str> = save
            .lines()
            .filter(|l| {
                l.starts_with("-A ") && l.split_whitespace().any(|w| w.trim_matches('"') == comment)
            })
            .collect();
        let prefixes: std::collections::BTreeSet<&str> = jumps
            .iter()
            .filter_map(|l| l.split(" -j ").nth(1))
            // `BOSUN-<6 hash characters>-`: the agent's chain prefix.
            .filter_map(|target| target.get(..13).filter(|p| p.starts_with("BOSUN-")))
            .collect();
        let chains: Vec<&str> = save
            .lines()
            .filter_map(|l| l.strip_prefix(':'))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|c| prefixes.iter().any(|p| c.starts_with(p)))
            .collect();
        flush.push_str(&format!("*{table}\n"));
        delete.push_str(&format!("*{table}\n"));
        for jump in &jumps {
            flush.push_str(&format!("-D {}\n", &jump[3..]));
        }
        for chain in chains {
            flush.push_str(&format!("-F {chain}\n"));
            delete.push_str(&format!("-X {chain}\n"));
        }
        flush.push_str("COMMIT\n");
        delete.push_str("COMMIT\n");
    }
    for rules in [flush, delete] {
        let Ok(mut restore) = Command::new("iptables-restore")
            .args(["-w", "--noflush"])
            .stdin(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
        else {
            return;
        };
        let _ = std::io::Write::write_all(&mut restore.stdin.take().unwrap(), rules.as_bytes());
        let _ = restore.wait();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for a in &mut self.agents {
            if let Some(mut child) = a.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if let Some(mut c) = self.control.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for node in self.nodes() {
            // Containers, network and the service proxy's table and
            // iptables chains, which a killed agent leaves.
            docker::remove_node(&node);
            remove_iptables_chains(&node);
        }
        // tmpfs emptyDirs are mounted under the agents' data dirs.
        docker::unmount_under(&[self.dir.path()]);
    }
}
