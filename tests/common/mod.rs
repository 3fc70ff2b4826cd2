//! What the end-to-end tests of the CLI share: a real `bosun-control`
//! started in a temporary directory (killed when the test ends, also on
//! panic), and runners for `bosun` and `kubectl` pointed at its admin
//! kubeconfig. What the three packages' tests share is in
//! `bosun-test-support`, re-exported here.

// Each test binary uses a different part of this module.
#![allow(dead_code, unused_imports)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub use bosun_test_support::binaries::{bin_dir, kubectl_binary};
pub use bosun_test_support::docker::node_containers;
pub use bosun_test_support::images::ensure_images;
pub use bosun_test_support::process::KillOnDrop;
pub use bosun_test_support::wait_for;
use bosun_test_support::{binaries::workspace_binary, control::start_control, docker};

/// `bosun-control`, built into the same target directory if it is not there yet.
pub fn control_binary() -> PathBuf {
    workspace_binary("bosun-control")
}

/// `bosun-agent`, built into the same target directory if it is not there yet.
pub fn agent_binary() -> PathBuf {
    workspace_binary("bosun-agent")
}

/// A throwaway etcd for the cluster a test makes with `bosun up` when the
/// tests run on etcd (`BOSUN_TEST_STORE=etcd`), None on the embedded store.
/// Keep it in a variable declared before whatever stops the cluster, so
/// etcd is stopped after the control plane.
pub use bosun_test_support::etcd::for_test_store as test_store_etcd;

/// `bosun up` arguments that put a new cluster on `etcd` (`--store
/// etcd://...`), none for the embedded store.
pub fn up_store_args(etcd: &Option<bosun_test_support::etcd::Etcd>) -> Vec<String> {
    etcd.iter()
        .flat_map(|e| ["--store".to_string(), e.store_url()])
        .collect()
}

/// A file of the repository's `examples/` directory.
pub fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
        .display()
        .to_string()
}

/// A running control plane in a temp dir, on a throwaway etcd with
/// `BOSUN_TEST_STORE=etcd` (unless the test gives a `--store` of its own).
pub struct Cluster {
    child: Child,
    dir: tempfile::TempDir,
    /// Dropped, so stopped, after the control plane.
    etcd: Option<bosun_test_support::etcd::Etcd>,
}

impl Cluster {
    pub fn start() -> Cluster {
        Self::start_with(&[])
    }

    /// A cluster whose `bosun-control` gets `extra` arguments too (e.g.
    /// `--controllers=*,-deployment` for a test of stored objects that
    /// controllers would add to).
    pub fn start_with(extra: &[&str]) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let log = std::fs::File::create(dir.path().join("control.log")).unwrap();
        let own_store = extra.iter().any(|a| a.starts_with("--store"));
        let etcd = if own_store {
            None
        } else {
            bosun_test_support::etcd::for_test_store()
        };
        let mut cmd = Command::new(control_binary());
        cmd.arg("--data-dir")
            .arg(&data)
            .args(["--port", "0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if let Some(etcd) = &etcd {
            cmd.args(["--store", &etcd.store_url()]);
        }
        let (child, _) = start_control(cmd, &data, Duration::from_secs(30));
        Cluster { child, dir, etcd }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("data").join("admin.kubeconfig")
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, text: &str) -> String {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }

    /// `program --kubeconfig <admin kubeconfig> args...` with a private HOME,
    /// not yet started.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        cmd.arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args)
            .env("HOME", self.path("home"))
            .env_remove("KUBECONFIG");
        cmd
    }

    /// Runs `bosun --kubeconfig <admin kubeconfig> args...` with a private HOME.
    pub fn bosun(&self, args: &[&str]) -> Run {
        let out = self
            .command(env!("CARGO_BIN_EXE_bosun"), args)
            .output()
            .expect("running bosun");
        Run::from("bosun", args, out)
    }

    /// Runs `kubectl --kubeconfig <admin kubeconfig> args...` with a private
    /// HOME (so its discovery cache is this cluster's alone).
    pub fn kubectl(&self, args: &[&str]) -> Run {
        let out = self
            .command(kubectl_binary(), args)
            .output()
            .expect("running kubectl");
        Run::from("kubectl", args, out)
    }

    /// The control plane's log so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path("control.log")).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Run {
    pub args: String,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn from(program: &str, args: &[&str], o: Output) -> Run {
        Run {
            args: format!("{program} {}", args.join(" ")),
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// Asserts success and returns stdout.
    pub fn ok(&self) -> &str {
        assert_eq!(
            self.code, 0,
            "{} failed:\nstdout:\n{}\nstderr:\n{}",
            self.args, self.stdout, self.stderr
        );
        &self.stdout
    }

    /// Asserts exit code 1 and returns stderr.
    pub fn fails(&self) -> &str {
        assert_eq!(
            self.code, 1,
            "{} should fail:\nstdout:\n{}\nstderr:\n{}",
            self.args, self.stdout, self.stderr
        );
        &self.stderr
    }
}

/// Starts `cmd` with stdout piped and returns it with a channel of its
/// stdout lines, read on a thread so the test can wait with a deadline.
pub fn spawn_lines(mut cmd: Command) -> (KillOnDrop, mpsc::Receiver<String>) {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning a watch");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (KillOnDrop(child), rx)
}

/// Byte offsets where each column starts in a kubectl-style table line.
pub fn column_starts(line: &str) -> Vec<usize> {
    let mut starts = vec![0];
    let b = line.as_bytes();
    for i in 1..b.len() {
        if b[i] != b' ' && i >= 3 && &b[i - 3..i] == b"   " {
            starts.push(i);
        }
    }
    starts
}

/// A kubectl-style table cut at its header's column starts: the header's
/// names (which may hold single spaces, like `ACCESS MODES`) and each row's
/// cells, trimmed (empty cells stay empty strings).
pub fn parse_table(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let starts = column_starts(header);
    let cut = |line: &str| -> Vec<String> {
        starts
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                let end = starts.get(i + 1).copied().unwrap_or(usize::MAX);
                let s = s.min(line.len());
                let end = end.min(line.len());
                line.get(s..end).unwrap_or("").trim().to_string()
            })
            .collect()
    };
    let names = cut(header);
    let rows = lines.filter(|l| !l.is_empty()).map(cut).collect();
    (names, rows)
}

/// SIGKILLs what `bosun up`/`join` started from `dir`: the supervisors
/// first (or they would start their process again), then the processes.
pub fn kill_started_processes(dir: &Path) {
    for pid_file in [
        "agent.supervisor.pid",
        "control.supervisor.pid",
        "agent.pid",
        "control.pid",
    ] {
        bosun_test_support::process::kill_pid_file(&dir.join(pid_file));
    }
}

/// Stops what a test of `bosun up`/`join` started on this host, also when
/// it fails half-way: the processes, the node's containers and network,
/// its iptables rule, its service proxy table and leftover pod mounts.
pub struct HostReaper {
    /// Data dirs whose agent.pid/control.pid are killed and whose mounts go.
    pub dirs: Vec<PathBuf>,
    /// The node whose containers and `bosun-<node>` network are removed.
    pub node: String,
    /// The pod CIDR (/16) of the node's accept rule in `BOSUN-FORWARD`.
    pub cidr: String,
}

impl Drop for HostReaper {
    fn drop(&mut self) {
        for dir in &self.dirs {
            kill_started_processes(dir);
        }
        // Containers, network and the service proxy's table (which a
        // SIGKILLed agent leaves).
        docker::remove_node(&self.node);
        remove_forward_rule(&self.cidr);
        // Volume mounts (tmpfs) of pods the agent had no time to remove.
        let dirs: Vec<&Path> = self.dirs.iter().map(PathBuf::as_path).collect();
        docker::unmount_under(&dirs);
    }
}

/// kubectl with `kubeconfig` and `context`.
pub fn kubectl_context(kubeconfig: &Path, context: &str, args: &[&str]) -> Run {
    let out = Command::new(kubectl_binary())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--context", context])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("kubectl is installed");
    Run::from("kubectl", args, out)
}

/// Cleans up after one cluster of `bosun up --name`, also when the test
/// fails half-way: what its supervisors and processes made, found from its
/// record (`control` is its data dir, the agent's is beside it).
pub struct ClusterReaper {
    pub control: PathBuf,
    pub node: String,
}

impl Drop for ClusterReaper {
    fn drop(&mut self) {
        kill_started_processes(&self.control);
        let cidr = std::fs::read_to_string(self.control.join("cluster.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|r| r["clusterCIDR"].as_str().map(String::from))
            .unwrap_or_default();
        drop(HostReaper {
            dirs: vec![
                self.control.clone(),
                self.control.parent().unwrap().join("agent"),
            ],
            node: self.node.clone(),
            cidr,
        });
    }
}

/// The ids of every container of `node`.
pub fn docker_ids(node: &str) -> Vec<String> {
    node_containers(node, &[])
}

/// bosun's filter chain for pod-to-pod traffic between bridges.
pub const FORWARD_CHAIN: &str = "BOSUN-FORWARD";

/// `iptables -S` of a filter chain; `None` if there is no such chain.
pub fn chain_rules(chain: &str) -> Option<Vec<String>> {
    let out = Command::new("iptables")
        .args(["-w", "-S", chain])
        .stderr(Stdio::null())
        .output()
        .expect("iptables is installed");
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("-A "))
            .map(String::from)
            .collect()
    })
}

/// Whether the agent's accept rule for `cidr` is in `BOSUN-FORWARD`.
pub fn rule_exists(cidr: &str) -> bool {
    let wanted = format!("-s {cidr} -d {cidr} ");
    chain_rules(FORWARD_CHAIN)
        .unwrap_or_default()
        .iter()
        .any(|r| r.contains(&wanted) && r.ends_with("-j ACCEPT"))
}

/// How many jumps `DOCKER-USER` has to `BOSUN-FORWARD`.
pub fn forward_jumps() -> usize {
    let jump = format!("-A DOCKER-USER -j {FORWARD_CHAIN}");
    chain_rules("DOCKER-USER")
        .unwrap_or_default()
        .iter()
        .filter(|r| **r == jump)
        .count()
}

/// Takes `cidr`'s rule out of `BOSUN-FORWARD` (and an older agent's out
/// of `DOCKER-USER`), and the chain with its jump once it is empty, as
/// `bosun-agent --purge` does; for cleaning up after a failed test.
pub fn remove_forward_rule(cidr: &str) {
    let iptables = |args: &[&str]| {
        Command::new("iptables")
            .arg("-w")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let legacy = ["DOCKER-USER", "-s", cidr, "-d", cidr, "-j", "ACCEPT"];
    while iptables(&[&["-D"], &legacy[..]].concat()) {}
    let wanted = format!("-s {cidr} -d {cidr} ");
    for rule in chain_rules(FORWARD_CHAIN).unwrap_or_default() {
        if rule.contains(&wanted) {
            // `-A CHAIN args` → `-D CHAIN args`, quoted comment and all.
            let _ = Command::new("sh")
                .arg("-c")
                .arg(format!("iptables -w -D {}", &rule[3..]))
                .stderr(Stdio::null())
                .status();
        }
    }
    if chain_rules(FORWARD_CHAIN).is_some_and(|r| r.is_empty()) {
        while iptables(&["-D", "DOCKER-USER", "-j", FORWARD_CHAIN]) {}
        iptables(&["-X", FORWARD_CHAIN]);
    }
}

/// The arguments of the control-plane join command `bosun up` printed in
/// `stdout` (without the leading `bosun`), joining into `dir` with the
/// API on a free port.
pub fn control_plane_join_args(stdout: &str, dir: &Path) -> Vec<String> {
    let join = stdout
        .lines()
        .find(|l| l.contains("--control-plane --certificate-key"))
        .unwrap_or_else(|| panic!("no control-plane join command:\n{stdout}"));
    let mut args: Vec<String> = join.split_whitespace().skip(1).map(String::from).collect();
    args.extend([
        "--data-dir".to_string(),
        dir.display().to_string(),
        "--control-plane-port".to_string(),
        "0".to_string(),
    ]);
    args
}

/// `https://127.0.0.1:PORT` of the control plane whose data dir is `dir`
/// (the port from the `address` file it writes once listening).
pub fn loopback_server(dir: &Path) -> String {
    let path = dir.join("address");
    let address =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let port = address.trim().rsplit_once(':').unwrap().1;
    format!("https://127.0.0.1:{port}")
}
