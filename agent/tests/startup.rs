//! The agent after a host reboot: started before the control plane and
//! before Docker answer, it waits for both (saying so, and reporting the
//! runtime as down on its Node once the control plane hears it) and comes
//! up once they do, on the real Docker Engine.

mod cluster;

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cluster::{wait_for, Cluster, BUSYBOX};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use serde_json::json;

/// A Unix socket that passes every connection on to the engine's own
/// socket: "Docker answers" once it exists.
struct DockerSocketProxy {
    path: PathBuf,
    stop: Arc<AtomicBool>,
}

impl DockerSocketProxy {
    fn start(path: &Path) -> DockerSocketProxy {
        let engine = std::env::var("DOCKER_HOST")
            .ok()
            .and_then(|h| h.strip_prefix("unix://").map(String::from))
            .unwrap_or_else(|| "/var/run/docker.sock".into());
        let listener = UnixListener::bind(path).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = UnixStream::connect(&engine) else {
                    continue;
                };
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Write);
                    });
                }
            }
        });
        DockerSocketProxy {
            path: path.to_path_buf(),
            stop,
        }
    }
}

impl Drop for DockerSocketProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop up to see the flag.
        let _ = UnixStream::connect(&self.path);
        let _ = std::fs::remove_file(&self.path);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_started_before_docker_and_the_control_plane_comes_up_once_they_answer() {
    let sockets = tempfile::tempdir().unwrap();
    let socket = sockets.path().join("docker.sock");
    let docker_host = format!("unix://{}", socket.display());
    let mut c = Cluster::start_with(&["--docker-host", &docker_host]);
    // As after a reboot: nothing answers yet when the agent starts.
    c.stop_agent();
    c.stop_control();
    c.start_agent();
    wait_for(
        "the agent to say it waits for the control plane",
        Duration::from_secs(60),
        || {
            c.agent_log()
                .contains("waiting for the control plane")
                .then_some(())
        },
    );
    assert!(!c.agent_exited(0), "the agent gave up:\n{}", c.agent_log());

    // The control plane comes: the Node says why it is not Ready.
    c.start_control();
    let client = c.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let ready_condition = |n: Node| {
        n.status
            .and_then(|s| s.conditions)
            .and_then(|cs| cs.into_iter().find(|c| c.type_ == "Ready"))
    };
    let message = c
        .poll(
            "the node to report the runtime down",
            Duration::from_secs(60),
            || async {
                let cond = ready_condition(nodes.get_opt(&c.node).await.ok()??)?;
                (cond.status == "False").then_some(cond.message.unwrap_or_default())
            },
        )
        .await;
    assert!(
        message.starts_with("container runtime is down"),
        "{message}"
    );
    assert!(!c.agent_exited(0), "the agent gave up:\n{}", c.agent_log());

    // Docker answers: the node becomes Ready and runs a pod.
    let _docker = DockerSocketProxy::start(&socket);
    c.poll(
        "the node to become Ready",
        Duration::from_secs(60),
        || async {
            let cond = ready_condition(nodes.get_opt(&c.node).await.ok()??)?;
            (cond.status == "True").then_some(())
        },
    )
    .await;
    c.create_pod(
        &client,
        json!({
            "metadata": {"name": "after-reboot"},
            "spec": {"containers": [{"name": "c", "image": BUSYBOX, "command": ["sleep", "3600"]}]}
        }),
    )
    .await;
    c.wait_pod(
        &client,
        "after-reboot",
        "Running",
        Duration::from_secs(60),
        |p| p["status"]["phase"] == "Running",
    )
    .await;
}
