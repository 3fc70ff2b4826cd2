//! One pod's life on this node, as the kubelet's pod workers and
//! kuberuntime run it.
//!
//! - [`workers`]: [`PodWorkers`], one task per pod running
//!   [`pod_worker_loop`] (the kubelet's `podWorkerLoop`);
//! - [`worker`]: [`PodWorker`], what one pod's syncs remember;
//! - [`sync`]: one sync of a pod ([`PodWorker::sync_pod`]), a sequence of
//!   named steps;
//! - `sandbox`, `containers`, `images`, `probing`: those steps (the
//!   sandbox, init and app containers with crash-loop back-off, image
//!   pulls with pull back-off, probe runners and what they found);
//! - `backoff`: the one crash-loop and image-pull back-off;
//! - `kill`: [`PodWorker::kill_pod`], stopping and removing a deleted pod.

mod backoff;
mod containers;
mod images;
mod kill;
mod probing;
mod sandbox;
pub mod sync;
pub mod worker;
pub mod workers;

pub use sandbox::{ensure_pod_network, Sandbox};
pub use sync::Synced;
pub use worker::PodWorker;
pub use workers::{pod_worker_loop, PodWorkers};

#[cfg(test)]
mod tests;
