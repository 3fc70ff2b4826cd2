//! Two hosts of the namespace-hosts harness (`scripts/hosts.sh`: network
//! namespaces with their own Docker Engine and address on a shared
//! bridge), a control plane on this machine and one agent per host
//! (nodes `h1`, `h2`); dropping it stops them and takes the hosts down.
//! Shared by the multi-host tests of the service proxy and of network
//! policies; run them under `flock /tmp/hosts-harness.lock` when other
//! harness tests may run beside them.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use super::{
    bin_dir, dies_with_test, ensure_images, host_ip, hosts_sh, kubectl_binary, kubectl_stdout, ok,
    run, start_hosts_control, tail,
};

pub const HOSTS: usize = 2;
const WAIT: Duration = Duration::from_secs(90);

/// `cmd` in host `i`'s network namespace (`hosts.sh exec`).
pub fn on_host(i: usize, cmd: &[&str]) -> String {
    ok(Command::new("bash")
        .arg(hosts_sh())
        .args(["exec", &i.to_string()])
        .args(cmd))
}

pub struct Hosts {
    pub dir: tempfile::TempDir,
    control: Option<Child>,
    agents: Vec<Option<Child>>,
    /// The control plane's etcd with BOSUN_TEST_STORE=etcd (on this
    /// machine's loopback); dropped, so stopped, after `drop` has stopped
    /// the control plane.
    etcd: Option<bosun_test_support::etcd::Etcd>,
}

impl Hosts {
    /// Brings the hosts up and starts the control plane and an agent per
    /// host with `agent_args` added.
    pub fn start(agent_args: &[&str]) -> Hosts {
        ensure_images();
        let mut h = Hosts {
            dir: tempfile::tempdir().unwrap(),
            control: None,
            agents: (0..HOSTS).map(|_| None).collect(),
            etcd: bosun_test_support::etcd::for_test_store(),
        };
        ok(Command::new("bash")
            .arg(hosts_sh())
            .args(["up", &HOSTS.to_string()]));
        // As Docker leaves a host whose forwarding it turned on itself (this
        // machine): FORWARD's policy DROP. The hosts' engines found
        // forwarding on and left it ACCEPT.
        for i in 1..=HOSTS {
            on_host(i, &["iptables", "-w", "-P", "FORWARD", "DROP"]);
        }
        h.control = Some(start_hosts_control(h.dir.path(), WAIT, h.etcd.as_ref()));
        for i in 1..=HOSTS {
            let log = std::fs::File::create(h.dir.path().join(format!("agent-{i}.log"))).unwrap();
            let child = dies_with_test("bash")
                .arg(hosts_sh())
                .args(["exec", &i.to_string()])
                .arg(bin_dir().join("bosun-agent"))
                .arg("--kubeconfig")
                .arg(h.kubeconfig())
                .args(["--node-name", &format!("h{i}"), "--node-ip", &host_ip(i)])
                .args(["--data-dir", &format!("/tmp/bosun-hosts/h{i}/agent")])
                .args(["--port", "0", "--heartbeat-period", "2"])
                .args(agent_args)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("starting bosun-agent");
            h.agents[i - 1] = Some(child);
        }
        h
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("control/admin.kubeconfig")
    }

    /// The tails of the control plane's and the agents' logs.
    pub fn logs(&self) -> String {
        let mut all = String::new();
        for name in ["control.log", "agent-1.log", "agent-2.log"] {
            let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
            all.push_str(&format!("--- {name}\n{}\n", tail(&text, 15)));
        }
        all
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        run(Command::new(kubectl_binary())
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args))
    }

    /// kubectl's stdout; fails the test with the logs unless it succeeded.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        kubectl_stdout(self.kubectl(args), args, || self.logs())
    }

    /// `kubectl get WHAT -o jsonpath=PATH`.
    pub fn jsonpath(&self, what: &[&str], path: &str) -> String {
        let mut args = vec!["get"];
        args.extend(what);
        let jp = format!("jsonpath={path}");
        args.extend(["-o", &jp]);
        self.kubectl_ok(&args)
    }

    /// Stops host `i`'s agent as a user would (SIGTERM).
    pub fn stop_agent(&mut self, i: usize) {
        if let Some(mut child) = self.agents[i - 1].take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = child.wait();
        }
    }

    /// Stops every process and takes the hosts down.
    pub fn stop_all(&mut self) {
        for c in self.agents.iter_mut().chain([&mut self.control]) {
            if let Some(mut c) = c.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        let _ = Command::new("bash").arg(hosts_sh()).arg("down").status();
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        self.stop_all();
    }
}
