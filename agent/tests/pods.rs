//! Pods on real Docker, end to end: a control plane and an agent, pods
//! created through the API, checked the way a user would check them.

mod cluster;

use std::process::Command;
use std::time::Duration;

use cluster::{Cluster, BUSYBOX};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(60);

fn pod(name: &str, policy: &str, containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"test": "pods"}},
        "spec": {"restartPolicy": policy, "terminationGracePeriodSeconds": 2, "containers": containers}})
}

fn sh(name: &str, script: &str) -> Value {
    json!({"name": name, "image": BUSYBOX, "command": ["sh", "-c", script]})
}

fn phase(p: &Value) -> &str {
    p["status"]["phase"].as_str().unwrap_or("")
}

fn ready(p: &Value) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn restarts(p: &Value, i: usize) -> i64 {
    p["status"]["containerStatuses"][i]["restartCount"]
        .as_i64()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_runs_in_its_sandbox_with_hostname_and_ip() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(
        &client,
        pod("web", "Always", json!([sh("app", "sleep 3600")])),
    )
    .await;
    let p = c
        .wait_pod(&client, "web", "Running and Ready", UP, |p| {
            phase(p) == "Running" && ready(p)
        })
        .await;
    let ip = p["status"]["podIP"].as_str().unwrap();
    let prefix = c.pod_cidr.trim_end_matches("0/24");
    assert!(
        ip.starts_with(prefix),
        "pod IP {ip} is in the node's pod CIDR {}",
        c.pod_cidr
    );
    assert_eq!(p["status"]["hostIP"], "127.0.0.1");
    assert_eq!(c.exec("web", "app", &["hostname"]).trim(), "web");
    let resolv = c.exec("web", "app", &["cat", "/etc/resolv.conf"]);
    assert!(
        resolv.contains("ndots:5") && resolv.contains("default.svc.cluster.local"),
        "{resolv}"
    );
    assert_eq!(
        c.docker_ids(&["io.bosun.pod.name=web"]).len(),
        2,
        "a pause container and the app"
    );
    assert_eq!(
        c.docker_ids(&["io.bosun.pod.name=web", "io.bosun.role=sandbox"])
            .len(),
        1
    );

    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.get(&c.node).await.unwrap();
    let status = node.status.unwrap();
    assert!(status
        .conditions
        .unwrap()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True"));
    assert!(status
        .node_info
        .unwrap()
        .container_runtime_version
        .starts_with("docker://"));
    assert!(status.capacity.unwrap().contains_key("cpu"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_policies_decide_the_phase() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(
        &client,
        pod("never-fails", "Never", json!([sh("app", "exit 3")])),
    )
    .await;
    c.create_pod(
        &client,
        pod("onfailure-ok", "OnFailure", json!([sh("app", "exit 0")])),
    )
    .await;
    c.create_pod(
        &client,
        pod("always-crashes", "Always", json!([sh("app", "exit 1")])),
    )
    .await;
    c.create_pod(
        &client,
        pod(
            "half-failed",
            "Never",
            json!([sh("bad", "exit 1"), sh("good", "sleep 3600")]),
        ),
    )
    .await;

    let p = c
        .wait_pod(&client, "never-fails", "Failed", UP, |p| {
            phase(p) == "Failed"
        })
        .await;
    assert_eq!(
        p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        3
    );
    assert_eq!(
        p["status"]["containerStatuses"][0]["state"]["terminated"]["reason"],
        "Error"
    );
    assert_eq!(restarts(&p, 0), 0);
    let p = c
        .wait_pod(&client, "onfailure-ok", "Succeeded", UP, |p| {
            phase(p) == "Succeeded"
        })
        .await;
    assert_eq!(
        p["status"]["containerStatuses"][0]["state"]["terminated"]["reason"],
        "Completed"
    );
    let p = c
        .wait_pod(&client, "always-crashes", "restarted twice", UP, |p| {
            restarts(p, 0) >= 2
        })
        .await;
    assert_eq!(phase(&p), "Running", "a crash-looping pod stays Running");
    assert_eq!(
        p["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"],
        1
    );
    let p = c
        .wait_pod(&client, "half-failed", "one failed, one running", UP, |p| {
            p["status"]["containerStatuses"][0]["state"]["terminated"].is_object()
                && p["status"]["containerStatuses"][1]["state"]["running"].is_object()
        })
        .await;
    assert_eq!(
        phase(&p),
        "Running",
        "a two-container pod with one failed container stays Running"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_run_first_and_share_an_empty_dir() {
    let c = Cluster::start();
    let client = c.client().await;
    let mut p = pod(
        "javaweb-2",
        "Always",
        json!([{"name": "web", "image": BUSYBOX, "command": ["httpd", "-f", "-p", "8080", "-h", "/app"],
            "volumeMounts": [{"name": "app-volume", "mountPath": "/app"}]}]),
    );
    p["spec"]["initContainers"] = json!([
        {"name": "war", "image": BUSYBOX, "command": ["sh", "-c", "echo sample-war > /app/index.html"],
         "volumeMounts": [{"name": "app-volume", "mountPath": "/app"}]},
        {"name": "check", "image": BUSYBOX, "command": ["sh", "-c", "test -f /app/index.html"],
         "volumeMounts": [{"name": "app-volume", "mountPath": "/app"}]}
    ]);
    p["spec"]["volumes"] = json!([{"name": "app-volume", "emptyDir": {}}]);
    c.create_pod(&client, p).await;
    let p = c
        .wait_pod(&client, "javaweb-2", "Running", UP, |p| {
            phase(p) == "Running" && ready(p)
        })
        .await;
    let inits = p["status"]["initContainerStatuses"].as_array().unwrap();
    assert!(inits
        .iter()
        .all(|s| s["state"]["terminated"]["exitCode"] == 0));
    let served = c.exec(
        "javaweb-2",
        "web",
        &["wget", "-qO-", "http://127.0.0.1:8080/"],
    );
    assert_eq!(
        served.trim(),
        "sample-war",
        "the app serves the file the init container wrote"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_process_namespace_shows_the_other_containers() {
    let c = Cluster::start();
    let client = c.client().await;
    let containers = json!([sh("app", "sleep 3601"), sh("shell", "sleep 3602")]);
    let mut shared = pod("shared", "Always", containers.clone());
    shared["spec"]["shareProcessNamespace"] = json!(true);
    c.create_pod(&client, shared).await;
    c.create_pod(&client, pod("separate", "Always", containers))
        .await;
    for name in ["shared", "separate"] {
        c.wait_pod(&client, name, "Running", UP, |p| {
            phase(p) == "Running" && ready(p)
        })
        .await;
    }
    let ps = c.exec("shared", "shell", &["ps", "ax"]);
    assert!(
        ps.contains("sleep 3601"),
        "the app's process is visible:\n{ps}"
    );
    assert!(
        ps.lines()
            .any(|l| l.trim_start().starts_with("1 ") && l.contains("/pause")),
        "pause is PID 1:\n{ps}"
    );
    let ps = c.exec("separate", "shell", &["ps", "ax"]);
    assert!(
        !ps.contains("sleep 3601"),
        "without sharing, the app is not visible:\n{ps}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_pod_stops_and_removes_its_containers() {
    let c = Cluster::start();
    let client = c.client().await;
    let mut p = pod("doomed", "Always", json!([sh("app", "sleep 3600")]));
    p["spec"]["volumes"] = json!([{"name": "scratch", "emptyDir": {}}]);
    p["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "scratch", "mountPath": "/scratch"}]);
    let created = c.create_pod(&client, p).await;
    c.wait_pod(&client, "doomed", "Running", UP, |p| phase(p) == "Running")
        .await;
    let uid = created.metadata.uid.unwrap();
    let volume_dir = c.dir.path().join("agent/pods").join(&uid);
    assert!(volume_dir.exists());
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    // Polled on the test's runtime: futures' block_on inside it spun
    // forever once tokio's cooperative budget ran out (a CI run hung here).
    c.poll("the pod object to go", Duration::from_secs(60), || async {
        let gone = matches!(api.get_opt("doomed").await, Ok(None));
        gone.then_some(())
    })
    .await;
    assert!(
        c.docker_ids(&["io.bosun.pod.name=doomed"]).is_empty(),
        "containers removed"
    );
    assert!(!volume_dir.exists(), "emptyDir removed with the pod");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_deleted_while_the_agent_is_away_loses_its_containers_when_it_is_back() {
    let mut c = Cluster::start();
    let client = c.client().await;
    let mut p = pod("away", "Always", json!([sh("app", "sleep 3600")]));
    p["spec"]["volumes"] = json!([{"name": "scratch", "emptyDir": {}}]);
    p["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "scratch", "mountPath": "/scratch"}]);
    let created = c.create_pod(&client, p).await;
    c.create_pod(
        &client,
        pod("stays", "Always", json!([sh("app", "sleep 3600")])),
    )
    .await;
    for name in ["away", "stays"] {
        c.wait_pod(&client, name, "Running", UP, |p| {
            phase(p) == "Running" && ready(p)
        })
        .await;
    }
    let volume_dir = c
        .dir
        .path()
        .join("agent/pods")
        .join(created.metadata.uid.unwrap());
    assert!(volume_dir.exists());
    let stays = c.docker_ids(&["io.bosun.pod.name=stays"]);
    assert_eq!(stays.len(), 2, "sandbox and app of the pod that stays");

    c.stop_agent();
    // Force-deleted while no agent runs: the object goes at once and only
    // the containers are left, for the agent's relist to find.
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.delete("away", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    c.poll("the pod object to go", Duration::from_secs(60), || async {
        matches!(api.get_opt("away").await, Ok(None)).then_some(())
    })
    .await;
    assert_eq!(c.docker_ids(&["io.bosun.pod.name=away"]).len(), 2);

    c.start_agent();
    c.poll("the gone pod's containers to be removed", UP, || async {
        c.docker_ids(&["io.bosun.pod.name=away"])
            .is_empty()
            .then_some(())
    })
    .await;
    c.poll("the gone pod's volumes to be removed", UP, || async {
        (!volume_dir.exists()).then_some(())
    })
    .await;
    let mut still = c.docker_ids(&["io.bosun.pod.name=stays"]);
    still.sort();
    let mut stays = stays;
    stays.sort();
    assert_eq!(still, stays, "the other pod's containers are left alone");
}

fn container_ids(c: &Cluster) -> Vec<String> {
    let mut ids = c.docker_ids(&[]);
    ids.sort();
    ids
}

/// Each of the node's containers: its id, when it last started, and
/// whether it runs (what `docker inspect` says).
fn container_starts(c: &Cluster) -> Vec<(String, String, bool)> {
    let ids = container_ids(c);
    let out = Command::new("docker")
        .args([
            "inspect",
            "-f",
            "{{.Id}} {{.State.StartedAt}} {{.State.Running}}",
        ])
        .args(&ids)
        .output()
        .expect("docker inspect");
    let mut starts: Vec<(String, String, bool)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0][..ids[0].len()].to_string(),
                f[1].to_string(),
                f[2] == "true",
            )
        })
        .collect();
    starts.sort();
    starts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_restart_adopts_running_pods_and_docker_kill_is_repaired() {
    let mut c = Cluster::start();
    let client = c.client().await;
    for i in 0..5 {
        c.create_pod(
            &client,
            pod(&format!("p{i}"), "Always", json!([sh("app", "sleep 3600")])),
        )
        .await;
    }
    for i in 0..5 {
        c.wait_pod(&client, &format!("p{i}"), "Running", UP, |p| {
            phase(p) == "Running" && ready(p)
        })
        .await;
    }
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let ips = || async {
        api.list(&ListParams::default().labels("test=pods"))
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|p| (p.metadata.name.unwrap(), p.status.unwrap().pod_ip))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let ips_before = ips().await;
    assert!(ips_before.values().all(Option::is_some), "{ips_before:?}");
    let before = container_starts(&c);
    assert_eq!(before.len(), 10);
    assert!(before.iter().all(|(_, _, running)| *running), "{before:?}");

    c.stop_agent();
    // While the agent is away, each pod's status says something only the
    // agent's sync puts right: a wrong hostIP.
    for i in 0..5 {
        api.patch_status(
            &format!("p{i}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"hostIP": "192.0.2.1"}})),
        )
        .await
        .unwrap();
    }
    c.start_agent();
    // The new agent has synced every pod once each hostIP is its own
    // again: by then it has decided what to do with their containers.
    for i in 0..5 {
        c.wait_pod(
            &client,
            &format!("p{i}"),
            "synced by the new agent",
            UP,
            |p| p["status"]["hostIP"] == "127.0.0.1",
        )
        .await;
    }
    let after = container_starts(&c);
    assert_eq!(
        after, before,
        "adopted containers are the same ones, never restarted (id, StartedAt, running)"
    );
    assert_eq!(ips().await, ips_before, "pod IPs unchanged");
    for p in api
        .list(&ListParams::default().labels("test=pods"))
        .await
        .unwrap()
    {
        assert_eq!(
            p.status.unwrap().container_statuses.unwrap()[0].restart_count,
            0
        );
    }

    // docker kill of an app container: restarted per policy.
    let app = c.docker_ids(&["io.bosun.pod.name=p0", "io.bosun.role=app"]);
    Command::new("docker")
        .args(["kill", &app[0]])
        .output()
        .unwrap();
    c.wait_pod(&client, "p0", "app restarted", UP, |p| {
        restarts(p, 0) == 1 && ready(p)
    })
    .await;

    // docker kill of the pause container: the sandbox and its containers are recreated.
    let old_ip = api.get("p1").await.unwrap().status.unwrap().pod_ip;
    let pause = c.docker_ids(&["io.bosun.pod.name=p1", "io.bosun.role=sandbox"]);
    Command::new("docker")
        .args(["kill", &pause[0]])
        .output()
        .unwrap();
    c.wait_pod(&client, "p1", "sandbox recreated", UP, |p| {
        restarts(p, 0) >= 1 && ready(p)
    })
    .await;
    let sandboxes = c.docker_ids(&["io.bosun.pod.name=p1", "io.bosun.role=sandbox"]);
    assert_eq!(sandboxes.len(), 1);
    assert_ne!(sandboxes, pause);
    assert!(old_ip.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_keep_running_while_the_control_plane_is_down() {
    let mut c = Cluster::start();
    let client = c.client().await;
    c.create_pod(
        &client,
        pod("steady", "Always", json!([sh("app", "sleep 3600")])),
    )
    .await;
    c.wait_pod(&client, "steady", "Running", UP, |p| phase(p) == "Running")
        .await;
    let before = container_starts(&c);
    assert!(before.iter().all(|(_, _, running)| *running), "{before:?}");
    let failed_heartbeats = |c: &Cluster| c.agent_log().matches("renewing the node lease").count();
    let failed_before = failed_heartbeats(&c);
    c.stop_control();
    // The agent has noticed: three heartbeats in a row failed (6 s at
    // --heartbeat-period 2), with a dozen relists (every 0.5 s) meanwhile.
    cluster::wait_for(
        "the agent to fail three heartbeats",
        Duration::from_secs(30),
        || (failed_heartbeats(&c) >= failed_before + 3).then_some(()),
    );
    assert_eq!(
        container_starts(&c),
        before,
        "nothing stopped or restarted while the control plane was away"
    );
    c.start_control();
    let client = c.client().await;
    let p = c
        .wait_pod(&client, "steady", "still Running", UP, |p| {
            phase(p) == "Running"
        })
        .await;
    assert_eq!(restarts(&p, 0), 0);
}
