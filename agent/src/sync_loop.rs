//! The agent's main loop (the kubelet's `syncLoop`): register the node and
//! keep its heartbeat, watch the pods bound to this node and hand each to
//! its pod worker ([`PodWorkers`], whose per-pod loop syncs the pod and
//! writes its status), and notice containers that change behind the
//! agent's back with a periodic relist (like the kubelet's PLEG), which
//! wakes the pods concerned and removes containers of pods that are gone.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use tokio::sync::watch;

use crate::config::service_env::ServiceEnv;
use crate::config::AgentConfig;
use crate::dns::{DnsServer, DnsSettings};
use crate::events::Recorder;
use crate::pod::{ensure_pod_network, PodWorkers};
use crate::runtime::{ContainerInfo, ContainerRuntime, ContainerState, Role};

pub struct Agent {
    pub client: Client,
    pub rt: Arc<dyn ContainerRuntime>,
    pub cfg: Arc<AgentConfig>,
}

fn uid_of(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// What the relist compares between rounds: each container's id and state.
type Fingerprint = HashMap<String, Vec<(String, ContainerState)>>;

fn fingerprint(containers: &[ContainerInfo]) -> Fingerprint {
    let mut out: Fingerprint = HashMap::new();
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

/// Starts the node-local DNS server, retrying for a while if its address
/// is not on the host yet (a bridge Docker is still bringing up); None if
/// `shutdown` came first.
async fn start_dns(
    client: &Client,
    settings: &DnsSettings,
    shutdown: &mut watch::Receiver<bool>,
) -> anyhow::Result<Option<DnsServer>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match DnsServer::start(client.clone(), settings.clone()).await {
            Ok(server) => return Ok(Some(server)),
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(error = %format!("{e:#}"), "starting the cluster DNS server; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    _ = shutdown.changed() => return Ok(None),
                }
            }
            Err(e) => return Err(e),
        }
    }
}

impl Agent {
    /// Runs until `shutdown` flips to true. Pods keep running when the
    /// agent stops; a new agent adopts them.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) -> anyhow::Result<()> {
        let Some(runtime_version) = self.await_runtime(&mut shutdown).await else {
            return Ok(());
        };
        ensure_pod_network(self.rt.as_ref(), &self.cfg).await?;
        // The node-local DNS server listens on the pod network's gateway,
        // so it starts once that network is there.
        let dns = match &self.cfg.dns {
            Some(settings) => Some(start_dns(&self.client, settings, &mut shutdown).await?),
            None => None,
        };
        let result = self.serve(runtime_version, shutdown).await;
        if let Some(dns) = dns.flatten() {
            dns.shutdown().await;
        }
        result
    }

    async fn serve(
        &self,
        runtime_version: String,
        mut shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        if !self.register_node(&runtime_version, &mut shutdown).await {
            return Ok(());
        }
        tracing::info!(node = %self.cfg.node_name, "node registered");
        let heartbeat = self.spawn_heartbeat(runtime_version);
        // Directories of this node's deleted local-path volumes.
        let volume_cleanup = tokio::spawn(crate::volumes::persistent_claim::run_cleanup(
            self.client.clone(),
            self.cfg.clone(),
        ));

        let recorder = Recorder::new(self.client.clone(), &self.cfg.node_name);
        let pods: Api<Pod> = Api::all(self.client.clone());
        let selector = format!("spec.nodeName={}", self.cfg.node_name);
        let mut stream = watcher::watcher(pods, watcher::Config::default().fields(&selector))
            .default_backoff()
            .boxed();
        // The Services' variables every container gets.
        let (services, services_watch) = ServiceEnv::start(self.client.clone());
        let mut workers = PodWorkers::new(
            self.rt.clone(),
            self.cfg.clone(),
            self.client.clone(),
            recorder,
        )
        .with_services(services);
        let mut known: HashSet<String> = HashSet::new();
        let mut init: Option<HashSet<String>> = None;
        let mut synced_once = false;
        // The relist runs in its own task (as the kubelet's PLEG does), so
        // a slow list of the node's containers (inspecting a burst's new
        // ones under a loaded engine) never holds up the pods' watch
        // events; its results come here.
        let (relisted_tx, mut relisted) = tokio::sync::mpsc::channel(1);
        let relister = tokio::spawn(relist(
            self.rt.clone(),
            self.cfg.node_name.clone(),
            self.cfg.relist_period,
            relisted_tx,
        ));
        let mut last_seen: Fingerprint = HashMap::new();
        // Whether the node's containers changed since the heap was last
        // trimmed.
        let mut churned = false;
        // The removal of gone pods' containers under way, if any.
        let mut removing: Option<tokio::task::JoinHandle<()>> = None;

        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                event = stream.next() => match event {
                    Some(Ok(Event::Apply(pod))) | Some(Ok(Event::InitApply(pod))) => {
                        let uid = uid_of(&pod);
                        known.insert(uid.clone());
                        if let Some(i) = init.as_mut() { i.insert(uid.clone()); }
                        workers.update_pod(pod);
                    }
                    Some(Ok(Event::Delete(pod))) => {
                        let uid = uid_of(&pod);
                        known.remove(&uid);
                        workers.pod_gone(&uid);
                    }
                    Some(Ok(Event::Init)) => init = Some(HashSet::new()),
                    Some(Ok(Event::InitDone)) => {
                        // After a (re)list, the pods not listed are gone.
                        if let Some(listed) = init.take() {
                            known.retain(|u| listed.contains(u));
                            workers.keep_only(&listed);
                        }
                        synced_once = true;
                    }
                    Some(Err(e)) => tracing::warn!(error = %e, "watching pods; retrying"),
                    None => break,
                },
                Some(containers) = relisted.recv() => {
                    workers.forget_finished();
                    let seen = fingerprint(&containers);
                    workers.poke(|uid| seen.get(uid) != last_seen.get(uid));
                    let idle = removing.as_ref().is_none_or(|r| r.is_finished());
                    if synced_once && idle {
                        let orphans = orphans(containers, &known, &workers);
                        if !orphans.is_empty() {
                            let (rt, cfg) = (self.rt.clone(), self.cfg.clone());
                            removing = Some(tokio::spawn(remove_orphans(rt, cfg, orphans)));
                        }
                    }
                    // Once a burst of starts or stops has settled (a
                    // relist with nothing changed), what its syncs and
                    // finished workers freed goes back to the system: the
                    // RSS stays flat across rolling updates instead of
                    // keeping each burst's high-water mark.
                    if seen != last_seen {
                        churned = true;
                    } else if churned {
                        churned = false;
                        crate::memory::trim();
                    }
                    last_seen = seen;
                }
            }
        }
        relister.abort();
        if let Some(r) = removing {
            r.abort();
        }
        heartbeat.abort();
        volume_cleanup.abort();
        services_watch.abort();
        Ok(())
    }

    /// The runtime's version once it answers. Until then the Node is
    /// registered NotReady with the kubelet's words ("container runtime
    /// is down: ..."), so `kubectl get nodes` says what is wrong. None if
    /// `shutdown` came first.
    async fn await_runtime(&self, shutdown: &mut watch::Receiver<bool>) -> Option<String> {
        let mut backoff = crate::startup::Backoff::default();
        let mut reported: Option<String> = None;
        loop {
            let why = match self.rt.version().await {
                Ok(v) => return Some(v),
                Err(e) => format!("container runtime is down: {e}"),
            };
            let wait = backoff.step();
            if backoff.worth_saying() {
                tracing::warn!("{why}; retrying in {wait:?}");
            }
            if reported.as_ref() != Some(&why) {
                let health = crate::node::Health {
                    runtime_version: String::new(),
                    not_ready: Some(why.clone()),
                };
                match crate::node::register(&self.client, &self.cfg, &health).await {
                    Ok(()) => reported = Some(why),
                    Err(e) => tracing::debug!(error = %e, "reporting the runtime as down"),
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => return None,
            }
        }
    }

    /// Registers the node, retrying with back-off; false if `shutdown`
    /// came first.
    async fn register_node(
        &self,
        runtime_version: &str,
        shutdown: &mut watch::Receiver<bool>,
    ) -> bool {
        let mut delay = Duration::from_millis(200);
        loop {
            let health = crate::node::Health::ready(runtime_version);
            match crate::node::register(&self.client, &self.cfg, &health).await {
                Ok(()) => return true,
                Err(e) => {
                    tracing::warn!(error = %e, "registering the node; retrying in {delay:?}");
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = shutdown.changed() => return false,
                    }
                    delay = (delay * 2).min(Duration::from_secs(10));
                }
            }
        }
    }

    /// Every heartbeat period: asks the runtime whether it answers,
    /// renews the Lease, and writes the Node's status if it changed or is
    /// due.
    fn spawn_heartbeat(&self, runtime_version: String) -> tokio::task::JoinHandle<()> {
        let (client, cfg, rt) = (self.client.clone(), self.cfg.clone(), self.rt.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(cfg.heartbeat_period);
            let mut health = crate::node::Health::ready(&runtime_version);
            let mut last_report = std::time::Instant::now();
            loop {
                tick.tick().await;
                match tokio::time::timeout(cfg.heartbeat_period, rt.version()).await {
                    Ok(Ok(version)) => health = crate::node::Health::ready(&version),
                    Ok(Err(e)) => {
                        health.not_ready = Some(format!("container runtime is down: {e}"))
                    }
                    Err(_) => health.not_ready = Some("container runtime is not responding".into()),
                }
                if let Err(e) = crate::node::renew_lease(&client, &cfg).await {
                    tracing::warn!(error = %e, "renewing the node lease");
                }
                let since = Some((last_report, cfg.status_report_period));
                match crate::node::report_status(&client, &cfg, &health, since).await {
                    Ok(true) => last_report = std::time::Instant::now(),
                    Ok(false) => {}
                    Err(e) => tracing::warn!(error = %e, "node status"),
                }
            }
        })
    }
}

/// Lists the node's containers every `period` and sends them on `out`
/// until the receiver is gone; a failed list is logged and skipped.
async fn relist(
    rt: Arc<dyn ContainerRuntime>,
    node: String,
    period: Duration,
    out: tokio::sync::mpsc::Sender<Vec<ContainerInfo>>,
) {
    let mut tick = tokio::time::interval(period);
    // A list slower than the period is followed by a full period's rest,
    // not by a catch-up burst of lists.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match rt.list_containers(&node).await {
            Ok(containers) => {
                if out.send(containers).await.is_err() {
                    return;
                }
            }
            Err(e) => tracing::warn!(error = %e, "listing containers"),
        }
    }
}

/// The containers of pods this node no longer has (and no worker is
/// finishing).
fn orphans(
    containers: Vec<ContainerInfo>,
    known: &HashSet<String>,
    workers: &PodWorkers,
) -> Vec<ContainerInfo> {
    containers
        .into_iter()
        .filter(|c| !known.contains(&c.pod.uid) && !workers.contains(&c.pod.uid))
        .collect()
}

/// Removes containers of pods that are gone, and their volumes.
async fn remove_orphans(
    rt: Arc<dyn ContainerRuntime>,
    cfg: Arc<AgentConfig>,
    orphans: Vec<ContainerInfo>,
) {
    let mut uids = HashSet::new();
    for c in orphans {
        tracing::info!(pod = %c.pod.name, container = %c.name, "removing a container of a pod that is gone");
        let grace = if c.role == Role::Sandbox { 0 } else { 2 };
        let _ = rt.stop_container(&c.id, Duration::from_secs(grace)).await;
        let _ = rt.remove_container(&c.id).await;
        uids.insert(c.pod.uid);
    }
    for uid in uids {
        crate::volumes::teardown(&cfg, &uid);
    }
}
