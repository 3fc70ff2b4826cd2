//! `bosun up` where systemd is the host's service manager: a real systemd
//! booted as PID 1 of namespaces of its own (`scripts/systemd-sandbox.sh`),
//! on this host's network and Docker Engine. `up` installs and enables a
//! unit per process, systemd restarts each after `kill -9` with the node
//! Ready again and no pod restarted, the logs are in the journal, and
//! `down` removes the units.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{bin_dir, ensure_images, kubectl_context as kubectl, wait_for, ClusterReaper, Run};

const SANDBOX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/systemd-sandbox.sh");

/// A booted sandbox, stopped (every process in it killed, its cgroups and
/// mounts removed) when dropped.
struct Sandbox {
    state: tempfile::TempDir,
}

impl Sandbox {
    fn start(binds: &[&Path]) -> Sandbox {
        let state = tempfile::tempdir().unwrap();
        let out = Command::new(SANDBOX)
            .arg("start")
            .arg(state.path())
            .args(binds)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let sandbox = Sandbox { state };
        assert!(
            out.status.success(),
            "systemd-sandbox.sh start: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        sandbox
    }

    /// Runs a command inside.
    fn run(&self, program: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
        let out = Command::new(SANDBOX)
            .arg("exec")
            .arg(self.state.path())
            .arg("env")
            .args(env.iter().map(|(k, v)| format!("{k}={v}")))
            .arg(program)
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        Run::from(program, args, out)
    }

    fn systemctl(&self, args: &[&str]) -> Run {
        self.run("systemctl", args, &[])
    }

    /// A property of a unit.
    fn show(&self, unit: &str, property: &str) -> String {
        self.systemctl(&["show", "-p", property, "--value", unit])
            .stdout
            .trim()
            .to_string()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = Command::new(SANDBOX)
            .arg("stop")
            .arg(self.state.path())
            .status();
    }
}

#[test]
fn up_under_systemd_installs_units_that_restart_and_down_removes_them() {
    ensure_images();
    common::control_binary();
    common::agent_binary();
    let bins = bin_dir();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    // The host's registry of clusters, so this one's ranges keep clear of
    // every other cluster here (a user's own included).
    let registry = PathBuf::from(
        std::env::var("BOSUN_CLUSTERS_DIR").unwrap_or_else(|_| "/var/lib/bosun/clusters".into()),
    );
    std::fs::create_dir_all(&registry).unwrap();
    let name = format!("e2e{}sd", std::process::id());
    let control = home.join(".bosun/clusters").join(&name).join("control");
    // On etcd with BOSUN_TEST_STORE=etcd (the sandbox shares this host's
    // network); stopped after the reaper.
    let etcd = common::test_store_etcd();
    let store = common::up_store_args(&etcd);
    let store: Vec<&str> = store.iter().map(String::as_str).collect();
    let _reaper = ClusterReaper {
        control: control.clone(),
        node: name.clone(),
    };
    let sandbox = Sandbox::start(&[&bins, &home, &registry, Path::new("/var/run/docker.sock")]);
    let bosun = bins.join("bosun").display().to_string();
    let home_env = home.display().to_string();
    let registry_env = registry.display().to_string();
    // The default, `auto`, finds systemd (scripts/test.sh makes the rest
    // of the suite use bosun's supervisor).
    let env = [
        ("HOME", home_env.as_str()),
        ("BOSUN_CLUSTERS_DIR", registry_env.as_str()),
        ("BOSUN_SERVICE_MANAGER", "auto"),
    ];

    let up = sandbox.run(
        &bosun,
        &[&["up", "--name", &name, "--timeout", "120s"][..], &store].concat(),
        &env,
    );
    let (control_unit, agent_unit) = (
        format!("bosun-control-{name}.service"),
        format!("bosun-agent-{name}.service"),
    );
    assert!(
        up.ok()
            .contains(&format!("logs:       journalctl -u {control_unit}")),
        "{}",
        up.stdout
    );
    for unit in [&control_unit, &agent_unit] {
        assert_eq!(
            sandbox.systemctl(&["is-enabled", unit]).stdout.trim(),
            "enabled"
        );
        assert_eq!(sandbox.show(unit, "ActiveState"), "active");
        assert_eq!(sandbox.show(unit, "Restart"), "always");
        let file = sandbox.run("test", &["-f", &format!("/etc/systemd/system/{unit}")], &[]);
        assert_eq!(file.code, 0, "no unit file {unit}");
    }
    assert!(sandbox
        .show(&agent_unit, "After")
        .contains("docker.service"));

    let kubeconfig = home.join(".bosun/kubeconfig");
    let ctx = format!("bosun-{name}");
    let pod = tmp.path().join("pod.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: sleeper}\nspec:\n  containers:\n  - {name: c, image: bosun.local/busybox:1.35, command: [sleep, \"3600\"]}\n",
    )
    .unwrap();
    kubectl(&kubeconfig, &ctx, &["apply", "-f", pod.to_str().unwrap()]).ok();
    kubectl(
        &kubeconfig,
        &ctx,
        &[
            "wait",
            "--for=condition=Ready",
            "pod/sleeper",
            "--timeout=120s",
        ],
    )
    .ok();
    let container = || {
        kubectl(
            &kubeconfig,
            &ctx,
            &[
                "get",
                "pod",
                "sleeper",
                "-o",
                "jsonpath={.status.containerStatuses[0].containerID} {.status.containerStatuses[0].restartCount}",
            ],
        )
        .ok()
        .to_string()
    };
    let node_ready = || {
        kubectl(
            &kubeconfig,
            &ctx,
            &[
                "get",
                "node",
                &name,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
            ],
        )
        .stdout
            == "True"
    };
    let before = container();

    // kill -9 of each: systemd starts it again, the node is Ready, the pod
    // keeps its container.
    for unit in [&agent_unit, &control_unit] {
        let pid = sandbox.show(unit, "MainPID");
        assert_ne!(pid, "0", "{unit} has no process");
        sandbox.run("kill", &["-9", &pid], &[]).ok();
        wait_for(
            &format!("systemd to start {unit} again"),
            Duration::from_secs(60),
            || {
                let now = sandbox.show(unit, "MainPID");
                now != "0" && now != pid && sandbox.show(unit, "NRestarts") == "1"
            },
        );
        wait_for(
            &format!("node {name} Ready after {unit} came back"),
            Duration::from_secs(90),
            node_ready,
        );
        assert_eq!(container(), before, "the pod was restarted");
    }

    // The journal has each process's log, as plain text.
    for unit in [&control_unit, &agent_unit] {
        let log = sandbox.run("journalctl", &["-u", unit, "--no-pager", "-o", "cat"], &[]);
        assert!(log.ok().lines().count() > 5, "{unit}: {}", log.stdout);
        assert!(
            !log.stdout.contains('\u{1b}'),
            "{unit} logs escape sequences"
        );
    }

    // down stops and removes both units; nothing of bosun is left to systemd.
    sandbox
        .run(&bosun, &["down", "--name", &name, "--purge", "--yes"], &env)
        .ok();
    let units = sandbox.systemctl(&["list-unit-files", "bosun*", "--no-legend"]);
    assert_eq!(units.stdout.trim(), "", "units left: {}", units.stdout);
    for unit in [&control_unit, &agent_unit] {
        assert_ne!(sandbox.show(unit, "ActiveState"), "active");
    }
    assert!(!control.exists());
}

#[test]
fn an_explicit_systemd_where_there_is_none_is_refused_before_anything_is_made() {
    if Path::new("/run/systemd/system").is_dir() {
        // This host runs systemd: the refusal cannot be shown here.
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("e2e{}nosd", std::process::id());
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["up", "--name", &name, "--service-manager", "systemd"])
        .env("HOME", tmp.path())
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let run = Run::from("bosun", &["up"], out);
    assert!(
        run.fails()
            .contains("--service-manager systemd: systemd is not this host's service manager"),
        "{}",
        run.stderr
    );
    assert!(!tmp.path().join(".bosun").exists());
}
