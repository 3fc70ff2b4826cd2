//! sync.go's new set: the ReplicaSet whose template is the Deployment's,
//! found and brought up to date or created (`getNewReplicaSet`), and the
//! revision annotations on it and on the Deployment.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use bosun::events::EventType;
// Deployment annotations not copied onto its new set.
use bosun::well_known::{DEPLOYMENT_ANNOTATIONS_TO_SKIP as NOT_COPIED, REVISION, REVISION_HISTORY};

use super::hash::{compute_hash, equal_ignore_hash};
use super::progress::{self, has_progress_deadline};
use super::replicas;
use super::rollout::Rollout;
use super::{controller_of, Error, POD_TEMPLATE_HASH};
use crate::toolkit::api_errors::is_status;
use crate::toolkit::controller_ref;

/// The longest `revision-history` annotation Kubernetes keeps.
const MAX_REVISION_HISTORY_CHARS: usize = 2000;

/// A set's revision number (0 when it has none).
pub fn revision_of(rs: &ReplicaSet) -> i64 {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl Rollout<'_> {
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
                let name = rs.metadata.name.clone().unwrap_or_default();
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
            let rs_name = rs.metadata.name.clone().unwrap_or_default();
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
}
