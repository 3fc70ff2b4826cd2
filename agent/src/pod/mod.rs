//! One pod's life on this node, as the kubelet's pod workers and
//! kuberuntime run it.
//!
//! - [`pod_workers`]: [`PodWorkers`], one task per pod running
//!   [`pod_worker_loop`] (the kubelet's `podWorkerLoop`);
//! - [`worker_state`]: [`PodWorker`], what one pod's syncs remember;
//! - [`sync`]: one sync of a pod ([`PodWorker::sync_pod`]), a sequence of
//!   named steps;
//! - `sandbox`, `containers`, `ephemeral`, `images`, `probing`: those
//!   steps (the sandbox, init and app containers with crash-loop back-off,
//!   ephemeral containers started once, image pulls with pull back-off,
//!   probe runners and what they found);
//! - [`runtime_class`]: the pod's RuntimeClass handler, the runtime its
//!   sandbox and containers run with;
//! - `backoff`: the one crash-loop and image-pull back-off;
//! - `kill`: [`PodWorker::kill_pod`], stopping and removing a deleted pod;
//! - [`timeline`]: when each step of a pod's first start happened, logged
//!   at debug once it is Ready.

mod backoff;
mod containers;
mod ephemeral;
mod images;
mod kill;
pub mod pod_workers;
mod probing;
pub mod runtime_class;
mod sandbox;
pub mod sync;
pub mod timeline;
pub mod worker_state;

pub use pod_workers::{pod_worker_loop, PodWorkers};
pub use sandbox::{ensure_pod_network, Sandbox};
pub use sync::Synced;
pub use worker_state::PodWorker;

#[cfg(test)]
mod tests;
