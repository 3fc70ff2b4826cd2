//! Killing a pod (the kubelet's `KillPod`, then its cleanup): every
//! container stopped within the grace period, each app container's
//! preStop hook first, then the containers and the pod's volumes removed.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::worker_state::{app_containers, uid_of, PodWorker};
use crate::events::PodEvent;
use crate::probes::{self, Target};
use crate::runtime::{ContainerInfo, ContainerState, Role, RuntimeError};
use crate::volumes;

impl PodWorker {
    /// Stops every container of the pod within `grace` (each app
    /// container's preStop hook first) and removes them and the pod's
    /// volumes. Returns the events to record.
    pub async fn kill_pod(
        &mut self,
        pod: &Pod,
        grace: Duration,
    ) -> Result<Vec<PodEvent>, RuntimeError> {
        self.events.clear();
        // No probe may kill or restart anything from here on.
        self.runners.clear();
        let uid = uid_of(pod);
        let containers = self.pod_containers(&uid).await?;
        let pod_ip = self.pod_ip(pod, || {
            containers
                .iter()
                .filter(|c| c.role == Role::Sandbox)
                .find_map(|c| c.ip.clone())
        });
        let specs = app_containers(pod);
        let running: Vec<&ContainerInfo> = containers
            .iter()
            .filter(|c| c.role != Role::Sandbox && c.state == ContainerState::Running)
            .collect();
        for c in &running {
            self.record(
                PodEvent::normal("Killing", format!("Stopping container {}", c.name))
                    .about(c.role, &c.name),
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
                self.record(e);
            }
        }
        // The app containers are stopped: the rest go at once, the
        // sandbox with them (a forced removal kills it; stopping it first
        // was one more Docker round trip per pod in a rolling update).
        let removals = containers.iter().map(|c| self.rt.remove_container(&c.id));
        for r in futures::future::join_all(removals).await {
            r?;
        }
        volumes::teardown(&self.cfg, &uid);
        Ok(std::mem::take(&mut self.events))
    }
}

/// Stops one container the way the kubelet does: its preStop hook within
/// `grace`, then SIGTERM and, after what is left of `grace`, SIGKILL.
/// Returns the `FailedPreStopHook` event when the hook failed (the stop
/// goes on regardless).
pub(super) async fn stop_container(
    target: &Target,
    pod: &Pod,
    c: &Container,
    grace: Duration,
) -> Result<Option<PodEvent>, RuntimeError> {
    let hook = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref());
    let (left, failure) = probes::run_pre_stop(target, hook, grace).await;
    target.rt.stop_container(&target.container_id, left).await?;
    Ok(failure.map(|msg| {
        PodEvent::warning(
            "FailedPreStopHook",
            probes::hook_failure_message(pod, &c.name, &msg),
        )
        .about(Role::App, &c.name)
    }))
}
