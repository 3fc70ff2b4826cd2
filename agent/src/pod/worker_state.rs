//! [`PodWorker`]: what one pod's syncs remember between them (back-off,
//! restart counts carried across a sandbox re-creation, the probe runners
//! of its containers) and what one sync collects (events, waiting
//! reasons), with the helpers every step of a sync uses.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};
use tokio::sync::Notify;

use super::backoff::Backoff;
use super::runtime_class::RuntimeClasses;
use super::timeline::Timeline;
use crate::config::service_env::ServiceEnv;
use crate::config::sources::ConfigSources;
use crate::config::AgentConfig;
use crate::events::PodEvent;
use crate::probes::ProbeRunner;
use crate::runtime::{ContainerInfo, ContainerRuntime, Role, RuntimeError};
use crate::status::Waiting;
use crate::volumes::volume_manager::PreparedVolumes;

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
    /// Why claim-backed volumes cannot be mounted yet (claims missing or
    /// not bound), as the volume manager found before this sync.
    pub unmountable_claims: Vec<String>,
    /// The ConfigMaps and Secrets the containers' environment reads, as
    /// the volume manager found them before this sync.
    pub config_sources: ConfigSources,
    /// The Services whose variables containers get; none in unit tests.
    pub services: Option<ServiceEnv>,
    /// Where the pod's RuntimeClass is read; none in unit tests (every
    /// pod then runs with the engine's default runtime).
    pub runtime_classes: Option<RuntimeClasses>,
    /// The runtime the pod's sandbox was made with (its RuntimeClass's
    /// handler), once looked up; its containers run with the same.
    pub(super) runtime_handler: Option<Option<String>>,
    /// When each step of the pod's first start happened.
    pub timeline: Timeline,
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
            unmountable_claims: Vec::new(),
            config_sources: ConfigSources::default(),
            services: None,
            runtime_classes: None,
            runtime_handler: None,
            timeline: Timeline::default(),
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
        self.rt.list_pod_containers(&self.cfg.node_name, uid).await
    }

    /// Takes what the volume manager found before this sync, and gives
    /// the pod as the sync sees it (bound claims as hostPaths), moved out
    /// of `prepared`.
    pub fn use_volumes(&mut self, prepared: &mut PreparedVolumes) -> Pod {
        self.unmountable_claims = prepared.unmountable_claims.clone();
        self.config_sources = prepared.config_sources.clone();
        std::mem::take(&mut prepared.pod)
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
