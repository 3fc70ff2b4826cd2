//! The pod worker's side of probes and the postStart hook: one
//! [`ProbeRunner`] per running app container instance that needs one, and
//! acting on what the runners found (recording their events, killing a
//! container whose liveness or startup probe or postStart hook failed).

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::kill::stop_container;
use super::worker_state::{app_containers, latest, PodWorker};
use crate::events::PodEvent;
use crate::probes::{self, Action, KillReason, ProbeRunner, Target};
use crate::runtime::{ContainerInfo, ContainerState, Role, RuntimeError};

impl PodWorker {
    /// Where probes and hooks of container instance `id` go.
    pub(super) fn target(&self, c: Option<&Container>, id: &str, pod_ip: Option<&str>) -> Target {
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
    pub(super) fn ensure_runners(
        &mut self,
        pod: &Pod,
        containers: &[ContainerInfo],
        pod_ip: Option<&str>,
    ) {
        let specs = app_containers(pod);
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
    pub(super) async fn act_on_probe_results(
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
        let specs = app_containers(pod);
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
                    self.record(
                        PodEvent::warning(
                            "FailedPostStartHook",
                            probes::hook_failure_message(pod, &name, msg),
                        )
                        .about(Role::App, &name),
                    );
                    ("FailedPostStartHook".to_string(), None)
                }
            };
            self.record(PodEvent::normal("Killing", message).about(Role::App, &name));
            let grace = Duration::from_secs(probe_grace.unwrap_or(pod_grace).max(0) as u64);
            let target = self.target(Some(c), &id, pod_ip);
            if let Some(e) = stop_container(&target, pod, c, grace).await? {
                self.record(e);
            }
            killed = true;
        }
        Ok(killed)
    }
}
