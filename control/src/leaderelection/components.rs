//! What runs elected in a control plane, split as upstream splits the
//! processes: kube-scheduler (the `scheduler` loop) under the
//! `kube-scheduler` Lease, kube-controller-manager (every other
//! `--controllers` loop) under `kube-controller-manager`. What
//! kube-apiserver runs itself stays in every API server (`server.rs`):
//! the kubernetes Service, the CRD naming controller, APIService
//! availability, the RBAC/webhook/policy/flow-control followers and the
//! flow-control ensurer, the bootstrap-token cleaner (idempotent deletes
//! of expired tokens, harmless from several servers).
//!
//! Each term gets shared caches of its own, made when the Lease is won
//! and dropped when it is lost, so a new leader starts from the API's
//! state as a freshly started kube-controller-manager would (the node
//! IPAM, for one, rebuilds its CIDR set from the Nodes when it starts).

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{
    identity, LeaderElectionOptions, LeaderElector, Term, CONTROLLER_MANAGER_LEASE, SCHEDULER_LEASE,
};
use crate::auth::UserInfo;
use crate::manager::{self, ControllerOptions};
use crate::toolkit::{Shared, SystemClock};

/// The loops of one term and the caches they read.
pub struct ControllerTerm {
    tasks: JoinSet<()>,
    shared: Arc<Shared>,
}

impl ControllerTerm {
    /// Starts the enabled loops `which` picks, on caches of their own.
    pub fn start(
        router: &axum::Router,
        options: &ControllerOptions,
        which: impl Fn(&str) -> bool,
    ) -> ControllerTerm {
        let shared = manager::shared_in_process(router.clone(), Arc::new(SystemClock));
        let mut tasks = JoinSet::new();
        for controller in manager::start_matching(&shared, options, which) {
            tasks.spawn(controller);
        }
        ControllerTerm { tasks, shared }
    }
}

impl Term for ControllerTerm {
    async fn stop(mut self) {
        // The loops first, then their caches' watches.
        self.tasks.shutdown().await;
        self.shared.informers.stop().await;
    }
}

/// Picks the `--controllers` loops one component runs.
type Picks = fn(&str) -> bool;

fn is_scheduler(name: &str) -> bool {
    name == "scheduler"
}

/// Starts the scheduler and the controllers: each under its Lease when
/// leader election is on, else at once. The returned tasks end once
/// `stop` turns true and everything they ran has stopped (and the Leases
/// held have been released).
pub fn start(
    router: axum::Router,
    controllers: ControllerOptions,
    election: &LeaderElectionOptions,
    stop: watch::Receiver<bool>,
) -> JoinSet<()> {
    let mut running = JoinSet::new();
    if !election.enabled {
        let term = ControllerTerm::start(&router, &controllers, |_| true);
        let mut stop = stop;
        running.spawn(async move {
            let _ = stop.wait_for(|s| *s).await;
            term.stop().await;
        });
        return running;
    }
    let identity = identity();
    tracing::info!(%identity, "leader election: campaigning for the scheduler's and the controller manager's Leases");
    let components: [(&str, UserInfo, Picks); 2] = [
        (SCHEDULER_LEASE, manager::scheduler_user(), is_scheduler),
        (
            CONTROLLER_MANAGER_LEASE,
            manager::controller_manager_user(),
            |n| !is_scheduler(n),
        ),
    ];
    for (lease, user, which) in components {
        // Each candidate writes its Lease as its component's user, held
        // to the bootstrap policy's rules on its own Lease.
        let client = manager::in_process_client_for(router.clone(), user, lease);
        let elector = LeaderElector::new(client, lease, &identity, election.clone());
        let (router, controllers) = (router.clone(), controllers.clone());
        running.spawn(elector.run(stop.clone(), move || {
            let term = ControllerTerm::start(&router, &controllers, which);
            async move { term }
        }));
    }
    running
}
