//! sync.go: the sets a Deployment claims, scaling (proportional during a
//! rollout), history cleanup and status; its new set and revisions are
//! [`super::new_set`].

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::controller::Action;

use bosun::events::EventType;
use bosun::selector::LabelSelector;

use super::hash::equal_ignore_hash;
use super::new_set::revision_of;
use super::progress;
use super::replicas::{self, spec_replicas};
use super::rollout::Rollout;
use super::{Error, RESYNC};
use crate::toolkit::api_errors::is_status;
use crate::toolkit::ClaimManager;

fn name_of(md: &ObjectMeta) -> String {
    md.name.clone().unwrap_or_default()
}

impl Rollout<'_> {
    /// `syncDeployment`.
    pub async fn sync_deployment(&mut self) -> Result<(), Error> {
        let spec = self.d.spec.clone();
        let selector = LabelSelector::from_label_selector(&spec.selector)
            .map_err(|e| Error::Selector(self.name(), e.0))?;
        if selector.is_empty() {
            self.event(
                EventType::Warning,
                "SelectingAll",
                "This deployment is selecting all pods. A non-empty selector is required.".into(),
            );
            let mut status = self.status();
            if status.observed_generation < self.d.metadata.generation {
                status.observed_generation = self.d.metadata.generation;
                self.write_status(status).await?;
            }
            return Ok(());
        }
        self.claim_replica_sets(&selector).await?;
        self.map_pods(&selector);
        if self.d.metadata.deletion_timestamp.is_some() {
            return self.sync_status_only().await;
        }
        self.check_paused_conditions().await?;
        if self.paused() {
            return self.sync().await;
        }
        if self.is_scaling_event().await? {
            return self.sync().await;
        }
        if replicas::is_rolling_update(&self.d) {
            self.rollout_rolling().await
        } else {
            self.rollout_recreate().await
        }
    }

    /// What the work queue does with this Deployment next.
    pub fn next_action(&self) -> Action {
        let complete = progress::deployment_complete(&self.d, &self.status());
        let resync = if complete {
            RESYNC
        } else {
            self.ctx.rollout_resync
        };
        Action::requeue(self.requeue.map_or(resync, |r| r.min(resync)))
    }

    /// The sets this Deployment controls, adopting matching orphans and
    /// releasing its sets that no longer match (`ClaimReplicaSets`),
    /// oldest first.
    async fn claim_replica_sets(&mut self, selector: &LabelSelector) -> Result<(), Error> {
        let ns = self.namespace();
        let mut candidates: Vec<ReplicaSet> = self
            .ctx
            .replica_sets
            .state()
            .into_iter()
            .filter(|rs| rs.metadata.namespace.as_deref() == Some(ns.as_str()))
            .map(|rs| (*rs).clone())
            .collect();
        replicas::sort_by_creation(&mut candidates);
        let claims = ClaimManager::new(self.ctx.client.clone(), &self.d, Some(selector));
        let claimed = claims.claim(candidates.into_iter().map(Arc::new)).await?;
        self.rss = claimed.into_iter().map(Arc::unwrap_or_clone).collect();
        Ok(())
    }

    /// The live pods of the claimed sets (`getPodMapForDeployment`), read
    /// from the pod cache's controller index: the pods of each set that
    /// still match the Deployment's selector.
    fn map_pods(&mut self, selector: &LabelSelector) {
        let ns = self.namespace();
        let mut map: HashMap<String, Vec<Arc<Pod>>> = HashMap::new();
        for uid in self.rss.iter().filter_map(|rs| rs.metadata.uid.as_deref()) {
            let pods = self
                .ctx
                .pods
                .controlled_by(uid)
                .into_iter()
                .filter(|pod| {
                    pod.metadata.namespace.as_deref() == Some(ns.as_str())
                        && match &pod.metadata.labels {
                            Some(labels) => selector.matches(labels),
                            None => selector.matches(&Default::default()),
                        }
                })
                .collect::<Vec<_>>();
            if !pods.is_empty() {
                map.insert(uid.to_string(), pods);
            }
        }
        self.pods_by_rs = map;
    }

    /// The index of the new set: the oldest whose template is the
    /// Deployment's (`FindNewReplicaSet`).
    pub fn new_index(&self) -> Option<usize> {
        let template = &self.d.spec.template;
        self.rss.iter().position(|rs| {
            rs.spec
                .template
                .as_ref()
                .is_some_and(|t| equal_ignore_hash(t, template))
        })
    }

    /// Every claimed set but the new one.
    pub fn old_sets(&self) -> Vec<&ReplicaSet> {
        let new = self.new_index();
        self.rss
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != new)
            .map(|(_, rs)| rs)
            .collect()
    }

    pub fn new_set(&self) -> Option<&ReplicaSet> {
        self.new_index().map(|i| &self.rss[i])
    }

    pub fn all_sets(&self) -> Vec<&ReplicaSet> {
        self.rss.iter().collect()
    }

    pub(super) fn store_rs(&mut self, rs: ReplicaSet) {
        match self
            .rss
            .iter()
            .position(|r| r.metadata.name == rs.metadata.name)
        {
            Some(i) => self.rss[i] = rs,
            None => self.rss.push(rs),
        }
    }

    fn rs_by_name(&self, name: &str) -> Option<&ReplicaSet> {
        self.rss
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
    }

    /// Writes `status` through the status subresource (if it changed)
    /// and keeps the result.
    pub async fn write_status(&mut self, status: DeploymentStatus) -> Result<(), Error> {
        if self.d.status.as_ref() == Some(&status) {
            return Ok(());
        }
        let mut d = self.d.clone();
        d.status = Some(status);
        self.d = self
            .deployment_api()
            .replace_status(&self.name(), &PostParams::default(), &d)
            .await?;
        Ok(())
    }

    /// Scales the set `name` to `to` (and refreshes its replica
    /// annotations), recording a ScalingReplicaSet event. With
    /// `only_if_resized`, a set already at `to` is left alone
    /// (`scaleReplicaSetAndRecordEvent`); otherwise its annotations are
    /// brought up to date anyway (`scaleReplicaSet`). True if resized.
    pub async fn scale_rs(
        &mut self,
        name: &str,
        to: i32,
        only_if_resized: bool,
    ) -> Result<bool, Error> {
        let Some(rs) = self.rs_by_name(name) else {
            return Ok(false);
        };
        let from = spec_replicas(rs);
        if only_if_resized && from == to {
            return Ok(false);
        }
        let desired = replicas::desired(&self.d);
        let max = desired + replicas::max_surge(&self.d);
        let resize = from != to;
        if !resize && !replicas::replicas_annotations_need_update(rs, desired, max) {
            return Ok(false);
        }
        let mut rs = rs.clone();
        replicas::set_spec_replicas(&mut rs, to);
        replicas::set_replicas_annotations(&mut rs, desired, max);
        let updated = self
            .rs_api()
            .replace(name, &PostParams::default(), &rs)
            .await?;
        self.store_rs(updated);
        if resize {
            let direction = if from < to { "up" } else { "down" };
            self.event(
                EventType::Normal,
                "ScalingReplicaSet",
                format!("Scaled {direction} replica set {name} from {from} to {to}"),
            );
        }
        Ok(resize)
    }

    /// A change of `spec.replicas` only: some active set was sized for
    /// another number (`isScalingEvent`).
    async fn is_scaling_event(&mut self) -> Result<bool, Error> {
        self.get_new_replica_set(false).await?;
        let desired = replicas::desired(&self.d);
        Ok(self.rss.iter().any(|rs| {
            spec_replicas(rs) > 0
                && replicas::desired_replicas_annotation(rs).is_some_and(|n| n != desired)
        }))
    }

    /// Scaling without a rollout, and paused Deployments (`sync`).
    async fn sync(&mut self) -> Result<(), Error> {
        self.get_new_replica_set(false).await?;
        self.scale().await?;
        if self.paused() {
            self.cleanup_deployment().await?;
        }
        self.sync_deployment_status().await
    }

    /// The one active (or the newest) set takes all replicas; otherwise a
    /// saturated new set means old ones go to 0; otherwise a rolling
    /// Deployment is scaled proportionally (sync.go's `scale`).
    async fn scale(&mut self) -> Result<(), Error> {
        let desired = replicas::desired(&self.d);
        if let Some(name) = self.active_or_latest() {
            self.scale_rs(&name, desired, true).await?;
            return Ok(());
        }
        if replicas::is_saturated(&self.d, self.new_set()) {
            let olds: Vec<String> = self
                .old_sets()
                .iter()
                .filter(|rs| spec_replicas(rs) > 0)
                .map(|rs| name_of(&rs.metadata))
                .collect();
            for name in olds {
                self.scale_rs(&name, 0, true).await?;
            }
            return Ok(());
        }
        if replicas::is_rolling_update(&self.d) {
            let active: Vec<&ReplicaSet> =
                self.rss.iter().filter(|rs| spec_replicas(rs) > 0).collect();
            let sizes = replicas::proportional_sizes(&self.d, &active);
            for (name, size) in sizes {
                self.scale_rs(&name, size, false).await?;
            }
        }
        Ok(())
    }

    /// The set that should hold every replica when at most one set is
    /// active (`FindActiveOrLatest`).
    fn active_or_latest(&self) -> Option<String> {
        let new = self.new_set();
        let mut olds = self.old_sets();
        if new.is_none() && olds.is_empty() {
            return None;
        }
        olds.reverse(); // newest first
        let mut active: Vec<&ReplicaSet> = olds
            .iter()
            .copied()
            .filter(|rs| spec_replicas(rs) > 0)
            .collect();
        if let Some(n) = new.filter(|rs| spec_replicas(rs) > 0) {
            active.push(n);
        }
        match active.len() {
            0 => new
                .or(olds.first().copied())
                .map(|rs| name_of(&rs.metadata)),
            1 => Some(name_of(&active[0].metadata)),
            _ => None,
        }
    }

    /// Deletes the oldest old sets beyond `revisionHistoryLimit` that run
    /// nothing (`cleanupDeployment`).
    pub async fn cleanup_deployment(&mut self) -> Result<(), Error> {
        let Some(limit) = self.d.spec.revision_history_limit else {
            return Ok(());
        };
        let mut cleanable: Vec<ReplicaSet> = self
            .old_sets()
            .into_iter()
            .filter(|rs| rs.metadata.deletion_timestamp.is_none())
            .cloned()
            .collect();
        let diff = cleanable.len() as i64 - i64::from(limit);
        if diff <= 0 {
            return Ok(());
        }
        cleanable.sort_by(|a, b| {
            revision_of(a).cmp(&revision_of(b)).then_with(|| {
                let key = |r: &ReplicaSet| {
                    r.metadata
                        .creation_timestamp
                        .as_ref()
                        .map(|t| t.0.as_nanosecond())
                };
                key(a).cmp(&key(b))
            })
        });
        for rs in cleanable.iter().take(diff as usize) {
            let observed = rs
                .status
                .as_ref()
                .and_then(|s| s.observed_generation)
                .unwrap_or(0);
            let has_pods = rs
                .metadata
                .uid
                .as_ref()
                .is_some_and(|u| self.pods_by_rs.get(u).is_some_and(|p| !p.is_empty()));
            if replicas::actual_replicas(rs) != 0
                || spec_replicas(rs) != 0
                || rs.metadata.generation.unwrap_or(0) > observed
                || has_pods
            {
                continue;
            }
            let name = name_of(&rs.metadata);
            match self.rs_api().delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if is_status(&e, 404) => {}
                Err(e) => return Err(e.into()),
            }
            self.rss
                .retain(|r| r.metadata.name.as_deref() != Some(name.as_str()));
        }
        Ok(())
    }

    /// The status the sets add up to (`calculateStatus`).
    pub fn calculate_status(&self) -> DeploymentStatus {
        let all = self.all_sets();
        let available = replicas::total_available(&all);
        let total = replicas::total_spec(&all);
        let current = self.status();
        let mut status = DeploymentStatus {
            observed_generation: self.d.metadata.generation,
            replicas: Some(replicas::total_actual(&all)),
            updated_replicas: Some(self.new_set().map_or(0, replicas::actual_replicas)),
            ready_replicas: Some(replicas::total_ready(&all)),
            available_replicas: Some(available),
            unavailable_replicas: Some((total - available).max(0)),
            collision_count: current.collision_count,
            conditions: current.conditions.clone(),
            terminating_replicas: None,
        };
        let min_available = replicas::desired(&self.d) - replicas::max_unavailable(&self.d);
        let c = if available >= min_available {
            progress::new_condition(
                progress::AVAILABLE,
                "True",
                progress::MIN_AVAILABLE,
                "Deployment has minimum availability.".into(),
                self.ctx.clock.as_ref(),
            )
        } else {
            progress::new_condition(
                progress::AVAILABLE,
                "False",
                progress::MIN_UNAVAILABLE,
                "Deployment does not have minimum availability.".into(),
                self.ctx.clock.as_ref(),
            )
        };
        progress::set_condition(&mut status, c);
        status
    }

    /// `syncDeploymentStatus`: status without progress estimation.
    pub async fn sync_deployment_status(&mut self) -> Result<(), Error> {
        let status = self.calculate_status();
        self.write_status(status).await
    }

    /// A Deployment being deleted only reports.
    async fn sync_status_only(&mut self) -> Result<(), Error> {
        self.get_new_replica_set(false).await?;
        self.sync_deployment_status().await
    }
}
