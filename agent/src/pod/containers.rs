//! Starting the pod's init and app containers, as kuberuntime's `SyncPod`
//! does after the sandbox: init containers one at a time in order, then
//! every app container; an exited container restarts per restartPolicy,
//! after its crash-loop back-off. Old instances beyond the newest two are
//! pruned.

use std::collections::BTreeMap;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::backoff::BackoffKey;
use super::sandbox::Sandbox;
use super::worker_state::{app_containers, init_containers, latest, PodWorker};
use crate::events::PodEvent;
use crate::runtime::{ContainerInfo, ContainerState, Role, RuntimeError};
use crate::spec;

/// The pod's restartPolicy (`Always` unless it says otherwise).
fn restart_policy(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.clone())
        .unwrap_or_else(|| "Always".into())
}

/// Whether an exited container is restarted under `policy`.
fn should_restart(policy: &str, role: Role, exit_code: i64) -> bool {
    match (policy, role) {
        ("Never", _) => false,
        (_, Role::Init) | ("OnFailure", _) => exit_code != 0,
        _ => true,
    }
}

impl PodWorker {
    /// Runs init containers one at a time; true once all have succeeded.
    pub(super) async fn run_init_containers(
        &mut self,
        pod: &Pod,
        containers: &[ContainerInfo],
        sandbox: &Sandbox,
    ) -> Result<bool, RuntimeError> {
        let inits = init_containers(pod);
        for c in &inits {
            let done = latest(containers, Role::Init, &c.name)
                .is_some_and(|l| l.state == ContainerState::Exited && l.exit_code == Some(0));
            if done {
                continue;
            }
            // A failed init container with restartPolicy Never stays failed;
            // the status makes the pod Failed.
            self.run_container(pod, Role::Init, c, containers, sandbox)
                .await?;
            return Ok(false);
        }
        Ok(true)
    }

    /// Makes sure every app container runs if it should.
    pub(super) async fn run_app_containers(
        &mut self,
        pod: &Pod,
        containers: &[ContainerInfo],
        sandbox: &Sandbox,
    ) -> Result<(), RuntimeError> {
        let apps = app_containers(pod);
        for c in &apps {
            self.run_container(pod, Role::App, c, containers, sandbox)
                .await?;
        }
        Ok(())
    }

    /// Makes sure container `c` runs if it should: starts it the first
    /// time, restarts it per policy with back-off, or leaves it be.
    async fn run_container(
        &mut self,
        pod: &Pod,
        role: Role,
        c: &Container,
        containers: &[ContainerInfo],
        sandbox: &Sandbox,
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
                    if !should_restart(&restart_policy(pod), role, code) {
                        return Ok(());
                    }
                    if !self.restart_backoff_over(pod, role, &c.name, l) {
                        return Ok(());
                    }
                    l.restart_count + 1
                }
            },
        };
        self.create_and_start(pod, role, c, restart_count, sandbox, None)
            .await
    }

    /// Whether exited instance `last` of container `name` may restart now.
    /// If so, the next crash-loop back-off starts (from the base again when
    /// `last` ran long enough); if not, the container waits in
    /// `CrashLoopBackOff` (with one `BackOff` event per wait).
    fn restart_backoff_over(
        &mut self,
        pod: &Pod,
        role: Role,
        name: &str,
        last: &ContainerInfo,
    ) -> bool {
        let key = BackoffKey::Restart(name.to_string());
        let now = Instant::now();
        if let Some(wait) = self.backoff.waiting(&key, now) {
            let message = format!(
                "back-off {:?} restarting failed container={} pod={}_{}({})",
                wait.delay,
                name,
                pod.metadata.name.as_deref().unwrap_or(""),
                pod.metadata.namespace.as_deref().unwrap_or(""),
                pod.metadata.uid.as_deref().unwrap_or("")
            );
            if self.backoff.announce(&key) {
                self.record(
                    PodEvent::warning("BackOff", "Back-off restarting failed container")
                        .about(role, name),
                );
            }
            self.set_waiting(name, "CrashLoopBackOff", message);
            return false;
        }
        let ran_long = match (last.started_at, last.finished_at) {
            (Some(s), Some(f)) => (f - s).to_std().unwrap_or_default() >= self.cfg.backoff_reset,
            _ => false,
        };
        self.backoff.start(key, now, ran_long);
        true
    }

    /// Records that container `name` could not be made or started: a
    /// `Failed` event and the waiting `reason`.
    pub(super) fn container_failed(
        &mut self,
        role: Role,
        name: &str,
        reason: &str,
        error: &dyn std::fmt::Display,
    ) {
        self.record_and_wait(
            PodEvent::warning("Failed", format!("Error: {error}")).about(role, name),
            name,
            reason,
            error.to_string(),
        );
    }

    pub(super) async fn start(
        &mut self,
        role: Role,
        name: &str,
        id: &str,
    ) -> Result<(), RuntimeError> {
        match self.rt.start_container(id).await {
            Ok(()) => {
                self.timeline.mark("started");
                if role == Role::App {
                    self.fresh.insert(id.to_string());
                }
                self.record(
                    PodEvent::normal("Started", format!("Started container {name}"))
                        .about(role, name),
                );
            }
            Err(e) => self.container_failed(role, name, "RunContainerError", &e),
        }
        Ok(())
    }

    /// Makes and starts container `c`; `pid_target` is the engine id of
    /// the container whose PID namespace it joins (an ephemeral
    /// container's target).
    pub(super) async fn create_and_start(
        &mut self,
        pod: &Pod,
        role: Role,
        c: &Container,
        restart_count: u32,
        sandbox: &Sandbox,
        pid_target: Option<&str>,
    ) -> Result<(), RuntimeError> {
        if !self.ensure_image(role, c).await? {
            return Ok(());
        }
        self.timeline.mark("image");
        let service_env = match &self.services {
            Some(services) => services.for_pod(pod),
            None => Ok(Vec::new()),
        };
        let mut config = match service_env.and_then(|service_env| {
            spec::container_config(
                pod,
                c,
                sandbox.pod_ip.as_deref(),
                restart_count,
                &self.cfg,
                &self.config_sources,
                &service_env,
            )
            .map_err(|e| e.0)
        }) {
            Ok(mut cfg) => {
                cfg.pid_target = pid_target.map(str::to_string);
                cfg
            }
            Err(e) => {
                self.container_failed(role, &c.name, "CreateContainerConfigError", &e);
                return Ok(());
            }
        };
        config.runtime = self.runtime_handler.clone().flatten();
        let pod_ref = spec::pod_ref(pod);
        // envFrom keys that are not variable names were left out; say so,
        // as the kubelet does.
        if let Ok(env) = self.config_sources.env_for(&pod_ref.namespace, c) {
            for msg in env.skipped {
                self.record(PodEvent::warning("InvalidEnvironmentVariableNames", msg));
            }
        }
        match self
            .rt
            .create_container(&self.cfg.node_name, &pod_ref, role, &sandbox.id, &config)
            .await
        {
            Ok(id) => {
                self.timeline.mark("created");
                self.record(
                    PodEvent::normal("Created", format!("Created container {}", c.name))
                        .about(role, &c.name),
                );
                self.start(role, &c.name, &id).await
            }
            Err(e) => {
                self.container_failed(role, &c.name, "CreateContainerError", &e);
                Ok(())
            }
        }
    }

    /// Keeps the newest instance of each container and the one before it
    /// (for `logs --previous` and lastState); removes older ones.
    pub(super) async fn prune(&self, containers: &[ContainerInfo]) {
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
}
