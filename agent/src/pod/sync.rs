//! One sync of a pod (the kubelet's `SyncPod`): look at the pod's
//! containers as they are and take the next steps toward its spec, in
//! order:
//!
//! 1. [`ensure_sandbox`](PodWorker::ensure_sandbox): keep the running
//!    sandbox, or kill everything and make a new one (with the pod's
//!    RuntimeClass handler); one that cannot be made leaves the pod
//!    Pending (FailedCreatePodSandBox);
//! 2. [`act_on_probe_results`](PodWorker::act_on_probe_results): kill what
//!    failed its liveness or startup probe or its postStart hook;
//! 3. [`mount_volumes`](PodWorker::mount_volumes);
//! 4. [`run_ephemeral_containers`](PodWorker::run_ephemeral_containers)
//!    not started yet (never restarted), then
//!    [`run_init_containers`](PodWorker::run_init_containers), one at a
//!    time, then [`run_app_containers`](PodWorker::run_app_containers);
//!    exited ones restart per restartPolicy with crash-loop back-off;
//! 5. [`ensure_runners`](PodWorker::ensure_runners) for the probes of the
//!    running containers;
//! 6. [`compute_status`](PodWorker::compute_status).
//!
//! What cannot proceed becomes a waiting reason in the status
//! (ContainerCreating, ErrImagePull, ImagePullBackOff, CrashLoopBackOff,
//! CreateContainerConfigError), not an error up the stack. A pod that has
//! finished stays finished.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::Utc;
use k8s_openapi::api::core::v1::{Pod, PodStatus};

use super::worker_state::{uid_of, PodWorker};
use crate::events::PodEvent;
use crate::probes::HookState;
use crate::runtime::{ContainerInfo, Role, RuntimeError};
use crate::status::{self, Observed};
use crate::volumes;

/// The outcome of one sync.
#[derive(Debug)]
pub struct Synced {
    /// The pod's status as it now is.
    pub status: PodStatus,
    /// When the worker should look again even if nothing happens.
    pub wake_after: Duration,
    pub events: Vec<PodEvent>,
}

impl Synced {
    /// The status as the status manager writes it.
    pub fn status_json(&self) -> serde_json::Value {
        status::to_json(&self.status)
    }
}

fn is_finished(phase: Option<&str>) -> bool {
    matches!(phase, Some("Succeeded") | Some("Failed"))
}

impl PodWorker {
    /// Brings the pod's containers one step closer to its spec and reports
    /// its status.
    pub async fn sync_pod(&mut self, pod: &Pod) -> Result<Synced, RuntimeError> {
        self.waiting.clear();
        self.events.clear();
        let uid = uid_of(pod);
        let mut containers = self.pod_containers(&uid).await?;
        let previous_phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if is_finished(previous_phase) {
            return Ok(self.keep_finished(pod, &containers).await);
        }

        let Some(sandbox) = self.ensure_sandbox(pod, &mut containers).await? else {
            // Tried again after a back-off, as the kubelet's pod worker.
            return Ok(Synced {
                status: self.compute_status(pod, &containers, None, false),
                wake_after: self.until_backoff_ends(self.cfg.backoff_base),
                events: std::mem::take(&mut self.events),
            });
        };
        let pod_ip = sandbox.pod_ip.as_deref();
        if self.act_on_probe_results(pod, &containers, pod_ip).await? {
            containers = self.pod_containers(&uid).await?;
        }
        let mut wake_after = self.cfg.sync_period;
        if self.mount_volumes(pod) {
            self.run_ephemeral_containers(pod, &containers, &sandbox)
                .await?;
            if self.run_init_containers(pod, &containers, &sandbox).await? {
                self.run_app_containers(pod, &containers, &sandbox).await?;
            }
            containers = self.pod_containers(&uid).await?;
            self.timeline.mark("listed");
            self.prune(&containers).await;
        } else {
            wake_after = self.cfg.backoff_base;
        }
        self.ensure_runners(pod, &containers, pod_ip);
        let status = self.compute_status(pod, &containers, sandbox.pod_ip.clone(), false);
        if is_finished(status.phase.as_deref()) {
            self.stop_sandbox(&containers).await;
        }
        Ok(Synced {
            status,
            wake_after: self.until_backoff_ends(wake_after),
            events: std::mem::take(&mut self.events),
        })
    }

    /// A finished pod stays finished: nothing restarts, the sandbox goes,
    /// the status stays as it is.
    async fn keep_finished(&mut self, pod: &Pod, containers: &[ContainerInfo]) -> Synced {
        self.runners.clear();
        self.stop_sandbox(containers).await;
        Synced {
            status: pod.status.clone().unwrap_or_default(),
            wake_after: self.cfg.sync_period,
            events: std::mem::take(&mut self.events),
        }
    }

    /// Sets up the pod's volumes; false (a `FailedMount` event, every
    /// container waiting in ContainerCreating) if they cannot be.
    pub(super) fn mount_volumes(&mut self, pod: &Pod) -> bool {
        let result = if self.unmountable_claims.is_empty() {
            volumes::setup(pod, &self.cfg, &self.config_sources)
        } else {
            // As the kubelet's volume manager says it.
            let names: Vec<&str> = pod
                .spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .filter(|v| v.persistent_volume_claim.is_some())
                .map(|v| v.name.as_str())
                .collect();
            Err(format!(
                "Unable to attach or mount volumes: unmounted volumes=[{}]: {}",
                names.join(" "),
                self.unmountable_claims.join("; ")
            ))
        };
        let Err(e) = result else {
            return true;
        };
        self.record(PodEvent::warning("FailedMount", e.clone()));
        let spec = pod.spec.clone().unwrap_or_default();
        for c in spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
        {
            self.set_waiting(&c.name, "ContainerCreating", e.clone());
        }
        for (c, _) in crate::spec::ephemeral_containers(pod) {
            self.set_waiting(&c.name, "ContainerCreating", e.clone());
        }
        false
    }

    /// The pod's status from its containers, this sync's waiting reasons
    /// and the probe runners' results; `terminal` once a deleted pod's
    /// containers are stopped (see [`Observed::terminal`]).
    pub(super) fn compute_status(
        &mut self,
        pod: &Pod,
        containers: &[ContainerInfo],
        pod_ip: Option<String>,
        terminal: bool,
    ) -> PodStatus {
        let mut ready = BTreeMap::new();
        let mut started = BTreeMap::new();
        let mut creating = Vec::new();
        for (name, r) in &self.runners {
            let view = r.view();
            if view.post_start == HookState::Running {
                // As in Kubernetes, a container is not running until its
                // postStart hook has finished.
                creating.push(name.clone());
            }
            ready.insert(name.clone(), view.ready);
            started.insert(name.clone(), view.started);
        }
        for name in creating {
            self.set_waiting(&name, "ContainerCreating", String::new());
        }
        let app_containers: Vec<ContainerInfo> = containers
            .iter()
            .filter(|c| c.role != Role::Sandbox)
            .cloned()
            .collect();
        status::pod_status(&Observed {
            pod,
            containers: &app_containers,
            waiting: &self.waiting,
            ready: &ready,
            started: &started,
            pod_ip,
            host_ip: self.cfg.node_ip.clone(),
            failed: None,
            terminal,
            now: Utc::now(),
        })
    }

    /// `wake_after`, or sooner if a back-off ends sooner.
    fn until_backoff_ends(&self, wake_after: Duration) -> Duration {
        let now = Instant::now();
        match self.backoff.next_end(now) {
            Some(end) => wake_after.min(end - now + Duration::from_millis(50)),
            None => wake_after,
        }
    }
}
