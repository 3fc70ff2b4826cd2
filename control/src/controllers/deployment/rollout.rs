//! One sync of one Deployment: the state `sync.go`, `rolling.go`,
//! `recreate.go` and `progress.go` share, with the accessors they all use.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use bosun::events::{reference_to, EventType};

use super::Context;

/// One sync of one Deployment: the Deployment as this sync sees and
/// writes it, and the sets it owns (kept up to date with every write).
pub struct Rollout<'a> {
    pub ctx: &'a Context,
    pub d: Deployment,
    /// The claimed sets, oldest first.
    pub rss: Vec<ReplicaSet>,
    /// Live pods of the claimed sets, by set uid (the cache's own).
    pub pods_by_rs: HashMap<String, Vec<Arc<Pod>>>,
    /// When to look at the Deployment again for its progress deadline.
    pub requeue: Option<Duration>,
}

impl<'a> Rollout<'a> {
    pub fn new(ctx: &'a Context, d: Deployment) -> Self {
        Rollout {
            ctx,
            d,
            rss: Vec::new(),
            pods_by_rs: HashMap::new(),
            requeue: None,
        }
    }

    pub fn name(&self) -> String {
        self.d.metadata.name.clone().unwrap_or_default()
    }

    pub fn namespace(&self) -> String {
        self.d
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into())
    }

    pub(super) fn rs_api(&self) -> Api<ReplicaSet> {
        Api::namespaced(self.ctx.client.clone(), &self.namespace())
    }

    pub(super) fn deployment_api(&self) -> Api<Deployment> {
        Api::namespaced(self.ctx.client.clone(), &self.namespace())
    }

    pub fn paused(&self) -> bool {
        self.d.spec.paused.unwrap_or(false)
    }

    pub fn status(&self) -> DeploymentStatus {
        self.d.status.clone().unwrap_or_default()
    }

    pub fn event(&self, type_: EventType, reason: &str, message: String) {
        self.ctx
            .recorder
            .record(&reference_to(&self.d), type_, reason, message);
    }
}
