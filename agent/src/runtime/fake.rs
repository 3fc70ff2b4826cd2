//! A fake container runtime, for unit tests and hollow nodes: containers
//! are records in memory; a test decides when they exit and with what code.
//!
//! A unit test's fake records every call and knows only the images it was
//! given. A hollow node's ([`FakeRuntime::hollow`]) has every image, keeps
//! no call log (it would grow without bound), and gives each sandbox a free
//! address of the node's pod CIDR, freed when the sandbox is removed.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::Mutex;
use std::time::Duration;

use chrono::Utc;

use bytes::Bytes;
use futures::StreamExt;
use tokio::io::AsyncReadExt;

use super::{
    ByteStream, ContainerConfig, ContainerInfo, ContainerRuntime, ContainerState, ContainerUsage,
    ExecOutput, LogOptions, Output, PodRef, Result, Role, RuntimeError, SandboxConfig, Session,
    SessionId, StreamFlags,
};

#[derive(Debug, Clone)]
pub struct FakeContainer {
    pub info: ContainerInfo,
    pub node: String,
    pub config: Option<ContainerConfig>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    containers: BTreeMap<String, FakeContainer>,
    images: BTreeMap<String, String>,
    calls: Vec<String>,
    exec_results: BTreeMap<String, i64>,
    logs: BTreeMap<String, String>,
    usage: BTreeMap<String, ContainerUsage>,
    hollow: Option<Hollow>,
}

/// What makes a fake a hollow node's.
struct Hollow {
    pod_cidr: ipnet::Ipv4Net,
    /// The sandbox addresses in use.
    used: BTreeSet<Ipv4Addr>,
}

impl Hollow {
    /// The lowest free address of the pod CIDR after its gateway (the
    /// first host address, which the real agent's bridge takes).
    fn allocate(&mut self) -> Option<Ipv4Addr> {
        let ip = self
            .pod_cidr
            .hosts()
            .skip(1)
            .find(|ip| !self.used.contains(ip))?;
        self.used.insert(ip);
        Some(ip)
    }
}

impl State {
    fn record(&mut self, call: String) {
        if self.hollow.is_none() {
            self.calls.push(call);
        }
    }

    /// The id of `image`: a hollow node has every image.
    fn image(&self, image: &str) -> Option<String> {
        match self.hollow {
            Some(_) => Some(format!("sha256:hollow-{image}")),
            None => self.images.get(image).cloned(),
        }
    }
}

/// Containers in memory; every call is recorded.
#[derive(Default)]
pub struct FakeRuntime {
    state: Mutex<State>,
}

impl FakeRuntime {
    pub fn new() -> Self {
        Self::default()
    }

    /// A hollow node's runtime: every image is there, nothing is recorded,
    /// and sandboxes get addresses of `pod_cidr`.
    pub fn hollow(pod_cidr: ipnet::Ipv4Net) -> Self {
        let state = State {
            hollow: Some(Hollow {
                pod_cidr,
                used: BTreeSet::new(),
            }),
            ..State::default()
        };
        FakeRuntime {
            state: Mutex::new(state),
        }
    }

    /// Makes `image` present.
    pub fn add_image(&self, image: &str) {
        let mut st = self.state.lock().unwrap();
        let id = format!("sha256:{:x}", image.len() * 7919);
        st.images.insert(image.to_string(), id);
    }

    /// Sets what [`ContainerRuntime::container_usage`] reports for `id`.
    pub fn set_usage(&self, id: &str, usage: ContainerUsage) {
        self.state
            .lock()
            .unwrap()
            .usage
            .insert(id.to_string(), usage);
    }

    /// The calls made so far, like `create app web`.
    pub fn calls(&self) -> Vec<String> {
        self.state.lock().unwrap().calls.clone()
    }

    pub fn containers(&self) -> Vec<FakeContainer> {
        self.state
            .lock()
            .unwrap()
            .containers
            .values()
            .cloned()
            .collect()
    }

    /// Makes a running container exit with `code`.
    pub fn exit(&self, id: &str, code: i64) {
        let mut st = self.state.lock().unwrap();
        if let Some(c) = st.containers.get_mut(id) {
            c.info.state = ContainerState::Exited;
            c.info.exit_code = Some(code);
            c.info.finished_at = Some(Utc::now());
        }
    }

    /// The exit code `exec` returns in container `id` (0 if never set).
    pub fn set_exec_result(&self, id: &str, code: i64) {
        self.state
            .lock()
            .unwrap()
            .exec_results
            .insert(id.to_string(), code);
    }

    /// What the container `id` has logged so far.
    pub fn set_logs(&self, id: &str, text: &str) {
        self.state
            .lock()
            .unwrap()
            .logs
            .insert(id.to_string(), text.to_string());
    }

    fn record(&self, call: String) {
        self.state.lock().unwrap().record(call);
    }
}

#[async_trait::async_trait]
impl ContainerRuntime for FakeRuntime {
    async fn version(&self) -> Result<String> {
        Ok("fake://1.0".into())
    }

    async fn ensure_network(&self, name: &str, subnet: &str, _node: &str) -> Result<()> {
        self.record(format!("network {name} {subnet}"));
        Ok(())
    }

    async fn image_id(&self, image: &str) -> Result<Option<String>> {
        Ok(self.state.lock().unwrap().image(image))
    }

    async fn pull_image(
        &self,
        image: &str,
        progress: &(dyn for<'a> Fn(&'a str) + Send + Sync),
    ) -> Result<String> {
        self.record(format!("pull {image}"));
        progress("pulling");
        self.state
            .lock()
            .unwrap()
            .image(image)
            .ok_or_else(|| RuntimeError::PullFailed {
                image: image.to_string(),
                message: "not found in the fake registry".into(),
            })
    }

    async fn ensure_pause_image(&self) -> Result<String> {
        self.add_image("bosun.local/pause:fake");
        Ok("bosun.local/pause:fake".into())
    }

    async fn run_sandbox(&self, node: &str, config: &SandboxConfig) -> Result<String> {
        let mut guard = self.state.lock().unwrap();
        let st = &mut *guard;
        st.next_id += 1;
        let id = format!("c{}", st.next_id);
        let ip = match (&mut st.hollow, config.host_network) {
            (_, true) => None,
            (Some(h), false) => Some(
                h.allocate()
                    .ok_or_else(|| {
                        RuntimeError::Docker(format!("no free address in {}", h.pod_cidr))
                    })?
                    .to_string(),
            ),
            (None, false) => Some(format!("10.244.0.{}", st.next_id % 250 + 2)),
        };
        st.record(format!("sandbox {}", config.pod.name));
        st.containers.insert(
            id.clone(),
            FakeContainer {
                node: node.to_string(),
                config: None,
                info: ContainerInfo {
                    id: id.clone(),
                    pod: config.pod.clone(),
                    role: Role::Sandbox,
                    name: super::SANDBOX_CONTAINER.into(),
                    state: ContainerState::Running,
                    exit_code: None,
                    reason: None,
                    created_at: Some(Utc::now()),
                    started_at: Some(Utc::now()),
                    finished_at: None,
                    image: "bosun.local/pause:fake".into(),
                    image_id: "sha256:pause".into(),
                    restart_count: 0,
                    spec_hash: String::new(),
                    ip,
                },
            },
        );
        Ok(id)
    }

    async fn create_container(
        &self,
        node: &str,
        pod: &PodRef,
        role: Role,
        _sandbox_id: &str,
        config: &ContainerConfig,
    ) -> Result<String> {
        let mut st = self.state.lock().unwrap();
        let image_id = st
            .image(&config.image)
            .ok_or_else(|| RuntimeError::ImageNotFound(config.image.clone()))?;
        st.next_id += 1;
        let id = format!("c{}", st.next_id);
        st.record(format!("create {} {}", role.as_str(), config.name));
        st.containers.insert(
            id.clone(),
            FakeContainer {
                node: node.to_string(),
                config: Some(config.clone()),
                info: ContainerInfo {
                    id: id.clone(),
                    pod: pod.clone(),
                    role,
                    name: config.name.clone(),
                    state: ContainerState::Created,
                    exit_code: None,
                    reason: None,
                    created_at: Some(Utc::now()),
                    started_at: None,
                    finished_at: None,
                    image: config.image.clone(),
                    image_id,
                    restart_count: config.restart_count,
                    spec_hash: config.spec_hash.clone(),
                    ip: None,
                },
            },
        );
        Ok(id)
    }

    async fn start_container(&self, id: &str) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        let c = st
            .containers
            .get_mut(id)
            .ok_or_else(|| RuntimeError::NotFound(id.to_string()))?;
        c.info.state = ContainerState::Running;
        c.info.started_at = Some(Utc::now());
        let name = c.info.name.clone();
        st.record(format!("start {name}"));
        Ok(())
    }

    async fn stop_container(&self, id: &str, _grace: Duration) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        if let Some(c) = st.containers.get_mut(id) {
            if c.info.state == ContainerState::Running {
                c.info.state = ContainerState::Exited;
                c.info.exit_code = Some(137);
                c.info.finished_at = Some(Utc::now());
            }
            let name = c.info.name.clone();
            st.record(format!("stop {name}"));
        }
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<()> {
        let mut guard = self.state.lock().unwrap();
        let st = &mut *guard;
        if let Some(c) = st.containers.remove(id) {
            if let (Some(h), Some(ip)) = (&mut st.hollow, &c.info.ip) {
                if let Ok(ip) = ip.parse() {
                    h.used.remove(&ip);
                }
            }
            st.record(format!("remove {}", c.info.name));
        }
        Ok(())
    }

    async fn list_containers(&self, node: &str) -> Result<Vec<ContainerInfo>> {
        Ok(self
            .state
            .lock()
            .unwrap()
            .containers
            .values()
            .filter(|c| c.node == node)
            .map(|c| c.info.clone())
            .collect())
    }

    async fn inspect_container(&self, id: &str) -> Result<ContainerInfo> {
        self.state
            .lock()
            .unwrap()
            .containers
            .get(id)
            .map(|c| c.info.clone())
            .ok_or_else(|| RuntimeError::NotFound(id.to_string()))
    }

    async fn exec(&self, id: &str, cmd: &[String], _timeout: Duration) -> Result<ExecOutput> {
        self.record(format!("exec {id} {}", cmd.join(" ")));
        let code = self
            .state
            .lock()
            .unwrap()
            .exec_results
            .get(id)
            .copied()
            .unwrap_or(0);
        Ok(ExecOutput {
            exit_code: code,
            stdout: Vec::new(),
            stderr: Vec::new(),
        })
    }

    async fn logs_tail(&self, _id: &str, _tail: usize) -> Result<String> {
        Ok(String::new())
    }

    async fn logs_stream(&self, id: &str, options: &LogOptions) -> Result<ByteStream> {
        self.record(format!("logs {id}"));
        let text = self
            .state
            .lock()
            .unwrap()
            .logs
            .get(id)
            .cloned()
            .ok_or_else(|| RuntimeError::NotFound(id.to_string()))?;
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let skip = options
            .tail_lines
            .map_or(0, |n| lines.len().saturating_sub(n as usize));
        let chunks: Vec<Result<Bytes>> = lines[skip..]
            .iter()
            .map(|l| Ok(Bytes::from(l.to_string())))
            .collect();
        Ok(Box::pin(futures::stream::iter(chunks)))
    }

    /// Prints the command line on stdout, then echoes stdin back.
    async fn exec_session(&self, id: &str, cmd: &[String], flags: StreamFlags) -> Result<Session> {
        self.record(format!("exec-session {id} {}", cmd.join(" ")));
        let banner = Output::Stdout(Bytes::from(format!("{}\n", cmd.join(" "))));
        let mut session = echo_session(SessionId::Exec(id.to_string()), flags);
        session.output = Box::pin(futures::stream::iter([Ok(banner)]).chain(session.output));
        Ok(session)
    }

    /// Echoes stdin back on stdout.
    async fn attach_session(&self, id: &str, flags: StreamFlags) -> Result<Session> {
        self.record(format!("attach {id}"));
        Ok(echo_session(SessionId::Attach(id.to_string()), flags))
    }

    async fn resize_session(&self, session: &SessionId, width: u16, height: u16) -> Result<()> {
        self.record(format!("resize {session:?} {width}x{height}"));
        Ok(())
    }

    async fn session_exit_code(&self, session: &SessionId) -> Result<Option<i64>> {
        Ok(match session {
            SessionId::Exec(id) => Some(
                self.state
                    .lock()
                    .unwrap()
                    .exec_results
                    .get(id)
                    .copied()
                    .unwrap_or(0),
            ),
            SessionId::Attach(_) => None,
        })
    }

    async fn container_usage(&self, id: &str) -> Result<ContainerUsage> {
        let st = self.state.lock().unwrap();
        if !st.containers.contains_key(id) {
            return Err(RuntimeError::NotFound(id.to_string()));
        }
        Ok(st.usage.get(id).copied().unwrap_or(ContainerUsage {
            cpu_usage_nanos: 0,
            memory_working_set_bytes: 0,
        }))
    }
}

/// A session whose stdin comes back on stdout; it ends when stdin is shut down.
fn echo_session(id: SessionId, flags: StreamFlags) -> Session {
    let (input, reader) = tokio::io::duplex(64 * 1024);
    let output = futures::stream::unfold(Some(reader), move |reader| async move {
        let mut reader = reader?;
        let mut buf = vec![0u8; 4096];
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Output::Stdout(Bytes::from(buf))), Some(reader)))
            }
        }
    });
    let _ = flags;
    Session {
        id,
        output: Box::pin(output),
        input: Box::pin(input),
    }
}
