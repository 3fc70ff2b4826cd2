//! Docker-in-Docker: the agent on an engine that is not this host's, as a
//! CI job's `docker:dind` service is (another daemon with its own network
//! namespace and data root). The stand-in is host 1 of `scripts/hosts.sh`;
//! the agent runs the supported way, as a container on that engine
//! (`examples/ci/agent-image.sh` and `run-agent.sh`, started from outside
//! through the engine's socket), and `examples/ci/smoke.sh`, which the CI
//! recipe runs too, checks that an HTTP readiness probe turns a pod Ready,
//! `bosun exec`/`logs` reach it and a hostPath volume is the engine's
//! filesystem.
//!
//! Needs root, iproute2, iptables, nsenter and dockerd, and fails without
//! them. The harness's names are fixed: run it under
//! `flock /tmp/hosts-harness.lock` when other harness tests may run.

mod cluster;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use cluster::{bin_dir, bosun_binary, ensure_images, ok, run, start_hosts_control};

const ENGINE_IP: &str = "172.31.250.11";
const ENGINE_SOCKET: &str = "/tmp/bosun-hosts/h1/docker.sock";
/// Shared with the engine; `hosts.sh down` unmounts and removes it.
const DATA_ROOT: &str = "/tmp/bosun-hosts/h1/bosun";
const NODE: &str = "dind";
const AGENT_CONTAINER: &str = "bosun-agent-dind";
const WAIT: Duration = Duration::from_secs(120);

fn root() -> PathBuf {
    cluster::repo_root()
}

fn engine() -> String {
    format!("unix://{ENGINE_SOCKET}")
}

/// `docker` against the stand-in engine, from this host.
fn docker(args: &[&str]) -> Output {
    run(Command::new("docker")
        .env("DOCKER_HOST", engine())
        .args(args))
}

/// The engine, the control plane and the agent container; dropping it
/// removes them all (the engine takes its pods with it).
struct Dind {
    dir: tempfile::TempDir,
    control: Option<Child>,
    /// The control plane's etcd with BOSUN_TEST_STORE=etcd; dropped, so
    /// stopped, after `drop` has stopped the control plane.
    etcd: Option<bosun_test_support::etcd::Etcd>,
}

impl Dind {
    fn start() -> Dind {
        for tool in ["ip", "iptables", "nsenter", "dockerd", "mount"] {
            assert!(
                Command::new("sh")
                    .args(["-c", &format!("command -v {tool}")])
                    .stdout(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success()),
                "{tool} is needed for the Docker-in-Docker test"
            );
        }
        ensure_images();
        let mut d = Dind {
            dir: tempfile::tempdir().unwrap(),
            control: None,
            etcd: bosun_test_support::etcd::for_test_store(),
        };
        ok(Command::new("bash")
            .arg(root().join("scripts/hosts.sh"))
            .args(["up", "1"]));
        // The agent's data must be the same path on the engine and shared
        // with it, so tmpfs volumes the agent mounts reach the pods
        // (docker:dind makes its / shared; this machine's is private).
        std::fs::create_dir_all(DATA_ROOT).unwrap();
        ok(Command::new("mount").args(["--bind", DATA_ROOT, DATA_ROOT]));
        ok(Command::new("mount").args(["--make-shared", DATA_ROOT]));

        d.control = Some(start_hosts_control(d.dir.path(), WAIT, d.etcd.as_ref()));

        // The agent image, built on the engine through its socket.
        ok(Command::new("bash")
            .arg(root().join("examples/ci/agent-image.sh"))
            .arg(bin_dir().join("bosun-agent"))
            .env("DOCKER_HOST", engine()));
        ok(Command::new("bash")
            .arg(root().join("examples/ci/run-agent.sh"))
            .arg("--kubeconfig")
            .arg(d.kubeconfig())
            .args(["--node-name", NODE, "--node-ip", ENGINE_IP])
            .args(["--engine-socket", ENGINE_SOCKET, "--data-root", DATA_ROOT])
            .args(["--", "--heartbeat-period", "2"])
            .env("DOCKER_HOST", engine()));
        d
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("control/admin.kubeconfig")
    }

    fn bosun(&self, args: &[&str]) -> Output {
        run(Command::new(bosun_binary())
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args))
    }

    fn logs(&self) -> String {
        let control =
            std::fs::read_to_string(self.dir.path().join("control.log")).unwrap_or_default();
        let agent = docker(&["logs", AGENT_CONTAINER]);
        format!(
            "--- control\n{}\n--- agent container\n{}",
            cluster::tail(&control, 15),
            cluster::tail(
                &format!(
                    "{}{}",
                    String::from_utf8_lossy(&agent.stdout),
                    String::from_utf8_lossy(&agent.stderr)
                ),
                200
            )
        )
    }
}

impl Drop for Dind {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", AGENT_CONTAINER]);
        if let Some(mut c) = self.control.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Takes the engine (and the pods on it) down, unmounts and removes
        // /tmp/bosun-hosts with DATA_ROOT.
        let _ = Command::new("bash")
            .arg(root().join("scripts/hosts.sh"))
            .arg("down")
            .status();
    }
}

#[test]
fn agent_in_a_container_on_another_engine_runs_probes_streams_and_host_paths() {
    let d = Dind::start();
    // The Node turns Ready: the agent in the container reached the control
    // plane, and the control plane reaches its stream API at ENGINE_IP.
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let out = d.bosun(&["get", "node", NODE]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let status = text
            .lines()
            .nth(1)
            .and_then(|l| l.split_whitespace().nth(1));
        if status == Some("Ready") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "node {NODE} is not Ready after {WAIT:?}: {text}\n{}",
            d.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The agent is a container of that engine, not a process here.
    let ps = docker(&["ps", "--filter", &format!("name={AGENT_CONTAINER}"), "-q"]);
    assert!(!ps.stdout.is_empty(), "no agent container on the engine");

    // Outside the data root the agent container shares: the agent sees it
    // only through --host-root.
    let hostpath = format!("/tmp/bosun-hosts/h1/hostpath-{}", std::process::id());
    let smoke = run(Command::new("bash")
        .arg(root().join("examples/ci/smoke.sh"))
        .env("BOSUN", bosun_binary())
        .env("KUBECONFIG", d.kubeconfig())
        .env("DOCKER_HOST", engine())
        .env("HOSTPATH_DIR", &hostpath)
        .env("WAIT", "120"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&smoke.stdout),
        String::from_utf8_lossy(&smoke.stderr)
    );
    assert!(
        smoke.status.success(),
        "smoke.sh failed:\n{text}\n{}",
        d.logs()
    );
    assert!(text.contains("all checks passed"), "{text}");
    eprintln!("{text}");
    // The agent's writes to the engine's /sys (hairpin mode for the
    // service proxy) work inside its container.
    let logs = d.logs();
    assert!(!logs.contains("Read-only file system"), "{logs}");
    // What the pod wrote is on the engine's filesystem (here the stand-in
    // shares this machine's, so it is readable at the same path).
    let visitors = std::fs::read_to_string(Path::new(&hostpath).join("visitors")).unwrap();
    assert_eq!(visitors.trim(), "dind-hostpath");
}
