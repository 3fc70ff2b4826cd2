//! Killing a pod (the kubelet's `syncTerminatingPod`, then its cleanup):
//! every container stopped within the grace period, each app container's
//! preStop hook first ([`PodWorker::stop_pod`]); the status of the stopped
//! pod, terminal, computed while its containers can still be inspected
//! ([`PodWorker::terminal_status`]); then the containers and the pod's
//! volumes removed ([`PodWorker::remove_pod`]).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodStatus};

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
        let events = self.stop_pod(pod, grace).await?;
        self.remove_pod(pod).await?;
        Ok(events)
    }

    /// Stops every running container of the pod within `grace` (each app
    /// container's preStop hook first); the sandbox and the stopped
    /// containers stay, to be inspected. Returns the events to record.
    pub async fn stop_pod(
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
        Ok(std::mem::take(&mut self.events))
    }

    /// The status of the pod once [`stop_pod`](Self::stop_pod) stopped it,
    /// as the kubelet writes it before the pod object goes: each container
    /// terminated with its exit code, Ready and ContainersReady False, the
    /// phase Succeeded or Failed. `None` if the pod had already finished
    /// (its status stays as it is).
    pub async fn terminal_status(&mut self, pod: &Pod) -> Result<Option<PodStatus>, RuntimeError> {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded") | Some("Failed")) {
            return Ok(None);
        }
        // What a sync found waiting (CrashLoopBackOff, ...) no longer
        // applies: the containers are as they were left.
        self.waiting.clear();
        let containers = self.pod_containers(&uid_of(pod)).await?;
        let pod_ip = self.pod_ip(pod, || {
            containers
                .iter()
                .filter(|c| c.role == Role::Sandbox)
                .find_map(|c| c.ip.clone())
                .or_else(|| pod.status.as_ref().and_then(|s| s.pod_ip.clone()))
        });
        Ok(Some(self.compute_status(pod, &containers, pod_ip, true)))
    }

    /// Removes every container of the pod (the sandbox too, killing what
    /// still runs) and its volumes.
    pub async fn remove_pod(&mut self, pod: &Pod) -> Result<(), RuntimeError> {
        let uid = uid_of(pod);
        let containers = self.pod_containers(&uid).await?;
        // The sandbox goes with the stopped containers (a forced removal
        // kills it; stopping it first was one more Docker round trip per
        // pod in a rolling update).
        let removals = containers.iter().map(|c| self.rt.remove_container(&c.id));
        for r in futures::future::join_all(removals).await {
            r?;
        }
        volumes::teardown(&self.cfg, &uid);
        Ok(())
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
