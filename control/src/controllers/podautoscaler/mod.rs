//! The HorizontalPodAutoscaler controller, as kube-controller-manager's
//! `horizontalpodautoscaling` controller: every sync period each HPA's
//! target is resized through its `scale` subresource from the pods'
//! resource metrics (`metrics.k8s.io`, which the control plane builds from
//! the agents' readings).
//!
//! The folder, after upstream's `pkg/controller/podautoscaler`:
//!
//! - `mod.rs` (here): the wiring — each HPA is synced when it changes, but
//!   at most once per sync period (upstream's fixed-interval rate limiter),
//!   and again after one sync period;
//! - [`sync`]: one sync (`reconcileAutoscaler`): scale, metrics,
//!   conditions, rescale, events, status;
//! - [`replica_calculator`]: the replica count one Resource metric asks
//!   for (tolerance, unready and missing pods);
//! - [`behavior`]: stabilization windows and scaling policies, with the
//!   history of recommendations and rescales per HPA;
//! - [`metrics`]: the metrics source (the API, or a fake in tests);
//! - `tests.rs`: unit tests with a fake clock and fake metrics.

pub mod behavior;
pub mod metrics;
pub mod replica_calculator;
pub mod sync;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::runtime::controller::Action;
use kube::runtime::Controller;
use kube::Client;
use tokio::time::Instant;

use bosun::events::EventRecorder;

use crate::toolkit::{key_of, run_controller, synced, Clock, Shared};
use behavior::History;
use metrics::{ApiMetrics, MetricsSource};
use replica_calculator::Calculator;

pub const COMPONENT: &str = "horizontal-pod-autoscaler";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Api(String),
}

/// kube-controller-manager's `--horizontal-pod-autoscaler-*` flags.
#[derive(Debug, Clone)]
pub struct PodAutoscalerOptions {
    /// `--horizontal-pod-autoscaler-sync-period` (15 s).
    pub sync_period: Duration,
    /// `--horizontal-pod-autoscaler-downscale-stabilization` (5 min): the
    /// scale-down window of HPAs that do not set their own.
    pub downscale_stabilization: Duration,
    /// `--horizontal-pod-autoscaler-tolerance` (0.1).
    pub tolerance: f64,
    /// `--horizontal-pod-autoscaler-cpu-initialization-period` (5 min).
    pub cpu_initialization_period: Duration,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay` (30 s).
    pub initial_readiness_delay: Duration,
}

impl Default for PodAutoscalerOptions {
    fn default() -> Self {
        PodAutoscalerOptions {
            sync_period: Duration::from_secs(15),
            downscale_stabilization: Duration::from_secs(300),
            tolerance: 0.1,
            cpu_initialization_period: Duration::from_secs(300),
            initial_readiness_delay: Duration::from_secs(30),
        }
    }
}

/// What every sync needs.
pub struct Context {
    client: Client,
    pods: crate::toolkit::PodIndex,
    clock: Arc<dyn Clock>,
    recorder: EventRecorder,
    metrics: Arc<dyn MetricsSource>,
    options: PodAutoscalerOptions,
    calculator: Calculator,
    /// Recommendations and rescales per HPA (`namespace/name`).
    histories: Mutex<HashMap<String, History>>,
    /// When each HPA was last synced (real time: it paces the loop).
    last_sync: Mutex<HashMap<String, Instant>>,
}

impl Context {
    /// Takes the caches it reads from `shared` (before the informers start).
    pub fn new(
        shared: &Shared,
        options: PodAutoscalerOptions,
        metrics: Arc<dyn MetricsSource>,
    ) -> Context {
        Context {
            client: shared.client_for("horizontalpodautoscaling"),
            pods: shared.informers.pods(),
            clock: shared.clock.clone(),
            recorder: shared.recorder(COMPONENT),
            metrics,
            calculator: Calculator {
                tolerance: options.tolerance,
                cpu_initialization_period: options.cpu_initialization_period,
                initial_readiness_delay: options.initial_readiness_delay,
            },
            options,
            histories: Mutex::new(HashMap::new()),
            last_sync: Mutex::new(HashMap::new()),
        }
    }

    /// Runs `f` on the history of the HPA `key`.
    fn history<T>(&self, key: &str, f: impl FnOnce(&mut History) -> T) -> T {
        f(self
            .histories
            .lock()
            .unwrap()
            .entry(key.to_string())
            .or_default())
    }
}

/// Sets up the controller; the future runs it.
pub fn start(shared: &Arc<Shared>, options: PodAutoscalerOptions) -> BoxFuture<'static, ()> {
    let metrics = Arc::new(ApiMetrics {
        client: shared.client_for("horizontalpodautoscaling"),
    });
    let ctx = Arc::new(Context::new(shared, options, metrics));
    let controller = Controller::for_shared_stream(
        shared.informers.subscribe::<HorizontalPodAutoscaler>(),
        shared.informers.store::<HorizontalPodAutoscaler>(),
    );
    run_controller("horizontalpodautoscaling", controller, ctx, reconcile).boxed()
}

/// Syncs an HPA at most once per sync period (its own status writes and
/// other changes in between wait for the period's end), then again one
/// period later. Errors are reported in the HPA's conditions and events
/// and retried at the next period, as upstream does.
pub async fn reconcile(
    hpa: Arc<HorizontalPodAutoscaler>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    synced(ctx.pods.store()).await;
    let key = key_of(hpa.as_ref());
    let period = ctx.options.sync_period;
    {
        let mut last = ctx.last_sync.lock().unwrap();
        if let Some(at) = last.get(&key) {
            let since = at.elapsed();
            if since < period {
                return Ok(Action::requeue(period - since));
            }
        }
        last.insert(key.clone(), Instant::now());
    }
    if let Err(e) = sync::sync(&hpa, &ctx).await {
        tracing::warn!(hpa = %key, error = %e, "sync failed");
    }
    Ok(Action::requeue(period))
}
