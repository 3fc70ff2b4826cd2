//! SIGTERM with work attached: a control plane serving an agent and a
//! Deployment of 20 running pods stops within 5 s, every time, and comes
//! back on the same data dir and port; the agent stops as promptly and
//! leaves its pods running. (A stopping control plane's controllers used
//! to re-watch the API in a loop once its watches ended, and in one
//! benchmark run it never exited.)

mod cluster;

use std::time::Duration;

use cluster::{Cluster, BUSYBOX};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use kube::Client;

const REPLICAS: usize = 20;
const TRIES: usize = 20;
/// What a user (or systemd's stop, a supervisor) may expect.
const EXIT_WITHIN: Duration = Duration::from_secs(5);

/// How many of the Deployment's pods are Running, None if the API does
/// not answer.
async fn running(client: &Client) -> Option<usize> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let list = pods
        .list(&ListParams::default().labels("app=twenty"))
        .await
        .ok()?;
    Some(
        list.items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count(),
    )
}

/// The ids of the Docker containers running the pods' app containers.
fn app_containers(c: &Cluster) -> Vec<String> {
    let mut ids = c.docker_ids(&["io.bosun.container=app"]);
    ids.sort();
    ids
}

fn docker_running(ids: &[String]) -> usize {
    let out = std::process::Command::new("docker")
        .args(["inspect", "-f", "{{.State.Running}}"])
        .args(ids)
        .output()
        .expect("docker inspect");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim() == "true")
        .count()
}

fn summary(times: &[Duration]) -> String {
    let mut sorted = times.to_vec();
    sorted.sort();
    format!(
        "median {:?}, max {:?} over {} tries",
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1],
        sorted.len()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_a_busy_control_plane_within_5s_twenty_times_and_the_agent_promptly() {
    let mut c = Cluster::start();
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "twenty", "namespace": "default"},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": "twenty"}},
            "template": {
                "metadata": {"labels": {"app": "twenty"}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "app", "image": BUSYBOX,
                                    "command": ["sleep", "3600"]}],
                },
            },
        },
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    c.poll("20 pods Running", Duration::from_secs(180), || async {
        (running(&client).await == Some(REPLICAS)).then_some(())
    })
    .await;
    let containers = app_containers(&c);
    assert_eq!(containers.len(), REPLICAS, "{containers:?}");

    let mut times = Vec::new();
    for i in 0..TRIES {
        let took = c.stop_control().unwrap_or_else(|| {
            panic!(
                "try {i}: bosun-control still running 20 s after SIGTERM\ncontrol log tail:\n{}",
                cluster::tail(&c.control_log(), 30)
            )
        });
        assert!(
            took < EXIT_WITHIN,
            "try {i}: bosun-control took {took:?} to exit after SIGTERM (tries so far: {times:?})\ncontrol log tail:\n{}",
            cluster::tail(&c.control_log(), 30)
        );
        times.push(took);
        c.start_control();
        // Ready: it answers, and its pods are still all there and Running.
        let client = c.client().await;
        c.poll(
            "the restarted control plane to serve",
            Duration::from_secs(60),
            || async { (running(&client).await == Some(REPLICAS)).then_some(()) },
        )
        .await;
    }
    eprintln!("bosun-control exit after SIGTERM: {}", summary(&times));

    // The agent stops as promptly and leaves every pod running.
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let took = c
        .stop_agent()
        .expect("bosun-agent still running 20 s after SIGTERM");
    assert!(
        took < EXIT_WITHIN,
        "bosun-agent took {took:?} to exit after SIGTERM\nagent log tail:\n{}",
        cluster::tail(&c.agent_log(), 30)
    );
    eprintln!("bosun-agent exit after SIGTERM: {took:?}");
    assert_eq!(
        app_containers(&c),
        containers,
        "the pods' containers changed"
    );
    assert_eq!(
        docker_running(&containers),
        REPLICAS,
        "not every pod kept running"
    );
    // Neither log holds terminal escape codes (their stderr is a file).
    assert!(
        !c.control_log().contains('\u{1b}'),
        "an escape code in control.log"
    );
    assert!(
        !c.agent_log().contains('\u{1b}'),
        "an escape code in agent.log"
    );
}
