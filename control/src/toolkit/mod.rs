//! What the scheduler and every controller share, on top of kube-runtime.
//!
//! kube-runtime gives us the watcher, the reflector (a watch-fed cache with
//! one writer and many readers) and `Controller`, whose scheduler already
//! de-duplicates queued keys, runs one reconcile per object at a time,
//! honours `Action::requeue` and opens one tracing span per reconcile
//! naming the object and the reason. This folder adds what it lacks, and
//! what kube-controller-manager's controllers share in `pkg/controller`:
//!
//! - [`informers`]: one shared watch-fed cache per resource type, and a
//!   stream of deletions;
//! - [`run`]: the loop driver, with [`backoff`]'s per-key exponential
//!   back-off on errors (client-go's rate-limited work queue);
//! - [`expectations`]: an owner is not acted on again until its cache has
//!   seen what the last sync created and deleted;
//! - [`claim`]: adopting matching orphans and releasing what no longer
//!   matches (`ControllerRefManager`);
//! - [`owners`]: what wakes a controller of pods, and forgetting a deleted
//!   owner's expectations;
//! - [`pods`]: a pod from a template, and creating in slow-start batches;
//! - [`history`]: ControllerRevisions, the template history StatefulSets
//!   and DaemonSets keep, and the hash that names them;
//! - [`dynamic`]: the API of any served resource, for controllers that
//!   work across kinds;
//! - [`retry_after`]: the in-process clients send a request again when
//!   the API answers 429 (or 5xx) with `Retry-After`, as client-go does;
//! - [`clock`]: time as a dependency, so unit tests move it by hand;
//! - [`api_errors`]: reading a kube client's error as the API's status;
//! - [`scheduling`]: whether a pod may run on a node (taints, tolerations,
//!   node affinity), asked by the scheduler and by the DaemonSet and taint
//!   eviction controllers;
//! - [`status`]: writing a status onto the object it was computed from;
//! - [`volumes`]: which volume a claim gets, asked by the binder and the
//!   scheduler.

pub mod api_errors;
pub mod backoff;
pub mod claim;
pub mod clock;
pub mod dynamic;
pub mod expectations;
pub mod hash;
pub mod history;
pub mod informers;
pub mod owners;
pub mod pod_index;
pub mod pods;
pub mod retry_after;
pub mod run;
pub mod scheduling;
pub mod status;
#[cfg(test)]
pub mod testing;
pub mod volumes;

use std::sync::Arc;

use kube::Client;

use bosun::events::{EventRecorder, EventSource};

pub use backoff::KeyBackoff;
pub use bosun::owners::{controller_of, controller_ref};
pub use claim::ClaimManager;
pub use clock::{from_chrono, to_chrono, Clock, FakeClock, SystemClock};
pub use expectations::{expectations_key, Expectations, EXPECTATIONS_TIMEOUT};
pub use informers::{synced, Cached, Informers};
pub use owners::{forget_deleted, pod_owner_controller};
pub use pod_index::PodIndex;
pub use pods::{pod_from_template, slow_start_batch, PodControl};
pub use run::{key_of, run_controller};

/// What the controllers of one control plane share.
pub struct Shared {
    pub client: Client,
    /// The scheduler's client: the same API, with a User-Agent that names
    /// kube-scheduler as the manager of its writes.
    pub scheduler_client: Client,
    pub informers: Informers,
    pub clock: Arc<dyn Clock>,
    /// Makes the client a controller writes through, given the service
    /// account it acts as; `None` writes through `client` (tests).
    controller_clients: Option<ControllerClients>,
}

/// Makes a controller's client from its service account's name.
pub type ControllerClients = Arc<dyn Fn(&str) -> Client + Send + Sync>;

impl Shared {
    pub fn new(client: Client, clock: Arc<dyn Clock>) -> Arc<Self> {
        Self::with_scheduler_client(client.clone(), client, clock)
    }

    /// As [`Shared::new`], the scheduler writing through `scheduler_client`.
    pub fn with_scheduler_client(
        client: Client,
        scheduler_client: Client,
        clock: Arc<dyn Clock>,
    ) -> Arc<Self> {
        Self::with_clients(client, scheduler_client, None, clock)
    }

    /// As [`Shared::with_scheduler_client`], each controller writing
    /// through a client of its own from `controller_clients` (if any).
    pub fn with_clients(
        client: Client,
        scheduler_client: Client,
        controller_clients: Option<ControllerClients>,
        clock: Arc<dyn Clock>,
    ) -> Arc<Self> {
        Arc::new(Shared {
            informers: Informers::new(client.clone()),
            client,
            scheduler_client,
            clock,
            controller_clients,
        })
    }

    /// The client controller `name` (its `--controllers` name) writes
    /// through: as its service account in the bootstrap policy.
    pub fn client_for(&self, name: &str) -> Client {
        let account = crate::auth::rbac::policy::controller_account(name)
            .unwrap_or_else(|| panic!("controller {name:?} has no service account in the policy"));
        match &self.controller_clients {
            Some(make) => make(account),
            None => self.client.clone(),
        }
    }

    /// An event recorder reporting as `component` (e.g.
    /// `deployment-controller`, `default-scheduler`).
    pub fn recorder(&self, component: &str) -> EventRecorder {
        EventRecorder::new(
            self.client.clone(),
            EventSource {
                component: component.to_string(),
                host: None,
            },
        )
    }
}
