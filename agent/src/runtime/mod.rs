//! The container runtime the agent drives: Docker in production
//! ([`docker::DockerRuntime`]), a fake in memory for unit tests and hollow
//! nodes ([`fake::FakeRuntime`]).
//!
//! The interface is pod-shaped, like Kubernetes' CRI: a *sandbox* (the
//! pause container) owns a pod's network, IPC and UTS namespaces; app and
//! init containers join it. Everything created carries labels naming the
//! node, the pod and the container, so an agent finds its own after a
//! restart and never touches another node's.

pub mod docker;
pub mod fake;

use std::collections::BTreeMap;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::Stream;
use tokio::io::AsyncWrite;

/// Labels on every container and network bosun makes.
pub mod labels {
    pub const NODE: &str = "io.bosun.node";
    pub const POD_NAMESPACE: &str = "io.bosun.pod.namespace";
    pub const POD_NAME: &str = "io.bosun.pod.name";
    pub const POD_UID: &str = "io.bosun.pod.uid";
    /// The container's name in the pod spec; `POD` for the sandbox.
    pub const CONTAINER: &str = "io.bosun.container";
    /// `sandbox`, `init`, `app` or `ephemeral`.
    pub const ROLE: &str = "io.bosun.role";
    /// How many times this container was restarted before this instance.
    pub const RESTART_COUNT: &str = "io.bosun.restart-count";
    /// A hash of the container's spec, to tell when it changed.
    pub const SPEC_HASH: &str = "io.bosun.spec-hash";
}

/// The sandbox's container name in `labels::CONTAINER`.
pub const SANDBOX_CONTAINER: &str = "POD";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Sandbox,
    Init,
    App,
    /// An ephemeral (debug) container: started once, never restarted.
    Ephemeral,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Sandbox => "sandbox",
            Role::Init => "init",
            Role::App => "app",
            Role::Ephemeral => "ephemeral",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "sandbox" => Some(Role::Sandbox),
            "init" => Some(Role::Init),
            "app" => Some(Role::App),
            "ephemeral" => Some(Role::Ephemeral),
            _ => None,
        }
    }
}

/// Which pod a container belongs to, as its labels say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMapping {
    pub container_port: u16,
    pub host_port: u16,
    /// `tcp`, `udp` or `sctp`.
    pub protocol: String,
    pub host_ip: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsConfig {
    pub servers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

/// What the pause container is made with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    pub pod: PodRef,
    /// The pod's hostname (spec.hostname or the pod name).
    pub hostname: String,
    /// `<hostname>.<subdomain>.<ns>.svc.<domain>` when spec.subdomain is set.
    pub fqdn: Option<String>,
    /// The Docker network pods of this node live on; ignored with host_network.
    pub network: String,
    pub host_network: bool,
    pub host_ipc: bool,
    pub host_pid: bool,
    pub dns: DnsConfig,
    pub ports: Vec<PortMapping>,
    /// `hostAliases`: extra /etc/hosts lines (ip, names).
    pub extra_hosts: Vec<(String, Vec<String>)>,
    /// The engine's runtime for the pod (its RuntimeClass's handler);
    /// None: the engine's default.
    pub runtime: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub host_path: String,
    pub container_path: String,
    pub read_only: bool,
}

/// What an app or init container is made with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerConfig {
    /// The container's name in the pod spec.
    pub name: String,
    pub image: String,
    /// Replaces the image's entrypoint when non-empty (`command`).
    pub entrypoint: Vec<String>,
    /// Replaces the image's cmd when non-empty (`args`).
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub working_dir: Option<String>,
    pub mounts: Vec<Mount>,
    pub stdin: bool,
    pub stdin_once: bool,
    pub tty: bool,
    /// resources.limits.memory in bytes.
    pub memory_limit: Option<i64>,
    /// resources.limits.cpu in millicores.
    pub cpu_limit_millis: Option<i64>,
    /// resources.requests.cpu in millicores (cpu shares).
    pub cpu_request_millis: Option<i64>,
    pub privileged: bool,
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    /// Extra groups of the container's process: the pod's
    /// `supplementalGroups` and its `fsGroup`, which owns its volumes'
    /// files (as the kubelet adds them).
    pub supplemental_groups: Vec<i64>,
    pub read_only_root_fs: bool,
    pub cap_add: Vec<String>,
    pub cap_drop: Vec<String>,
    /// Join the sandbox's PID namespace (shareProcessNamespace).
    pub share_pid: bool,
    /// Use the host's PID namespace (hostPID).
    pub host_pid: bool,
    /// Join this container's PID namespace instead (an ephemeral
    /// container's `targetContainerName`, by the engine's id).
    pub pid_target: Option<String>,
    /// Use the host's network (hostNetwork); otherwise the sandbox's.
    pub host_network: bool,
    /// Use the host's IPC namespace (hostIPC); otherwise the sandbox's.
    pub host_ipc: bool,
    pub restart_count: u32,
    pub spec_hash: String,
    /// Extra labels (the runtime adds the identity labels itself).
    pub labels: BTreeMap<String, String>,
    /// The engine's runtime, the sandbox's (its RuntimeClass's handler);
    /// None: the engine's default.
    pub runtime: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerState {
    Created,
    Running,
    Exited,
    /// Paused, restarting, dead, removing: not something bosun asked for.
    Unknown,
}

/// A container as the runtime reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerInfo {
    pub id: String,
    pub pod: PodRef,
    pub role: Role,
    /// Name in the pod spec (`POD` for the sandbox).
    pub name: String,
    pub state: ContainerState,
    pub exit_code: Option<i64>,
    /// Docker's `State.Error` or OOMKilled, when there is one.
    pub reason: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub image: String,
    pub image_id: String,
    pub restart_count: u32,
    pub spec_hash: String,
    /// The sandbox's IP on the pod network.
    pub ip: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    pub exit_code: i64,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// One reading of a container's resource use, as the engine's stats
/// give it (cumulative CPU time, so a rate needs two readings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainerUsage {
    /// CPU time used since the container started, in nanoseconds.
    pub cpu_usage_nanos: u64,
    /// Memory in use minus the inactive page cache (the kubelet's
    /// `workingSetBytes`, `docker stats`' MEM USAGE).
    pub memory_working_set_bytes: u64,
}

/// A container's log bytes as they come.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes>> + Send>>;

/// Which part of a container's log to read (the kubelet's `PodLogOptions`
/// that the engine handles; `limitBytes` and `previous` are the caller's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// Keep the stream open and send new lines as they are written.
    pub follow: bool,
    /// Only the last this many lines.
    pub tail_lines: Option<u64>,
    /// Prefix each line with its RFC 3339 timestamp.
    pub timestamps: bool,
    /// Only lines written at or after this Unix time, in seconds.
    pub since_unix: Option<i64>,
}

/// The streams an interactive session wants.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamFlags {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    /// A terminal: output comes as one stream, on stdout.
    pub tty: bool,
}

/// A chunk of a session's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Stdout(Bytes),
    Stderr(Bytes),
}

/// What an interactive session runs in, to resize its terminal or read
/// its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionId {
    /// An exec instance, by the engine's exec id.
    Exec(String),
    /// An attach to a container's main process, by container id.
    Attach(String),
}

/// A running exec or attach: its output until the process ends (or the
/// attach is dropped), and its stdin.
pub struct Session {
    pub id: SessionId,
    pub output: Pin<Box<dyn Stream<Item = Result<Output>> + Send>>,
    /// Shutting it down closes the process's stdin (exec only; an attached
    /// container keeps its stdin unless it has `stdinOnce`).
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("id", &self.id).finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("image {0} not found")]
    ImageNotFound(String),
    #[error("pulling image {image}: {message}")]
    PullFailed { image: String, message: String },
    #[error("container {0} not found")]
    NotFound(String),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Docker(String),
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

/// What the agent needs of a container engine.
#[async_trait::async_trait]
pub trait ContainerRuntime: Send + Sync + 'static {
    /// The engine's name and version, for Node status (`docker://28.2.2`).
    async fn version(&self) -> Result<String>;

    /// Makes sure the node's pod network exists with `subnet` (a CIDR),
    /// labelled with the node's name.
    async fn ensure_network(&self, name: &str, subnet: &str, node: &str) -> Result<()>;

    /// The image's id, if the engine has it.
    async fn image_id(&self, image: &str) -> Result<Option<String>>;

    /// Pulls `image`; `progress` hears each status line. Returns its id.
    ///
    /// (`for<'a>` is spelled out because `#[async_trait]` would otherwise
    /// tie the line's lifetime to the call's, so an implementation could
    /// not hand it a line it just formatted.)
    async fn pull_image(
        &self,
        image: &str,
        progress: &(dyn for<'a> Fn(&'a str) + Send + Sync),
    ) -> Result<String>;

    /// Makes sure the pause image exists (importing the one built into the
    /// agent) and returns its reference.
    async fn ensure_pause_image(&self) -> Result<String>;

    /// Creates and starts a pod's pause container; returns its id.
    async fn run_sandbox(&self, node: &str, config: &SandboxConfig) -> Result<String>;

    /// Creates (does not start) a container joined to `sandbox_id`.
    async fn create_container(
        &self,
        node: &str,
        pod: &PodRef,
        role: Role,
        sandbox_id: &str,
        config: &ContainerConfig,
    ) -> Result<String>;

    async fn start_container(&self, id: &str) -> Result<()>;

    /// Sends SIGTERM, then SIGKILL after `grace`. Stopping a stopped or
    /// missing container is not an error.
    async fn stop_container(&self, id: &str, grace: Duration) -> Result<()>;

    /// Removes a container (and its anonymous volumes), killing it first
    /// if it still runs; a missing one is not an error.
    async fn remove_container(&self, id: &str) -> Result<()>;

    /// Every container labelled with `node`, running or not.
    async fn list_containers(&self, node: &str) -> Result<Vec<ContainerInfo>>;

    /// The containers of pod `uid` on `node` (every instance, the sandbox
    /// too), running or not.
    async fn list_pod_containers(&self, node: &str, uid: &str) -> Result<Vec<ContainerInfo>> {
        let all = self.list_containers(node).await?;
        Ok(all.into_iter().filter(|c| c.pod.uid == uid).collect())
    }

    async fn inspect_container(&self, id: &str) -> Result<ContainerInfo>;

    /// Runs `cmd` in a running container and waits up to `timeout`.
    async fn exec(&self, id: &str, cmd: &[String], timeout: Duration) -> Result<ExecOutput>;

    /// The container's last `tail` log lines (stdout and stderr), for
    /// termination messages and tests.
    async fn logs_tail(&self, id: &str, tail: usize) -> Result<String>;

    /// A container's log as a stream (stdout and stderr, interleaved as
    /// written).
    async fn logs_stream(&self, id: &str, options: &LogOptions) -> Result<ByteStream>;

    /// Starts `cmd` in a running container with the streams `flags` asks
    /// for attached.
    async fn exec_session(&self, id: &str, cmd: &[String], flags: StreamFlags) -> Result<Session>;

    /// Attaches to a running container's main process.
    async fn attach_session(&self, id: &str, flags: StreamFlags) -> Result<Session>;

    /// Resizes a session's terminal.
    async fn resize_session(&self, session: &SessionId, width: u16, height: u16) -> Result<()>;

    /// The exit code of an exec session whose output has ended (`None` for
    /// an attach, or an exec the engine lost).
    async fn session_exit_code(&self, session: &SessionId) -> Result<Option<i64>>;

    /// One reading of a running container's CPU and memory (a single
    /// request, no stream held open).
    async fn container_usage(&self, id: &str) -> Result<ContainerUsage>;

    /// The host PID of a running container's main process, when the
    /// engine runs on this host (its network namespace is then
    /// `/proc/PID/ns/net`); `None` for a remote engine or a runtime without
    /// processes, whose pods are reached by their IP instead.
    async fn container_pid(&self, _id: &str) -> Result<Option<u32>> {
        Ok(None)
    }
}
