//! One pass over a StatefulSet's pods (`StatefulSetControl.UpdateStatefulSet`).
//!
//! Ordinals `[start, start + replicas)` are the set's replicas; pods with
//! any other ordinal are condemned. In order, a pass:
//!
//! 1. replaces failed (or finished) replicas and creates missing ones,
//!    lowest ordinal first, each with its claims created before it;
//! 2. removes condemned pods, highest ordinal first;
//! 3. rolls replicas whose revision is not the update revision, highest
//!    ordinal first, down to `partition`, at most `maxUnavailable` at a
//!    time (RollingUpdate; OnDelete leaves that to the user).
//!
//! With `podManagementPolicy: OrderedReady` (monotonic) the pass stops at
//! the first pod that is not yet Running and Ready (and available for
//! `minReadySeconds`), and after each create or delete, so pod N+1 starts
//! only once 0..N are ready and scale-down waits for each pod to be gone.
//! `Parallel` does not wait for creates and deletes. Either way a pod
//! still terminating keeps its slot: its identity is never run twice.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use bosun::events::{reference_to, EventType};

use super::identity::{self, claims_for, identity_matches, is_member_of, ordinal_of};
use super::revision::{apply_revision, current_and_update, truncate_history};
use super::{selector_of, status, Context, Error};
use crate::toolkit::api_errors::{is_status, message_of};
use crate::toolkit::pods::{phase_of, until_available};
use crate::toolkit::ClaimManager;

/// One sync of a set: claim its pods and revisions, run a pass, write its
/// status, trim its history. Returns when to look again for a pod that is
/// due to become available.
pub async fn sync(set: &StatefulSet, ctx: &Context) -> Result<Option<Duration>, Error> {
    let ns = set.namespace();
    let selector = selector_of(set);
    let claims = ClaimManager::new(ctx.client.clone(), set, selector.as_ref());
    let in_ns = |n: &Option<String>| *n == ns;
    // Its own pods and the orphans of its namespace: all it may claim.
    let pods: Vec<Arc<Pod>> = ctx.pods.claimable_by(
        ns.as_deref().unwrap_or_default(),
        set.metadata.uid.as_deref().unwrap_or_default(),
    );
    let mut pods = claims.claim_members(pods, |p| is_member_of(set, p)).await?;
    pods.sort_by_key(|p| ordinal_of(p));
    let revisions: Vec<Arc<ControllerRevision>> = ctx
        .revisions
        .state()
        .into_iter()
        .filter(|r| in_ns(&r.namespace()))
        .collect();
    let mut revisions = claims.claim(revisions).await?;
    let (current, update, collision_count) = current_and_update(ctx, set, &mut revisions).await?;

    let now = ctx.clock.now();
    let pass = Pass::new(ctx, set, &current, &update, now);
    let outcome = pass.run(&pods).await;

    let status = status::compute(set, &pods, &current, &update, collision_count, now);
    status::write(ctx, set, status).await?;
    let available_in = status::next_available(set, &pods, now);
    let mut in_use: Vec<&str> = pods
        .iter()
        .filter_map(|p| identity::revision_of(p))
        .collect();
    in_use.push(current.metadata.name.as_deref().unwrap_or_default());
    in_use.push(update.metadata.name.as_deref().unwrap_or_default());
    truncate_history(ctx, set, &revisions, &in_use).await?;
    Ok(match (outcome?, available_in) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    })
}

fn terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn finished(pod: &Pod) -> bool {
    matches!(phase_of(pod), "Failed" | "Succeeded")
}

/// Running, ready, available and not terminating (`isHealthy`).
fn healthy(pod: &Pod, min_ready: i64, now: DateTime<Utc>) -> bool {
    !terminating(pod) && until_available(pod, min_ready, now) == Some(Duration::ZERO)
}

/// What a pass does next: carry on, or stop this sync (and maybe come
/// back when a pod becomes available).
enum Step {
    Next,
    Stop(Option<Duration>),
}

/// One pass over one set's pods.
struct Pass<'a> {
    ctx: &'a Context,
    set: &'a StatefulSet,
    current_set: StatefulSet,
    update_set: StatefulSet,
    current_revision: String,
    update_revision: String,
    monotonic: bool,
    min_ready: i64,
    now: DateTime<Utc>,
}

impl<'a> Pass<'a> {
    fn new(
        ctx: &'a Context,
        set: &'a StatefulSet,
        current: &ControllerRevision,
        update: &ControllerRevision,
        now: DateTime<Utc>,
    ) -> Self {
        let spec = &set.spec;
        Pass {
            ctx,
            set,
            current_set: apply_revision(set, current),
            update_set: apply_revision(set, update),
            current_revision: current.name_any(),
            update_revision: update.name_any(),
            monotonic: spec.pod_management_policy.as_deref() != Some("Parallel"),
            min_ready: i64::from(spec.min_ready_seconds.unwrap_or(0).max(0)),
            now,
        }
    }

    fn spec(&self) -> &k8s_openapi::api::apps::v1::StatefulSetSpec {
        &self.set.spec
    }

    fn rolling_update_settings(
        &self,
    ) -> Option<&k8s_openapi::api::apps::v1::RollingUpdateStatefulSetStrategy> {
        self.spec()
            .update_strategy
            .as_ref()?
            .rolling_update
            .as_ref()
    }

    fn replicas(&self) -> i32 {
        self.spec().replicas.unwrap_or(1).max(0)
    }

    fn start_ordinal(&self) -> i32 {
        self.spec()
            .ordinals
            .as_ref()
            .and_then(|o| o.start)
            .unwrap_or(0)
            .max(0)
    }

    fn rolling_update(&self) -> bool {
        self.spec()
            .update_strategy
            .as_ref()
            .and_then(|s| s.type_.as_deref())
            .is_none_or(|t| t == "RollingUpdate")
    }

    fn partition(&self) -> i32 {
        self.rolling_update_settings()
            .and_then(|r| r.partition)
            .unwrap_or(0)
            .max(0)
    }

    /// `maxUnavailable` as a number of pods (a percentage of replicas,
    /// rounded down), at least 1.
    fn max_unavailable(&self) -> i32 {
        let given = self
            .rolling_update_settings()
            .and_then(|r| r.max_unavailable.as_ref());
        let n = match given {
            Some(IntOrString::Int(n)) => *n,
            Some(IntOrString::String(s)) => s
                .strip_suffix('%')
                .and_then(|p| p.parse::<i64>().ok())
                .map_or(1, |p| (p * i64::from(self.replicas()) / 100) as i32),
            None => 1,
        };
        n.max(1)
    }

    fn healthy(&self, pod: &Pod) -> bool {
        healthy(pod, self.min_ready, self.now)
    }

    /// The step for a replica that is there but not (yet) healthy: in
    /// monotonic mode, stop, coming back when it is due to be available.
    fn wait_for(&self, pod: &Pod) -> Step {
        if !self.monotonic || self.healthy(pod) {
            return Step::Next;
        }
        if terminating(pod) {
            return Step::Stop(None);
        }
        Step::Stop(until_available(pod, self.min_ready, self.now).filter(|d| !d.is_zero()))
    }

    /// After a create or delete: monotonic mode waits for its effect.
    fn after_change(&self) -> Step {
        if self.monotonic {
            Step::Stop(None)
        } else {
            Step::Next
        }
    }

    async fn run(&self, pods: &[Arc<Pod>]) -> Result<Option<Duration>, Error> {
        if self.set.meta().deletion_timestamp.is_some() {
            return Ok(None);
        }
        let start = self.start_ordinal();
        let end = start + self.replicas();
        let mut slots: Vec<Option<&Pod>> = vec![None; (end - start) as usize];
        let mut condemned: Vec<&Pod> = Vec::new();
        for pod in pods.iter().map(Arc::as_ref) {
            let ordinal = ordinal_of(pod);
            if (start..end).contains(&ordinal) {
                slots[(ordinal - start) as usize] = Some(pod);
            } else if ordinal >= 0 {
                condemned.push(pod);
            }
        }
        condemned.sort_by_key(|p| std::cmp::Reverse(ordinal_of(p)));
        let first_unhealthy = slots
            .iter()
            .flatten()
            .chain(condemned.iter())
            .find(|p| !self.healthy(p))
            .map(|p| p.name_any());

        for (i, slot) in slots.iter().enumerate() {
            let ordinal = start + i as i32;
            let step = match slot {
                None => {
                    self.create(ordinal).await?;
                    self.after_change()
                }
                Some(pod) if finished(pod) && !terminating(pod) => {
                    // A failed pod is replaced under the same identity once
                    // it is gone.
                    self.delete(pod).await?;
                    self.after_change()
                }
                Some(pod) => {
                    self.repair_identity(pod).await?;
                    self.wait_for(pod)
                }
            };
            if let Step::Stop(requeue) = step {
                return Ok(requeue);
            }
        }

        for pod in &condemned {
            if terminating(pod) {
                if self.monotonic {
                    return Ok(None);
                }
                continue;
            }
            if self.monotonic
                && !self.healthy(pod)
                && first_unhealthy.as_deref() != Some(pod.name_any().as_str())
            {
                return Ok(None);
            }
            self.condemn(pod).await?;
            if let Step::Stop(requeue) = self.after_change() {
                return Ok(requeue);
            }
        }

        if !self.rolling_update() {
            return Ok(None);
        }
        let unavailable = slots
            .iter()
            .filter(|s| s.is_none_or(|p| !self.healthy(p)))
            .count() as i32;
        let mut budget = self.max_unavailable() - unavailable;
        let partition = self.partition();
        for (i, slot) in slots.iter().enumerate().rev() {
            if budget <= 0 || start + (i as i32) < partition {
                break;
            }
            let Some(pod) = slot else { continue };
            if identity::revision_of(pod) != Some(self.update_revision.as_str())
                && !terminating(pod)
            {
                self.delete(pod).await?;
                budget -= 1;
            }
        }
        Ok(None)
    }

    /// The pod of `ordinal` from the current revision if it is below the
    /// partition, else from the update revision
    /// (`newVersionedStatefulSetPod`).
    fn versioned_pod(&self, ordinal: i32) -> Pod {
        if self.rolling_update() && ordinal < self.partition() {
            identity::new_pod(&self.current_set, ordinal, &self.current_revision)
        } else {
            identity::new_pod(&self.update_set, ordinal, &self.update_revision)
        }
    }

    fn event(&self, type_: EventType, reason: &str, message: String) {
        self.ctx
            .recorder
            .record(&reference_to(self.set), type_, reason, message);
    }

    /// The ownerReference claims carry when `whenDeleted: Delete` asks the
    /// set's deletion to take them along.
    fn claim_owner(&self) -> Option<OwnerReference> {
        let policy = self
            .spec()
            .persistent_volume_claim_retention_policy
            .as_ref()?;
        (policy.when_deleted.as_deref() == Some("Delete")).then(|| OwnerReference {
            controller: None,
            ..self.set.controller_owner_ref(&()).unwrap_or_default()
        })
    }

    fn deletes_claims_on_scale_down(&self) -> bool {
        self.spec()
            .persistent_volume_claim_retention_policy
            .as_ref()
            .and_then(|p| p.when_scaled.as_deref())
            == Some("Delete")
    }

    /// Creates the pod's missing claims, then the pod
    /// (`CreateStatefulPod`).
    async fn create(&self, ordinal: i32) -> Result<(), Error> {
        let pod = self.versioned_pod(ordinal);
        let name = pod.name_any();
        let set_name = self.set.name_any();
        self.create_claims(ordinal, &name).await?;
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.namespace());
        match api.create(&PostParams::default(), &pod).await {
            Ok(_) => {
                self.event(
                    EventType::Normal,
                    "SuccessfulCreate",
                    format!("create Pod {name} in StatefulSet {set_name} successful"),
                );
                Ok(())
            }
            // The cache has not seen our last create yet.
            Err(e) if is_status(&e, 409) => Ok(()),
            Err(e) => {
                self.event(
                    EventType::Warning,
                    "FailedCreate",
                    format!(
                        "create Pod {name} in StatefulSet {set_name} failed error: {}",
                        message_of(&e)
                    ),
                );
                Err(e.into())
            }
        }
    }

    fn namespace(&self) -> String {
        self.set.namespace().unwrap_or_default()
    }

    /// Creates the claims of `ordinal` that do not exist yet; a claim that
    /// is being deleted holds the pod back.
    async fn create_claims(&self, ordinal: i32, pod_name: &str) -> Result<(), Error> {
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.ctx.client.clone(), &self.namespace());
        let set_name = self.set.name_any();
        for mut claim in claims_for(self.set, ordinal) {
            let claim_name = claim.name_any();
            let cached = self
                .ctx
                .claims
                .state()
                .into_iter()
                .find(|c| c.namespace() == claim.namespace() && c.name_any() == claim_name);
            if let Some(existing) = cached {
                if existing.metadata.deletion_timestamp.is_some() {
                    return Err(Error::Failed(format!("pvc {claim_name} is being deleted")));
                }
                continue;
            }
            if let Some(owner) = self.claim_owner() {
                claim.owner_references_mut().push(owner);
            }
            match api.create(&PostParams::default(), &claim).await {
                Ok(_) => self.event(
                    EventType::Normal,
                    "SuccessfulCreate",
                    format!("create Claim {claim_name} Pod {pod_name} in StatefulSet {set_name} success"),
                ),
                Err(e) if is_status(&e, 409) => {}
                Err(e) => {
                    self.event(
                        EventType::Warning,
                        "FailedCreate",
                        format!(
                            "create Claim {claim_name} for Pod {pod_name} in StatefulSet {set_name} failed error: {}",
                            message_of(&e)
                        ),
                    );
                    return Err(e.into());
                }
            }
        }
        Ok(())
    }

    /// Puts back the pod-name label an adopted or edited pod lacks, and
    /// creates claims it mounts but that are missing (hostname and
    /// subdomain are fixed when a pod is created).
    async fn repair_identity(&self, pod: &Pod) -> Result<(), Error> {
        if !identity_matches(self.set, pod)
            && pod.labels().get(identity::POD_NAME_LABEL) != Some(&pod.name_any())
        {
            let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.namespace());
            let patch = json!({"metadata": {
                "labels": {identity::POD_NAME_LABEL: pod.name_any()},
                "uid": pod.uid(),
            }});
            match api
                .patch(
                    &pod.name_any(),
                    &PatchParams::default(),
                    &Patch::Strategic(patch),
                )
                .await
            {
                Ok(_) => {}
                Err(e) if is_status(&e, 404) || is_status(&e, 409) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if !identity::storage_matches(self.set, pod) {
            return Ok(());
        }
        self.create_claims(ordinal_of(pod), &pod.name_any()).await
    }

    /// Deletes a pod of the set (`DeleteStatefulPod`).
    async fn delete(&self, pod: &Pod) -> Result<(), Error> {
        let name = pod.name_any();
        let set_name = self.set.name_any();
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.namespace());
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                self.event(
                    EventType::Normal,
                    "SuccessfulDelete",
                    format!("delete Pod {name} in StatefulSet {set_name} successful"),
                );
                Ok(())
            }
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => {
                self.event(
                    EventType::Warning,
                    "FailedDelete",
                    format!(
                        "delete Pod {name} in StatefulSet {set_name} failed error: {}",
                        message_of(&e)
                    ),
                );
                Err(e.into())
            }
        }
    }

    /// Removes a pod past `replicas`; with `whenScaled: Delete` its claims
    /// are handed to the pod first, so they go with it.
    async fn condemn(&self, pod: &Pod) -> Result<(), Error> {
        if self.deletes_claims_on_scale_down() {
            let api: Api<PersistentVolumeClaim> =
                Api::namespaced(self.ctx.client.clone(), &self.namespace());
            let owner = OwnerReference {
                controller: None,
                ..pod.controller_owner_ref(&()).unwrap_or_default()
            };
            for claim in claims_for(self.set, ordinal_of(pod)) {
                let patch = json!({"metadata": {"ownerReferences": [owner]}});
                match api
                    .patch(
                        &claim.name_any(),
                        &PatchParams::default(),
                        &Patch::Strategic(patch),
                    )
                    .await
                {
                    Ok(_) => {}
                    Err(e) if is_status(&e, 404) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        self.delete(pod).await
    }
}
