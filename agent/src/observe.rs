//! The agent's Prometheus metrics at `/metrics` on its API port, under the
//! kubelet's names: probe results (`prober_probe_total`), image pulls
//! (`kubelet_image_pull_duration_seconds`), pod start latency
//! (`kubelet_pod_start_duration_seconds`, and creation to Ready), and,
//! read from Docker when scraped, running pods and containers and each
//! container's restarts (kube-state-metrics'
//! `kube_pod_container_status_restarts_total`).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use bosun::observe::{IMAGE_PULL_BUCKETS, POD_START_BUCKETS};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::runtime::{ContainerInfo, ContainerRuntime, ContainerState, Role, RuntimeError};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeLabels {
    pub probe_type: &'static str,
    pub result: &'static str,
    pub container: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub container_state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ContainerLabels {
    pub namespace: String,
    pub pod: String,
    pub container: String,
}

/// Every metric of the agent.
pub struct Metrics {
    registry: Registry,
    pub probes: Family<ProbeLabels, Counter>,
    pub image_pulls: Histogram,
    pub pod_start: Histogram,
    pub pod_ready: Histogram,
    pub running_pods: Gauge,
    pub running_containers: Family<StateLabels, Gauge>,
    pub restarts: Family<ContainerLabels, Counter>,
}

fn pod_start_histogram() -> Histogram {
    Histogram::new(POD_START_BUCKETS.iter().copied())
}

impl Metrics {
    fn new() -> Metrics {
        let m = Metrics {
            registry: Registry::default(),
            probes: Family::default(),
            image_pulls: Histogram::new(IMAGE_PULL_BUCKETS.iter().copied()),
            pod_start: pod_start_histogram(),
            pod_ready: pod_start_histogram(),
            running_pods: Gauge::default(),
            running_containers: Family::default(),
            restarts: Family::default(),
        };
        let mut r = Registry::default();
        r.register(
            "prober_probe",
            "Cumulative number of a liveness, readiness or startup probe for a container by result.",
            m.probes.clone(),
        );
        r.register(
            "kubelet_image_pull_duration_seconds",
            "Duration in seconds to pull an image.",
            m.image_pulls.clone(),
        );
        r.register(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from the agent seeing a pod for the first time to the pod starting to run.",
            m.pod_start.clone(),
        );
        r.register(
            "bosun_pod_start_to_ready_duration_seconds",
            "Duration in seconds from a pod's creation to the agent first reporting it Ready.",
            m.pod_ready.clone(),
        );
        r.register(
            "kubelet_running_pods",
            "Number of pods that have a running pod sandbox.",
            m.running_pods.clone(),
        );
        r.register(
            "kubelet_running_containers",
            "Number of containers currently running.",
            m.running_containers.clone(),
        );
        r.register(
            "kube_pod_container_status_restarts",
            "The number of container restarts per container.",
            m.restarts.clone(),
        );
        Metrics { registry: r, ..m }
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// One `probe_type` probe (`Liveness`, `Readiness`, `Startup`) of
/// `container` passed or not (the kubelet's results: `successful`,
/// `failed`).
pub fn probe_result(probe_type: &'static str, passed: bool, container: &str) {
    let result = if passed { "successful" } else { "failed" };
    metrics()
        .probes
        .get_or_create(&ProbeLabels {
            probe_type,
            result,
            container: container.to_string(),
        })
        .inc();
}

/// An image was pulled in `took`.
pub fn image_pulled(took: Duration) {
    metrics().image_pulls.observe(took.as_secs_f64());
}

/// A pod's way to running and Ready, as one pod worker sees it: each is
/// recorded once per worker, from the status the worker wrote.
#[derive(Debug)]
pub struct PodStart {
    first_seen: Instant,
    running: bool,
    ready: bool,
}

impl Default for PodStart {
    fn default() -> Self {
        PodStart {
            first_seen: Instant::now(),
            running: false,
            ready: false,
        }
    }
}

impl PodStart {
    /// The worker wrote `status` for `pod`.
    pub fn status_written(&mut self, pod: &Pod, status: &PodStatus) {
        if !self.running && status.phase.as_deref() == Some("Running") {
            self.running = true;
            metrics()
                .pod_start
                .observe(self.first_seen.elapsed().as_secs_f64());
        }
        let ready = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if !self.ready && ready {
            self.ready = true;
            if let Some(created) = &pod.metadata.creation_timestamp {
                let took = k8s_openapi::jiff::Timestamp::now().duration_since(created.0);
                metrics().pod_ready.observe(took.as_secs_f64().max(0.0));
            }
        }
    }
}

/// Sets the gauges read from the runtime: running pods and containers,
/// and the restarts of every container of this node's pods.
fn count_containers(containers: &[ContainerInfo]) {
    let m = metrics();
    let running = |c: &&ContainerInfo| c.state == ContainerState::Running;
    let sandboxes = containers.iter().filter(|c| c.role == Role::Sandbox);
    m.running_pods.set(sandboxes.filter(running).count() as i64);
    let mut states: BTreeMap<&'static str, i64> = BTreeMap::new();
    let mut restarts: BTreeMap<(String, String, String), u32> = BTreeMap::new();
    for c in containers.iter().filter(|c| c.role != Role::Sandbox) {
        let state = match c.state {
            ContainerState::Created => "created",
            ContainerState::Running => "running",
            ContainerState::Exited => "exited",
            ContainerState::Unknown => "unknown",
        };
        *states.entry(state).or_default() += 1;
        let key = (c.pod.namespace.clone(), c.pod.name.clone(), c.name.clone());
        let seen = restarts.entry(key).or_default();
        *seen = (*seen).max(c.restart_count);
    }
    for state in ["created", "running", "exited", "unknown"] {
        let n = states.get(state).copied().unwrap_or(0);
        m.running_containers
            .get_or_create(&StateLabels {
                container_state: state,
            })
            .set(n);
    }
    m.restarts.clear();
    for ((namespace, pod, container), n) in restarts {
        m.restarts
            .get_or_create(&ContainerLabels {
                namespace,
                pod,
                container,
            })
            .inner()
            .store(u64::from(n), Ordering::Relaxed);
    }
}

/// The metrics as `/metrics` serves them, after reading the runtime.
pub async fn render(rt: &dyn ContainerRuntime, node: &str) -> Result<String, RuntimeError> {
    count_containers(&rt.list_containers(node).await?);
    Ok(bosun::observe::render(&metrics().registry))
}
