//! The probe state machine of one container instance: a [`ProbeRunner`]
//! runs the postStart hook (when the worker has just started the
//! container), then the startup, liveness and readiness probes, each on
//! its own period, and keeps their results where the pod worker reads
//! them on every sync.
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

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Container, Probe};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::actions::{Action, Outcome, Target};
use super::hooks::{run_post_start, HookState};
use crate::events::PodEvent;
use crate::runtime::Role;

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
        let state = run_post_start(&target, &hook).await;
        {
            let mut st = shared.lock().unwrap();
            if let HookState::Failed(msg) = &state {
                st.view.kill = Some(KillReason::PostStart(msg.clone()));
            }
            st.view.post_start = state;
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
        crate::observe::probe_result(spec.kind.label(), ok, name);
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
                st.events.push(
                    PodEvent::warning(
                        "Unhealthy",
                        format!("{} probe failed: {msg}", spec.kind.label()),
                    )
                    .about(Role::App, name),
                );
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
    use tokio::time::Instant;

    use super::*;
    use crate::probes::testing::target;
    use crate::runtime::fake::FakeRuntime;
    use serde_json::json;

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

    /// Waits for `check`, on the test's paused clock: periods, sleeps and
    /// deadlines are virtual time, so a loaded machine cannot change what
    /// the runner does between two checks.
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

    #[tokio::test(start_paused = true)]
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

    #[tokio::test(start_paused = true)]
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

    #[tokio::test(start_paused = true)]
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

    #[tokio::test(start_paused = true)]
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

    #[tokio::test(start_paused = true)]
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

    #[tokio::test(start_paused = true)]
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
}
