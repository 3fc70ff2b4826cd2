//! The Docker implementation of [`super::ContainerRuntime`], through bollard.
//!
//! A pod is a pause container (the *sandbox*, image
//! `bosun.local/pause:<version>`, built from `pause/pause.c` and carried
//! inside the agent) on the node's bridge network, plus app and init
//! containers that join its network, IPC and UTS namespaces
//! (`container:<sandbox>` modes) and, with `shareProcessNamespace`, its PID
//! namespace. Docker gives the sandbox its IP from the network's subnet; the
//! joined containers share it, its `/etc/hosts` and its `/etc/resolv.conf`.
//!
//! Container names are `bosun_<ns>_<pod>_<uid8>_POD` for sandboxes and
//! `bosun_<ns>_<pod>_<uid8>_<container>_<restartCount>` for the others; the
//! labels in [`super::labels`] are what bosun reads back, never the names.
//!
//! This file holds the connection and the trait's implementation, which
//! hands each call to the file of its concern: `network`, `images`,
//! `sandbox`, `containers` and `streams` (exec, logs, attach); `errors`
//! maps Docker's errors to bosun's.

mod containers;
mod errors;
mod images;
mod inspected;
mod network;
mod purge;
mod sandbox;
mod stats;
mod streams;

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use bollard::Docker;
use tokio::sync::OnceCell;

use self::errors::docker_err;
pub use self::images::PAUSE_REPOSITORY;
use super::{
    ByteStream, ContainerConfig, ContainerInfo, ContainerRuntime, ContainerUsage, ExecOutput,
    LogOptions, PodRef, Result, Role, RuntimeError, SandboxConfig, Session, SessionId, StreamFlags,
};

/// Label on app and init containers naming their sandbox's id.
pub const SANDBOX_ID_LABEL: &str = "io.bosun.sandbox-id";

const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// Requests time out after this long unless they say otherwise (stop with a
/// long grace period, pulls).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs pods on a Docker Engine.
pub struct DockerRuntime {
    /// Made at the first request that finds the engine there (after a
    /// reboot the agent may start before Docker has made its socket), the
    /// API version agreed on with it then (Debian's 20.10 speaks 1.41;
    /// bollard would ask for a newer one).
    docker: OnceCell<Docker>,
    host: String,
    /// Pod CIDRs whose iptables rule this runtime has already checked.
    iptables_done: Mutex<HashSet<String>>,
    /// Pod networks (name, subnet) found or made with that subnet: a burst of
    /// sandboxes does not inspect the network once each. Forgotten when a
    /// sandbox cannot be made, so the next sync looks again.
    networks_ok: Mutex<HashSet<(String, String)>>,
    /// The pause image's reference once it was found to be this agent's:
    /// a burst of sandboxes does not queue on the import lock to inspect
    /// it once each. Forgotten when Docker says the image is missing.
    pause_ok: Mutex<Option<String>>,
    /// What inspect said of the node's containers, by id.
    inspected: inspected::Inspected,
}

impl std::fmt::Debug for DockerRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerRuntime")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl DockerRuntime {
    /// Connects to the engine at `docker_host` (`unix:///path`, a bare socket
    /// path, or `tcp://` / `http://`), else at `$DOCKER_HOST`, else at
    /// `/var/run/docker.sock`. Nothing is sent until the first call.
    pub fn connect(docker_host: Option<&str>) -> Result<Self> {
        let host = match docker_host {
            Some(h) if !h.is_empty() => h.to_string(),
            _ => std::env::var("DOCKER_HOST")
                .ok()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| DEFAULT_HOST.to_string()),
        };
        if !(host.starts_with("unix://")
            || host.starts_with('/')
            || host.starts_with("tcp://")
            || host.starts_with("http://"))
        {
            return Err(RuntimeError::Docker(format!(
                "unsupported Docker host {host:?}: use unix:///path/to/docker.sock or tcp://host:port"
            )));
        }
        Ok(DockerRuntime {
            docker: OnceCell::new(),
            host,
            iptables_done: Mutex::new(HashSet::new()),
            networks_ok: Mutex::new(HashSet::new()),
            pause_ok: Mutex::new(None),
            inspected: Default::default(),
        })
    }

    fn open(host: &str) -> Result<Docker> {
        let timeout = REQUEST_TIMEOUT.as_secs();
        let version = bollard::API_DEFAULT_VERSION;
        if host.starts_with("unix://") || host.starts_with('/') {
            Docker::connect_with_unix(host, timeout, version)
        } else {
            Docker::connect_with_http(host, timeout, version)
        }
        .map_err(|e| RuntimeError::Docker(format!("talking to Docker at {host}: {e}")))
    }

    /// The engine address this runtime talks to.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The bollard client, after the API version was agreed on.
    pub async fn client(&self) -> Result<&Docker> {
        self.docker
            .get_or_try_init(|| async {
                let docker = Self::open(&self.host)?;
                docker.clone().negotiate_version().await.map_err(|e| {
                    RuntimeError::Docker(format!("talking to Docker at {}: {e}", self.host))
                })?;
                Ok(docker)
            })
            .await
    }
}

#[async_trait::async_trait]
impl ContainerRuntime for DockerRuntime {
    async fn version(&self) -> Result<String> {
        let v = self.client().await?.version().await.map_err(docker_err)?;
        Ok(format!("docker://{}", v.version.unwrap_or_default()))
    }

    async fn ensure_network(&self, name: &str, subnet: &str, node: &str) -> Result<()> {
        self.ensure_bridge_network(name, subnet, node).await
    }

    async fn image_id(&self, image: &str) -> Result<Option<String>> {
        self.inspect_image_id(image).await
    }

    async fn pull_image(
        &self,
        image: &str,
        progress: &(dyn for<'a> Fn(&'a str) + Send + Sync),
    ) -> Result<String> {
        self.pull(image, progress).await
    }

    async fn ensure_pause_image(&self) -> Result<String> {
        self.ensure_pause().await
    }

    async fn run_sandbox(&self, node: &str, config: &SandboxConfig) -> Result<String> {
        self.run_pause_container(node, config).await
    }

    async fn create_container(
        &self,
        node: &str,
        pod: &PodRef,
        role: Role,
        sandbox_id: &str,
        config: &ContainerConfig,
    ) -> Result<String> {
        let name = format!(
            "{}_{}",
            containers::container_name(pod, &config.name),
            config.restart_count
        );
        let identity = containers::identity_labels(node, pod, &config.name, role);
        let body = containers::joined_container_body(identity, sandbox_id, config);
        self.create_named(&name, body).await
    }

    async fn start_container(&self, id: &str) -> Result<()> {
        self.start(id).await
    }

    async fn stop_container(&self, id: &str, grace: Duration) -> Result<()> {
        self.stop(id, grace).await
    }

    async fn remove_container(&self, id: &str) -> Result<()> {
        self.remove(id).await
    }

    async fn list_containers(&self, node: &str) -> Result<Vec<ContainerInfo>> {
        self.list(node, None).await
    }

    async fn list_pod_containers(&self, node: &str, uid: &str) -> Result<Vec<ContainerInfo>> {
        self.list(node, Some(uid)).await
    }

    async fn inspect_container(&self, id: &str) -> Result<ContainerInfo> {
        containers::to_info(self.inspect_raw(id).await?)
    }

    async fn container_pid(&self, id: &str) -> Result<Option<u32>> {
        // Only a local engine's PIDs are this host's.
        if !(self.host.starts_with("unix://") || self.host.starts_with('/')) {
            return Ok(None);
        }
        let state = self.inspect_raw(id).await?.state.unwrap_or_default();
        Ok(state
            .pid
            .filter(|p| *p > 0 && state.running == Some(true))
            .and_then(|p| u32::try_from(p).ok()))
    }

    async fn exec(&self, id: &str, cmd: &[String], timeout: Duration) -> Result<ExecOutput> {
        self.exec_once(id, cmd, timeout).await
    }

    async fn logs_tail(&self, id: &str, tail: usize) -> Result<String> {
        self.tail_logs(id, tail).await
    }

    async fn logs_stream(&self, id: &str, options: &LogOptions) -> Result<ByteStream> {
        self.stream_logs(id, options).await
    }

    async fn exec_session(&self, id: &str, cmd: &[String], flags: StreamFlags) -> Result<Session> {
        self.start_exec_session(id, cmd, flags).await
    }

    async fn attach_session(&self, id: &str, flags: StreamFlags) -> Result<Session> {
        self.attach(id, flags).await
    }

    async fn resize_session(&self, session: &SessionId, width: u16, height: u16) -> Result<()> {
        self.resize(session, width, height).await
    }

    async fn session_exit_code(&self, session: &SessionId) -> Result<Option<i64>> {
        self.exec_exit_code(session).await
    }

    async fn container_usage(&self, id: &str) -> Result<ContainerUsage> {
        self.usage(id).await
    }
}
