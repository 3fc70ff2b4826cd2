//! The pod workers and the loop that drives each, as the kubelet's
//! `podWorkers`: the agent's sync loop hands every pod bound to the node
//! to [`PodWorkers::update_pod`], which gives each pod a task running
//! [`pod_worker_loop`]. The loop syncs the pod ([`PodWorker::sync_pod`])
//! and writes its status whenever the pod object changes, the relist sees
//! its containers change, a probe result matters, or the sync's
//! `wake_after` passes. A deleted pod is stopped within its grace period
//! ([`PodWorker::stop_pod`]), its containers removed, its terminal status
//! written (containers terminated, not Ready, Succeeded or Failed), and
//! only then its object, as the kubelet's `syncTerminatingPod` and status
//! manager do. Until its containers are stopped the pod keeps the
//! readiness it had (a terminating endpoint may still serve).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::Client;
use tokio::sync::{watch, Notify};

use super::runtime_class::RuntimeClasses;
use super::worker_state::{uid_of, PodWorker};
use crate::config::service_env::ServiceEnv;
use crate::config::AgentConfig;
use crate::events::Recorder;
use crate::runtime::ContainerRuntime;
use crate::status::status_manager::StatusManager;
use crate::volumes::volume_manager::VolumeManager;

/// One pod's worker task, as the agent's sync loop holds it.
struct WorkerHandle {
    /// The pod object as last watched (shared with the worker, which
    /// keeps no copy of its own between syncs); `None` once it is gone.
    pod: watch::Sender<Option<Arc<Pod>>>,
    /// Wakes the worker when the relist sees its containers change.
    poke: Arc<Notify>,
}

/// The pod workers of this node, by pod UID (the kubelet's `podWorkers`).
pub struct PodWorkers {
    rt: Arc<dyn ContainerRuntime>,
    cfg: Arc<AgentConfig>,
    client: Client,
    recorder: Recorder,
    /// The node's volume manager (and ConfigMap and Secret managers).
    volumes: VolumeManager,
    /// The Services whose variables containers get, if watched.
    services: Option<ServiceEnv>,
    workers: HashMap<String, WorkerHandle>,
}

impl PodWorkers {
    pub fn new(
        rt: Arc<dyn ContainerRuntime>,
        cfg: Arc<AgentConfig>,
        client: Client,
        recorder: Recorder,
    ) -> Self {
        PodWorkers {
            rt,
            cfg,
            volumes: VolumeManager::new(client.clone()),
            client,
            recorder,
            services: None,
            workers: HashMap::new(),
        }
    }

    /// Gives every container the variables of the Services in `services`.
    pub fn with_services(mut self, services: ServiceEnv) -> Self {
        self.services = Some(services);
        self
    }

    /// Hands the pod's latest object to its worker, starting a worker
    /// (a task running [`pod_worker_loop`]) if the pod has none running
    /// (the kubelet's `UpdatePod`).
    pub fn update_pod(&mut self, mut pod: Pod) {
        // Who wrote which field is of no use to the agent, and was the
        // larger part of each copy of a pod it held.
        pod.metadata.managed_fields = None;
        let pod = Arc::new(pod);
        let uid = uid_of(&pod);
        if let Some(w) = self.workers.get(&uid) {
            if !w.pod.is_closed() {
                let _ = w.pod.send(Some(pod));
                return;
            }
        }
        let (tx, rx) = watch::channel(Some(pod));
        let poke = Arc::new(Notify::new());
        self.workers.insert(
            uid,
            WorkerHandle {
                pod: tx,
                poke: poke.clone(),
            },
        );
        let mut worker = PodWorker::new(self.rt.clone(), self.cfg.clone());
        worker.services = self.services.clone();
        worker.runtime_classes = Some(RuntimeClasses::new(self.client.clone()));
        tokio::spawn(pod_worker_loop(
            worker,
            StatusManager::new(self.client.clone()),
            self.volumes.clone(),
            self.recorder.clone(),
            rx,
            poke,
        ));
    }

    /// Tells the worker of pod `uid` that the pod object is gone.
    pub fn pod_gone(&self, uid: &str) {
        if let Some(w) = self.workers.get(uid) {
            let _ = w.pod.send(None);
        }
    }

    /// Tells every worker whose pod is not `listed` that its pod is gone.
    pub fn keep_only(&self, listed: &HashSet<String>) {
        for (uid, w) in &self.workers {
            if !listed.contains(uid) {
                let _ = w.pod.send(None);
            }
        }
    }

    /// Forgets the workers whose loop has ended.
    pub fn forget_finished(&mut self) {
        self.workers.retain(|_, w| !w.pod.is_closed());
    }

    /// Wakes the worker of every pod `changed` holds for.
    pub fn poke(&self, changed: impl Fn(&str) -> bool) {
        for (uid, w) in &self.workers {
            if changed(uid) {
                w.poke.notify_one();
            }
        }
    }

    /// Whether pod `uid` has a worker (it may be finishing the pod).
    pub fn contains(&self, uid: &str) -> bool {
        self.workers.contains_key(uid)
    }
}

/// One pod's loop (the kubelet's `podWorkerLoop`): find what the pod's
/// volumes are made of, sync the pod and have its status written, then
/// wait for the next reason to look again; kill the pod once it is being
/// deleted or its object is gone.
pub async fn pod_worker_loop(
    mut worker: PodWorker,
    mut status: StatusManager,
    volumes: VolumeManager,
    recorder: Recorder,
    mut rx: watch::Receiver<Option<Arc<Pod>>>,
    poke: Arc<Notify>,
) {
    let mut last_pod: Option<Arc<Pod>> = None;
    let mut retry = Duration::from_millis(500);
    // A deleted pod's terminal status, once computed.
    let mut terminal = None;
    // Probe results that change the pod's status or need acting on, and
    // changes of the ConfigMaps and Secrets it reads.
    let wake = worker.wake_handle();
    // However the loop ends, the pod lets go of its ConfigMaps and Secrets.
    let uid = rx.borrow().as_deref().map(uid_of).unwrap_or_default();
    let _release = Released(&volumes, uid);
    loop {
        let current = rx.borrow_and_update().clone();
        let Some(pod) = current else {
            // The pod object is gone (force-deleted): stop at once.
            if let Some(p) = &last_pod {
                Box::pin(kill(&mut worker, &recorder, p, Duration::from_secs(0))).await;
            }
            return;
        };
        last_pod = Some(pod.clone());
        if pod.metadata.deletion_timestamp.is_some() {
            let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(30);
            let grace = Duration::from_secs(grace.max(0) as u64);
            let ended = terminate(
                &mut worker,
                &mut status,
                &recorder,
                &pod,
                grace,
                &mut terminal,
            );
            if Box::pin(ended).await {
                status.finish_deletion(&pod).await;
                return;
            }
            tokio::time::sleep(retry).await;
            continue;
        }
        // Boxed: what a sync holds (the pod as seen, its volumes, Docker's
        // answers) is freed when it ends, rather than sized into this
        // task's future for the pod's whole life.
        let wake_after = Box::pin(sync_once(
            &mut worker,
            &mut status,
            &volumes,
            &recorder,
            &wake,
            &pod,
            &mut retry,
        ))
        .await;
        drop(pod);
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { return },
            _ = poke.notified() => {}
            _ = wake.notified() => {}
            _ = tokio::time::sleep(wake_after) => {}
        }
    }
}

/// One sync of the pod and the write of its status; when to look again.
async fn sync_once(
    worker: &mut PodWorker,
    status: &mut StatusManager,
    volumes: &VolumeManager,
    recorder: &Recorder,
    wake: &Arc<Notify>,
    pod: &Pod,
    retry: &mut Duration,
) -> Duration {
    status.notice_other_writers(pod);
    let seen = status.with_own_status(pod);
    let mut prepared = volumes.prepare(&seen, &worker.config_sources, wake).await;
    drop(seen);
    worker.timeline.mark("volumes");
    let seen = worker.use_volumes(&mut prepared);
    let wake_after = match worker.sync_pod(&seen).await {
        Ok(synced) => {
            *retry = Duration::from_millis(500);
            recorder.pod_events(pod, synced.events);
            let ready = is_ready(&synced.status);
            if status.set_pod_status(pod, synced.status).await {
                worker.timeline.mark("status");
                if ready {
                    worker.timeline.mark("ready");
                    worker.timeline.report(&pod_key(pod));
                }
            }
            synced.wake_after
        }
        Err(e) => {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            tracing::warn!(pod = %name, error = %e, "syncing pod; retrying in {retry:?}");
            *retry = (*retry * 2).min(Duration::from_secs(10));
            *retry
        }
    };
    wake_after.min(volumes.recheck_after(&prepared, status.waits_on_config()))
}

/// Whether the status says the pod is Ready.
fn is_ready(status: &k8s_openapi::api::core::v1::PodStatus) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// `namespace/name`, as logs name a pod.
fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Releases the pod's references when its loop ends.
struct Released<'a>(&'a VolumeManager, String);

impl Drop for Released<'_> {
    fn drop(&mut self) {
        self.0.release_pod(&self.1);
    }
}

/// Stops and removes the pod's containers within `grace`, recording what
/// happened; false (logged) if that failed and must be tried again.
async fn kill(worker: &mut PodWorker, recorder: &Recorder, pod: &Pod, grace: Duration) -> bool {
    match worker.kill_pod(pod, grace).await {
        Ok(events) => {
            recorder.pod_events(pod, events);
            true
        }
        Err(e) => {
            warn_stop_failed(pod, &e);
            false
        }
    }
}

/// Ends a deleted pod whose object is still there: stops its containers
/// within `grace` and computes the stopped pod's terminal status while
/// they can still be inspected (kept in `terminal` across retries),
/// removes its containers and volumes, then writes that status (clients
/// wait for Ready=False and the exit codes before the pod goes). The
/// write comes last because it may end the object (an API server that
/// deletes a pod being deleted on any write), which must not go before
/// its containers. False (logged) if a step failed and the rest must be
/// tried again.
async fn terminate(
    worker: &mut PodWorker,
    status: &mut StatusManager,
    recorder: &Recorder,
    pod: &Pod,
    grace: Duration,
    terminal: &mut Option<Option<PodStatus>>,
) -> bool {
    if terminal.is_none() {
        match worker.stop_pod(pod, grace).await {
            Ok(events) => recorder.pod_events(pod, events),
            Err(e) => {
                warn_stop_failed(pod, &e);
                return false;
            }
        }
        let seen = status.with_own_status(pod);
        match worker.terminal_status(&seen).await {
            Ok(s) => *terminal = Some(s),
            Err(e) => {
                warn_stop_failed(pod, &e);
                return false;
            }
        }
    }
    if let Err(e) = worker.remove_pod(pod).await {
        warn_stop_failed(pod, &e);
        return false;
    }
    match terminal {
        Some(Some(s)) => status.set_pod_status(pod, s.clone()).await || status.has_written(s),
        _ => true,
    }
}

fn warn_stop_failed(pod: &Pod, e: &crate::runtime::RuntimeError) {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    tracing::warn!(pod = %name, error = %e, "stopping a deleted pod");
}
