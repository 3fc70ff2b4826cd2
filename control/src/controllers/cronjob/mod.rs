//! The CronJob controller: creates a Job from a CronJob's `jobTemplate` at
//! each scheduled time, as kube-controller-manager's cronjob controller
//! (v2) does; the Job controller then runs it.
//!
//! The folder:
//!
//! - `mod.rs` (here): the wiring — a CronJob is synced when it or one of
//!   the Jobs it controls changes, and again just after its next
//!   scheduled time (no polling);
//! - [`schedule`]: which scheduled time is due, how many were missed, how
//!   long until the next one (`utils.go`); the cron syntax itself is
//!   [`bosun::cron`], shared with validation;
//! - [`sync`]: one sync (`syncCronJob` + `cleanupFinishedJobs`) — track
//!   the active Jobs, honour suspend, startingDeadlineSeconds and the
//!   concurrency policy, create the Job named after its scheduled time,
//!   write the status, trim the finished Jobs to the history limits;
//! - `tests.rs`: unit tests against the real API handlers with a fake
//!   clock, calling one sync at a time.
//!
//! Times are computed in `spec.timeZone` when set, else in UTC (where
//! kube-controller-manager's container keeps its local time).

pub mod schedule;
pub mod sync;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::runtime::Controller;
use kube::Client;

use bosun::events::EventRecorder;

use crate::toolkit::{run_controller, synced, Clock, Shared};

pub const COMPONENT: &str = "cronjob-controller";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Api(String),
}

/// What every sync needs.
pub struct Context {
    client: Client,
    jobs: Store<Job>,
    clock: Arc<dyn Clock>,
    recorder: EventRecorder,
}

impl Context {
    /// Takes the caches it reads from `shared` (before the informers start).
    pub fn new(shared: &Shared) -> Context {
        Context {
            client: shared.client_for("cronjob"),
            jobs: shared.informers.store::<Job>(),
            clock: shared.clock.clone(),
            recorder: shared.recorder(COMPONENT),
        }
    }
}

/// Sets up the controller; the future runs it.
pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    let ctx = Arc::new(Context::new(shared));
    let controller = Controller::for_shared_stream(
        shared.informers.subscribe::<CronJob>(),
        shared.informers.store::<CronJob>(),
    )
    .owns_shared_stream(shared.informers.subscribe::<Job>())
    .owns_stream(shared.informers.deleted::<Job>());
    run_controller("cronjob", controller, ctx, reconcile).boxed()
}

/// Waits for the Job cache's first list, then syncs; requeues just after
/// the next scheduled time.
pub async fn reconcile(cj: Arc<CronJob>, ctx: Arc<Context>) -> Result<Action, Error> {
    synced(&ctx.jobs).await;
    Ok(match sync::sync(&cj, &ctx).await? {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}
