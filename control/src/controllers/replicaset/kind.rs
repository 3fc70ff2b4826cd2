//! The kinds the ReplicaSet controller drives: apps/v1 ReplicaSet and core
//! v1 ReplicationController (a set over an equality selector), as
//! kube-controller-manager runs its replication controller as the
//! ReplicaSet controller over converted objects.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{PodTemplateSpec, ReplicationController};
use k8s_openapi::NamespaceResourceScope;
use kube::Resource;

use bosun::selector::LabelSelector;

use crate::toolkit::Cached;

/// What the controller reads of a replicated set of pods.
pub trait ReplicatedSet: Cached + Resource<Scope = NamespaceResourceScope> {
    /// The name `--controllers` uses and its service account's policy key.
    const CONTROLLER: &'static str;
    /// The component its events report.
    const COMPONENT: &'static str;

    /// The selector; None when it is missing, empty or invalid (then it
    /// selects nothing).
    fn selector(&self) -> Option<LabelSelector>;
    fn replicas(&self) -> usize;
    fn min_ready_seconds(&self) -> i64;
    fn template(&self) -> Option<&PodTemplateSpec>;
    /// The current status in ReplicaSet's shape (the two kinds' status
    /// fields are the same).
    fn current_status(&self) -> ReplicaSetStatus;
}

impl ReplicatedSet for ReplicaSet {
    const CONTROLLER: &'static str = "replicaset";
    const COMPONENT: &'static str = "replicaset-controller";

    fn selector(&self) -> Option<LabelSelector> {
        LabelSelector::from_label_selector(&self.spec.selector)
            .ok()
            .filter(|s| !s.is_empty())
    }

    fn replicas(&self) -> usize {
        self.spec.replicas.unwrap_or(1).max(0) as usize
    }

    fn min_ready_seconds(&self) -> i64 {
        self.spec.min_ready_seconds.unwrap_or(0).max(0) as i64
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.template.as_ref()
    }

    fn current_status(&self) -> ReplicaSetStatus {
        self.status.clone().unwrap_or_default()
    }
}

impl ReplicatedSet for ReplicationController {
    const CONTROLLER: &'static str = "replicationcontroller";
    const COMPONENT: &'static str = "replication-controller";

    fn selector(&self) -> Option<LabelSelector> {
        let labels: BTreeMap<String, String> = self.spec.as_ref()?.selector.clone()?;
        let sel = k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_labels: Some(labels),
            match_expressions: None,
        };
        LabelSelector::from_label_selector(&sel)
            .ok()
            .filter(|s| !s.is_empty())
    }

    fn replicas(&self) -> usize {
        let spec = self.spec.as_ref();
        spec.and_then(|s| s.replicas).unwrap_or(1).max(0) as usize
    }

    fn min_ready_seconds(&self) -> i64 {
        let spec = self.spec.as_ref();
        spec.and_then(|s| s.min_ready_seconds).unwrap_or(0).max(0) as i64
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref()?.template.as_ref()
    }

    fn current_status(&self) -> ReplicaSetStatus {
        let Some(s) = self.status.clone() else {
            return ReplicaSetStatus::default();
        };
        ReplicaSetStatus {
            replicas: s.replicas,
            fully_labeled_replicas: s.fully_labeled_replicas,
            ready_replicas: s.ready_replicas,
            available_replicas: s.available_replicas,
            observed_generation: s.observed_generation,
            conditions: s.conditions.map(|cs| {
                cs.into_iter()
                    .map(|c| ReplicaSetCondition {
                        type_: Some(c.type_),
                        status: Some(c.status),
                        reason: c.reason,
                        message: c.message,
                        last_transition_time: c.last_transition_time,
                    })
                    .collect()
            }),
            ..Default::default()
        }
    }
}
