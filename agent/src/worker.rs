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

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::Value;

use crate::config::AgentConfig;
use crate::runtime::{ContainerInfo, ContainerRuntime, ContainerState, Role, RuntimeError};
use crate::spec;
use crate::status::{self, Observed, Waiting};
use crate::volumes;

/// An event to record on the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEvent {
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    pub reason: &'static str,
    pub message: String,
    /// `spec.containers{name}`, as the kubelet sets it.
    pub field_path: Option<String>,
}

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
        }
    }

    fn event(
        &mut self,
        type_: &'static str,
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
                        "Normal",
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

        let mut wake_after = self.cfg.sync_period;
        match volumes::setup(pod, &self.cfg) {
            Err(e) => {
                self.event("Warning", "FailedMount", e.clone(), None);
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

        let app_containers: Vec<ContainerInfo> = containers
            .iter()
            .filter(|c| c.role != Role::Sandbox)
            .cloned()
            .collect();
        let status = status::pod_status(&Observed {
            pod,
            containers: &app_containers,
            waiting: &self.waiting,
            ready: &BTreeMap::new(),
            started: &BTreeMap::new(),
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
                                    "Warning",
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
                self.event(
                    "Normal",
                    "Started",
                    format!("Started container {name}"),
                    field_path(role, name),
                );
                Ok(())
            }
            Err(e) => {
                self.event(
                    "Warning",
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
                self.event("Warning", "ErrImageNeverPull", message.clone(), path);
                self.waiting
                    .insert(c.name.clone(), wait("ErrImageNeverPull", message));
                return Ok(false);
            }
            "IfNotPresent" | "Never" if present => {
                self.event(
                    "Normal",
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
            "Normal",
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
                    "Normal",
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
                self.event("Warning", "Failed", message.clone(), path);
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
                self.event("Warning", "Failed", format!("Error: {e}"), path);
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
                    "Normal",
                    "Created",
                    format!("Created container {}", c.name),
                    path,
                );
                self.start(role, &c.name, &id).await
            }
            Err(e) => {
                self.event("Warning", "Failed", format!("Error: {e}"), path);
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

    /// Stops every container of the pod within `grace` and removes them
    /// and the pod's volumes.
    pub async fn terminate(
        &mut self,
        pod: &Pod,
        grace: Duration,
    ) -> Result<Vec<PodEvent>, RuntimeError> {
        self.events.clear();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let containers = self.pod_containers(&uid).await?;
        let running: Vec<&ContainerInfo> = containers
            .iter()
            .filter(|c| c.role != Role::Sandbox && c.state == ContainerState::Running)
            .collect();
        for c in &running {
            self.event(
                "Normal",
                "Killing",
                format!("Stopping container {}", c.name),
                field_path(c.role, &c.name),
            );
        }
        let stops = running.iter().map(|c| self.rt.stop_container(&c.id, grace));
        for r in futures::future::join_all(stops).await {
            r?;
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
