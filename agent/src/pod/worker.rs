//! One pod's worker and the loop that drives it, as the kubelet's
//! `podWorkers`: the agent's sync loop hands every pod bound to the node
//! to [`PodWorkers::update_pod`], which gives each pod a task running
//! [`pod_worker_loop`]. The loop syncs the pod ([`PodWorker::sync_pod`])
//! and writes its status whenever the pod object changes, the relist sees
//! its containers change, a probe result matters, or the sync's
//! `wake_after` passes; a deleted pod is killed ([`PodWorker::kill_pod`])
//! and its object removed.
//!
//! [`PodWorker`] holds what one pod's syncs remember between them:
//! back-off, restart counts carried across a sandbox re-creation, and the
//! probe runners of its containers.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::{watch, Notify};

use super::backoff::Backoff;
use crate::config::AgentConfig;
use crate::events::{PodEvent, Recorder};
use crate::probes::ProbeRunner;
use crate::runtime::{ContainerInfo, ContainerRuntime, Role, RuntimeError};
use crate::status::Waiting;

/// What one pod's syncs remember, and what one sync collects.
pub struct PodWorker {
    pub(super) rt: Arc<dyn ContainerRuntime>,
    pub(super) cfg: Arc<AgentConfig>,
    /// Crash-loop and image-pull back-off of the pod's containers.
    pub(super) backoff: Backoff,
    /// Restart counts carried across a sandbox re-creation.
    pub(super) restart_floor: HashMap<String, u32>,
    /// Probes of the running instance of each app container, by name.
    pub(super) runners: HashMap<String, ProbeRunner>,
    /// Containers started in this sync: their postStart hook is still to run.
    pub(super) fresh: HashSet<String>,
    /// Notified when a probe result changes something; see [`PodWorker::wake_handle`].
    pub(super) wake: Arc<Notify>,
    /// This sync's waiting reasons, by container name.
    pub(super) waiting: BTreeMap<String, Waiting>,
    /// This sync's events.
    pub(super) events: Vec<PodEvent>,
}

impl PodWorker {
    pub fn new(rt: Arc<dyn ContainerRuntime>, cfg: Arc<AgentConfig>) -> Self {
        PodWorker {
            backoff: Backoff::new(cfg.backoff_base, cfg.backoff_max),
            rt,
            cfg,
            restart_floor: HashMap::new(),
            runners: HashMap::new(),
            fresh: HashSet::new(),
            wake: Arc::new(Notify::new()),
            waiting: BTreeMap::new(),
            events: Vec::new(),
        }
    }

    /// Notified whenever a probe or hook result means the pod should be
    /// synced again (readiness flipped, a container must be killed, an
    /// event to record). The worker's loop waits on it next to the pod's
    /// changes and `wake_after`.
    pub fn wake_handle(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Records an event on the pod.
    pub(super) fn record(&mut self, event: PodEvent) {
        self.events.push(event);
    }

    /// Sets container `name`'s waiting reason in this sync's status.
    pub(super) fn set_waiting(&mut self, name: &str, reason: &str, message: impl Into<String>) {
        self.waiting.insert(
            name.to_string(),
            Waiting {
                reason: reason.into(),
                message: message.into(),
            },
        );
    }

    /// What happens when a container cannot proceed: `event` is recorded
    /// and the container waits with `reason` and `message`.
    pub(super) fn record_and_wait(
        &mut self,
        event: PodEvent,
        name: &str,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.record(event);
        self.set_waiting(name, reason, message);
    }

    /// The pod's containers (every instance, the sandbox too) as the
    /// runtime has them now.
    pub(super) async fn pod_containers(
        &self,
        uid: &str,
    ) -> Result<Vec<ContainerInfo>, RuntimeError> {
        Ok(self
            .rt
            .list_containers(&self.cfg.node_name)
            .await?
            .into_iter()
            .filter(|c| c.pod.uid == uid)
            .collect())
    }

    /// The pod's IP: the node's with hostNetwork, else the sandbox's.
    pub(super) fn pod_ip(
        &self,
        pod: &Pod,
        sandbox_ip: impl FnOnce() -> Option<String>,
    ) -> Option<String> {
        if host_network(pod) {
            Some(self.cfg.node_ip.clone())
        } else {
            sandbox_ip()
        }
    }
}

pub(super) fn uid_of(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

pub(super) fn host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

/// The pod's app containers, as its spec has them.
pub(super) fn app_containers(pod: &Pod) -> Vec<Container> {
    pod.spec
        .as_ref()
        .map(|s| s.containers.clone())
        .unwrap_or_default()
}

/// The pod's init containers, in order.
pub(super) fn init_containers(pod: &Pod) -> Vec<Container> {
    pod.spec
        .as_ref()
        .and_then(|s| s.init_containers.clone())
        .unwrap_or_default()
}

/// The newest instance of container `name` in `role`.
pub(super) fn latest<'a>(
    containers: &'a [ContainerInfo],
    role: Role,
    name: &str,
) -> Option<&'a ContainerInfo> {
    containers
        .iter()
        .filter(|c| c.role == role && c.name == name)
        .max_by_key(|c| (c.restart_count, c.created_at))
}

/// One pod's worker task, as the agent's sync loop holds it.
struct WorkerHandle {
    /// The pod object as last watched; `None` once it is gone.
    pod: watch::Sender<Option<Pod>>,
    /// Wakes the worker when the relist sees its containers change.
    poke: Arc<Notify>,
}

/// The pod workers of this node, by pod UID (the kubelet's `podWorkers`).
pub struct PodWorkers {
    rt: Arc<dyn ContainerRuntime>,
    cfg: Arc<AgentConfig>,
    client: Client,
    recorder: Recorder,
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
            client,
            recorder,
            workers: HashMap::new(),
        }
    }

    /// Hands the pod's latest object to its worker, starting a worker
    /// (a task running [`pod_worker_loop`]) if the pod has none running
    /// (the kubelet's `UpdatePod`).
    pub fn update_pod(&mut self, pod: Pod) {
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
        let worker = PodWorker::new(self.rt.clone(), self.cfg.clone());
        tokio::spawn(pod_worker_loop(
            worker,
            self.client.clone(),
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

/// One pod's loop (the kubelet's `podWorkerLoop`): sync the pod and write
/// its status, then wait for the next reason to look again; kill the pod
/// once it is being deleted or its object is gone.
pub async fn pod_worker_loop(
    mut worker: PodWorker,
    client: Client,
    recorder: Recorder,
    mut rx: watch::Receiver<Option<Pod>>,
    poke: Arc<Notify>,
) {
    let mut last_status: Option<Value> = None;
    let mut last_pod: Option<Pod> = None;
    let mut retry = Duration::from_millis(500);
    // Probe results that change the pod's status or need acting on.
    let probes = worker.wake_handle();
    loop {
        let current = rx.borrow_and_update().clone();
        let pod = match current {
            Some(p) => p,
            None => {
                // The pod object is gone (force-deleted): stop at once.
                if let Some(p) = &last_pod {
                    match worker.kill_pod(p, Duration::from_secs(0)).await {
                        Ok(events) => recorder.pod_events(p, events),
                        Err(e) => tracing::warn!(error = %e, "cleaning up a deleted pod"),
                    }
                }
                return;
            }
        };
        last_pod = Some(pod.clone());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        if pod.metadata.deletion_timestamp.is_some() {
            let grace = pod
                .metadata
                .deletion_grace_period_seconds
                .unwrap_or(30)
                .max(0) as u64;
            match worker.kill_pod(&pod, Duration::from_secs(grace)).await {
                Ok(events) => {
                    recorder.pod_events(&pod, events);
                    finish_deletion(&client, &pod).await;
                    return;
                }
                Err(e) => {
                    tracing::warn!(pod = %name, error = %e, "stopping a deleted pod; retrying");
                    tokio::time::sleep(retry).await;
                    continue;
                }
            }
        }

        let seen = with_own_status(&pod, last_status.as_ref());
        let wake_after = match worker.sync_pod(&seen).await {
            Ok(synced) => {
                retry = Duration::from_millis(500);
                recorder.pod_events(&pod, synced.events);
                if last_status.as_ref() != Some(&synced.status) {
                    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
                    match api
                        .patch_status(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({"status": synced.status})),
                        )
                        .await
                    {
                        Ok(_) => last_status = Some(synced.status),
                        Err(e) => tracing::warn!(pod = %name, error = %e, "writing pod status"),
                    }
                }
                synced.wake_after
            }
            Err(e) => {
                tracing::warn!(pod = %name, error = %e, "syncing pod; retrying in {retry:?}");
                retry = (retry * 2).min(Duration::from_secs(10));
                retry
            }
        };
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { return },
            _ = poke.notified() => {}
            _ = probes.notified() => {}
            _ = tokio::time::sleep(wake_after) => {}
        }
    }
}

/// Deletes the pod object once its containers are gone (grace period 0,
/// only if it is still the same pod).
async fn finish_deletion(client: &Client, pod: &Pod) {
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api
        .delete(pod.metadata.name.as_deref().unwrap_or_default(), &params)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
        Err(e) => tracing::warn!(error = %e, "deleting a terminated pod"),
    }
}

/// The pod as this agent last left it: the watch may still deliver the
/// object from before our last status write, and a status computed from
/// that one would forget what the write set (startTime, transition times)
/// and write again. Only the agent writes a bound pod's status, so its own
/// last write is never older than the watched copy.
fn with_own_status(pod: &Pod, written: Option<&Value>) -> Pod {
    let Some(Value::Object(written)) = written else {
        return pod.clone();
    };
    let mut status = serde_json::to_value(pod.status.clone().unwrap_or_default())
        .unwrap_or_else(|_| Value::Object(Default::default()));
    if let Value::Object(fields) = &mut status {
        for (k, v) in written {
            fields.insert(k.clone(), v.clone());
        }
    }
    let mut pod = pod.clone();
    pod.status = serde_json::from_value(status).ok().or(pod.status);
    pod
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_watched_pod_gets_the_agents_last_written_status() {
        let watched: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending", "qosClass": "BestEffort",
                       "conditions": [{"type": "PodScheduled", "status": "True"}]}
        }))
        .unwrap();
        let written = json!({"phase": "Running", "startTime": "2026-12-03T08:37:56Z"});
        let seen = with_own_status(&watched, Some(&written));
        let status = seen.status.unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(
            status.start_time.map(|t| t.0.to_string()).as_deref(),
            Some("2026-12-03T08:37:56Z")
        );
        // What the agent did not write stays as watched.
        assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
        // Before any write, the watched pod is used as it is.
        assert_eq!(with_own_status(&watched, None), watched);
    }
}
