//! Hollow nodes (`bosun-agent hollow`) against a real control plane: one
//! process registers three Nodes, each with its own node certificate from
//! a bootstrap token; a Deployment's pods spread over them and report
//! Running and Ready with addresses of their node's pod CIDR; the Leases
//! renew; scaling to zero removes the pods; SIGTERM ends the process
//! cleanly. No Docker is involved.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bosun_test_support::binaries::workspace_binary;
use bosun_test_support::control::start_control;
use bosun_test_support::process::{dies_with_test, signal_and_wait, KillOnDrop};
use bosun_test_support::text::tail;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use nix::sys::signal::Signal;
use serde_json::json;

const NODES: [&str; 3] = ["hollow-0", "hollow-1", "hollow-2"];

fn log(path: &Path) -> String {
    tail(&std::fs::read_to_string(path).unwrap_or_default(), 30)
}

/// Polls `check` every 200 ms until it gives a value; fails after
/// `deadline` with the tail of the hollow process's log.
async fn poll<T, F, Fut>(what: &str, deadline: Duration, hollow_log: &Path, mut check: F) -> T
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
            "timed out after {deadline:?} waiting for {what}\nhollow log tail:\n{}",
            log(hollow_log)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn is_true(conditions: Option<Vec<(String, String)>>, type_: &str) -> bool {
    conditions
        .unwrap_or_default()
        .iter()
        .any(|(t, s)| t == type_ && s == "True")
}

fn pod_conditions(p: &Pod) -> Option<Vec<(String, String)>> {
    let cs = p.status.as_ref()?.conditions.as_ref()?;
    Some(
        cs.iter()
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect(),
    )
}

fn node_conditions(n: &Node) -> Option<Vec<(String, String)>> {
    let cs = n.status.as_ref()?.conditions.as_ref()?;
    Some(
        cs.iter()
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hollow_nodes_run_a_deployment_through_the_real_api() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("control");
    let control_log = std::fs::File::create(dir.path().join("control.log")).unwrap();
    // On a throwaway etcd with BOSUN_TEST_STORE=etcd; declared first so
    // it is stopped after the control plane.
    let etcd = bosun_test_support::etcd::for_test_store();
    let mut cmd = dies_with_test(workspace_binary("bosun-control"));
    cmd.arg("--data-dir")
        .arg(&data)
        .args(["--port", "0"])
        .stdin(Stdio::null())
        .stdout(control_log.try_clone().unwrap())
        .stderr(control_log);
    if let Some(etcd) = &etcd {
        cmd.args(["--store", &etcd.store_url()]);
    }
    let (control, _) = start_control(cmd, &data, Duration::from_secs(60));
    let _control = KillOnDrop(control);
    let kubeconfig = data.join("admin.kubeconfig");

    // A bootstrap token, as a joining host gets one.
    let out = Command::new(workspace_binary("bosun"))
        .args(["token", "create", "--ttl", "10m"])
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();

    let hollow_log = dir.path().join("hollow.log");
    let log_file = std::fs::File::create(&hollow_log).unwrap();
    let mut cmd = dies_with_test(env!("CARGO_BIN_EXE_bosun-agent"));
    cmd.args(["hollow", "--nodes", "3", "--heartbeat-period", "1"])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--token", &token])
        .arg("--data-dir")
        .arg(dir.path().join("hollow"))
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file);
    let mut hollow = KillOnDrop(cmd.spawn().unwrap());

    let client = bosun_test_support::client::client(&kubeconfig).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let cidrs: BTreeMap<String, ipnet::Ipv4Net> = poll(
        "the three hollow nodes to be Ready with a pod CIDR",
        Duration::from_secs(60),
        &hollow_log,
        || async {
            let mut cidrs = BTreeMap::new();
            for name in NODES {
                let n = nodes.get_opt(name).await.ok()??;
                if !is_true(node_conditions(&n), "Ready") {
                    return None;
                }
                let cidr = n.spec?.pod_cidr?.parse().ok()?;
                cidrs.insert(name.to_string(), cidr);
            }
            Some(cidrs)
        },
    )
    .await;

    // Each node heartbeats through its own Lease.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let renew_times = || async {
        let mut times = BTreeMap::new();
        for name in NODES {
            let l = leases.get_opt(name).await.ok()??;
            let spec = l.spec?;
            assert_eq!(spec.holder_identity.as_deref(), Some(name));
            times.insert(name, spec.renew_time?.0);
        }
        Some(times)
    };
    let first = poll(
        "the nodes' Leases",
        Duration::from_secs(30),
        &hollow_log,
        &renew_times,
    )
    .await;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 6,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "bosun.local/never-pulled:1"}]},
            },
        },
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let running = poll(
        "six pods Running and Ready",
        Duration::from_secs(60),
        &hollow_log,
        || async {
            let list = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .ok()?;
            let ready: Vec<Pod> = list
                .items
                .into_iter()
                .filter(|p| {
                    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                        && is_true(pod_conditions(p), "Ready")
                })
                .collect();
            (ready.len() == 6).then_some(ready)
        },
    )
    .await;
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    let mut ips = std::collections::BTreeSet::new();
    for p in &running {
        let node = p.spec.as_ref().unwrap().node_name.clone().unwrap();
        let ip: std::net::Ipv4Addr = p
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_deref())
            .unwrap_or_else(|| panic!("pod {:?} has no podIP", p.metadata.name))
            .parse()
            .unwrap();
        let cidr = cidrs
            .get(&node)
            .unwrap_or_else(|| panic!("pod on an unknown node {node}"));
        assert!(
            cidr.contains(&ip),
            "pod {:?} on {node} has {ip}, outside {cidr}",
            p.metadata.name
        );
        assert!(ips.insert(ip), "two pods have {ip}");
        *per_node.entry(node).or_default() += 1;
    }
    assert_eq!(
        per_node.len(),
        3,
        "the pods are not spread over the three nodes: {per_node:?}"
    );

    // The Leases were renewed since the first look (heartbeat 1 s).
    poll(
        "every node's Lease to be renewed",
        Duration::from_secs(30),
        &hollow_log,
        || async {
            let now = renew_times().await?;
            now.iter().all(|(n, t)| *t > first[n]).then_some(())
        },
    )
    .await;

    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    poll(
        "the pods to be gone after scaling to zero",
        Duration::from_secs(60),
        &hollow_log,
        || async {
            let list = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .ok()?;
            list.items.is_empty().then_some(())
        },
    )
    .await;

    let took = signal_and_wait(&mut hollow.0, Signal::SIGTERM, Duration::from_secs(10));
    assert!(
        took.is_some(),
        "the hollow process did not exit within 10 s of SIGTERM\n{}",
        log(&hollow_log)
    );
    let status = hollow.0.wait().unwrap();
    assert!(
        status.success(),
        "the hollow process exited with {status}\n{}",
        log(&hollow_log)
    );
}
