//! Resource metrics on real Docker, end to end: the agent's readings
//! (Docker's one-shot stats, /proc) reach `metrics.k8s.io`, and `bosun top`
//! and `kubectl top` print them in kubectl's columns, matching what
//! `docker stats --no-stream` says of the same container within 20%.

mod cluster;

use std::process::Command;
use std::time::Duration;

use cluster::{Cluster, BUSYBOX};
use serde_json::json;

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().expect("run the CLI");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{cmd:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// `45m` → 45, `19Mi` → 19.
fn number(cell: &str, unit: &str) -> f64 {
    cell.strip_suffix(unit)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{cell:?} is not a number of {unit}"))
}

/// `docker stats --no-stream` of one container: millicores and MiB.
fn docker_stats(id: &str) -> (f64, f64) {
    let out = Command::new("docker")
        .args([
            "stats",
            "--no-stream",
            "--format",
            "{{.CPUPerc}} {{.MemUsage}}",
            id,
        ])
        .output()
        .expect("docker stats");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    // `49.87% 23.1MiB / 500MiB`
    let mut parts = text.split_whitespace();
    let cpu: f64 = parts
        .next()
        .and_then(|c| c.strip_suffix('%'))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("docker stats said {text:?}"));
    let mem = parts.next().unwrap_or_default();
    let mib = if let Some(m) = mem.strip_suffix("MiB") {
        m.parse().unwrap()
    } else if let Some(k) = mem.strip_suffix("KiB") {
        k.parse::<f64>().unwrap() / 1024.0
    } else if let Some(g) = mem.strip_suffix("GiB") {
        g.parse::<f64>().unwrap() * 1024.0
    } else {
        panic!("docker stats memory {mem:?}")
    };
    (cpu * 10.0, mib)
}

fn within(a: f64, b: f64, share: f64) -> bool {
    (a - b).abs() <= share * a.max(b)
}

/// A pod that holds ~24 MB in /dev/shm (tmpfs: counted in its working
/// set) and burns as much CPU as its 500m limit lets it.
fn burner() -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "burner", "labels": {"app": "burn"}},
        "spec": {"containers": [{
            "name": "burn", "image": BUSYBOX,
            "command": ["sh", "-c", "head -c 25165824 /dev/zero > /dev/shm/fill; while :; do :; done"],
            "resources": {"requests": {"cpu": "50m", "memory": "50Mi"},
                          "limits": {"cpu": "500m", "memory": "500Mi"}},
        }]},
    })
}

#[tokio::test]
async fn top_pod_and_node_match_docker_stats() {
    let cluster = Cluster::start_with(&["--metrics-interval", "1"]);
    let client = cluster.client().await;
    cluster.wait_nodes_ready(&client).await;
    cluster.create_pod(&client, burner()).await;
    cluster
        .wait_pod(&client, "burner", "Running", Duration::from_secs(60), |p| {
            p["status"]["phase"] == "Running"
        })
        .await;
    let id = cluster
        .docker_ids(&["io.bosun.pod.name=burner", "io.bosun.container=burn"])
        .pop()
        .expect("the burner's container");

    // `bosun top pod burner` against `docker stats`, until both have
    // settled on the same figures (readings are a second apart).
    let mut last = String::new();
    let (cpu, mem) = cluster
        .poll(
            "top and docker stats to agree",
            Duration::from_secs(90),
            || {
                let out = run(cluster.bosun().args(["top", "pod", "burner"]));
                let docker = docker_stats(&id);
                last = format!("{out:?} vs docker {docker:?}");
                async move {
                    let out = out.ok()?;
                    let row: Vec<&str> = out.lines().nth(1)?.split_whitespace().collect();
                    let (cpu, mem) = (number(row[1], "m"), number(row[2], "Mi"));
                    (cpu > 0.0
                        && mem > 0.0
                        && within(cpu, docker.0, 0.2)
                        && within(mem, docker.1, 0.2))
                    .then_some((cpu, mem))
                }
            },
        )
        .await;
    eprintln!("top pod: {cpu}m {mem}Mi ({last})");

    // kubectl's columns, the last padded too, as kubectl's tabwriter does.
    let out = run(cluster.bosun().args(["top", "pod", "-l", "app=burn"])).unwrap();
    let header = out.lines().next().unwrap();
    assert_eq!(header, "NAME     CPU(cores)   MEMORY(bytes)   ");
    let out = run(cluster
        .bosun()
        .args(["top", "pod", "burner", "--containers"]))
    .unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "POD      NAME   CPU(cores)   MEMORY(bytes)   ");
    assert!(lines[1].starts_with("burner   burn   "), "{out}");
    let out = run(cluster.bosun().args(["top", "pod", "-A"])).unwrap();
    assert!(out.starts_with("NAMESPACE   NAME     CPU(cores)"), "{out}");

    // kubectl finds the metrics API by discovery and prints the same.
    let theirs = run(cluster.kubectl().args(["top", "pod", "burner"])).unwrap();
    let ours = run(cluster.bosun().args(["top", "pod", "burner"])).unwrap();
    assert_eq!(
        theirs.lines().next(),
        ours.lines().next(),
        "{theirs}\n{ours}"
    );
    let row: Vec<&str> = theirs.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[0], "burner");
    assert!(
        number(row[1], "m") > 0.0 && number(row[2], "Mi") > 0.0,
        "{theirs}"
    );

    // Nodes: non-zero use and shares of allocatable, as kubectl prints them.
    for cmd in [cluster.bosun(), cluster.kubectl()] {
        let mut cmd = cmd;
        let out = run(cmd.args(["top", "node"])).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"],
            "{out}"
        );
        let row: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(row[0], cluster.node, "{out}");
        // The burner alone keeps the host at least this busy.
        assert!(number(row[1], "m") >= 100.0, "{out}");
        assert!(number(row[2], "%") >= 1.0, "{out}");
        assert!(number(row[3], "Mi") > 0.0, "{out}");
        assert!(row[4].ends_with('%'), "{out}");
    }
    let ours = run(cluster.bosun().args(["top", "node"])).unwrap();
    let theirs = run(cluster.kubectl().args(["top", "node"])).unwrap();
    assert_eq!(ours.lines().next(), theirs.lines().next());

    // A pod without readings yet, and the API's read-only verbs.
    let err = run(cluster.bosun().args(["top", "pod", "nosuch"])).unwrap_err();
    assert!(err.contains("not found"), "{err}");
    let err = run(cluster
        .kubectl()
        .args([
            "create",
            "--raw",
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
            "-f",
            "-",
        ])
        .stdin(std::process::Stdio::null()))
    .unwrap_err();
    assert!(
        err.contains("MethodNotAllowed") || err.contains("not allow"),
        "{err}"
    );
}
