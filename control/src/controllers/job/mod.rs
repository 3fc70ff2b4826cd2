//! The Job controller: runs a Job's pods to completion, as
//! kube-controller-manager's job controller does.
//!
//! The folder:
//!
//! - `mod.rs` (here): the controller's wiring — caches, what wakes a Job
//!   up, the [`Context`] with the failure back-off (injectable for tests);
//! - [`sync`]: one sync of a Job — claim its pods, count them, decide
//!   Complete / Failed, create or delete pods, write the status; delete a
//!   finished Job when its `ttlSecondsAfterFinished` is over;
//! - [`indexes`]: Indexed completion mode — pod indexes, the
//!   `JOB_COMPLETION_INDEX` env var and annotation, `completedIndexes`;
//! - `tests.rs`: unit tests against the real API handlers with a fake
//!   clock.
//!
//! Counting: `succeeded` and `failed` are counted from the Job's pods in
//! the cache (no finalizer tracking, no `uncountedTerminatedPods`); a
//! finished pod is never deleted by the controller while the Job lives, so
//! each one is counted exactly once. The counts never go down: a finished
//! pod deleted by hand keeps being counted through the previous status.

pub mod indexes;
pub mod sync;

#[cfg(test)]
mod tests;

use crate::toolkit::synced;
use crate::toolkit::{forget_deleted, pod_owner_controller};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};

use bosun::events::EventRecorder;
use bosun::selector::LabelSelector;

use crate::toolkit::claim::ClaimError;
use crate::toolkit::{expectations_key, run_controller, Clock, Expectations, Shared};

/// How often every Job is synced even without a change.
const RESYNC: Duration = Duration::from_secs(60);

const COMPONENT: &str = "job-controller";

/// Kubernetes' failure back-off: 10 s, doubling per failure, at most 6 min.
pub const DEFAULT_BACKOFF_BASE: Duration = Duration::from_secs(10);
pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(360);

/// The most pods one sync creates (Kubernetes' MaxPodCreateDeletePerSync).
pub const MAX_CREATE_PER_SYNC: usize = 500;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Create(String),
    #[error("{0}")]
    Delete(String),
    #[error(transparent)]
    Claim(#[from] ClaimError),
    #[error("updating the status of Job {job}: {message}")]
    Status { job: String, message: String },
}

/// What every sync needs.
pub struct Context {
    client: Client,
    pods: crate::toolkit::PodIndex,
    clock: Arc<dyn Clock>,
    recorder: EventRecorder,
    expectations: Expectations,
    /// The delay before the pod replacing the first failure; each further
    /// failure since the last success doubles it.
    pub backoff_base: Duration,
    /// The longest failure back-off.
    pub backoff_max: Duration,
}

impl Context {
    /// Takes the caches it reads from `shared` (before the informers start).
    pub fn new(shared: &Shared) -> Context {
        Context {
            client: shared.client_for("job"),
            pods: shared.informers.pods(),
            clock: shared.clock.clone(),
            recorder: shared.recorder(COMPONENT),
            expectations: Expectations::default(),
            backoff_base: DEFAULT_BACKOFF_BASE,
            backoff_max: DEFAULT_BACKOFF_MAX,
        }
    }
}

/// Sets up the controller with Kubernetes' back-off; the future runs it.
pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    start_with(shared, DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_MAX)
}

/// Sets up the controller with the given failure back-off.
pub fn start_with(
    shared: &Arc<Shared>,
    backoff_base: Duration,
    backoff_max: Duration,
) -> BoxFuture<'static, ()> {
    let mut ctx = Context::new(shared);
    ctx.backoff_base = backoff_base;
    ctx.backoff_max = backoff_max;
    let ctx = Arc::new(ctx);
    let jobs = shared.informers.store::<Job>();
    let controller = pod_owner_controller(&shared.informers, jobs, job_may_adopt, RESYNC);
    let deleted_jobs = shared.informers.deleted::<Job>();
    async move {
        let forget = forget_deleted(deleted_jobs, &ctx.expectations);
        let run = run_controller("job", controller, ctx.clone(), reconcile);
        futures::future::join(forget, run).await;
    }
    .boxed()
}

/// Whether an orphan pod may join the Job: its selector matches it.
fn job_may_adopt(job: &Job, pod: &Pod) -> bool {
    selector_of(job).is_some_and(|s| s.matches(pod.labels()))
}

/// The Job's selector; None when missing, empty or invalid.
fn selector_of(job: &Job) -> Option<LabelSelector> {
    let sel = job.spec.as_ref()?.selector.as_ref()?;
    LabelSelector::from_label_selector(sel)
        .ok()
        .filter(|s| !s.is_empty())
}

/// Waits for the pod cache's first list, then syncs.
pub async fn reconcile(job: Arc<Job>, ctx: Arc<Context>) -> Result<Action, Error> {
    synced(ctx.pods.store()).await;
    sync::sync(job, ctx).await
}
