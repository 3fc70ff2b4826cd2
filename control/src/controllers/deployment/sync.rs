//! sync.go: the sets a Deployment claims, its new set and revisions,
//! scaling (proportional during a rollout), history cleanup and status.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use serde_json::json;

use bosun::events::EventType;
use bosun::selector::LabelSelector;
// Deployment annotations not copied onto its new set.
use bosun::well_known::{DEPLOYMENT_ANNOTATIONS_TO_SKIP as NOT_COPIED, REVISION, REVISION_HISTORY};

use super::hash::{compute_hash, equal_ignore_hash};
use super::progress::{self, has_progress_deadline};
use super::replicas::{self, spec_replicas};
use super::rollout::Rollout;
use super::{controller_of, Error, POD_TEMPLATE_HASH, RESYNC};
use crate::toolkit::api_errors::is_status;
use crate::toolkit::{controller_ref, ClaimManager};

/// The longest `revision-history` annotation Kubernetes keeps.
const MAX_REVISION_HISTORY_CHARS: usize = 2000;

pub fn revision_of(rs: &ReplicaSet) -> i64 {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

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

    /// The live pods of the claimed sets (`getPodMapForDeployment`).
    fn map_pods(&mut self, selector: &LabelSelector) {
        let ns = self.namespace();
        let uids: HashSet<String> = self
            .rss
            .iter()
            .filter_map(|rs| rs.metadata.uid.clone())
            .collect();
        let mut map: HashMap<String, Vec<Pod>> = HashMap::new();
        for pod in self.ctx.pods.state() {
            if pod.metadata.namespace.as_deref() != Some(ns.as_str())
                || !selector.matches(&pod.metadata.labels.clone().unwrap_or_default())
            {
                continue;
            }
            if let Some(owner) = controller_of(&pod.metadata) {
                if uids.contains(&owner.uid) {
                    map.entry(owner.uid.clone())
                        .or_default()
                        .push((*pod).clone());
                }
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

    fn store_rs(&mut self, rs: ReplicaSet) {
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

    /// Sets the Deployment's revision annotation (`SetDeploymentRevision`);
    /// bosun's status subresource writes status only, so this is a patch
    /// of the object itself.
    async fn set_deployment_revision(&mut self, revision: &str) -> Result<(), Error> {
        let current = self
            .d
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REVISION));
        if current.map(String::as_str) == Some(revision) {
            return Ok(());
        }
        let patch = json!({"metadata": {
            "resourceVersion": self.d.metadata.resource_version,
            "annotations": {REVISION: revision},
        }});
        let patched = self
            .deployment_api()
            .patch(&self.name(), &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let status = self.d.status.take();
        self.d = patched;
        self.d.status = status;
        Ok(())
    }

    /// Copies the Deployment's annotations onto its new set and sets the
    /// set's revision (`SetNewReplicaSetAnnotations`); true on a change.
    fn set_new_rs_annotations(&self, rs: &mut ReplicaSet, new_revision: i64, exists: bool) -> bool {
        let mut changed = false;
        let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
        for (k, v) in self.d.metadata.annotations.iter().flatten() {
            if NOT_COPIED.contains(&k.as_str()) || annotations.get(k) == Some(v) {
                continue;
            }
            annotations.insert(k.clone(), v.clone());
            changed = true;
        }
        let old = annotations.get(REVISION).cloned();
        let old_number = match old.as_deref() {
            None | Some("") => 0,
            Some(s) => match s.parse::<i64>() {
                Ok(n) => n,
                Err(_) => return false,
            },
        };
        if old_number < new_revision {
            annotations.insert(REVISION.into(), new_revision.to_string());
            changed = true;
            // A set that had a revision and gets a newer one is an old
            // template come back: remember the numbers it had.
            if let Some(old) = old.filter(|o| !o.is_empty()) {
                let history = annotations
                    .get(REVISION_HISTORY)
                    .cloned()
                    .unwrap_or_default();
                if history.is_empty() {
                    annotations.insert(REVISION_HISTORY.into(), old);
                } else {
                    let mut revisions: Vec<&str> = history.split(',').collect();
                    let mut total = history.len() + old.len() + 1;
                    let mut start = 0;
                    while total > MAX_REVISION_HISTORY_CHARS && start < revisions.len() {
                        total -= revisions[start].len() + 1;
                        start += 1;
                    }
                    if total <= MAX_REVISION_HISTORY_CHARS {
                        revisions = revisions.split_off(start);
                        revisions.push(&old);
                        annotations.insert(REVISION_HISTORY.into(), revisions.join(","));
                    }
                }
            }
        }
        if !exists {
            let desired = replicas::desired(&self.d);
            changed |= replicas::set_replicas_annotations(
                rs,
                desired,
                desired + replicas::max_surge(&self.d),
            );
        }
        changed
    }

    /// The new set, brought up to date, or created when `create` and
    /// there is none (`getNewReplicaSet`). Also keeps the Deployment's
    /// revision and its Progressing condition.
    pub async fn get_new_replica_set(&mut self, create: bool) -> Result<Option<usize>, Error> {
        let max_old = self.old_sets().iter().map(|rs| revision_of(rs)).max();
        let new_revision = max_old.unwrap_or(0) + 1;
        let min_ready = self.d.spec.min_ready_seconds;
        if let Some(i) = self.new_index() {
            let mut rs = self.rss[i].clone();
            let annotations_changed = self.set_new_rs_annotations(&mut rs, new_revision, true);
            let spec = &mut rs.spec;
            let min_ready_changed = spec.min_ready_seconds.unwrap_or(0) != min_ready.unwrap_or(0);
            if annotations_changed || min_ready_changed {
                spec.min_ready_seconds = min_ready;
                let name = name_of(&rs.metadata);
                let updated = self
                    .rs_api()
                    .replace(&name, &PostParams::default(), &rs)
                    .await?;
                self.store_rs(updated);
            }
            let rs = &self.rss[i];
            let revision = rs
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(REVISION))
                .cloned()
                .unwrap_or_default();
            let rs_name = name_of(&rs.metadata);
            self.set_deployment_revision(&revision).await?;
            let mut status = self.status();
            if has_progress_deadline(&self.d)
                && progress::get_condition(&status, progress::PROGRESSING).is_none()
            {
                let c = progress::new_condition(
                    progress::PROGRESSING,
                    "True",
                    progress::FOUND_NEW_RS,
                    format!("Found new replica set {rs_name:?}"),
                    self.ctx.clock.as_ref(),
                );
                progress::set_condition(&mut status, c);
                self.write_status(status).await?;
            }
            return Ok(Some(i));
        }
        if !create {
            return Ok(None);
        }
        let spec = self.d.spec.clone();
        let collision_count = self.d.status.as_ref().and_then(|s| s.collision_count);
        let mut template = spec.template.clone();
        let hash = compute_hash(&template, collision_count);
        let template_md = template.metadata.get_or_insert_with(Default::default);
        template_md
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let labels = template_md.labels.clone();
        let mut selector = spec.selector.clone();
        selector
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let name = format!("{}-{hash}", self.name());
        let mut rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.namespace()),
                owner_references: Some(vec![controller_ref(&self.d)]),
                labels,
                ..Default::default()
            },
            spec: ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: min_ready,
                selector,
                template: Some(template),
            },
            status: None,
        };
        let count = {
            let mut all = self.all_sets();
            all.push(&rs);
            replicas::new_rs_new_replicas(&self.d, &all, &rs)
        };
        replicas::set_spec_replicas(&mut rs, count);
        self.set_new_rs_annotations(&mut rs, new_revision, false);
        let (created, already_existed) =
            match self.rs_api().create(&PostParams::default(), &rs).await {
                Ok(created) => (created, false),
                Err(e) if is_status(&e, 409) => {
                    // A slow cache: it may be ours already. Read it fresh.
                    let existing = self.rs_api().get(&name).await?;
                    let ours = controller_of(&existing.metadata)
                        .is_some_and(|o| Some(&o.uid) == self.d.metadata.uid.as_ref());
                    let same = existing
                        .spec
                        .template
                        .as_ref()
                        .is_some_and(|t| equal_ignore_hash(t, &spec.template));
                    if !(ours && same) {
                        let mut status = self.status();
                        status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
                        self.write_status(status).await?;
                        return Err(Error::HashCollision(name));
                    }
                    (existing, true)
                }
                Err(e) => {
                    let msg = format!("Failed to create new replica set {name:?}: {e}");
                    if has_progress_deadline(&self.d) {
                        let mut status = self.status();
                        let c = progress::new_condition(
                            progress::PROGRESSING,
                            "False",
                            progress::FAILED_RS_CREATE,
                            msg.clone(),
                            self.ctx.clock.as_ref(),
                        );
                        progress::set_condition(&mut status, c);
                        let _ = self.write_status(status).await;
                    }
                    self.event(EventType::Warning, progress::FAILED_RS_CREATE, msg);
                    return Err(e.into());
                }
            };
        if !already_existed && count > 0 {
            self.event(
                EventType::Normal,
                "ScalingReplicaSet",
                format!("Scaled up replica set {name} from 0 to {count}"),
            );
        }
        self.store_rs(created);
        replicas::sort_by_creation(&mut self.rss);
        self.set_deployment_revision(&new_revision.to_string())
            .await?;
        if !already_existed && has_progress_deadline(&self.d) {
            let mut status = self.status();
            let c = progress::new_condition(
                progress::PROGRESSING,
                "True",
                progress::NEW_RS_CREATED,
                format!("Created new replica set {name:?}"),
                self.ctx.clock.as_ref(),
            );
            progress::set_condition(&mut status, c);
            self.write_status(status).await?;
        }
        Ok(self.new_index())
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
