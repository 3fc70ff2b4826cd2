//! Several clusters on one host, as kind users run them: `bosun up --name`
//! on the real Docker Engine, each cluster with ranges of its own, each
//! process under its supervisor.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{ensure_images, kubectl_context, wait_for, ClusterReaper, Run};
use serde_json::Value;

/// A home of the test's own (kubeconfig, data dirs), on this host.
struct Host {
    home: PathBuf,
}

impl Host {
    fn bosun(&self, args: &[&str]) -> Run {
        self.bosun_env(args, &[])
    }

    fn bosun_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
            .args(args)
            .env("HOME", &self.home)
            .env_remove("KUBECONFIG")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        Run::from("bosun", args, out)
    }

    fn kubeconfig(&self) -> PathBuf {
        self.home.join(".bosun/kubeconfig")
    }

    fn kubectl(&self, context: &str, args: &[&str]) -> Run {
        kubectl_context(&self.kubeconfig(), context, args)
    }

    fn control_dir(&self, name: &str) -> PathBuf {
        self.home.join(".bosun/clusters").join(name).join("control")
    }

    fn record(&self, name: &str) -> Value {
        let text = std::fs::read_to_string(self.control_dir(name).join("cluster.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

fn manifest(image: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - {{name: web, image: "{image}", ports: [{{containerPort: 80}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  selector: {{app: web}}
  ports: [{{port: 80}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: client}}
spec:
  containers:
  - {{name: c, image: bosun.local/busybox:1.35, command: [sleep, "3600"]}}
"#
    )
}

/// The web pod's container id and restart count.
fn web_container(host: &Host, ctx: &str) -> (String, String) {
    let out = host
        .kubectl(
            ctx,
            &[
                "get",
                "pods",
                "-l",
                "app=web",
                "-o",
                "jsonpath={.items[0].status.containerStatuses[0].containerID} {.items[0].status.containerStatuses[0].restartCount}",
            ],
        )
        .ok()
        .to_string();
    let (id, restarts) = out.split_once(' ').unwrap_or((&out, ""));
    (id.to_string(), restarts.to_string())
}

fn node_ready(host: &Host, ctx: &str, node: &str) -> bool {
    host.kubectl(
        ctx,
        &[
            "get",
            "node",
            node,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ],
    )
    .stdout
        == "True"
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z"))
}

/// SIGKILLs the process `bosun up` started as `component` (control or
/// agent) and waits until its supervisor has started it again and the
/// node is Ready; the web pod's container stays the one it was.
fn kill_and_see_it_back(host: &Host, name: &str, ctx: &str, component: &str) {
    let dir = host.control_dir(name);
    let pid_file = dir.join(format!("{component}.pid"));
    let before = read_pid(&pid_file).expect("a pid file");
    let web = web_container(host, ctx);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(before),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_for(
        &format!("{component} of {name} started again"),
        Duration::from_secs(60),
        || read_pid(&pid_file).is_some_and(|p| p != before && alive(p)),
    );
    let restarts = std::fs::read_to_string(dir.join(format!("{component}.restarts"))).unwrap();
    assert!(restarts.contains("SIGKILL"), "{restarts}");
    wait_for(
        &format!("node {name} Ready after its {component} came back"),
        Duration::from_secs(90),
        || node_ready(host, ctx, name),
    );
    assert_eq!(web_container(host, ctx), web, "the pod was restarted");
}

#[test]
fn two_named_clusters_share_a_host_and_keep_to_themselves() {
    ensure_images();
    common::control_binary();
    common::agent_binary();
    let tmp = tempfile::tempdir().unwrap();
    let host = Host {
        home: tmp.path().to_path_buf(),
    };
    let tag = format!("e2e{}", std::process::id());
    let (a, b) = (format!("{tag}a"), format!("{tag}b"));
    let (ctx_a, ctx_b) = (format!("bosun-{a}"), format!("bosun-{b}"));
    // Each cluster on an etcd of its own with BOSUN_TEST_STORE=etcd
    // (declared before the reapers, so stopped after the clusters).
    let (etcd_a, etcd_b) = (common::test_store_etcd(), common::test_store_etcd());
    let (store_a, store_b) = (
        common::up_store_args(&etcd_a),
        common::up_store_args(&etcd_b),
    );
    let store_a: Vec<&str> = store_a.iter().map(String::as_str).collect();
    let store_b: Vec<&str> = store_b.iter().map(String::as_str).collect();
    let _reapers: Vec<ClusterReaper> = [&a, &b]
        .iter()
        .map(|n| ClusterReaper {
            control: host.control_dir(n),
            node: n.to_string(),
        })
        .collect();

    let up_a = host.bosun(&[&["up", "--name", &a, "--timeout", "120s"][..], &store_a].concat());
    assert!(up_a.ok().contains("bosun is up."), "{}", up_a.stdout);
    // b's logs are kept small, and made chatty so that they rotate.
    let up_b = host.bosun_env(
        &[
            "up",
            "--name",
            &b,
            "--timeout",
            "120s",
            "--log-max-size",
            "64Ki",
            "--log-max-files",
            "2",
        ]
        .iter()
        .chain(&store_b)
        .copied()
        .collect::<Vec<&str>>(),
        &[("BOSUN_LOG", "debug")],
    );
    assert!(up_b.ok().contains("bosun is up."), "{}", up_b.stdout);
    // `up` returned with the node Ready, and says where others join: the
    // advertise address, never loopback.
    assert!(node_ready(&host, &ctx_a, &a));
    let join = up_a
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("bosun join https://"))
        .unwrap_or_else(|| panic!("no join command:\n{}", up_a.stdout));
    assert!(!join.contains("127.0.0.1"), "{join}");

    let (ra, rb) = (host.record(&a), host.record(&b));
    for key in ["clusterCIDR", "serviceCIDR"] {
        assert_ne!(ra[key], rb[key], "both clusters have the same {key}");
    }
    let list = host.bosun(&["list"]);
    for (n, r) in [(&a, &ra), (&b, &rb)] {
        let row = list
            .ok()
            .lines()
            .find(|l| l.starts_with(n.as_str()))
            .unwrap_or_else(|| panic!("{n} not listed:\n{}", list.stdout));
        assert!(row.contains("Running"), "{row}");
        assert!(row.contains(r["clusterCIDR"].as_str().unwrap()), "{row}");
        assert!(row.contains(r["serviceCIDR"].as_str().unwrap()), "{row}");
    }

    // A third cluster asked to take a's pod range is refused, naming it,
    // and leaves nothing behind.
    let c = format!("{tag}c");
    let clash = host.bosun(&[
        "up",
        "--name",
        &c,
        "--cluster-cidr",
        ra["clusterCIDR"].as_str().unwrap(),
    ]);
    let err = clash.fails();
    assert!(
        err.contains(&format!(
            "--cluster-cidr {} overlaps the cluster range {} of bosun cluster \"{a}\"",
            ra["clusterCIDR"].as_str().unwrap(),
            ra["clusterCIDR"].as_str().unwrap()
        )),
        "{err}"
    );
    assert!(!host.home.join(".bosun/clusters").join(&c).exists());

    // Each runs a Deployment and a Service; a pod in each reaches its own
    // cluster's names and Services.
    for (ctx, image) in [(&ctx_a, "bosun.local/web:1"), (&ctx_b, "bosun.local/web:2")] {
        let file = host.home.join(format!("{ctx}.yaml"));
        std::fs::write(&file, manifest(image)).unwrap();
        host.kubectl(ctx, &["apply", "-f", file.to_str().unwrap()])
            .ok();
    }
    for ctx in [&ctx_a, &ctx_b] {
        host.kubectl(
            ctx,
            &[
                "wait",
                "--for=condition=Available",
                "deployment/web",
                "--timeout=120s",
            ],
        )
        .ok();
        host.kubectl(
            ctx,
            &[
                "wait",
                "--for=condition=Ready",
                "pod/client",
                "--timeout=120s",
            ],
        )
        .ok();
    }
    for (ctx, body, other) in [(&ctx_a, "web v1", &ctx_b), (&ctx_b, "web v2", &ctx_a)] {
        let in_client = |ctx: &str, script: &str| {
            host.kubectl(ctx, &["exec", "client", "--", "sh", "-c", script])
        };
        let got = in_client(ctx, "timeout 10 wget -qO- http://web")
            .ok()
            .to_string();
        assert!(got.contains(body), "{ctx}: {got}");
        let api_ip = |ctx: &str| {
            host.kubectl(
                ctx,
                &[
                    "get",
                    "svc",
                    "kubernetes",
                    "-o",
                    "jsonpath={.spec.clusterIP}",
                ],
            )
            .ok()
            .to_string()
        };
        let (own, theirs) = (api_ip(ctx), api_ip(other));
        assert_ne!(own, theirs);
        let answer = in_client(ctx, "nslookup kubernetes.default.svc.cluster.local")
            .ok()
            .to_string();
        assert!(answer.contains(&own), "{ctx}: {answer}");
        assert!(!answer.contains(&theirs), "{ctx}: {answer}");
        // Its own API answers at its own kubernetes Service: the TCP
        // connection is made (not refused, not left unanswered).
        let tcp = in_client(
            ctx,
            &format!("timeout 3 nc -w 2 {own} 443 </dev/null; echo rc=$?"),
        )
        .stdout;
        assert!(
            tcp.contains("rc=0") && !tcp.contains("can't connect"),
            "{ctx}: {tcp}"
        );
    }

    // kill -9 of the agent and of the control plane: each comes back,
    // the node is Ready again, the pod was not restarted.
    kill_and_see_it_back(&host, &a, &ctx_a, "agent");
    kill_and_see_it_back(&host, &a, &ctx_a, "control");

    // Logs: plain text, and b's within their cap.
    let dir_b = host.control_dir(&b);
    wait_for("b's control log to rotate", Duration::from_secs(90), || {
        dir_b.join("control.log.1").exists()
    });
    for name in [&a, &b] {
        for file in ["control.log", "agent.log"] {
            let text = std::fs::read(host.control_dir(name).join(file)).unwrap();
            assert!(
                !text.contains(&0x1b),
                "{name}/{file} holds escape sequences"
            );
        }
    }
    for entry in std::fs::read_dir(&dir_b).unwrap() {
        let entry = entry.unwrap();
        let n = entry.file_name().to_string_lossy().into_owned();
        if n.contains(".log") {
            assert!(
                ["control.log", "control.log.1", "agent.log", "agent.log.1"].contains(&n.as_str()),
                "{n}: more log files than --log-max-files"
            );
            let len = entry.metadata().unwrap().len();
            assert!(len <= 64 * 1024, "{n} is {len} bytes, over --log-max-size");
        }
    }

    // down --name stops one cluster and leaves the other running.
    host.bosun(&["down", "--name", &a, "--purge", "--yes"]).ok();
    let list = host.bosun(&["list"]);
    assert!(!list.ok().contains(&a), "{}", list.stdout);
    assert!(node_ready(&host, &ctx_b, &b));
    host.bosun(&["down", "--name", &b, "--purge", "--yes"]).ok();
    assert!(!host.home.join(".bosun/clusters").join(&a).exists());
}
