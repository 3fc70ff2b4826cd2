//! One pod's worker: level-triggered sync of the containers Docker has
//! with what the pod's spec asks for.
//!
//! Each sync looks at the pod's containers as they are and takes the next
//! steps: a sandbox (recreating everything if the pause container died),
//! volumes, init containers one at a time in order, then the app
//! containers; exited containers restart per restartPolicy with
//! crash-loop back-off. What cannot proceed becomes a waiting reason in
//! the status (ContainerCreating, ErrImagePull, ImagePullBackOff,
//! CrashLoopBackOff, CreateContainerConfigError), not an error up the
//! stack.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::Value;
use tokio::sync::Notify;

use bosun::events::EventType;

use crate::config::AgentConfig;
use crate::events::PodEvent;
use crate::probes::{self, Action, HookState, KillReason, ProbeRunner, Target};
use crate::runtime::{ContainerInfo, ContainerRuntime, ContainerState, Role, RuntimeError};
use crate::spec;
use crate::status::{self, Observed, Waiting};
use crate::volumes;

/// The outcome of one sync.
#[derive(Debug)]
pub struct Synced {
    /// The pod's status as it now is.
    pub status: Value,
    /// When the worker should look again even if nothing happens.
    pub wake_after: Duration,
    pub events: Vec<PodEvent>,
}

#[derive(Debug, Clone, Copy)]
struct Backoff {
    delay: Duration,
    until: Instant,
}

pub struct PodWorker {
    rt: Arc<dyn ContainerRuntime>,
    cfg: Arc<AgentConfig>,
    /// Crash-loop and image-pull back-off per key (`run:<name>`, `pull:<name>`).
    backoff: HashMap<String, Backoff>,
    /// Restart counts carried across a sandbox re-creation.
    restart_floor: HashMap<String, u32>,
    waiting: BTreeMap<String, Waiting>,
    events: Vec<PodEvent>,
    failed: Option<(String, String)>,
    /// Keys already reported as backing off, so BackOff is emitted once per wait.
    announced: HashMap<String, Instant>,
    /// Probes of the running instance of each app container, by name.
    runners: HashMap<String, ProbeRunner>,
    /// Containers started in this sync: their postStart hook is still to run.
    fresh: HashSet<String>,
    /// Notified when a probe result changes something; see [`PodWorker::wake_handle`].
    wake: Arc<Notify>,
}

fn field_path(role: Role, name: &str) -> Option<String> {
    match role {
        Role::Init => Some(format!("spec.initContainers{{{name}}}")),
        Role::App => Some(format!("spec.containers{{{name}}}")),
        Role::Sandbox => None,
    }
}

/// Whether an exited container is restarted under `policy`.
fn should_restart(policy: &str, role: Role, exit_code: i64) -> bool {
    match (policy, role) {
        ("Never", _) => false,
        (_, Role::Init) | ("OnFailure", _) => exit_code != 0,
        _ => true,
    }
}

fn latest<'a>(
    containers: &'a [ContainerInfo],
    role: Role,
    name: &str,
) -> Option<&'a ContainerInfo> {
    containers
        .iter()
        .filter(|c| c.role == role && c.name == name)
        .max_by_key(|c| (c.restart_count, c.created_at))
}

impl PodWorker {
    pub fn new(rt: Arc<dyn ContainerRuntime>, cfg: Arc<AgentConfig>) -> Self {
        PodWorker {
            rt,
            cfg,
            backoff: HashMap::new(),
            restart_floor: HashMap::new(),
            waiting: BTreeMap::new(),
            events: Vec::new(),
            failed: None,
            announced: HashMap::new(),
            runners: HashMap::new(),
            fresh: HashSet::new(),
            wake: Arc::new(Notify::new()),
        }
    }

    /// Notified whenever a probe or hook result means the pod should be
    /// synced again (readiness flipped, a container must be killed, an
    /// event to record). The worker's driver waits on it next to the pod's
    /// changes and `wake_after`.
    pub fn wake_handle(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    fn event(
        &mut self,
        type_: EventType,
        reason: &'static str,
        message: String,
        path: Option<String>,
    ) {
        self.events.push(PodEvent {
            type_,
            reason,
            message,
            field_path: path,
        });
    }

    async fn pod_containers(&self, uid: &str) -> Result<Vec<ContainerInfo>, RuntimeError> {
        Ok(self
            .rt
            .list_containers(&self.cfg.node_name)
            .await?
            .into_iter()
            .filter(|c| c.pod.uid == uid)
            .collect())
    }

    /// Brings the pod's containers one step closer to its spec and reports
    /// its status.
    pub async fn sync(&mut self, pod: &Pod) -> Result<Synced, RuntimeError> {
        self.waiting.clear();
        self.events.clear();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let spec = pod.spec.clone().unwrap_or_default();
        let policy = spec
            .restart_policy
            .clone()
            .unwrap_or_else(|| "Always".into());
        let previous_phase = pod.status.as_ref().and_then(|s| s.phase.clone());
        let mut containers = self.pod_containers(&uid).await?;

        let finished = matches!(
            previous_phase.as_deref(),
            Some("Succeeded") | Some("Failed")
        );
        if finished {
            // A finished pod stays finished: nothing restarts, the sandbox goes.
            self.runners.clear();
            self.stop_sandbox(&containers).await;
            return Ok(Synced {
                status: serde_json::to_value(pod.status.clone().unwrap_or_default())
                    .unwrap_or_default(),
                wake_after: self.cfg.sync_period,
                events: std::mem::take(&mut self.events),
            });
        }

        let sandbox = containers
            .iter()
            .filter(|c| c.role == Role::Sandbox)
            .max_by_key(|c| c.created_at)
            .cloned();
        let sandbox = match sandbox.filter(|s| s.state == ContainerState::Running) {
            Some(s) => s,
            None => {
                if !containers.is_empty() {
                    self.event(
                        EventType::Normal,
                        "SandboxChanged",
                        "Pod sandbox changed, it will be killed and re-created.".into(),
                        None,
                    );
                    for c in &containers {
                        if c.role != Role::Sandbox {
                            let floor = self.restart_floor.entry(c.name.clone()).or_default();
                            *floor = (*floor).max(c.restart_count + 1);
                        }
                        self.rt
                            .stop_container(&c.id, Duration::from_secs(0))
                            .await?;
                        self.rt.remove_container(&c.id).await?;
                    }
                }
                if !spec.host_network.unwrap_or(false) {
                    self.rt
                        .ensure_network(
                            &self.cfg.network_name(),
                            &self.cfg.pod_cidr,
                            &self.cfg.node_name,
                        )
                        .await?;
                }
                self.rt.ensure_pause_image().await?;
                let id = self
                    .rt
                    .run_sandbox(&self.cfg.node_name, &spec::sandbox_config(pod, &self.cfg))
                    .await?;
                containers = self.pod_containers(&uid).await?;
                containers
                    .iter()
                    .find(|c| c.id == id)
                    .cloned()
                    .ok_or_else(|| RuntimeError::NotFound(id.clone()))?
            }
        };
        let pod_ip = if spec.host_network.unwrap_or(false) {
            Some(self.cfg.node_ip.clone())
        } else {
            sandbox.ip.clone()
        };
        if self
            .act_on_probe_results(pod, &containers, pod_ip.as_deref())
            .await?
        {
            containers = self.pod_containers(&uid).await?;
        }

        let mut wake_after = self.cfg.sync_period;
        match volumes::setup(pod, &self.cfg) {
            Err(e) => {
                self.event(EventType::Warning, "FailedMount", e.clone(), None);
                for c in spec
                    .init_containers
                    .iter()
                    .flatten()
                    .chain(&spec.containers)
                {
                    self.waiting.insert(
                        c.name.clone(),
                        Waiting {
                            reason: "ContainerCreating".into(),
                            message: e.clone(),
                        },
                    );
                }
                wake_after = self.cfg.backoff_base;
            }
            Ok(()) => {
                let initialized = self
                    .run_init_containers(pod, &policy, &containers, &sandbox.id, pod_ip.as_deref())
                    .await?;
                if initialized {
                    for c in &spec.containers {
                        self.run_container(
                            pod,
                            Role::App,
                            c,
                            &policy,
                            &containers,
                            &sandbox.id,
                            pod_ip.as_deref(),
                        )
                        .await?;
                    }
                }
                containers = self.pod_containers(&uid).await?;
                self.prune(&containers).await;
            }
        }
        self.ensure_runners(pod, &containers, pod_ip.as_deref());
        let mut ready = BTreeMap::new();
        let mut started = BTreeMap::new();
        for (name, r) in &self.runners {
            let view = r.view();
            if view.post_start == HookState::Running {
                // As in Kubernetes, a container is not running until its
                // postStart hook has finished.
                self.waiting.insert(
                    name.clone(),
                    Waiting {
                        reason: "ContainerCreating".into(),
                        message: String::new(),
                    },
                );
            }
            ready.insert(name.clone(), view.ready);
            started.insert(name.clone(), view.started);
        }

        let app_containers: Vec<ContainerInfo> = containers
            .iter()
            .filter(|c| c.role != Role::Sandbox)
            .cloned()
            .collect();
        let status = status::pod_status(&Observed {
            pod,
            containers: &app_containers,
            waiting: &self.waiting,
            ready: &ready,
            started: &started,
            pod_ip,
            host_ip: self.cfg.node_ip.clone(),
            failed: self.failed.clone(),
            now: Utc::now(),
        });
        if matches!(status["phase"].as_str(), Some("Succeeded") | Some("Failed")) {
            self.stop_sandbox(&containers).await;
        }
        let now = Instant::now();
        if let Some(next) = self
            .backoff
            .values()
            .map(|b| b.until)
            .filter(|u| *u > now)
            .min()
        {
            wake_after = wake_after.min(next - now + Duration::from_millis(50));
        }
        Ok(Synced {
            status,
            wake_after,
            events: std::mem::take(&mut self.events),
        })
    }

    async fn stop_sandbox(&self, containers: &[ContainerInfo]) {
        for c in containers
            .iter()
            .filter(|c| c.role == Role::Sandbox && c.state == ContainerState::Running)
        {
            if let Err(e) = self.rt.stop_container(&c.id, Duration::from_secs(2)).await {
                tracing::warn!(container = %c.id, error = %e, "stopping a finished pod's sandbox");
            }
        }
    }

    /// Runs init containers one at a time; true once all have succeeded.
    async fn run_init_containers(
        &mut self,
        pod: &Pod,
        policy: &str,
        containers: &[ContainerInfo],
        sandbox_id: &str,
        pod_ip: Option<&str>,
    ) -> Result<bool, RuntimeError> {
        let inits = pod
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.clone())
            .unwrap_or_default();
        for c in &inits {
            let done = latest(containers, Role::Init, &c.name)
                .is_some_and(|l| l.state == ContainerState::Exited && l.exit_code == Some(0));
            if done {
                continue;
            }
            // A failed init container with restartPolicy Never stays failed;
            // the status makes the pod Failed.
            self.run_container(pod, Role::Init, c, policy, containers, sandbox_id, pod_ip)
                .await?;
            return Ok(false);
        }
        Ok(true)
    }

    /// Makes sure container `c` runs if it should: starts it the first
    /// time, restarts it per policy with back-off, or leaves it be.
    #[allow(clippy::too_many_arguments)]
    async fn run_container(
        &mut self,
        pod: &Pod,
        role: Role,
        c: &Container,
        policy: &str,
        containers: &[ContainerInfo],
        sandbox_id: &str,
        pod_ip: Option<&str>,
    ) -> Result<(), RuntimeError> {
        let restart_count = match latest(containers, role, &c.name) {
            None => self.restart_floor.get(&c.name).copied().unwrap_or(0),
            Some(l) => match l.state {
                ContainerState::Running | ContainerState::Unknown => return Ok(()),
                ContainerState::Created => {
                    // Made but never started (the agent stopped in between).
                    return self.start(role, &c.name, &l.id).await;
                }
                ContainerState::Exited => {
                    let code = l.exit_code.unwrap_or(0);
                    if !should_restart(policy, role, code) {
                        return Ok(());
                    }
                    let key = format!("run:{}", c.name);
                    let now = Instant::now();
                    if let Some(b) = self.backoff.get(&key).copied() {
                        if now < b.until {
                            let message = format!(
                                "back-off {:?} restarting failed container={} pod={}_{}({})",
                                b.delay,
                                c.name,
                                pod.metadata.name.as_deref().unwrap_or(""),
                                pod.metadata.namespace.as_deref().unwrap_or(""),
                                pod.metadata.uid.as_deref().unwrap_or("")
                            );
                            if self.announced.get(&key) != Some(&b.until) {
                                self.announced.insert(key.clone(), b.until);
                                self.event(
                                    EventType::Warning,
                                    "BackOff",
                                    "Back-off restarting failed container".into(),
                                    field_path(role, &c.name),
                                );
                            }
                            self.waiting.insert(
                                c.name.clone(),
                                Waiting {
                                    reason: "CrashLoopBackOff".into(),
                                    message,
                                },
                            );
                            return Ok(());
                        }
                    }
                    let ran_long = match (l.started_at, l.finished_at) {
                        (Some(s), Some(f)) => {
                            (f - s).to_std().unwrap_or_default() >= self.cfg.backoff_reset
                        }
                        _ => false,
                    };
                    let delay = match self.backoff.get(&key) {
                        Some(b) if !ran_long => (b.delay * 2).min(self.cfg.backoff_max),
                        _ => self.cfg.backoff_base,
                    };
                    self.backoff.insert(
                        key,
                        Backoff {
                            delay,
                            until: now + delay,
                        },
                    );
                    l.restart_count + 1
                }
            },
        };
        self.create_and_start(pod, role, c, restart_count, sandbox_id, pod_ip)
            .await
    }

    async fn start(&mut self, role: Role, name: &str, id: &str) -> Result<(), RuntimeError> {
        match self.rt.start_container(id).await {
            Ok(()) => {
                if role == Role::App {
                    self.fresh.insert(id.to_string());
                }
                self.event(
                    EventType::Normal,
                    "Started",
                    format!("Started container {name}"),
                    field_path(role, name),
                );
                Ok(())
            }
            Err(e) => {
                self.event(
                    EventType::Warning,
                    "Failed",
                    format!("Error: {e}"),
                    field_path(role, name),
                );
                self.waiting.insert(
                    name.to_string(),
                    Waiting {
                        reason: "RunContainerError".into(),
                        message: e.to_string(),
                    },
                );
                Ok(())
            }
        }
    }

    /// Pulls the image as the policy says; false (with a waiting reason)
    /// if it is not there to use.
    async fn ensure_image(&mut self, role: Role, c: &Container) -> Result<bool, RuntimeError> {
        let image = c.image.clone().unwrap_or_default();
        let policy = c
            .image_pull_policy
            .clone()
            .unwrap_or_else(|| bosun::defaults::default_pull_policy(&image).to_string());
        let present = self.rt.image_id(&image).await?.is_some();
        let path = field_path(role, &c.name);
        let wait = |reason: &str, message: String| Waiting {
            reason: reason.into(),
            message,
        };
        match policy.as_str() {
            "Never" if !present => {
                let message =
                    format!("Container image \"{image}\" is not present with pull policy of Never");
                self.event(
                    EventType::Warning,
                    "ErrImageNeverPull",
                    message.clone(),
                    path,
                );
                self.waiting
                    .insert(c.name.clone(), wait("ErrImageNeverPull", message));
                return Ok(false);
            }
            "IfNotPresent" | "Never" if present => {
                self.event(
                    EventType::Normal,
                    "Pulled",
                    format!("Container image \"{image}\" already present on machine"),
                    path,
                );
                return Ok(true);
            }
            _ => {}
        }
        let key = format!("pull:{}", c.name);
        let now = Instant::now();
        if let Some(b) = self.backoff.get(&key).copied() {
            if now < b.until {
                let message = format!("Back-off pulling image \"{image}\"");
                self.waiting
                    .insert(c.name.clone(), wait("ImagePullBackOff", message));
                return Ok(false);
            }
        }
        self.event(
            EventType::Normal,
            "Pulling",
            format!("Pulling image \"{image}\""),
            path.clone(),
        );
        let started = Instant::now();
        let img = image.clone();
        match self
            .rt
            .pull_image(&image, &move |line| tracing::debug!(image = %img, "{line}"))
            .await
        {
            Ok(_) => {
                self.backoff.remove(&key);
                self.event(
                    EventType::Normal,
                    "Pulled",
                    format!(
                        "Successfully pulled image \"{image}\" in {:?}",
                        started.elapsed()
                    ),
                    path,
                );
                Ok(true)
            }
            Err(e) => {
                let delay = match self.backoff.get(&key) {
                    Some(b) => (b.delay * 2).min(self.cfg.backoff_max),
                    None => self.cfg.backoff_base,
                };
                self.backoff.insert(
                    key,
                    Backoff {
                        delay,
                        until: now + delay,
                    },
                );
                let message = format!("Failed to pull image \"{image}\": {e}");
                self.event(EventType::Warning, "Failed", message.clone(), path);
                self.waiting
                    .insert(c.name.clone(), wait("ErrImagePull", message));
                Ok(false)
            }
        }
    }

    async fn create_and_start(
        &mut self,
        pod: &Pod,
        role: Role,
        c: &Container,
        restart_count: u32,
        sandbox_id: &str,
        pod_ip: Option<&str>,
    ) -> Result<(), RuntimeError> {
        if !self.ensure_image(role, c).await? {
            return Ok(());
        }
        let path = field_path(role, &c.name);
        let config = match spec::container_config(pod, c, pod_ip, restart_count, &self.cfg) {
            Ok(cfg) => cfg,
            Err(e) => {
                self.event(EventType::Warning, "Failed", format!("Error: {e}"), path);
                self.waiting.insert(
                    c.name.clone(),
                    Waiting {
                        reason: "CreateContainerConfigError".into(),
                        message: e.to_string(),
                    },
                );
                return Ok(());
            }
        };
        let pod_ref = spec::pod_ref(pod);
        match self
            .rt
            .create_container(&self.cfg.node_name, &pod_ref, role, sandbox_id, &config)
            .await
        {
            Ok(id) => {
                self.event(
                    EventType::Normal,
                    "Created",
                    format!("Created container {}", c.name),
                    path,
                );
                self.start(role, &c.name, &id).await
            }
            Err(e) => {
                self.event(EventType::Warning, "Failed", format!("Error: {e}"), path);
                self.waiting.insert(
                    c.name.clone(),
                    Waiting {
                        reason: "CreateContainerError".into(),
                        message: e.to_string(),
                    },
                );
                Ok(())
            }
        }
    }

    fn target(&self, c: Option<&Container>, id: &str, pod_ip: Option<&str>) -> Target {
        Target {
            rt: self.rt.clone(),
            container_id: id.to_string(),
            pod_ip: pod_ip.map(String::from),
            ports: c.and_then(|c| c.ports.clone()).unwrap_or_default(),
        }
    }

    /// Makes sure the running instance of each app container that has
    /// probes or a postStart hook has its runner, and no other runner is
    /// left. A new instance gets a new runner: results never carry over.
    fn ensure_runners(&mut self, pod: &Pod, containers: &[ContainerInfo], pod_ip: Option<&str>) {
        let specs = pod
            .spec
            .as_ref()
            .map(|s| s.containers.clone())
            .unwrap_or_default();
        let mut live = HashSet::new();
        for c in specs.iter().filter(|c| ProbeRunner::needed(c)) {
            let Some(l) = latest(containers, Role::App, &c.name)
                .filter(|l| l.state == ContainerState::Running)
            else {
                continue;
            };
            live.insert(c.name.clone());
            if self
                .runners
                .get(&c.name)
                .is_some_and(|r| r.container_id() == l.id)
            {
                continue;
            }
            if let Some(old) = self.runners.remove(&c.name) {
                self.events.extend(old.take_events());
            }
            // Only an instance this worker has just started runs postStart
            // (an adopted one ran it under the agent before).
            let post_start = c
                .lifecycle
                .as_ref()
                .and_then(|l| l.post_start.as_ref())
                .filter(|_| self.fresh.contains(&l.id))
                .map(Action::of_hook);
            let runner = ProbeRunner::start(
                self.target(Some(c), &l.id, pod_ip),
                c,
                l.started_at,
                post_start,
                self.wake.clone(),
            );
            self.runners.insert(c.name.clone(), runner);
        }
        let gone: Vec<String> = self
            .runners
            .keys()
            .filter(|n| !live.contains(*n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(r) = self.runners.remove(&name) {
                self.events.extend(r.take_events());
            }
        }
        self.fresh.clear();
    }

    /// Records the runners' events and kills the containers whose liveness
    /// or startup probe failed for good or whose postStart hook failed.
    /// True if it killed any (the caller then lists containers again and
    /// restarts them per restartPolicy).
    async fn act_on_probe_results(
        &mut self,
        pod: &Pod,
        containers: &[ContainerInfo],
        pod_ip: Option<&str>,
    ) -> Result<bool, RuntimeError> {
        let mut kills = Vec::new();
        for (name, r) in &self.runners {
            self.events.extend(r.take_events());
            if let Some(k) = r.view().kill {
                kills.push((name.clone(), r.container_id().to_string(), k));
            }
        }
        let specs = pod
            .spec
            .as_ref()
            .map(|s| s.containers.clone())
            .unwrap_or_default();
        let pod_grace = pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(30);
        let mut killed = false;
        for (name, id, reason) in kills {
            self.runners.remove(&name);
            let running = containers
                .iter()
                .any(|c| c.id == id && c.state == ContainerState::Running);
            let Some(c) = specs.iter().find(|c| c.name == name).filter(|_| running) else {
                continue;
            };
            let path = field_path(Role::App, &name);
            let (message, probe_grace) = match &reason {
                KillReason::Liveness => (
                    format!("Container {name} failed liveness probe, will be restarted"),
                    c.liveness_probe
                        .as_ref()
                        .and_then(|p| p.termination_grace_period_seconds),
                ),
                KillReason::Startup => (
                    format!("Container {name} failed startup probe, will be restarted"),
                    c.startup_probe
                        .as_ref()
                        .and_then(|p| p.termination_grace_period_seconds),
                ),
                KillReason::PostStart(msg) => {
                    self.event(
                        EventType::Warning,
                        "FailedPostStartHook",
                        probes::hook_failure_message(pod, &name, msg),
                        path.clone(),
                    );
                    ("FailedPostStartHook".to_string(), None)
                }
            };
            self.event(EventType::Normal, "Killing", message, path);
            let grace = Duration::from_secs(probe_grace.unwrap_or(pod_grace).max(0) as u64);
            let target = self.target(Some(c), &id, pod_ip);
            if let Some(e) = stop_container(&target, pod, c, grace).await? {
                self.events.push(e);
            }
            killed = true;
        }
        Ok(killed)
    }

    /// Keeps the newest instance of each container and the one before it
    /// (for `logs --previous` and lastState); removes older ones.
    async fn prune(&self, containers: &[ContainerInfo]) {
        let mut by_name: BTreeMap<(Role, &str), Vec<&ContainerInfo>> = BTreeMap::new();
        for c in containers.iter().filter(|c| c.role != Role::Sandbox) {
            by_name
                .entry((c.role, c.name.as_str()))
                .or_default()
                .push(c);
        }
        for (_, mut list) in by_name {
            list.sort_by_key(|c| std::cmp::Reverse((c.restart_count, c.created_at)));
            for old in list.iter().skip(2) {
                if old.state != ContainerState::Running {
                    let _ = self.rt.remove_container(&old.id).await;
                }
            }
        }
    }

    /// Stops every container of the pod within `grace` (each app
    /// container's preStop hook first) and removes them and the pod's
    /// volumes.
    pub async fn terminate(
        &mut self,
        pod: &Pod,
        grace: Duration,
    ) -> Result<Vec<PodEvent>, RuntimeError> {
        self.events.clear();
        // No probe may kill or restart anything from here on.
        self.runners.clear();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let containers = self.pod_containers(&uid).await?;
        let pod_ip = if pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false)
        {
            Some(self.cfg.node_ip.clone())
        } else {
            containers
                .iter()
                .filter(|c| c.role == Role::Sandbox)
                .find_map(|c| c.ip.clone())
        };
        let specs = pod
            .spec
            .as_ref()
            .map(|s| s.containers.clone())
            .unwrap_or_default();
        let running: Vec<&ContainerInfo> = containers
            .iter()
            .filter(|c| c.role != Role::Sandbox && c.state == ContainerState::Running)
            .collect();
        for c in &running {
            self.event(
                EventType::Normal,
                "Killing",
                format!("Stopping container {}", c.name),
                field_path(c.role, &c.name),
            );
        }
        let stops = running.iter().map(|c| {
            let spec = specs
                .iter()
                .find(|s| s.name == c.name && c.role == Role::App)
                .cloned()
                .unwrap_or_else(|| Container {
                    name: c.name.clone(),
                    ..Container::default()
                });
            let target = self.target(Some(&spec), &c.id, pod_ip.as_deref());
            async move { stop_container(&target, pod, &spec, grace).await }
        });
        for r in futures::future::join_all(stops).await {
            if let Some(e) = r? {
                self.events.push(e);
            }
        }
        for c in containers.iter().filter(|c| c.role == Role::Sandbox) {
            self.rt
                .stop_container(&c.id, Duration::from_secs(0))
                .await?;
        }
        for c in &containers {
            self.rt.remove_container(&c.id).await?;
        }
        volumes::teardown(&self.cfg, &uid);
        Ok(std::mem::take(&mut self.events))
    }
}

/// Stops one container the way the kubelet does: its preStop hook within
/// `grace`, then SIGTERM and, after what is left of `grace`, SIGKILL.
/// Returns the `FailedPreStopHook` event when the hook failed (the stop
/// goes on regardless).
async fn stop_container(
    target: &Target,
    pod: &Pod,
    c: &Container,
    grace: Duration,
) -> Result<Option<PodEvent>, RuntimeError> {
    let hook = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref());
    let (left, failure) = probes::run_pre_stop(target, hook, grace).await;
    target.rt.stop_container(&target.container_id, left).await?;
    Ok(failure.map(|msg| PodEvent {
        type_: EventType::Warning,
        reason: "FailedPreStopHook",
        message: probes::hook_failure_message(pod, &c.name, &msg),
        field_path: field_path(Role::App, &c.name),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::fake::FakeRuntime;
    use serde_json::json;

    fn setup(backoff: Duration) -> (Arc<FakeRuntime>, PodWorker, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let rt = Arc::new(FakeRuntime::new());
        rt.add_image("bosun.local/busybox:1.35");
        let mut cfg = AgentConfig::for_tests("n1", dir.path().to_path_buf());
        cfg.backoff_base = backoff;
        let w = PodWorker::new(rt.clone(), Arc::new(cfg));
        (rt, w, dir)
    }

    fn pod(spec: Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "default", "uid": "u1"},
            "spec": spec}),
        )
        .unwrap()
    }

    fn with_status(mut p: Pod, status: &Value) -> Pod {
        p.status = serde_json::from_value(status.clone()).unwrap();
        p
    }

    fn id_of(rt: &FakeRuntime, name: &str) -> String {
        rt.containers()
            .into_iter()
            .filter(|c| c.info.name == name)
            .max_by_key(|c| c.info.restart_count)
            .unwrap()
            .info
            .id
    }

    #[tokio::test]
    async fn sandbox_first_then_app_containers() {
        let (rt, mut w, _d) = setup(Duration::from_secs(10));
        let p = pod(json!({"containers": [{"name": "a", "image": "bosun.local/busybox:1.35"}]}));
        let s = w.sync(&p).await.unwrap();
        assert_eq!(
            rt.calls()
                .iter()
                .filter(|c| !c.starts_with("network"))
                .cloned()
                .collect::<Vec<_>>(),
            ["sandbox p", "create app a", "start a"]
        );
        assert_eq!(s.status["phase"], "Running");
        assert!(s.status["podIP"].as_str().unwrap().starts_with("10.244."));
        let reasons: Vec<&str> = s.events.iter().map(|e| e.reason).collect();
        assert_eq!(reasons, ["Pulled", "Created", "Started"]);
        // A second sync changes nothing.
        let before = rt.calls().len();
        w.sync(&with_status(p, &s.status)).await.unwrap();
        assert_eq!(rt.calls().len(), before);
    }

    #[tokio::test]
    async fn init_containers_run_in_order() {
        let (rt, mut w, _d) = setup(Duration::from_secs(10));
        let p = pod(json!({
            "initContainers": [{"name": "i1", "image": "bosun.local/busybox:1.35"},
                               {"name": "i2", "image": "bosun.local/busybox:1.35"}],
            "containers": [{"name": "a", "image": "bosun.local/busybox:1.35"}]}));
        let s = w.sync(&p).await.unwrap();
        assert_eq!(
            bosun::printers::pod_status(&json!({"spec": p.spec, "status": s.status})),
            "Init:0/2"
        );
        assert!(rt.calls().contains(&"start i1".to_string()));
        assert!(!rt.calls().contains(&"start i2".to_string()));
        rt.exit(&id_of(&rt, "i1"), 0);
        w.sync(&p).await.unwrap();
        assert!(rt.calls().contains(&"start i2".to_string()));
        assert!(!rt.calls().contains(&"start a".to_string()));
        rt.exit(&id_of(&rt, "i2"), 0);
        let s = w.sync(&p).await.unwrap();
        assert!(rt.calls().contains(&"start a".to_string()));
        assert_eq!(s.status["phase"], "Running");
    }

    #[tokio::test]
    async fn crash_loop_backs_off_and_counts_restarts() {
        let (rt, mut w, _d) = setup(Duration::from_millis(300));
        let p = pod(json!({"containers": [{"name": "a", "image": "bosun.local/busybox:1.35"}]}));
        w.sync(&p).await.unwrap();
        rt.exit(&id_of(&rt, "a"), 1);
        // The first restart is immediate.
        let s = w.sync(&p).await.unwrap();
        assert_eq!(s.status["containerStatuses"][0]["restartCount"], 1);
        assert_eq!(
            s.status["containerStatuses"][0]["lastState"]["terminated"]["exitCode"],
            1
        );
        rt.exit(&id_of(&rt, "a"), 1);
        // The second waits out the back-off.
        let s = w.sync(&p).await.unwrap();
        assert_eq!(
            s.status["containerStatuses"][0]["state"]["waiting"]["reason"],
            "CrashLoopBackOff"
        );
        assert_eq!(s.status["phase"], "Running");
        assert!(s.wake_after <= Duration::from_millis(400));
        assert!(s.events.iter().any(|e| e.reason == "BackOff"));
        tokio::time::sleep(s.wake_after).await;
        let s = w.sync(&p).await.unwrap();
        assert_eq!(s.status["containerStatuses"][0]["restartCount"], 2);
        assert!(s.status["containerStatuses"][0]["state"]["running"].is_object());
    }

    #[tokio::test]
    async fn restart_policies() {
        for (policy, code, phase) in [
            ("Never", 1, "Failed"),
            ("OnFailure", 0, "Succeeded"),
            ("Never", 0, "Succeeded"),
        ] {
            let (rt, mut w, _d) = setup(Duration::from_secs(10));
            let p = pod(json!({"restartPolicy": policy,
                "containers": [{"name": "a", "image": "bosun.local/busybox:1.35"}]}));
            w.sync(&p).await.unwrap();
            rt.exit(&id_of(&rt, "a"), code);
            let s = w.sync(&p).await.unwrap();
            assert_eq!(s.status["phase"], phase, "{policy} exit {code}");
            assert_eq!(s.status["containerStatuses"][0]["restartCount"], 0);
        }
    }

    #[tokio::test]
    async fn missing_image_with_never_and_failed_pull() {
        let (_rt, mut w, _d) = setup(Duration::from_secs(10));
        let p = pod(json!({"containers": [
            {"name": "a", "image": "nothere:1", "imagePullPolicy": "Never"},
            {"name": "b", "image": "elsewhere:1", "imagePullPolicy": "IfNotPresent"}]}));
        let s = w.sync(&p).await.unwrap();
        assert_eq!(
            s.status["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ErrImageNeverPull"
        );
        assert_eq!(
            s.status["containerStatuses"][1]["state"]["waiting"]["reason"],
            "ErrImagePull"
        );
        let s = w.sync(&p).await.unwrap();
        assert_eq!(
            s.status["containerStatuses"][1]["state"]["waiting"]["reason"],
            "ImagePullBackOff"
        );
        assert_eq!(s.status["phase"], "Pending");
    }

    #[tokio::test]
    async fn dead_sandbox_recreates_the_pod() {
        let (rt, mut w, _d) = setup(Duration::from_secs(10));
        let p = pod(json!({"containers": [{"name": "a", "image": "bosun.local/busybox:1.35"}]}));
        w.sync(&p).await.unwrap();
        rt.exit(&id_of(&rt, "POD"), 137);
        let s = w.sync(&p).await.unwrap();
        assert!(s.events.iter().any(|e| e.reason == "SandboxChanged"));
        let live: Vec<_> = rt.containers().into_iter().map(|c| c.info.name).collect();
        assert_eq!(
            live.len(),
            2,
            "one new sandbox and one new app container: {live:?}"
        );
        assert_eq!(s.status["containerStatuses"][0]["restartCount"], 1);
    }

    /// Syncs whenever the worker's probes wake it until `check` holds;
    /// returns the last result and every event recorded on the way.
    async fn sync_until(
        w: &mut PodWorker,
        p: &Pod,
        what: &str,
        check: impl Fn(&Synced) -> bool,
    ) -> (Synced, Vec<PodEvent>) {
        let wake = w.wake_handle();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut events = Vec::new();
        loop {
            let s = w.sync(p).await.unwrap();
            events.extend(s.events.iter().cloned());
            if check(&s) {
                return (s, events);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                tokio::time::timeout(left, wake.notified()).await.is_ok(),
                "timed out waiting for {what}: {:#}\nevents: {events:?}",
                s.status
            );
        }
    }

    fn cstatus(s: &Synced) -> &Value {
        &s.status["containerStatuses"][0]
    }

    fn condition(s: &Synced, kind: &str) -> String {
        s.status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == kind)
            .map(|c| c["status"].as_str().unwrap().to_string())
            .unwrap()
    }

    #[tokio::test]
    async fn failed_liveness_kills_and_restarts_the_container() {
        let (rt, mut w, _d) = setup(Duration::from_secs(10));
        let p = pod(json!({"terminationGracePeriodSeconds": 3, "containers": [{
            "name": "a", "image": "bosun.local/busybox:1.35",
            "livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]},
                              "periodSeconds": 1, "failureThreshold": 1}}]}));
        let s = w.sync(&p).await.unwrap();
        assert_eq!(
            cstatus(&s)["ready"],
            true,
            "no readiness probe: ready once running"
        );
        let first = id_of(&rt, "a");
        rt.set_exec_result(&first, 1);
        let (s, events) =
            sync_until(&mut w, &p, "a restart", |s| cstatus(s)["restartCount"] == 1).await;
        let reasons: Vec<&str> = events.iter().map(|e| e.reason).collect();
        let unhealthy = events.iter().position(|e| e.reason == "Unhealthy").unwrap();
        let killing = events.iter().position(|e| e.reason == "Killing").unwrap();
        assert!(unhealthy < killing, "{reasons:?}");
        assert!(events[unhealthy]
            .message
            .starts_with("Liveness probe failed: "));
        assert_eq!(
            events[killing].message,
            "Container a failed liveness probe, will be restarted"
        );
        assert_eq!(
            events[killing].field_path.as_deref(),
            Some("spec.containers{a}")
        );
        assert!(
            reasons.ends_with(&["Killing", "Pulled", "Created", "Started"]),
            "{reasons:?}"
        );
        assert_eq!(s.status["phase"], "Running");
        assert!(cstatus(&s)["state"]["running"].is_object());
        assert_eq!(cstatus(&s)["lastState"]["terminated"]["exitCode"], 137);
        let calls = rt.calls();
        let stop = calls.iter().position(|c| c == "stop a").unwrap();
        assert_eq!(calls[stop + 1..stop + 3], ["create app a", "start a"]);
        // The new instance is probed afresh (and is healthy).
        let second = id_of(&rt, "a");
        assert_ne!(first, second);
        let probed = |id: &str| {
            rt.calls()
                .iter()
                .filter(|c| c.starts_with(&format!("exec {id} ")))
                .count()
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while probed(&second) == 0 {
            assert!(
                Instant::now() < deadline,
                "the new instance is never probed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let s = w.sync(&p).await.unwrap();
        assert_eq!(cstatus(&s)["restartCount"], 1);
        assert!(!s.events.iter().any(|e| e.reason == "Killing"));
    }

    #[tokio::test]
    async fn readiness_drives_ready_and_conditions_without_restarts() {
        let (rt, mut w, _d) = setup(Duration::from_secs(10));
        let p = pod(json!({"containers": [{
            "name": "a", "image": "bosun.local/busybox:1.35",
            "readinessProbe": {"exec": {"command": ["ready"]},
                               "periodSeconds": 1, "failureThreshold": 1}}]}));
        let s = w.sync(&p).await.unwrap();
        assert_eq!(s.status["phase"], "Running");
        assert_eq!(
            cstatus(&s)["ready"],
            false,
            "not ready before the first probe"
        );
        assert_eq!(cstatus(&s)["started"], true);
        assert_eq!(condition(&s, "Ready"), "False");
        assert_eq!(condition(&s, "ContainersReady"), "False");
        let (s, _) = sync_until(&mut w, &p, "ready", |s| cstatus(s)["ready"] == true).await;
        assert_eq!(condition(&s, "Ready"), "True");
        assert_eq!(condition(&s, "ContainersReady"), "True");
        rt.set_exec_result(&id_of(&rt, "a"), 1);
        let (s, events) =
            sync_until(&mut w, &p, "not ready", |s| cstatus(s)["ready"] == false).await;
        assert_eq!(condition(&s, "Ready"), "False");
        assert!(events
            .iter()
            .any(|e| e.reason == "Unhealthy" && e.message.starts_with("Readiness probe failed")));
        assert!(!events.iter().any(|e| e.reason == "Killing"));
        assert_eq!(cstatus(&s)["restartCount"], 0);
        assert!(!rt.calls().contains(&"stop a".to_string()));
    }

    #[tokio::test]
    async fn startup_probe_holds_started_and_ready() {
        let (rt, mut w, _d) = setup(Duration::from_secs(10));
        let p = pod(json!({"containers": [{
            "name": "a", "image": "bosun.local/busybox:1.35",
            "startupProbe": {"exec": {"command": ["started"]},
                             "periodSeconds": 1, "failureThreshold": 30}}]}));
        let s = w.sync(&p).await.unwrap();
        rt.set_exec_result(&id_of(&rt, "a"), 1);
        assert_eq!(cstatus(&s)["started"], false);
        assert_eq!(cstatus(&s)["ready"], false);
        assert_eq!(s.status["phase"], "Running");
        // Let it fail once, then pass.
        let (s, _) = sync_until(&mut w, &p, "a failed startup probe", |s| {
            s.events.iter().any(|e| e.reason == "Unhealthy")
        })
        .await;
        assert_eq!(cstatus(&s)["started"], false);
        rt.set_exec_result(&id_of(&rt, "a"), 0);
        let (s, _) = sync_until(&mut w, &p, "started", |s| cstatus(s)["started"] == true).await;
        assert_eq!(
            cstatus(&s)["ready"],
            true,
            "no readiness probe: ready once started"
        );
        assert_eq!(condition(&s, "Ready"), "True");
    }

    #[tokio::test]
    async fn post_start_holds_the_container_and_its_failure_restarts_it() {
        let (rt, mut w, _d) = setup(Duration::from_secs(10));
        let p = pod(json!({"containers": [{
            "name": "a", "image": "bosun.local/busybox:1.35",
            "lifecycle": {"postStart": {"exec": {"command": ["hook"]}}}}]}));
        let s = w.sync(&p).await.unwrap();
        let first = id_of(&rt, "a");
        rt.set_exec_result(&first, 1);
        // Not running until the hook is done.
        assert_eq!(
            cstatus(&s)["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
        assert_eq!(s.status["phase"], "Pending");
        let (_, events) =
            sync_until(&mut w, &p, "a restart", |s| cstatus(s)["restartCount"] == 1).await;
        let failed = events
            .iter()
            .find(|e| e.reason == "FailedPostStartHook")
            .expect("a FailedPostStartHook event");
        assert!(
            failed.message.contains("Exec lifecycle hook ([hook])")
                && failed.message.contains("Container \"a\""),
            "{}",
            failed.message
        );
        assert!(events
            .iter()
            .any(|e| e.reason == "Killing" && e.message == "FailedPostStartHook"));
        // The new instance runs its hook again; it passes this time.
        let (s, _) = sync_until(&mut w, &p, "running", |s| {
            cstatus(s)["state"]["running"].is_object()
        })
        .await;
        assert_eq!(s.status["phase"], "Running");
        let second = id_of(&rt, "a");
        assert!(rt.calls().contains(&format!("exec {second} hook")));
        // A sync that finds the instance running does not run the hook again.
        let hooks = rt.calls().iter().filter(|c| c.ends_with(" hook")).count();
        w.sync(&p).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            rt.calls().iter().filter(|c| c.ends_with(" hook")).count(),
            hooks
        );
    }

    #[tokio::test]
    async fn terminate_runs_pre_stop_before_the_stop_signal() {
        let (rt, mut w, _d) = setup(Duration::from_secs(10));
        let p = pod(json!({"containers": [
            {"name": "a", "image": "bosun.local/busybox:1.35",
             "lifecycle": {"preStop": {"exec": {"command": ["drain"]}}}},
            {"name": "b", "image": "bosun.local/busybox:1.35",
             "lifecycle": {"preStop": {"exec": {"command": ["fails"]}}}}]}));
        w.sync(&p).await.unwrap();
        let a = id_of(&rt, "a");
        rt.set_exec_result(&id_of(&rt, "b"), 1);
        let events = w.terminate(&p, Duration::from_secs(5)).await.unwrap();
        let calls = rt.calls();
        let hook = calls
            .iter()
            .position(|c| *c == format!("exec {a} drain"))
            .unwrap();
        let stop = calls.iter().position(|c| c == "stop a").unwrap();
        assert!(hook < stop, "{calls:?}");
        // A failed hook is reported and the container is stopped anyway.
        assert!(events.iter().any(|e| e.reason == "FailedPreStopHook"
            && e.field_path.as_deref() == Some("spec.containers{b}")));
        assert!(calls.contains(&"stop b".to_string()));
        assert!(rt.containers().is_empty());
    }

    #[tokio::test]
    async fn terminate_removes_everything() {
        let (rt, mut w, dir) = setup(Duration::from_secs(10));
        let p = pod(
            json!({"containers": [{"name": "a", "image": "bosun.local/busybox:1.35",
            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
            "volumes": [{"name": "scratch", "emptyDir": {}}]}),
        );
        w.sync(&p).await.unwrap();
        assert!(dir
            .path()
            .join("pods/u1/volumes/empty-dir/scratch")
            .is_dir());
        let events = w.terminate(&p, Duration::from_secs(1)).await.unwrap();
        assert_eq!(events[0].reason, "Killing");
        assert!(rt.containers().is_empty());
        assert!(!dir.path().join("pods/u1").exists());
    }
}
