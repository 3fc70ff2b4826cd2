//! A recording fake of the runtime, for unit tests (and later hollow
//! nodes): containers are records in memory; a test decides when they
//! exit and with what code.

use std::collections::BTreeMap;
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
        self.state.lock().unwrap().calls.push(call);
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
        Ok(self.state.lock().unwrap().images.get(image).cloned())
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
            .images
            .get(image)
            .cloned()
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
        let mut st = self.state.lock().unwrap();
        st.next_id += 1;
        let id = format!("c{}", st.next_id);
        let ip = format!("10.244.0.{}", st.next_id % 250 + 2);
        st.calls.push(format!("sandbox {}", config.pod.name));
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
                    ip: (!config.host_network).then_some(ip),
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
            .images
            .get(&config.image)
            .cloned()
            .ok_or_else(|| RuntimeError::ImageNotFound(config.image.clone()))?;
        st.next_id += 1;
        let id = format!("c{}", st.next_id);
        st.calls
            .push(format!("create {} {}", role.as_str(), config.name));
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
        st.calls.push(format!("start {name}"));
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
            st.calls.push(format!("stop {name}"));
        }
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        if let Some(c) = st.containers.remove(id) {
            st.calls.push(format!("remove {}", c.info.name));
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
