//! The replication controller: keeps `spec.replicas` pods of each core v1
//! ReplicationController running. As kube-controller-manager's (which runs
//! the ReplicaSet controller over ReplicationControllers converted to
//! ReplicaSets), it is the ReplicaSet controller over the
//! [`ReplicatedSet`](super::replicaset::ReplicatedSet) view of the kind: its
//! equality selector is a ReplicaSet's `matchLabels`.

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ReplicationController;

use crate::toolkit::Shared;

/// Sets up the controller on the shared caches; the returned future runs it.
pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    super::replicaset::start_for::<ReplicationController>(shared)
}
