//! The control plane's Prometheus metrics, under Kubernetes' own names
//! where it has them: the apiserver's requests ([`http`]), the store's
//! operations ([`store`]), the controllers' reconciles, the scheduler's
//! attempts and queue, and pods by phase per node computed from the store
//! when `/metrics` is read ([`serve`]).
//!
//! One registry for the process ([`metrics`]); recording is an atomic add
//! on a label set of `&'static str`s, no lock held across an await.

pub mod http;
pub mod serve;
pub mod store;

use std::sync::LazyLock;
use std::time::Instant;

use bosun::observe::{HistogramFamily, REQUEST_BUCKETS, STORE_BUCKETS};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub use self::http::{record_request, RequestInfo};
pub use self::serve::routes;
pub use self::store::ObservedStore;

/// What a request is about, as the apiserver labels it.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub verb: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub resource: &'static str,
    pub subresource: &'static str,
    pub scope: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabels {
    pub verb: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub resource: &'static str,
    pub subresource: &'static str,
    pub scope: &'static str,
    pub code: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatcherLabels {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreLabels {
    pub operation: &'static str,
    pub kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    pub controller: &'static str,
    pub result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    pub name: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PendingLabels {
    pub queue: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScheduleLabels {
    pub result: &'static str,
    pub profile: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub node: String,
    pub phase: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FlowLabels {
    pub priority_level: String,
    pub flow_schema: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FlowRejectLabels {
    pub priority_level: String,
    pub flow_schema: String,
    pub reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LevelLabels {
    pub priority_level: String,
}

/// Every metric of the control plane.
pub struct Metrics {
    registry: Registry,
    pub requests: Family<CodeLabels, Counter>,
    pub request_duration: HistogramFamily<RequestLabels>,
    pub longrunning: Family<RequestLabels, Gauge>,
    pub watchers: Family<WatcherLabels, Gauge>,
    pub store_duration: HistogramFamily<StoreLabels>,
    pub reconciles: Family<ReconcileLabels, Counter>,
    pub reconcile_errors: Family<ControllerLabels, Counter>,
    pub reconcile_time: HistogramFamily<ControllerLabels>,
    pub active_workers: Family<ControllerLabels, Gauge>,
    pub queue_depth: Family<QueueLabels, Gauge>,
    pub queue_adds: Family<QueueLabels, Counter>,
    pub pending_pods: Family<PendingLabels, Gauge>,
    pub schedule_attempts: Family<ScheduleLabels, Counter>,
    pub scheduling_duration: HistogramFamily<ScheduleLabels>,
    pub pods_by_phase: Family<PhaseLabels, Gauge>,
    pub flow_dispatched: Family<FlowLabels, Counter>,
    pub flow_rejected: Family<FlowRejectLabels, Counter>,
    pub flow_inqueue: Family<FlowLabels, Gauge>,
    pub flow_limit: Family<LevelLabels, Gauge>,
}

fn request_histogram() -> Histogram {
    Histogram::new(REQUEST_BUCKETS.iter().copied())
}

fn store_histogram() -> Histogram {
    Histogram::new(STORE_BUCKETS.iter().copied())
}

impl Metrics {
    fn new() -> Metrics {
        let m = Metrics {
            registry: Registry::default(),
            requests: Family::default(),
            request_duration: Family::new_with_constructor(request_histogram),
            longrunning: Family::default(),
            watchers: Family::default(),
            store_duration: Family::new_with_constructor(store_histogram),
            reconciles: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(request_histogram),
            active_workers: Family::default(),
            queue_depth: Family::default(),
            queue_adds: Family::default(),
            pending_pods: Family::default(),
            schedule_attempts: Family::default(),
            scheduling_duration: Family::new_with_constructor(request_histogram),
            pods_by_phase: Family::default(),
            flow_dispatched: Family::default(),
            flow_rejected: Family::default(),
            flow_inqueue: Family::default(),
            flow_limit: Family::default(),
        };
        let mut r = Registry::default();
        // prometheus-client appends `_total` to counters itself.
        r.register(
            "apiserver_request",
            "Counter of apiserver requests broken out for each verb, API resource and HTTP response code.",
            m.requests.clone(),
        );
        r.register(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, API resource and scope (to the response head for watches).",
            m.request_duration.clone(),
        );
        r.register(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests (watches) broken out by verb, API resource and scope.",
            m.longrunning.clone(),
        );
        r.register(
            "apiserver_registered_watchers",
            "Number of currently registered watchers for a given resource kind.",
            m.watchers.clone(),
        );
        r.register(
            "bosun_store_operation_duration_seconds",
            "Latency of store operations in seconds, by operation and object kind (etcd_request_duration_seconds of an embedded store).",
            m.store_duration.clone(),
        );
        r.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller, by result.",
            m.reconciles.clone(),
        );
        r.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller.",
            m.reconcile_errors.clone(),
        );
        r.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller.",
            m.reconcile_time.clone(),
        );
        r.register(
            "controller_runtime_active_workers",
            "Number of reconciles running right now per controller.",
            m.active_workers.clone(),
        );
        r.register(
            "workqueue_depth",
            "Current depth of the work queue.",
            m.queue_depth.clone(),
        );
        r.register(
            "workqueue_adds",
            "Total number of adds handled by the work queue.",
            m.queue_adds.clone(),
        );
        r.register(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type: 'active' waiting to be tried, 'unschedulable' parked until something changes or their back-off ends.",
            m.pending_pods.clone(),
        );
        r.register(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result: 'unschedulable' means a pod could not be scheduled, 'error' means an internal scheduler problem.",
            m.schedule_attempts.clone(),
        );
        r.register(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
            m.scheduling_duration.clone(),
        );
        r.register(
            "bosun_pods_by_phase",
            "Pods per node and phase, counted from the store when scraped (node is empty for pods not yet scheduled).",
            m.pods_by_phase.clone(),
        );
        r.register(
            "apiserver_flowcontrol_dispatched_requests",
            "Number of requests executed by API Priority and Fairness subsystem.",
            m.flow_dispatched.clone(),
        );
        r.register(
            "apiserver_flowcontrol_rejected_requests",
            "Number of requests rejected by API Priority and Fairness subsystem.",
            m.flow_rejected.clone(),
        );
        r.register(
            "apiserver_flowcontrol_current_inqueue_requests",
            "Number of requests currently pending in queues of the API Priority and Fairness subsystem.",
            m.flow_inqueue.clone(),
        );
        r.register(
            "apiserver_flowcontrol_nominal_limit_seats",
            "Nominal number of execution seats configured for each priority level.",
            m.flow_limit.clone(),
        );
        Metrics { registry: r, ..m }
    }

    pub fn render(&self) -> String {
        bosun::observe::render(&self.registry)
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// One reconcile of a controller, from start to result: counts it as a
/// running worker until it ends.
pub struct Reconcile {
    controller: &'static str,
    started: Instant,
}

impl Reconcile {
    pub fn start(controller: &'static str) -> Reconcile {
        metrics()
            .active_workers
            .get_or_create(&ControllerLabels { controller })
            .inc();
        Reconcile {
            controller,
            started: Instant::now(),
        }
    }

    /// Records the result: `success` or `error`.
    pub fn finish(self, ok: bool) {
        let m = metrics();
        let controller = self.controller;
        let result = if ok { "success" } else { "error" };
        m.reconciles
            .get_or_create(&ReconcileLabels { controller, result })
            .inc();
        if !ok {
            m.reconcile_errors
                .get_or_create(&ControllerLabels { controller })
                .inc();
        }
        m.reconcile_time
            .get_or_create(&ControllerLabels { controller })
            .observe(self.started.elapsed().as_secs_f64());
    }
}

impl Drop for Reconcile {
    fn drop(&mut self) {
        metrics()
            .active_workers
            .get_or_create(&ControllerLabels {
                controller: self.controller,
            })
            .dec();
    }
}

/// The scheduler's name in its metrics (kube-scheduler's default profile).
const PROFILE: &str = "default-scheduler";

/// One scheduling attempt ended with `result` (`scheduled`,
/// `unschedulable` or `error`; none if no attempt was needed) after
/// starting at `started`.
pub fn scheduling_attempt(result: Option<&'static str>, started: Instant) {
    let Some(result) = result else { return };
    let m = metrics();
    let labels = ScheduleLabels {
        result,
        profile: PROFILE,
    };
    m.schedule_attempts.get_or_create(&labels).inc();
    m.scheduling_duration
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
}

/// A key was added to work queue `name`.
pub fn queue_add(name: &'static str) {
    metrics()
        .queue_adds
        .get_or_create(&QueueLabels { name })
        .inc();
}

/// The scheduler's queue now holds `active` pods waiting to be tried and
/// `parked` unschedulable ones.
pub fn scheduler_queue(active: usize, parked: usize) {
    let m = metrics();
    m.queue_depth
        .get_or_create(&QueueLabels { name: "scheduler" })
        .set(active as i64);
    m.pending_pods
        .get_or_create(&PendingLabels { queue: "active" })
        .set(active as i64);
    m.pending_pods
        .get_or_create(&PendingLabels {
            queue: "unschedulable",
        })
        .set(parked as i64);
}
