//! The pod's sandbox (its pause container, which owns the pod's network
//! namespace): found running, or made afresh after killing whatever the
//! pod had, as kuberuntime's `SyncPod` does when the sandbox changed.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::worker_state::{host_network, PodWorker};
use crate::config::AgentConfig;
use crate::events::PodEvent;
use crate::runtime::{ContainerInfo, ContainerRuntime, ContainerState, Role, RuntimeError};
use crate::spec;

/// The pod's running sandbox: what its containers join.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub id: String,
    /// The pod's IP (the node's with hostNetwork).
    pub pod_ip: Option<String>,
}

/// Makes sure the node's pod network exists (with the node's pod CIDR).
pub async fn ensure_pod_network(
    rt: &dyn ContainerRuntime,
    cfg: &AgentConfig,
) -> Result<(), RuntimeError> {
    rt.ensure_network(&cfg.network_name(), &cfg.pod_cidr, &cfg.node_name)
        .await
}

impl PodWorker {
    /// The pod's sandbox: its newest one if that runs; else every
    /// container of the pod is killed (a dead sandbox took their network
    /// with it) and a new sandbox made; `containers` then holds only it.
    /// None when the sandbox cannot be made (its RuntimeClass cannot be
    /// read, the engine refuses it): a `FailedCreatePodSandBox` event is
    /// recorded and every container waits in ContainerCreating.
    pub(super) async fn ensure_sandbox(
        &mut self,
        pod: &Pod,
        containers: &mut Vec<ContainerInfo>,
    ) -> Result<Option<Sandbox>, RuntimeError> {
        let newest = containers
            .iter()
            .filter(|c| c.role == Role::Sandbox)
            .max_by_key(|c| c.created_at)
            .cloned();
        let running = newest.filter(|s| s.state == ContainerState::Running);
        // Looked up once per worker: after an agent restart too, for the
        // containers that join a running sandbox.
        if self.runtime_handler.is_none() {
            match self.lookup_runtime_handler(pod).await {
                Ok(handler) => self.runtime_handler = Some(handler),
                Err(e) if running.is_none() => {
                    self.sandbox_failed(pod, e);
                    return Ok(None);
                }
                Err(e) => tracing::warn!(error = %e, "looking up the pod's RuntimeClass"),
            }
        }
        let sandbox = match running {
            Some(s) => s,
            None => {
                if !containers.is_empty() {
                    self.kill_sandbox_and_containers(containers).await?;
                    containers.clear();
                }
                match self.create_sandbox(pod, containers).await? {
                    Ok(s) => s,
                    Err(e) => {
                        self.sandbox_failed(pod, e.to_string());
                        return Ok(None);
                    }
                }
            }
        };
        Ok(Some(Sandbox {
            pod_ip: self.pod_ip(pod, || sandbox.ip.clone()),
            id: sandbox.id,
        }))
    }

    async fn lookup_runtime_handler(&self, pod: &Pod) -> Result<Option<String>, String> {
        match &self.runtime_classes {
            Some(classes) => classes.handler_for(pod).await,
            None => Ok(None),
        }
    }

    /// As the kubelet's SyncPod when `createPodSandbox` fails.
    fn sandbox_failed(&mut self, pod: &Pod, error: String) {
        self.record(PodEvent::warning(
            "FailedCreatePodSandBox",
            format!("Failed to create pod sandbox: {error}"),
        ));
        let spec = pod.spec.clone().unwrap_or_default();
        for c in spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
        {
            self.set_waiting(&c.name, "ContainerCreating", String::new());
        }
    }

    /// Removes every container of the pod, remembering the restart counts
    /// its containers reached so the new ones go on counting.
    async fn kill_sandbox_and_containers(
        &mut self,
        containers: &[ContainerInfo],
    ) -> Result<(), RuntimeError> {
        self.record(PodEvent::normal(
            "SandboxChanged",
            "Pod sandbox changed, it will be killed and re-created.",
        ));
        for c in containers {
            if c.role != Role::Sandbox {
                let floor = self.restart_floor.entry(c.name.clone()).or_default();
                *floor = (*floor).max(c.restart_count + 1);
            }
            self.rt
                .stop_container(&c.id, Duration::from_secs(0))
                .await?;
            self.rt.remove_container(&c.id).await?;
        }
        Ok(())
    }

    /// Runs a new sandbox for the pod; `containers` (emptied by the kill
    /// before, if the pod had any) then holds it. Only the new sandbox is
    /// inspected: listing the pod's containers again cost every new pod
    /// one more Docker list in a burst. The inner error: the engine
    /// refused this pod's sandbox (the node's network and pause image
    /// failing are the outer one).
    async fn create_sandbox(
        &mut self,
        pod: &Pod,
        containers: &mut Vec<ContainerInfo>,
    ) -> Result<Result<ContainerInfo, RuntimeError>, RuntimeError> {
        if !host_network(pod) {
            ensure_pod_network(self.rt.as_ref(), &self.cfg).await?;
        }
        self.rt.ensure_pause_image().await?;
        self.timeline.mark("pause_image");
        let mut config = spec::sandbox_config(pod, &self.cfg);
        config.runtime = self.runtime_handler.clone().flatten();
        let id = match self.rt.run_sandbox(&self.cfg.node_name, &config).await {
            Ok(id) => id,
            Err(e) => return Ok(Err(e)),
        };
        self.timeline.mark("sandbox");
        let info = self.rt.inspect_container(&id).await?;
        self.timeline.mark("sandbox_inspected");
        *containers = vec![info.clone()];
        Ok(Ok(info))
    }

    /// Stops the sandbox of a pod that has finished (its containers stay
    /// for their logs and status).
    pub(super) async fn stop_sandbox(&self, containers: &[ContainerInfo]) {
        for c in containers
            .iter()
            .filter(|c| c.role == Role::Sandbox && c.state == ContainerState::Running)
        {
            if let Err(e) = self.rt.stop_container(&c.id, Duration::from_secs(2)).await {
                tracing::warn!(container = %c.id, error = %e, "stopping a finished pod's sandbox");
            }
        }
    }
}
