//! The agent's main loop: watch the pods bound to this node, run one
//! worker per pod, write their status, and notice containers that change
//! behind the agent's back (a periodic relist, like the kubelet's PLEG).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::{watch, Notify};

use crate::config::AgentConfig;
use crate::events::Recorder;
use crate::runtime::{ContainerInfo, ContainerRuntime, ContainerState, Role};
use crate::worker::PodWorker;

struct WorkerHandle {
    pod: watch::Sender<Option<Pod>>,
    poke: Arc<Notify>,
}

pub struct Agent {
    pub client: Client,
    pub rt: Arc<dyn ContainerRuntime>,
    pub cfg: Arc<AgentConfig>,
}

fn uid_of(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// What the relist compares between rounds: each container's id and state.
fn fingerprint(containers: &[ContainerInfo]) -> HashMap<String, Vec<(String, ContainerState)>> {
    let mut out: HashMap<String, Vec<(String, ContainerState)>> = HashMap::new();
    for c in containers {
        out.entry(c.pod.uid.clone())
            .or_default()
            .push((c.id.clone(), c.state));
    }
    for v in out.values_mut() {
        v.sort_by(|a, b| a.0.cmp(&b.0));
    }
    out
}

impl Agent {
    /// Runs until `shutdown` flips to true. Pods keep running when the
    /// agent stops; a new agent adopts them.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) -> anyhow::Result<()> {
        let runtime_version = self.rt.version().await?;
        self.rt
            .ensure_network(
                &self.cfg.network_name(),
                &self.cfg.pod_cidr,
                &self.cfg.node_name,
            )
            .await?;
        let mut delay = Duration::from_millis(200);
        loop {
            match crate::node::register(&self.client, &self.cfg, &runtime_version).await {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "registering the node; retrying in {delay:?}");
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = shutdown.changed() => return Ok(()),
                    }
                    delay = (delay * 2).min(Duration::from_secs(10));
                }
            }
        }
        tracing::info!(node = %self.cfg.node_name, "node registered");
        let heartbeat = {
            let (client, cfg, version) = (
                self.client.clone(),
                self.cfg.clone(),
                runtime_version.clone(),
            );
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(cfg.heartbeat_period);
                loop {
                    tick.tick().await;
                    if let Err(e) = crate::node::heartbeat(&client, &cfg, &version).await {
                        tracing::warn!(error = %e, "node heartbeat");
                    }
                }
            })
        };

        let recorder = Recorder::new(self.client.clone(), &self.cfg.node_name);
        let pods: Api<Pod> = Api::all(self.client.clone());
        let selector = format!("spec.nodeName={}", self.cfg.node_name);
        let mut stream = watcher::watcher(pods, watcher::Config::default().fields(&selector))
            .default_backoff()
            .boxed();
        let mut workers: HashMap<String, WorkerHandle> = HashMap::new();
        let mut known: HashSet<String> = HashSet::new();
        let mut init: Option<HashSet<String>> = None;
        let mut synced_once = false;
        let mut relist = tokio::time::interval(self.cfg.relist_period);
        let mut last_seen: HashMap<String, Vec<(String, ContainerState)>> = HashMap::new();

        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                event = stream.next() => match event {
                    Some(Ok(Event::Apply(pod))) | Some(Ok(Event::InitApply(pod))) => {
                        let uid = uid_of(&pod);
                        known.insert(uid.clone());
                        if let Some(i) = init.as_mut() { i.insert(uid.clone()); }
                        self.dispatch(&mut workers, &recorder, pod);
                    }
                    Some(Ok(Event::Delete(pod))) => {
                        let uid = uid_of(&pod);
                        known.remove(&uid);
                        if let Some(w) = workers.get(&uid) {
                            let _ = w.pod.send(None);
                        }
                    }
                    Some(Ok(Event::Init)) => init = Some(HashSet::new()),
                    Some(Ok(Event::InitDone)) => {
                        // After a (re)list, the pods not listed are gone.
                        if let Some(listed) = init.take() {
                            known.retain(|u| listed.contains(u));
                            for (uid, w) in &workers {
                                if !listed.contains(uid) {
                                    let _ = w.pod.send(None);
                                }
                            }
                        }
                        synced_once = true;
                    }
                    Some(Err(e)) => tracing::warn!(error = %e, "watching pods; retrying"),
                    None => break,
                },
                _ = relist.tick() => {
                    workers.retain(|_, w| !w.pod.is_closed());
                    let containers = match self.rt.list_containers(&self.cfg.node_name).await {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::warn!(error = %e, "listing containers");
                            continue;
                        }
                    };
                    let seen = fingerprint(&containers);
                    for (uid, w) in &workers {
                        if seen.get(uid) != last_seen.get(uid) {
                            w.poke.notify_one();
                        }
                    }
                    if synced_once {
                        self.remove_orphans(&containers, &known, &workers).await;
                    }
                    last_seen = seen;
                }
            }
        }
        heartbeat.abort();
        Ok(())
    }

    /// Containers of pods this node no longer has (and no worker is
    /// finishing) are removed.
    async fn remove_orphans(
        &self,
        containers: &[ContainerInfo],
        known: &HashSet<String>,
        workers: &HashMap<String, WorkerHandle>,
    ) {
        let orphans: Vec<&ContainerInfo> = containers
            .iter()
            .filter(|c| !known.contains(&c.pod.uid) && !workers.contains_key(&c.pod.uid))
            .collect();
        let mut uids = HashSet::new();
        for c in orphans {
            tracing::info!(pod = %c.pod.name, container = %c.name, "removing a container of a pod that is gone");
            let grace = if c.role == Role::Sandbox { 0 } else { 2 };
            let _ = self
                .rt
                .stop_container(&c.id, Duration::from_secs(grace))
                .await;
            let _ = self.rt.remove_container(&c.id).await;
            uids.insert(c.pod.uid.clone());
        }
        for uid in uids {
            crate::volumes::teardown(&self.cfg, &uid);
        }
    }

    fn dispatch(&self, workers: &mut HashMap<String, WorkerHandle>, recorder: &Recorder, pod: Pod) {
        let uid = uid_of(&pod);
        if let Some(w) = workers.get(&uid) {
            if !w.pod.is_closed() {
                let _ = w.pod.send(Some(pod));
                return;
            }
        }
        let (tx, rx) = watch::channel(Some(pod));
        let poke = Arc::new(Notify::new());
        workers.insert(
            uid,
            WorkerHandle {
                pod: tx,
                poke: poke.clone(),
            },
        );
        let worker = PodWorker::new(self.rt.clone(), self.cfg.clone());
        tokio::spawn(run_worker(
            worker,
            self.client.clone(),
            recorder.clone(),
            rx,
            poke,
        ));
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

async fn run_worker(
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
                    match worker.terminate(p, Duration::from_secs(0)).await {
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
            match worker.terminate(&pod, Duration::from_secs(grace)).await {
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
        let wake_after = match worker.sync(&seen).await {
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
