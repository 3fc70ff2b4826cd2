//! The pod workers and the loop that drives each, as the kubelet's
//! `podWorkers`: the agent's sync loop hands every pod bound to the node
//! to [`PodWorkers::update_pod`], which gives each pod a task running
//! [`pod_worker_loop`]. The loop syncs the pod ([`PodWorker::sync_pod`])
//! and writes its status whenever the pod object changes, the relist sees
//! its containers change, a probe result matters, or the sync's
//! `wake_after` passes; a deleted pod is killed ([`PodWorker::kill_pod`])
//! and its object removed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::{watch, Notify};

use super::worker_state::{uid_of, PodWorker};
use crate::config::service_env::ServiceEnv;
use crate::config::AgentConfig;
use crate::events::Recorder;
use crate::runtime::ContainerRuntime;

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
        let mut worker = PodWorker::new(self.rt.clone(), self.cfg.clone());
        worker.services = self.services.clone();
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
    let mut start = crate::observe::PodStart::default();
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
        // Claim-backed volumes as the hostPaths of their bound volumes.
        let (seen, unmountable) = crate::volumes::persistent_claim::resolve(&client, &seen).await;
        let waiting_for_claims = !unmountable.is_empty();
        worker.unmountable_claims = unmountable;
        // ConfigMaps and Secrets the environment reads, read afresh each
        // sync: a container waiting for one starts on the sync after it
        // appears.
        let reads_config = crate::config::sources::references_any(&seen);
        if reads_config {
            worker.config_sources =
                crate::config::sources::resolve(&client, &seen, &worker.config_sources).await;
        }
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
                        Ok(_) => {
                            start.status_written(&pod, &synced.status);
                            last_status = Some(synced.status);
                        }
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
        // A claim is bound moments after its pod is placed: look again soon.
        let waiting_for_config = reads_config && worker_waits_on_config(&last_status);
        let wake_after = if waiting_for_claims || waiting_for_config {
            wake_after.min(Duration::from_secs(1))
        } else if crate::config::sources::has_config_volumes(&seen) {
            // configMap and secret volumes follow their objects within
            // seconds: read them again every two.
            wake_after.min(Duration::from_secs(2))
        } else {
            wake_after
        };
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { return },
            _ = poke.notified() => {}
            _ = probes.notified() => {}
            _ = tokio::time::sleep(wake_after) => {}
        }
    }
}

/// Whether a container of the pod waits with CreateContainerConfigError
/// (a ConfigMap or Secret it reads is missing): the pod is synced again
/// within a second, so it starts soon after the object is created.
fn worker_waits_on_config(status: &Option<Value>) -> bool {
    let Some(status) = status else { return false };
    ["containerStatuses", "initContainerStatuses"]
        .iter()
        .any(|k| {
            status[k].as_array().is_some_and(|list| {
                list.iter()
                    .any(|c| c["state"]["waiting"]["reason"] == "CreateContainerConfigError")
            })
        })
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
