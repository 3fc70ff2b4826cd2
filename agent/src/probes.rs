//! Container probes and lifecycle hooks, by Kubernetes' rules.
//!
//! One [`ProbeRunner`] watches one container *instance*: it runs the
//! postStart hook (when the worker has just started the container), then
//! the startup, liveness and readiness probes, each on its own period. Its
//! results live in memory shared with the pod worker, which reads them on
//! every sync; a result that changes anything (readiness flips, startup
//! passes, a container must be killed, an `Unhealthy` event) wakes the
//! worker. A restarted container gets a new runner, so results never leak
//! from one instance to the next.
//!
//! The rules, as the kubelet applies them:
//! - each probe waits `initialDelaySeconds` from the container's start,
//!   then runs every `periodSeconds` (default 10) with `timeoutSeconds`
//!   (default 1) to answer;
//! - `failureThreshold` (default 3) consecutive failures or
//!   `successThreshold` (default 1; always 1 for liveness and startup)
//!   consecutive successes change the result;
//! - a startup probe gates the other two; until it passes the container is
//!   not `started` and not ready; once it passes it stops running;
//! - readiness starts false (when there is a readiness probe) and only
//!   ever changes `ready`;
//! - liveness or startup failing for good asks the worker to kill the
//!   container, which then restarts per restartPolicy; this runner stops.
//!
//! Probes and hooks reach the container by `exec` through the runtime, or
//! over the pod network from the agent (`httpGet`, `tcpSocket`) with a
//! minimal HTTP/1.1 client on a tokio `TcpStream`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, HTTPGetAction, LifecycleHandler, Pod, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use crate::runtime::{ContainerRuntime, RuntimeError};
use crate::worker::PodEvent;

/// How long a postStart hook may run (Kubernetes sets no bound; one that
/// hangs forever would keep the container waiting forever).
pub const POST_START_TIMEOUT: Duration = Duration::from_secs(300);

/// After a preStop hook, the container still gets at least this long
/// between SIGTERM and SIGKILL (the kubelet's minimum grace period).
pub const MIN_GRACE_AFTER_PRE_STOP: Duration = Duration::from_secs(2);

const USER_AGENT: &str = "kube-probe/1.35";

/// What a probe or a hook does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Exec(Vec<String>),
    HttpGet(HTTPGetAction),
    TcpSocket(TCPSocketAction),
    Sleep(Duration),
    /// A kind bosun cannot run (gRPC, an empty handler); it fails with this message.
    Unsupported(String),
}

impl Action {
    pub fn of_probe(p: &Probe) -> Action {
        if let Some(e) = &p.exec {
            Action::Exec(e.command.clone().unwrap_or_default())
        } else if let Some(h) = &p.http_get {
            Action::HttpGet(h.clone())
        } else if let Some(t) = &p.tcp_socket {
            Action::TcpSocket(t.clone())
        } else if p.grpc.is_some() {
            Action::Unsupported("gRPC probes are not supported by bosun".into())
        } else {
            Action::Unsupported("the probe has no handler".into())
        }
    }

    pub fn of_hook(h: &LifecycleHandler) -> Action {
        if let Some(e) = &h.exec {
            Action::Exec(e.command.clone().unwrap_or_default())
        } else if let Some(g) = &h.http_get {
            Action::HttpGet(g.clone())
        } else if let Some(s) = &h.sleep {
            Action::Sleep(Duration::from_secs(s.seconds.max(0) as u64))
        } else if let Some(t) = &h.tcp_socket {
            // Deprecated and never implemented by the kubelet either.
            let _ = t;
            Action::Unsupported("tcpSocket lifecycle hooks are not supported".into())
        } else {
            Action::Unsupported("the lifecycle hook has no handler".into())
        }
    }

    /// How a hook is named in its failure event, like the kubelet's
    /// `Exec lifecycle hook ([sh -c ...])`.
    fn hook_description(&self) -> String {
        match self {
            Action::Exec(cmd) => format!("Exec lifecycle hook ([{}])", cmd.join(" ")),
            Action::HttpGet(h) => format!(
                "HTTP lifecycle hook ({})",
                h.path.clone().unwrap_or_default()
            ),
            Action::Sleep(d) => format!("Sleep lifecycle hook ({})", d.as_secs()),
            Action::TcpSocket(_) | Action::Unsupported(_) => "Lifecycle hook".into(),
        }
    }
}

/// A probe's or hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Why it failed: the command's output, the HTTP status, the dial error.
    Failure(String),
}

/// Where probes and hooks of one container instance go.
#[derive(Clone)]
pub struct Target {
    pub rt: Arc<dyn ContainerRuntime>,
    pub container_id: String,
    /// The pod's IP (the node's with hostNetwork): the default host for
    /// httpGet and tcpSocket.
    pub pod_ip: Option<String>,
    /// The container's ports, to resolve a port given by name.
    pub ports: Vec<ContainerPort>,
}

/// A port given by number or by the name of one of the container's ports.
fn resolve_port(port: &IntOrString, ports: &[ContainerPort]) -> Result<u16, String> {
    let n = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(s) => match ports.iter().find(|p| p.name.as_deref() == Some(s)) {
            Some(p) => i64::from(p.container_port),
            None => s
                .parse::<i64>()
                .map_err(|_| format!("port {s:?} is not a port of the container"))?,
        },
    };
    u16::try_from(n)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("invalid port number {n}"))
}

/// A dial error the way Go (and so the kubelet's messages) words it.
fn dial_error(addr: &str, e: &std::io::Error) -> String {
    let what = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_string(),
        std::io::ErrorKind::TimedOut => "i/o timeout".to_string(),
        _ => format!("connect: {e}"),
    };
    format!("dial tcp {addr}: {what}")
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

impl Target {
    fn host(&self, explicit: Option<&String>) -> Result<String, String> {
        explicit
            .filter(|h| !h.is_empty())
            .cloned()
            .or_else(|| self.pod_ip.clone())
            .ok_or_else(|| "the pod has no IP yet".to_string())
    }

    /// Runs `action` once, bounded by `timeout`.
    pub async fn run(&self, action: &Action, timeout: Duration) -> Outcome {
        match action {
            Action::Exec(cmd) => self.exec(cmd, timeout).await,
            Action::HttpGet(h) => self.http_get(h, timeout).await,
            Action::TcpSocket(t) => self.tcp_socket(t, timeout).await,
            Action::Sleep(d) => {
                tokio::time::sleep((*d).min(timeout)).await;
                Outcome::Success
            }
            Action::Unsupported(why) => Outcome::Failure(why.clone()),
        }
    }

    async fn exec(&self, cmd: &[String], timeout: Duration) -> Outcome {
        if cmd.is_empty() {
            return Outcome::Failure("exec has no command".into());
        }
        let run = self.rt.exec(&self.container_id, cmd, timeout);
        // The runtime bounds the call itself; this bounds a runtime that does not.
        let result = match tokio::time::timeout(timeout + Duration::from_secs(1), run).await {
            Ok(r) => r,
            Err(_) => Err(RuntimeError::Timeout(timeout)),
        };
        match result {
            Ok(out) if out.exit_code == 0 => Outcome::Success,
            Ok(out) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&out.stderr));
                let text = text.trim();
                if text.is_empty() {
                    Outcome::Failure(format!(
                        "command {:?} exited with {}",
                        cmd.join(" "),
                        out.exit_code
                    ))
                } else {
                    Outcome::Failure(text.to_string())
                }
            }
            Err(RuntimeError::Timeout(_)) => {
                Outcome::Failure(format!("command {:?} timed out", cmd.join(" ")))
            }
            Err(e) => Outcome::Failure(e.to_string()),
        }
    }

    async fn tcp_socket(&self, t: &TCPSocketAction, timeout: Duration) -> Outcome {
        let (host, port) = match (
            self.host(t.host.as_ref()),
            resolve_port(&t.port, &self.ports),
        ) {
            (Ok(h), Ok(p)) => (h, p),
            (Err(e), _) | (_, Err(e)) => return Outcome::Failure(e),
        };
        let addr = host_port(&host, port);
        match tokio::time::timeout(timeout, TcpStream::connect(&addr)).await {
            Ok(Ok(_)) => Outcome::Success,
            Ok(Err(e)) => Outcome::Failure(dial_error(&addr, &e)),
            Err(_) => Outcome::Failure(format!("dial tcp {addr}: i/o timeout")),
        }
    }

    async fn http_get(&self, h: &HTTPGetAction, timeout: Duration) -> Outcome {
        let scheme = h.scheme.as_deref().unwrap_or("HTTP");
        if !scheme.eq_ignore_ascii_case("HTTP") {
            return Outcome::Failure(format!(
                "{scheme} probes are not supported by bosun (only HTTP)"
            ));
        }
        let (host, port) = match (
            self.host(h.host.as_ref()),
            resolve_port(&h.port, &self.ports),
        ) {
            (Ok(h), Ok(p)) => (h, p),
            (Err(e), _) | (_, Err(e)) => return Outcome::Failure(e),
        };
        let addr = host_port(&host, port);
        let mut path = h.path.clone().unwrap_or_default();
        if !path.starts_with('/') {
            path.insert(0, '/');
        }
        let url = format!("http://{addr}{path}");
        match tokio::time::timeout(timeout, http_status(&addr, &path, h)).await {
            Ok(Ok(code)) if (200..400).contains(&code) => Outcome::Success,
            Ok(Ok(code)) => Outcome::Failure(format!("HTTP probe failed with statuscode: {code}")),
            Ok(Err(e)) => Outcome::Failure(format!("Get \"{url}\": {e}")),
            Err(_) => Outcome::Failure(format!(
                "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
            )),
        }
    }
}

/// Sends `GET path` to `addr` and returns the response's status code.
async fn http_status(addr: &str, path: &str, h: &HTTPGetAction) -> Result<u16, String> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| dial_error(addr, &e))?;
    let mut headers: Vec<(String, String)> = vec![
        ("Host".into(), addr.to_string()),
        ("User-Agent".into(), USER_AGENT.into()),
        ("Accept".into(), "*/*".into()),
    ];
    let custom = h.http_headers.clone().unwrap_or_default();
    // A header the user sets replaces the default of that name.
    headers.retain(|(n, _)| !custom.iter().any(|c| c.name.eq_ignore_ascii_case(n)));
    headers.extend(custom.into_iter().map(|c| (c.name, c.value)));
    let mut request = format!("GET {path} HTTP/1.1\r\n");
    for (n, v) in headers {
        if n.contains(['\r', '\n']) || v.contains(['\r', '\n']) {
            return Err(format!("invalid header {n:?}"));
        }
        request.push_str(&format!("{n}: {v}\r\n"));
    }
    request.push_str("Connection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    while !buf.windows(2).any(|w| w == b"\r\n") && buf.len() < 8192 {
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&buf);
    let line = line.lines().next().unwrap_or_default();
    let mut parts = line.split_whitespace();
    match (
        parts.next(),
        parts.next().and_then(|c| c.parse::<u16>().ok()),
    ) {
        (Some(v), Some(code)) if v.starts_with("HTTP/") => Ok(code),
        _ => Err(format!("malformed HTTP response {line:?}")),
    }
}

/// Runs a preStop hook within `grace` and returns how long the container
/// then gets between SIGTERM and SIGKILL, and the hook's failure, if any.
///
/// As in the kubelet, the hook's time comes out of the grace period, but
/// at least [`MIN_GRACE_AFTER_PRE_STOP`] is left; with no grace at all
/// (a forced stop) the hook does not run.
pub async fn run_pre_stop(
    target: &Target,
    hook: Option<&LifecycleHandler>,
    grace: Duration,
) -> (Duration, Option<String>) {
    let Some(hook) = hook.filter(|_| !grace.is_zero()) else {
        return (grace, None);
    };
    let started = Instant::now();
    let action = Action::of_hook(hook);
    let failure = match tokio::time::timeout(grace, target.run(&action, grace)).await {
        Ok(Outcome::Success) => None,
        Ok(Outcome::Failure(msg)) => Some(msg),
        Err(_) => Some(format!("hook did not finish within {grace:?}")),
    };
    let left = grace
        .saturating_sub(started.elapsed())
        .max(MIN_GRACE_AFTER_PRE_STOP);
    (
        left,
        failure.map(|msg| format!("{}: {msg}", action.hook_description())),
    )
}

/// The kubelet's message for a failed lifecycle hook.
pub fn hook_failure_message(pod: &Pod, container: &str, failure: &str) -> String {
    format!(
        "{failure} (Container \"{container}\" in Pod \"{}_{}({})\")",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    Startup,
    Liveness,
    Readiness,
}

impl ProbeKind {
    pub fn label(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
        }
    }
}

/// One probe with Kubernetes' defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSpec {
    pub kind: ProbeKind,
    pub action: Action,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

fn secs(v: Option<i32>, default: i32, min: i32) -> Duration {
    Duration::from_secs(v.unwrap_or(default).max(min) as u64)
}

impl ProbeSpec {
    pub fn new(kind: ProbeKind, p: &Probe) -> ProbeSpec {
        let success = match kind {
            // Liveness and startup must succeed once; the API insists on 1.
            ProbeKind::Liveness | ProbeKind::Startup => 1,
            ProbeKind::Readiness => p.success_threshold.unwrap_or(1).max(1) as u32,
        };
        ProbeSpec {
            kind,
            action: Action::of_probe(p),
            initial_delay: secs(p.initial_delay_seconds, 0, 0),
            period: secs(p.period_seconds, 10, 1),
            timeout: secs(p.timeout_seconds, 1, 1),
            success_threshold: success,
            failure_threshold: p.failure_threshold.unwrap_or(3).max(1) as u32,
        }
    }

    /// The container's probes, startup first.
    pub fn of_container(c: &Container) -> Vec<ProbeSpec> {
        [
            (ProbeKind::Startup, &c.startup_probe),
            (ProbeKind::Liveness, &c.liveness_probe),
            (ProbeKind::Readiness, &c.readiness_probe),
        ]
        .into_iter()
        .filter_map(|(k, p)| p.as_ref().map(|p| ProbeSpec::new(k, p)))
        .collect()
    }
}

/// The postStart hook's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookState {
    /// Running; the container counts as not yet running.
    Running,
    /// Done, or there was none to run.
    Done,
    Failed(String),
}

/// Why the worker must kill the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillReason {
    Liveness,
    Startup,
    /// The postStart hook failed with this message.
    PostStart(String),
}

/// What the worker reads of a runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeView {
    /// The startup probe passed (true without one).
    pub started: bool,
    /// Readiness (true without a readiness probe).
    pub ready: bool,
    pub post_start: HookState,
    pub kill: Option<KillReason>,
}

#[derive(Debug)]
struct Shared {
    view: ProbeView,
    events: Vec<PodEvent>,
}

/// Probes (and the postStart hook of) one container instance, in a task
/// of its own that stops when the runner is dropped.
pub struct ProbeRunner {
    container_id: String,
    shared: Arc<Mutex<Shared>>,
    task: JoinHandle<()>,
}

impl Drop for ProbeRunner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ProbeRunner {
    /// Whether `c` needs a runner at all: it has a probe or a postStart hook.
    pub fn needed(c: &Container) -> bool {
        c.startup_probe.is_some()
            || c.liveness_probe.is_some()
            || c.readiness_probe.is_some()
            || c.lifecycle.as_ref().is_some_and(|l| l.post_start.is_some())
    }

    /// Starts watching the instance `target` points at, which started at
    /// `started_at`. `post_start` is the hook to run first (only for an
    /// instance the worker has just started). `wake` hears of every
    /// result that matters.
    pub fn start(
        target: Target,
        container: &Container,
        started_at: Option<DateTime<Utc>>,
        post_start: Option<Action>,
        wake: Arc<Notify>,
    ) -> ProbeRunner {
        Self::start_with(
            target,
            &container.name,
            ProbeSpec::of_container(container),
            started_at,
            post_start,
            wake,
        )
    }

    /// [`ProbeRunner::start`] with the probes given (tests use periods
    /// shorter than a second).
    pub fn start_with(
        target: Target,
        name: &str,
        probes: Vec<ProbeSpec>,
        started_at: Option<DateTime<Utc>>,
        post_start: Option<Action>,
        wake: Arc<Notify>,
    ) -> ProbeRunner {
        let has = |k: ProbeKind| probes.iter().any(|p| p.kind == k);
        let shared = Arc::new(Mutex::new(Shared {
            view: ProbeView {
                started: !has(ProbeKind::Startup),
                ready: !has(ProbeKind::Readiness),
                post_start: if post_start.is_some() {
                    HookState::Running
                } else {
                    HookState::Done
                },
                kill: None,
            },
            events: Vec::new(),
        }));
        let container_id = target.container_id.clone();
        let task = tokio::spawn(run_instance(
            target,
            name.to_string(),
            probes,
            started_at.unwrap_or_else(Utc::now),
            post_start,
            shared.clone(),
            wake,
        ));
        ProbeRunner {
            container_id,
            shared,
            task,
        }
    }

    /// The instance this runner watches.
    pub fn container_id(&self) -> &str {
        &self.container_id
    }

    pub fn view(&self) -> ProbeView {
        self.shared.lock().unwrap().view.clone()
    }

    /// The events recorded since the last call (`Unhealthy`, ...).
    pub fn take_events(&self) -> Vec<PodEvent> {
        std::mem::take(&mut self.shared.lock().unwrap().events)
    }
}

fn container_path(name: &str) -> Option<String> {
    Some(format!("spec.containers{{{name}}}"))
}

async fn run_instance(
    target: Target,
    name: String,
    probes: Vec<ProbeSpec>,
    started_at: DateTime<Utc>,
    post_start: Option<Action>,
    shared: Arc<Mutex<Shared>>,
    wake: Arc<Notify>,
) {
    if let Some(hook) = post_start {
        let outcome = target.run(&hook, POST_START_TIMEOUT).await;
        {
            let mut st = shared.lock().unwrap();
            match outcome {
                Outcome::Success => st.view.post_start = HookState::Done,
                Outcome::Failure(msg) => {
                    let msg = format!("{}: {msg}", hook.hook_description());
                    st.view.post_start = HookState::Failed(msg.clone());
                    st.view.kill = Some(KillReason::PostStart(msg));
                }
            }
        }
        wake.notify_one();
        if shared.lock().unwrap().view.kill.is_some() {
            return;
        }
    }
    let loops = probes
        .into_iter()
        .map(|p| probe_loop(&target, &name, p, started_at, &shared, &wake));
    futures::future::join_all(loops).await;
}

/// Runs one probe until it no longer has to: forever for readiness, until
/// the container must be killed for liveness, until it passes or fails
/// for good for startup.
async fn probe_loop(
    target: &Target,
    name: &str,
    spec: ProbeSpec,
    started_at: DateTime<Utc>,
    shared: &Mutex<Shared>,
    wake: &Notify,
) {
    let mut tick = tokio::time::interval(spec.period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last: Option<bool> = None;
    let mut run = 0u32;
    loop {
        tick.tick().await;
        {
            let st = shared.lock().unwrap();
            if st.view.kill.is_some() {
                return;
            }
            match spec.kind {
                ProbeKind::Startup if st.view.started => return,
                // Nothing but the startup probe runs before it passes.
                ProbeKind::Liveness | ProbeKind::Readiness if !st.view.started => continue,
                _ => {}
            }
        }
        let age = (Utc::now() - started_at).to_std().unwrap_or_default();
        if age < spec.initial_delay {
            continue;
        }
        let outcome = target.run(&spec.action, spec.timeout).await;
        let ok = outcome == Outcome::Success;
        if last == Some(ok) {
            run = run.saturating_add(1);
        } else {
            last = Some(ok);
            run = 1;
        }
        let mut changed = false;
        let mut done = false;
        {
            let mut st = shared.lock().unwrap();
            if st.view.kill.is_some() {
                return;
            }
            if let Outcome::Failure(msg) = &outcome {
                st.events.push(PodEvent {
                    type_: "Warning",
                    reason: "Unhealthy",
                    message: format!("{} probe failed: {msg}", spec.kind.label()),
                    field_path: container_path(name),
                });
                changed = true;
            }
            let threshold = if ok {
                spec.success_threshold
            } else {
                spec.failure_threshold
            };
            if run >= threshold {
                match (spec.kind, ok) {
                    (ProbeKind::Readiness, ready) => {
                        if st.view.ready != ready {
                            st.view.ready = ready;
                            changed = true;
                        }
                    }
                    (ProbeKind::Startup, true) => {
                        st.view.started = true;
                        changed = true;
                        done = true;
                    }
                    (ProbeKind::Startup, false) => {
                        st.view.kill = Some(KillReason::Startup);
                        changed = true;
                        done = true;
                    }
                    (ProbeKind::Liveness, false) => {
                        st.view.kill = Some(KillReason::Liveness);
                        changed = true;
                        done = true;
                    }
                    (ProbeKind::Liveness, true) => {}
                }
            }
        }
        if changed {
            wake.notify_one();
        }
        if done {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::fake::FakeRuntime;
    use k8s_openapi::api::core::v1::HTTPHeader;
    use serde_json::json;
    use tokio::net::TcpListener;

    fn target(rt: Arc<FakeRuntime>, ip: &str) -> Target {
        Target {
            rt,
            container_id: "c1".into(),
            pod_ip: Some(ip.into()),
            ports: vec![
                serde_json::from_value(json!({"name": "http", "containerPort": 1})).unwrap(),
            ],
        }
    }

    /// A one-request-at-a-time HTTP server answering `code`; returns its
    /// port and the requests it saw.
    async fn server(code: u16) -> (u16, Arc<Mutex<Vec<String>>>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap();
                log.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&buf[..n]).into_owned());
                let _ = s
                    .write_all(format!("HTTP/1.1 {code} X\r\nContent-Length: 0\r\n\r\n").as_bytes())
                    .await;
            }
        });
        (port, seen)
    }

    fn http(port: Value, path: &str) -> Action {
        Action::HttpGet(serde_json::from_value(json!({"port": port, "path": path})).unwrap())
    }

    use serde_json::Value;

    #[tokio::test]
    async fn http_get_succeeds_on_2xx_3xx_and_fails_otherwise() {
        let rt = Arc::new(FakeRuntime::new());
        for (code, ok) in [(200, true), (302, true), (404, false), (503, false)] {
            let (port, seen) = server(code).await;
            let out = target(rt.clone(), "127.0.0.1")
                .run(&http(json!(port), "healthz"), Duration::from_secs(1))
                .await;
            assert_eq!(out == Outcome::Success, ok, "{code}: {out:?}");
            if !ok {
                assert_eq!(
                    out,
                    Outcome::Failure(format!("HTTP probe failed with statuscode: {code}"))
                );
            }
            let req = seen.lock().unwrap()[0].clone();
            assert!(req.starts_with("GET /healthz HTTP/1.1\r\n"), "{req}");
            assert!(
                req.contains(&format!("Host: 127.0.0.1:{port}\r\n")),
                "{req}"
            );
            assert!(req.contains("User-Agent: kube-probe/"), "{req}");
        }
    }

    #[tokio::test]
    async fn http_get_resolves_named_ports_and_sends_headers() {
        let rt = Arc::new(FakeRuntime::new());
        let (port, seen) = server(200).await;
        let mut t = target(rt, "127.0.0.1");
        t.ports =
            vec![serde_json::from_value(json!({"name": "web", "containerPort": port})).unwrap()];
        let mut action: HTTPGetAction =
            serde_json::from_value(json!({"port": "web", "path": "/x"})).unwrap();
        action.http_headers = Some(vec![
            HTTPHeader {
                name: "X-Probe".into(),
                value: "yes".into(),
            },
            HTTPHeader {
                name: "host".into(),
                value: "example.test".into(),
            },
        ]);
        let out = t
            .run(&Action::HttpGet(action), Duration::from_secs(1))
            .await;
        assert_eq!(out, Outcome::Success);
        let req = seen.lock().unwrap()[0].clone();
        assert!(req.contains("X-Probe: yes\r\n"), "{req}");
        assert!(req.contains("host: example.test\r\n"), "{req}");
        assert!(
            !req.contains("Host: 127.0.0.1"),
            "the user's Host wins: {req}"
        );
        // A name the container does not have is a failure, not a panic.
        let out = t
            .run(&http(json!("nope"), "/"), Duration::from_secs(1))
            .await;
        assert!(matches!(out, Outcome::Failure(m) if m.contains("nope")));
    }

    #[tokio::test]
    async fn http_get_and_tcp_fail_on_a_closed_port_and_on_silence() {
        let rt = Arc::new(FakeRuntime::new());
        // A port nobody listens on.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let closed = l.local_addr().unwrap().port();
        drop(l);
        let t = target(rt, "127.0.0.1");
        let out = t
            .run(&http(json!(closed), "/"), Duration::from_secs(1))
            .await;
        assert!(
            matches!(&out, Outcome::Failure(m) if m.contains("connection refused")),
            "{out:?}"
        );
        let tcp =
            |port: u16| Action::TcpSocket(serde_json::from_value(json!({"port": port})).unwrap());
        assert!(matches!(
            t.run(&tcp(closed), Duration::from_secs(1)).await,
            Outcome::Failure(_)
        ));
        // A server that accepts but never answers: the timeout bounds the probe.
        let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = silent.local_addr().unwrap().port();
        assert_eq!(
            t.run(&tcp(port), Duration::from_secs(1)).await,
            Outcome::Success
        );
        let started = Instant::now();
        let out = t
            .run(&http(json!(port), "/"), Duration::from_millis(300))
            .await;
        assert!(
            matches!(&out, Outcome::Failure(m) if m.contains("deadline")),
            "{out:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(1));
        // HTTPS and gRPC say plainly that they are not supported.
        let https = Action::HttpGet(
            serde_json::from_value(json!({"port": port, "scheme": "HTTPS"})).unwrap(),
        );
        assert!(matches!(t.run(&https, Duration::from_secs(1)).await,
            Outcome::Failure(m) if m.contains("not supported")));
        let grpc: Probe = serde_json::from_value(json!({"grpc": {"port": 9000}})).unwrap();
        assert!(matches!(Action::of_probe(&grpc), Action::Unsupported(_)));
    }

    #[tokio::test]
    async fn exec_uses_the_exit_code() {
        let rt = Arc::new(FakeRuntime::new());
        let t = target(rt.clone(), "127.0.0.1");
        let cmd = Action::Exec(vec!["cat".into(), "/tmp/healthy".into()]);
        assert_eq!(t.run(&cmd, Duration::from_secs(1)).await, Outcome::Success);
        rt.set_exec_result("c1", 1);
        assert!(matches!(
            t.run(&cmd, Duration::from_secs(1)).await,
            Outcome::Failure(m) if m.contains("cat /tmp/healthy")
        ));
        assert_eq!(rt.calls(), ["exec c1 cat /tmp/healthy"; 2]);
    }

    #[test]
    fn defaults_follow_kubernetes() {
        let p: Probe = serde_json::from_value(json!({"exec": {"command": ["true"]}})).unwrap();
        let s = ProbeSpec::new(ProbeKind::Readiness, &p);
        assert_eq!(s.period, Duration::from_secs(10));
        assert_eq!(s.timeout, Duration::from_secs(1));
        assert_eq!(s.initial_delay, Duration::ZERO);
        assert_eq!((s.success_threshold, s.failure_threshold), (1, 3));
        let p: Probe = serde_json::from_value(
            json!({"tcpSocket": {"port": 80}, "successThreshold": 3, "failureThreshold": 5,
                   "periodSeconds": 2, "timeoutSeconds": 4, "initialDelaySeconds": 7}),
        )
        .unwrap();
        let live = ProbeSpec::new(ProbeKind::Liveness, &p);
        assert_eq!(
            live.success_threshold, 1,
            "liveness always needs one success"
        );
        assert_eq!(live.failure_threshold, 5);
        assert_eq!(live.period, Duration::from_secs(2));
        assert_eq!(live.timeout, Duration::from_secs(4));
        assert_eq!(live.initial_delay, Duration::from_secs(7));
        assert_eq!(
            ProbeSpec::new(ProbeKind::Readiness, &p).success_threshold,
            3
        );
    }

    fn fast(kind: ProbeKind, cmd: &str, success: u32, failure: u32) -> ProbeSpec {
        ProbeSpec {
            kind,
            action: Action::Exec(vec![cmd.into()]),
            initial_delay: Duration::ZERO,
            period: Duration::from_millis(20),
            timeout: Duration::from_secs(1),
            success_threshold: success,
            failure_threshold: failure,
        }
    }

    async fn until(runner: &ProbeRunner, what: &str, check: impl Fn(&ProbeView) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !check(&runner.view()) {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {:?}",
                runner.view()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn liveness_kills_after_failure_threshold_consecutive_failures() {
        let rt = Arc::new(FakeRuntime::new());
        rt.set_exec_result("c1", 1);
        let wake = Arc::new(Notify::new());
        let r = ProbeRunner::start_with(
            target(rt.clone(), "127.0.0.1"),
            "app",
            vec![fast(ProbeKind::Liveness, "live", 1, 3)],
            None,
            None,
            wake.clone(),
        );
        until(&r, "the kill", |v| v.kill.is_some()).await;
        assert_eq!(r.view().kill, Some(KillReason::Liveness));
        let events = r.take_events();
        assert_eq!(
            events.len(),
            3,
            "one Unhealthy per failed probe: {events:?}"
        );
        assert!(events.iter().all(|e| e.reason == "Unhealthy"
            && e.message.starts_with("Liveness probe failed: ")
            && e.field_path.as_deref() == Some("spec.containers{app}")));
        // The runner stops probing a container it condemned.
        let calls = rt.calls().len();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(rt.calls().len(), calls);
        // The worker was told.
        tokio::time::timeout(Duration::from_millis(100), wake.notified())
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_success_between_failures_resets_the_count() {
        let rt = Arc::new(FakeRuntime::new());
        let r = ProbeRunner::start_with(
            target(rt.clone(), "127.0.0.1"),
            "app",
            vec![fast(ProbeKind::Liveness, "live", 1, 3)],
            None,
            None,
            Arc::new(Notify::new()),
        );
        // Fail twice, succeed, fail twice: never three in a row.
        for _ in 0..3 {
            rt.set_exec_result("c1", 1);
            let before = rt.calls().len();
            while rt.calls().len() < before + 2 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            rt.set_exec_result("c1", 0);
            let before = rt.calls().len();
            while rt.calls().len() < before + 1 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        assert_eq!(r.view().kill, None);
    }

    #[tokio::test]
    async fn readiness_starts_false_and_follows_thresholds_both_ways() {
        let rt = Arc::new(FakeRuntime::new());
        rt.set_exec_result("c1", 1);
        let r = ProbeRunner::start_with(
            target(rt.clone(), "127.0.0.1"),
            "app",
            vec![fast(ProbeKind::Readiness, "ready", 2, 2)],
            None,
            None,
            Arc::new(Notify::new()),
        );
        assert!(!r.view().ready, "not ready before the first success");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!r.view().ready);
        rt.set_exec_result("c1", 0);
        until(&r, "ready", |v| v.ready).await;
        rt.set_exec_result("c1", 1);
        until(&r, "not ready", |v| !v.ready).await;
        assert_eq!(r.view().kill, None, "readiness never kills");
        assert!(r.view().started);
    }

    #[tokio::test]
    async fn startup_gates_the_other_probes_then_stops() {
        let rt = Arc::new(FakeRuntime::new());
        rt.set_exec_result("c1", 1);
        let r = ProbeRunner::start_with(
            target(rt.clone(), "127.0.0.1"),
            "app",
            vec![
                fast(ProbeKind::Startup, "startup", 1, 1000),
                fast(ProbeKind::Liveness, "live", 1, 1),
                fast(ProbeKind::Readiness, "ready", 1, 1),
            ],
            None,
            None,
            Arc::new(Notify::new()),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let v = r.view();
        assert!(!v.started && !v.ready && v.kill.is_none(), "{v:?}");
        assert!(
            rt.calls().iter().all(|c| c == "exec c1 startup"),
            "only the startup probe ran: {:?}",
            rt.calls()
        );
        rt.set_exec_result("c1", 0);
        until(&r, "started and ready", |v| v.started && v.ready).await;
        tokio::time::sleep(Duration::from_millis(60)).await;
        let n = rt.calls().len();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let later: Vec<String> = rt.calls()[n..].to_vec();
        assert!(!later.is_empty());
        assert!(
            later.iter().all(|c| c != "exec c1 startup"),
            "startup stops once passed: {later:?}"
        );
    }

    #[tokio::test]
    async fn failing_startup_kills() {
        let rt = Arc::new(FakeRuntime::new());
        rt.set_exec_result("c1", 1);
        let r = ProbeRunner::start_with(
            target(rt.clone(), "127.0.0.1"),
            "app",
            vec![fast(ProbeKind::Startup, "startup", 1, 2)],
            None,
            None,
            Arc::new(Notify::new()),
        );
        until(&r, "the kill", |v| v.kill.is_some()).await;
        assert_eq!(r.view().kill, Some(KillReason::Startup));
    }

    #[tokio::test]
    async fn post_start_runs_before_probes_and_its_failure_kills() {
        let rt = Arc::new(FakeRuntime::new());
        let r = ProbeRunner::start_with(
            target(rt.clone(), "127.0.0.1"),
            "app",
            vec![fast(ProbeKind::Readiness, "ready", 1, 1)],
            None,
            Some(Action::Exec(vec!["hook".into()])),
            Arc::new(Notify::new()),
        );
        until(&r, "ready", |v| v.ready).await;
        assert_eq!(rt.calls()[..2], ["exec c1 hook", "exec c1 ready"]);
        assert_eq!(r.view().post_start, HookState::Done);

        rt.set_exec_result("c1", 2);
        let r = ProbeRunner::start_with(
            target(rt.clone(), "127.0.0.1"),
            "app",
            vec![],
            None,
            Some(Action::Exec(vec!["hook".into()])),
            Arc::new(Notify::new()),
        );
        until(&r, "the kill", |v| v.kill.is_some()).await;
        assert!(
            matches!(r.view().post_start, HookState::Failed(m) if m.contains("Exec lifecycle hook ([hook])"))
        );
    }

    #[tokio::test]
    async fn pre_stop_takes_its_time_out_of_the_grace_period() {
        let rt = Arc::new(FakeRuntime::new());
        let t = target(rt.clone(), "127.0.0.1");
        let hook: LifecycleHandler =
            serde_json::from_value(json!({"sleep": {"seconds": 1}})).unwrap();
        let (left, failure) = run_pre_stop(&t, Some(&hook), Duration::from_secs(10)).await;
        assert!(failure.is_none());
        assert!(
            left <= Duration::from_secs(9) && left > Duration::from_secs(8),
            "{left:?}"
        );
        // At least the minimum is left, however long the hook took.
        let (left, _) = run_pre_stop(&t, Some(&hook), Duration::from_secs(1)).await;
        assert_eq!(left, MIN_GRACE_AFTER_PRE_STOP);
        // A forced stop skips the hook.
        let exec: LifecycleHandler =
            serde_json::from_value(json!({"exec": {"command": ["x"]}})).unwrap();
        let (left, _) = run_pre_stop(&t, Some(&exec), Duration::ZERO).await;
        assert_eq!(left, Duration::ZERO);
        assert!(rt.calls().is_empty());
        rt.set_exec_result("c1", 1);
        let (_, failure) = run_pre_stop(&t, Some(&exec), Duration::from_secs(5)).await;
        assert!(failure.unwrap().starts_with("Exec lifecycle hook ([x])"));
    }
}
