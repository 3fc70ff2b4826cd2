//! One sync of a Job (`syncJob`):
//!
//! 1. claims its pods (adopting matching orphans, releasing owned pods
//!    that no longer match) and sorts them into active, succeeded and
//!    failed;
//! 2. decides whether it is done: it failed when more pods failed than
//!    `backoffLimit` allows (restartPolicy OnFailure: when its running
//!    pods' container restarts reach the limit), it succeeded when
//!    `completions` pods (Indexed: every index) succeeded, or, with
//!    `completions` unset, when any pod succeeded and none is running;
//!    it failed with DeadlineExceeded once `activeDeadlineSeconds` passed
//!    since startTime (which a resume resets).
//!    As since Kubernetes 1.31, the decision is first recorded as the
//!    interim condition FailureTarget / SuccessCriteriaMet, the pods still
//!    running are deleted, and the final condition Failed / Complete is
//!    added once none is left;
//! 3. otherwise, when the cache has seen what the last sync did, makes the
//!    active pods what they should be: deletes the surplus (suspended:
//!    all, with the condition Suspended; resumed: Suspended turns False), or creates the missing ones in slow-start batches — but not
//!    before the failure back-off has passed (`base * 2^(failures since the
//!    last success - 1)`, capped, counted from the last failure);
//! 4. writes the status (active, ready, succeeded, failed, startTime,
//!    completionTime, completedIndexes, conditions) when it changed.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;
use kube::ResourceExt;
use serde_json::json;

use bosun::events::{reference_to, EventType};

use super::indexes::{self, index_of, set_index};
use super::{expectations_key, selector_of, Context, Error, MAX_CREATE_PER_SYNC, RESYNC};
use crate::toolkit::api_errors::{code_of, message_of};
use crate::toolkit::pods::{is_active, is_ready, phase_of, PodControl};
use crate::toolkit::status::patch_status;
use crate::toolkit::{from_chrono, pod_from_template, to_chrono, ClaimManager};

pub const COMPLETE: &str = "Complete";
pub const FAILED: &str = "Failed";
pub const SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";
pub const FAILURE_TARGET: &str = "FailureTarget";
pub const BACKOFF_LIMIT_EXCEEDED: &str = "BackoffLimitExceeded";
const BACKOFF_MESSAGE: &str = "Job has reached the specified backoff limit";
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
const DEADLINE_MESSAGE: &str = "Job was active longer than specified deadline";
pub const SUSPENDED: &str = "Suspended";
const COMPLETIONS_REACHED: &str = "CompletionsReached";
const COMPLETIONS_MESSAGE: &str = "Reached expected number of succeeded pods";

/// Whether the Job has the condition `type_` with status True.
pub fn has_condition(job: &Job, type_: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// Complete or Failed: nothing more to do for it.
pub fn is_finished(job: &Job) -> bool {
    has_condition(job, COMPLETE) || has_condition(job, FAILED)
}

/// The Job's pods, sorted by what became of them.
struct Counted<'a> {
    active: Vec<&'a Pod>,
    /// Owned pods not yet in a terminal phase, terminating ones included.
    running: usize,
    /// Of those, the ones being deleted (`status.terminating`).
    terminating: i32,
    succeeded: i32,
    failed: i32,
    ready: i32,
    /// Indexed: the indexes with a succeeded pod.
    completed_indexes: BTreeSet<i32>,
    /// OnFailure: container restarts of the active pods.
    restarts: i32,
    /// Failures since the last success, and when the last one happened.
    recent_failures: u32,
    last_failure: Option<DateTime<Utc>>,
}

/// When a finished pod finished: its containers' last finishedAt, else
/// when it was created.
fn finish_time(pod: &Pod) -> Option<DateTime<Utc>> {
    let status = pod.status.as_ref();
    let finished = status
        .into_iter()
        .flat_map(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten())
        })
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
        .map(to_chrono)
        .max();
    finished.or_else(|| pod.metadata.creation_timestamp.as_ref().map(to_chrono))
}

fn restarts_of(pod: &Pod) -> i32 {
    pod.status.as_ref().map_or(0, |s| {
        s.container_statuses
            .iter()
            .flatten()
            .chain(s.init_container_statuses.iter().flatten())
            .map(|c| c.restart_count)
            .sum()
    })
}

fn count<'a>(spec: &JobSpec, old: &JobStatus, owned: &[&'a Pod]) -> Counted<'a> {
    let indexed = is_indexed(spec);
    let completions = spec.completions.unwrap_or(0);
    let mut c = Counted {
        active: Vec::new(),
        running: 0,
        terminating: 0,
        succeeded: 0,
        failed: 0,
        ready: 0,
        completed_indexes: BTreeSet::new(),
        restarts: 0,
        recent_failures: 0,
        last_failure: None,
    };
    let mut last_success: Option<DateTime<Utc>> = None;
    let mut failures: Vec<Option<DateTime<Utc>>> = Vec::new();
    for pod in owned {
        match phase_of(pod) {
            "Succeeded" => {
                c.succeeded += 1;
                if indexed {
                    if let Some(i) = index_of(pod, completions) {
                        c.completed_indexes.insert(i);
                    }
                }
                last_success = last_success.max(finish_time(pod));
            }
            "Failed" => {
                c.failed += 1;
                failures.push(finish_time(pod));
            }
            _ => {
                c.running += 1;
                if pod.metadata.deletion_timestamp.is_some() {
                    c.terminating += 1;
                }
                if is_active(pod) {
                    c.active.push(pod);
                    c.restarts += restarts_of(pod);
                    if is_ready(pod) {
                        c.ready += 1;
                    }
                }
            }
        }
    }
    for at in failures {
        if last_success.is_none() || at > last_success {
            c.recent_failures += 1;
            c.last_failure = c.last_failure.max(at);
        }
    }
    if indexed {
        c.succeeded = c.completed_indexes.len() as i32;
    }
    // Never lower a count: a finished pod deleted by hand stays counted.
    c.succeeded = c.succeeded.max(old.succeeded.unwrap_or(0));
    c.failed = c.failed.max(old.failed.unwrap_or(0));
    c
}

fn is_indexed(spec: &JobSpec) -> bool {
    spec.completion_mode.as_deref() == Some("Indexed")
}

/// Why the Job is done.
struct Decision {
    /// SuccessCriteriaMet or FailureTarget, recorded at once.
    interim: &'static str,
    /// Complete or Failed, once no pod of the Job runs.
    last: &'static str,
    reason: String,
    message: String,
}

impl Decision {
    fn failure(reason: &str, message: &str) -> Decision {
        Decision {
            interim: FAILURE_TARGET,
            last: FAILED,
            reason: reason.into(),
            message: message.into(),
        }
    }

    fn success() -> Decision {
        Decision {
            interim: SUCCESS_CRITERIA_MET,
            last: COMPLETE,
            reason: COMPLETIONS_REACHED.into(),
            message: COMPLETIONS_MESSAGE.into(),
        }
    }
}

/// When a running Job's activeDeadlineSeconds runs out.
fn deadline_of(spec: &JobSpec, status: &JobStatus) -> Option<DateTime<Utc>> {
    let seconds = spec.active_deadline_seconds?;
    let start = to_chrono(status.start_time.as_ref()?);
    Some(start + chrono::Duration::seconds(seconds))
}

/// Whether the Job is done, and why (`syncJob`'s finished condition).
fn finished_decision(
    job: &Job,
    spec: &JobSpec,
    status: &JobStatus,
    c: &Counted,
    now: DateTime<Utc>,
) -> Option<Decision> {
    // A decision once recorded stands.
    let recorded = |type_: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_ && c.status == "True")
            .map(|c| {
                (
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                )
            })
    };
    if let Some((reason, message)) = recorded(FAILURE_TARGET) {
        return Some(Decision::failure(&reason, &message));
    }
    if has_condition(job, SUCCESS_CRITERIA_MET) {
        return Some(Decision::success());
    }
    let limit = spec.backoff_limit.unwrap_or(6).max(0);
    let on_failure = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        == Some("OnFailure");
    let restarts_exceeded = on_failure
        && if limit == 0 {
            c.restarts > 0
        } else {
            c.restarts >= limit
        };
    if c.failed > limit || restarts_exceeded {
        return Some(Decision::failure(BACKOFF_LIMIT_EXCEEDED, BACKOFF_MESSAGE));
    }
    let done = match spec.completions {
        Some(n) => c.succeeded >= n,
        None => c.succeeded > 0 && c.active.is_empty(),
    };
    if done {
        return Some(Decision::success());
    }
    if spec.suspend != Some(true) && deadline_of(spec, status).is_some_and(|d| now >= d) {
        return Some(Decision::failure(DEADLINE_EXCEEDED, DEADLINE_MESSAGE));
    }
    None
}

fn condition(type_: &str, reason: &str, message: &str, now: DateTime<Utc>) -> JobCondition {
    JobCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: Some(from_chrono(now)),
        last_transition_time: Some(from_chrono(now)),
    }
}

/// One level-triggered sync of a Job; a finished one is only deleted
/// when its `ttlSecondsAfterFinished` is over.
pub async fn sync(job: Arc<Job>, ctx: Arc<Context>) -> Result<Action, Error> {
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if is_finished(&job) {
        return expire(&job, &ctx).await;
    }
    let spec = job.spec.clone().unwrap_or_default();
    let ns = job.namespace().unwrap_or_default();
    let key = expectations_key(job.as_ref());
    let needs_sync = ctx.expectations.satisfied_in(&key, &ns, &ctx.pods);
    // Its own pods and the orphans of its namespace: all it may claim.
    let claimable = ctx
        .pods
        .claimable_by(&ns, job.metadata.uid.as_deref().unwrap_or_default());
    let selector = selector_of(&job);
    let claims = ClaimManager::new(ctx.client.clone(), job.as_ref(), selector.as_ref());
    let claimed = claims.claim(claimable).await?;
    let owned: Vec<&Pod> = claimed.iter().map(Arc::as_ref).collect();

    let now = ctx.clock.now();
    let old = job.status.clone().unwrap_or_default();
    let c = count(&spec, &old, &owned);
    let suspended = spec.suspend == Some(true);
    let mut status = JobStatus {
        active: Some(c.active.len() as i32),
        ready: Some(c.ready),
        terminating: Some(c.terminating),
        succeeded: Some(c.succeeded),
        failed: Some(c.failed),
        ..old.clone()
    };
    let was_suspended = has_condition(&job, SUSPENDED);
    if !is_finished(&job) && suspended != was_suspended {
        // Suspended: a condition; resumed: the condition turns False and
        // the deadline counts from now.
        let (state, reason, message, event) = if suspended {
            ("True", "JobSuspended", "Job suspended", "Suspended")
        } else {
            ("False", "JobResumed", "Job resumed", "Resumed")
        };
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        conditions.retain(|c| c.type_ != SUSPENDED);
        let mut cond = condition(SUSPENDED, reason, message, now);
        cond.status = state.into();
        conditions.push(cond);
        if !suspended {
            status.start_time = Some(from_chrono(now));
        }
        let object = reference_to(job.as_ref());
        ctx.recorder
            .record(&object, EventType::Normal, event, message);
    }
    if status.start_time.is_none() && !suspended {
        status.start_time = Some(from_chrono(now));
    }
    if is_indexed(&spec) {
        status.completed_indexes = Some(indexes::format_ranges(&c.completed_indexes));
    }

    let mut requeue = RESYNC;
    if let Some(deadline) = deadline_of(&spec, &status).filter(|_| !suspended) {
        let left = (deadline - now).to_std().unwrap_or_default();
        requeue = requeue.min(left + Duration::from_millis(10));
    }
    let mut manage_result = Ok(());
    if let Some(d) = finished_decision(&job, &spec, &status, &c, now) {
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        if !conditions.iter().any(|c| c.type_ == d.interim) {
            conditions.push(condition(d.interim, &d.reason, &d.message, now));
        }
        if needs_sync && !c.active.is_empty() {
            manage_result = delete_pods(&job, &ctx, &c.active).await;
        }
        if c.running == 0 {
            conditions.push(condition(d.last, &d.reason, &d.message, now));
            let object = reference_to(job.as_ref());
            if d.last == COMPLETE {
                status.completion_time = Some(from_chrono(now));
                ctx.recorder
                    .record(&object, EventType::Normal, "Completed", "Job completed");
            } else {
                ctx.recorder
                    .record(&object, EventType::Warning, &d.reason, &d.message);
            }
        }
    } else if needs_sync {
        match manage_pods(&job, &spec, &ctx, &c, suspended, now).await {
            Ok(Some(wait)) => requeue = wait.min(RESYNC),
            Ok(None) => {}
            Err(e) => manage_result = Err(e),
        }
    }
    update_status(&job, &ctx, &old, status).await?;
    manage_result?;
    Ok(Action::requeue(requeue))
}

/// When a finished Job is due to go (`ttlSecondsAfterFinished` after
/// its Complete or Failed condition turned True).
fn expires_at(job: &Job) -> Option<DateTime<Utc>> {
    let ttl = job.spec.as_ref()?.ttl_seconds_after_finished?;
    let finished = job
        .status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .filter(|c| (c.type_ == COMPLETE || c.type_ == FAILED) && c.status == "True")
        .find_map(|c| c.last_transition_time.as_ref())?;
    Some(to_chrono(finished) + chrono::Duration::seconds(ttl.into()))
}

/// Deletes a finished Job whose time to live is over, its pods with it
/// (foreground, as the ttl-after-finished controller does); otherwise
/// comes back when it is.
async fn expire(job: &Job, ctx: &Context) -> Result<Action, Error> {
    let Some(at) = expires_at(job) else {
        return Ok(Action::await_change());
    };
    let now = ctx.clock.now();
    if now < at {
        let wait = (at - now).to_std().unwrap_or_default() + Duration::from_millis(10);
        return Ok(Action::requeue(wait.min(RESYNC)));
    }
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &job.namespace().unwrap_or_default());
    let params = DeleteParams {
        propagation_policy: Some(kube::api::PropagationPolicy::Foreground),
        preconditions: Some(kube::api::Preconditions {
            uid: job.uid(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&job.name_any(), &params).await {
        Ok(_) => Ok(Action::await_change()),
        Err(e) if matches!(code_of(&e), Some(404) | Some(409)) => Ok(Action::await_change()),
        Err(e) => Err(Error::Delete(message_of(&e))),
    }
}

/// How many pods should be running now.
fn want_active(spec: &JobSpec, c: &Counted, suspended: bool) -> usize {
    if suspended {
        return 0;
    }
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    let want = match spec.completions {
        // Once one succeeded, the others may finish but none is added.
        None if c.succeeded > 0 => c.active.len() as i32,
        None => parallelism,
        Some(n) => (n - c.succeeded).clamp(0, parallelism),
    };
    want.max(0) as usize
}

/// The failure back-off still to wait before creating a pod, if any.
fn backoff_remaining(ctx: &Context, c: &Counted, now: DateTime<Utc>) -> Option<Duration> {
    if c.recent_failures == 0 {
        return None;
    }
    let factor = 1u32.checked_shl(c.recent_failures - 1).unwrap_or(u32::MAX);
    let delay = ctx
        .backoff_base
        .checked_mul(factor)
        .unwrap_or(ctx.backoff_max)
        .min(ctx.backoff_max);
    let due = c.last_failure? + chrono::Duration::from_std(delay).ok()?;
    (due > now).then(|| (due - now).to_std().unwrap_or_default())
}

/// Creates or deletes active pods (`manageJob`); returns how long until
/// the failure back-off allows a creation, when it held one back.
async fn manage_pods(
    job: &Job,
    spec: &JobSpec,
    ctx: &Context,
    c: &Counted<'_>,
    suspended: bool,
    now: DateTime<Utc>,
) -> Result<Option<Duration>, Error> {
    let want = want_active(spec, c, suspended);
    let mut active: Vec<&Pod> = c.active.clone();
    if is_indexed(spec) {
        // Pods without a valid index, and second pods of an index, go.
        let completions = spec.completions.unwrap_or(0);
        let mut seen = BTreeSet::new();
        let (keep, extra): (Vec<&Pod>, Vec<&Pod>) = active.into_iter().partition(|p| {
            index_of(p, completions)
                .is_some_and(|i| !c.completed_indexes.contains(&i) && seen.insert(i))
        });
        if !extra.is_empty() {
            return delete_pods(job, ctx, &extra).await.map(|_| None);
        }
        active = keep;
    }
    if active.len() > want {
        active.sort_by_key(|p| deletion_rank(p));
        let victims = &active[..active.len() - want];
        return delete_pods(job, ctx, victims).await.map(|_| None);
    }
    if active.len() == want {
        return Ok(None);
    }
    if let Some(wait) = backoff_remaining(ctx, c, now) {
        return Ok(Some(wait + Duration::from_millis(10)));
    }
    let missing = (want - active.len()).min(MAX_CREATE_PER_SYNC);
    let template = pod_from_template(job, Some(&spec.template));
    let pods: Vec<k8s_openapi::api::core::v1::Pod> = if is_indexed(spec) {
        let completions = spec.completions.unwrap_or(0);
        let running: BTreeSet<i32> = active
            .iter()
            .filter_map(|p| index_of(p, completions))
            .collect();
        indexes::pending(completions, &c.completed_indexes, &running, missing)
            .into_iter()
            .map(|i| {
                let mut pod = template.clone();
                set_index(&mut pod, &job.name_any(), i);
                pod
            })
            .collect()
    } else {
        vec![template; missing]
    };
    create_pods(job, ctx, pods).await.map(|_| None)
}

/// Which active pods go first: unscheduled, then pending, then not
/// ready, then the youngest.
fn deletion_rank(pod: &Pod) -> (u8, u8, u8, std::cmp::Reverse<Option<DateTime<Utc>>>) {
    let scheduled = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
    (
        scheduled as u8,
        (phase_of(pod) == "Running") as u8,
        is_ready(pod) as u8,
        std::cmp::Reverse(pod.metadata.creation_timestamp.as_ref().map(to_chrono)),
    )
}

/// The job's pod control: creates and deletes with its expectations and
/// events.
fn pod_control<'a>(job: &Job, ctx: &'a Context) -> PodControl<'a> {
    PodControl {
        api: Api::namespaced(ctx.client.clone(), &job.namespace().unwrap_or_default()),
        recorder: &ctx.recorder,
        owner: reference_to(job),
        expectations: &ctx.expectations,
        key: expectations_key(job),
    }
}

async fn create_pods(job: &Job, ctx: &Context, pods: Vec<Pod>) -> Result<(), Error> {
    pod_control(job, ctx)
        .create(pods)
        .await
        .map_err(Error::Create)
}

async fn delete_pods(job: &Job, ctx: &Context, victims: &[&Pod]) -> Result<(), Error> {
    pod_control(job, ctx)
        .delete(victims)
        .await
        .map_err(Error::Delete)
}

/// Writes the status when it changed; zero counts are left out, as the
/// API's omitempty does.
pub(super) async fn update_status(
    job: &Job,
    ctx: &Context,
    old: &JobStatus,
    status: JobStatus,
) -> Result<(), Error> {
    let nonzero = |v: Option<i32>| v.filter(|n| *n != 0);
    let status = JobStatus {
        active: nonzero(status.active),
        succeeded: nonzero(status.succeeded),
        failed: nonzero(status.failed),
        ..status
    };
    if &status == old {
        return Ok(());
    }
    // The status is computed from the cached Job: written only over that
    // version, so a sync on a stale cache cannot erase a condition a
    // newer sync wrote (409, and the retry reads the newer Job).
    let patch = json!({
        "active": status.active,
        "ready": status.ready,
        "terminating": status.terminating,
        "succeeded": status.succeeded,
        "failed": status.failed,
        "startTime": status.start_time,
        "completionTime": status.completion_time,
        "completedIndexes": status.completed_indexes,
        "conditions": status.conditions,
    });
    patch_status(&ctx.client, job, patch, true)
        .await
        .map_err(|e| Error::Status {
            job: job.name_any(),
            message: message_of(&e),
        })
}
