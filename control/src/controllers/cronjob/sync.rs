//! One sync of a CronJob (`sync` = `syncCronJob` + `cleanupFinishedJobs`
//! in Kubernetes' cronjob_controllerv2.go):
//!
//! 1. reconcile `status.active` with the Jobs it controls: a finished Job
//!    leaves it (SawCompletedJob), a succeeded one moves
//!    lastSuccessfulTime, an unfinished one not in it is reported
//!    (UnexpectedJob: made by hand, e.g. `create job --from`), one that
//!    is gone leaves it (MissingJob);
//! 2. unless deleting, suspended, or the zone or schedule is bad (a
//!    warning event each), find the most recent scheduled time not yet
//!    run — warning TooManyMissedTimes past 100 missed — and skip it when
//!    later than startingDeadlineSeconds (MissSchedule), already run, or
//!    Forbid with a Job active (JobAlreadyActive); Replace deletes the
//!    active Jobs first;
//! 3. create the Job `<cronjob>-<scheduled time in minutes since the
//!    epoch>`: the name is the lock, so AlreadyExists is the Job this sync
//!    would have made (no second one, no second event);
//! 4. delete the oldest finished Jobs beyond the history limits, with
//!    background propagation so their pods go too;
//! 5. write the status if it changed, and requeue just after the next
//!    scheduled time.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::batch::v1::{CronJob, Job, JobTemplateSpec};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;

use bosun::cron::{load_location, rfc3339_in, Schedule, TimeZone};
use bosun::events::{reference_to, EventType};
use bosun::owners::controller_of;

use super::schedule::{most_recent_schedule_time, requeue_after, MANY_MISSED};
use super::{Context, Error};
use crate::controllers::job::sync::{has_condition, COMPLETE, FAILED};
use crate::toolkit::api_errors::{is_status, message_of};
use crate::toolkit::{controller_ref, from_chrono, to_chrono};

/// The annotation with a scheduled Job's nominal time (RFC 3339 in the
/// CronJob's zone).
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// The name of the Job for `scheduled`: minutes since the epoch, so one
/// scheduled time is one name.
pub fn job_name(cj: &CronJob, scheduled: DateTime<Utc>) -> String {
    format!("{}-{}", cj.name_any(), scheduled.timestamp().div_euclid(60))
}

/// Complete or Failed, whichever the Job has.
fn finished_condition(job: &Job) -> Option<&'static str> {
    if has_condition(job, COMPLETE) {
        Some(COMPLETE)
    } else if has_condition(job, FAILED) {
        Some(FAILED)
    } else {
        None
    }
}

/// The Jobs in the cache that the CronJob controls.
pub fn jobs_of(ctx: &Context, cj: &CronJob) -> Vec<Arc<Job>> {
    let uid = cj.metadata.uid.as_deref();
    ctx.jobs
        .state()
        .into_iter()
        .filter(|j| j.metadata.namespace == cj.metadata.namespace)
        .filter(|j| controller_of(&j.metadata).map(|r| r.uid.as_str()) == uid)
        .collect()
}

fn active(cj: &CronJob) -> &[ObjectReference] {
    cj.status
        .as_ref()
        .and_then(|s| s.active.as_deref())
        .unwrap_or_default()
}

fn in_active_list(cj: &CronJob, uid: Option<&str>) -> bool {
    active(cj)
        .iter()
        .any(|r| r.uid.as_deref() == uid && uid.is_some())
}

fn delete_from_active_list(cj: &mut CronJob, uid: Option<&str>) {
    if let Some(list) = cj.status.get_or_insert_default().active.as_mut() {
        list.retain(|r| r.uid.as_deref() != uid);
    }
}

/// The Job for `scheduled` (`getJobFromTemplate2`): the template's
/// labels, annotations (plus the scheduled time) and spec, controlled by
/// the CronJob.
pub fn job_from_template(cj: &CronJob, scheduled: DateTime<Utc>, tz: &TimeZone) -> Job {
    let template: JobTemplateSpec = cj.spec.job_template.clone();
    let meta = template.metadata.unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    annotations.insert(SCHEDULED_TIMESTAMP.into(), rfc3339_in(scheduled, tz));
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(cj, scheduled)),
            namespace: cj.metadata.namespace.clone(),
            labels: meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![controller_ref(cj)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

struct Sync<'a> {
    ctx: &'a Context,
    jobs: Api<Job>,
    cj: CronJob,
    reference: ObjectReference,
    update_status: bool,
}

impl Sync<'_> {
    fn event(&self, type_: EventType, reason: &str, message: String) {
        self.ctx
            .recorder
            .record(&self.reference, type_, reason, message);
    }

    /// Deletes a Job and its pods (background), and drops it from the
    /// active list (`deleteJob`); false when the delete failed.
    async fn delete_job(&mut self, job: &Job) -> bool {
        let name = job.name_any();
        match self.jobs.delete(&name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => {}
            Err(e) => {
                self.event(
                    EventType::Warning,
                    "FailedDelete",
                    format!("Deleted job: {}", message_of(&e)),
                );
                return false;
            }
        }
        delete_from_active_list(&mut self.cj, job.metadata.uid.as_deref());
        self.update_status = true;
        self.event(
            EventType::Normal,
            "SuccessfulDelete",
            format!("Deleted job {name}"),
        );
        true
    }

    /// Step 1: the active list against the Jobs that exist.
    async fn track_jobs(&mut self, jobs: &[Arc<Job>]) -> Result<(), Error> {
        let children: HashSet<Option<&str>> =
            jobs.iter().map(|j| j.metadata.uid.as_deref()).collect();
        for job in jobs {
            let uid = job.metadata.uid.as_deref();
            let finished = finished_condition(job);
            let found = in_active_list(&self.cj, uid);
            if !found && finished.is_none() {
                // The cache may be behind our own last status write.
                let fresh = self.fresh_cronjob().await?;
                if in_active_list(&fresh, uid) {
                    self.cj = fresh;
                    continue;
                }
                self.event(
                    EventType::Warning,
                    "UnexpectedJob",
                    format!(
                        "Saw a job that the controller did not create or forgot: {}",
                        job.name_any()
                    ),
                );
            } else if let (true, Some(condition)) = (found, finished) {
                delete_from_active_list(&mut self.cj, uid);
                self.update_status = true;
                self.event(
                    EventType::Normal,
                    "SawCompletedJob",
                    format!(
                        "Saw completed job: {}, condition: {condition}",
                        job.name_any()
                    ),
                );
            } else if finished == Some(COMPLETE) {
                let completed = job.status.as_ref().and_then(|s| s.completion_time.clone());
                let status = self.cj.status.get_or_insert_default();
                if let Some(at) = completed {
                    let later = status
                        .last_successful_time
                        .as_ref()
                        .is_none_or(|last| to_chrono(&at) > to_chrono(last));
                    if later {
                        status.last_successful_time = Some(at);
                        self.update_status = true;
                    }
                }
            }
        }
        let gone: Vec<ObjectReference> = active(&self.cj)
            .iter()
            .filter(|r| !children.contains(&r.uid.as_deref()))
            .cloned()
            .collect();
        for r in gone {
            let name = r.name.clone().unwrap_or_default();
            // The cache may be behind: ask the API.
            match self.jobs.get(&name).await {
                Err(e) if is_status(&e, 404) => {
                    self.event(
                        EventType::Normal,
                        "MissingJob",
                        format!("Active job went missing: {name}"),
                    );
                    delete_from_active_list(&mut self.cj, r.uid.as_deref());
                    self.update_status = true;
                }
                Err(e) => return Err(Error::Api(message_of(&e))),
                Ok(_) => {}
            }
        }
        Ok(())
    }

    async fn fresh_cronjob(&self) -> Result<CronJob, Error> {
        let api: Api<CronJob> = Api::namespaced(
            self.ctx.client.clone(),
            self.cj.metadata.namespace.as_deref().unwrap_or("default"),
        );
        api.get(&self.cj.name_any())
            .await
            .map_err(|e| Error::Api(message_of(&e)))
    }

    /// Steps 2 and 3; the requeue delay.
    async fn schedule(&mut self, now: DateTime<Utc>) -> Result<Option<Duration>, Error> {
        if self.cj.metadata.deletion_timestamp.is_some() {
            return Ok(None);
        }
        let spec = self.cj.spec.clone();
        let tz = match spec.time_zone.as_deref() {
            Some(name) => match load_location(name) {
                Ok(tz) => tz,
                Err(e) => {
                    self.event(
                        EventType::Warning,
                        "UnknownTimeZone",
                        format!("invalid timeZone: {name:?}: {e}"),
                    );
                    return Ok(None);
                }
            },
            None => TimeZone::UTC,
        };
        if spec.suspend == Some(true) {
            return Ok(None);
        }
        if spec.schedule.contains("TZ") {
            self.event(
                EventType::Warning,
                "UnsupportedSchedule",
                format!(
                    "CRON_TZ or TZ used in schedule {:?} is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
                    spec.schedule
                ),
            );
        }
        let schedule = match Schedule::parse(&spec.schedule) {
            Ok(s) => s,
            Err(e) => {
                self.event(
                    EventType::Warning,
                    "UnparseableSchedule",
                    format!("unparseable schedule: {:?} : {e}", spec.schedule),
                );
                return Ok(None);
            }
        };
        let requeue = |cj: &CronJob| requeue_after(cj, now, &schedule, &tz);
        let scheduled = match most_recent_schedule_time(&self.cj, now, &schedule, &tz, true) {
            Err(e) => {
                self.event(
                    EventType::Warning,
                    "InvalidSchedule",
                    format!("invalid schedule: {} : {e}", spec.schedule),
                );
                return Ok(None);
            }
            Ok(found) => match found.time {
                // Nothing due (the requeue normally lands just after one).
                None => return Ok(requeue(&self.cj)),
                Some(t) => {
                    if found.missed > MANY_MISSED {
                        self.event(
                            EventType::Warning,
                            "TooManyMissedTimes",
                            format!(
                                "too many missed start times: {}. Set or decrease .spec.startingDeadlineSeconds or check clock skew",
                                found.missed
                            ),
                        );
                    }
                    t
                }
            },
        };
        if let Some(secs) = spec.starting_deadline_seconds {
            if scheduled + chrono::Duration::seconds(secs) < now {
                self.event(
                    EventType::Warning,
                    "MissSchedule",
                    format!(
                        "Missed scheduled time to start a job: {}",
                        scheduled.format("%a, %d %b %Y %H:%M:%S %z")
                    ),
                );
                return Ok(requeue(&self.cj));
            }
        }
        let name = job_name(&self.cj, scheduled);
        let already = active(&self.cj)
            .iter()
            .any(|r| r.name.as_deref() == Some(&name))
            || self
                .cj
                .status
                .as_ref()
                .and_then(|s| s.last_schedule_time.as_ref())
                .is_some_and(|t| to_chrono(t) == scheduled);
        if already {
            return Ok(requeue(&self.cj));
        }
        let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
        if policy == "Forbid" && !active(&self.cj).is_empty() {
            self.event(
                EventType::Normal,
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy is Forbid".into(),
            );
            return Ok(requeue(&self.cj));
        }
        if policy == "Replace" {
            for r in active(&self.cj).to_vec() {
                let job_name = r.name.clone().unwrap_or_default();
                let job = match self.jobs.get(&job_name).await {
                    Ok(job) => job,
                    Err(e) => {
                        self.event(
                            EventType::Warning,
                            "FailedGet",
                            format!("Get job: {}", message_of(&e)),
                        );
                        return Err(Error::Api(message_of(&e)));
                    }
                };
                if !self.delete_job(&job).await {
                    return Err(Error::Api(format!("could not replace job {job_name}")));
                }
            }
        }
        let want = job_from_template(&self.cj, scheduled, &tz);
        let created = match self.jobs.create(&PostParams::default(), &want).await {
            Ok(job) => {
                self.event(
                    EventType::Normal,
                    "SuccessfulCreate",
                    format!("Created job {name}"),
                );
                job
            }
            Err(e) if is_status(&e, 409) => {
                // Made by an earlier sync whose status write we have not
                // seen yet (or by someone else): not a second Job.
                let job = self
                    .jobs
                    .get(&name)
                    .await
                    .map_err(|e| Error::Api(message_of(&e)))?;
                let ours = controller_of(&job.metadata).map(|r| r.uid.as_str())
                    == self.cj.metadata.uid.as_deref();
                if !ours || in_active_list(&self.cj, job.metadata.uid.as_deref()) {
                    return Ok(None);
                }
                job
            }
            Err(e) => {
                self.event(
                    EventType::Warning,
                    "FailedCreate",
                    format!("Error creating job: {}", message_of(&e)),
                );
                return Err(Error::Api(message_of(&e)));
            }
        };
        let status = self.cj.status.get_or_insert_default();
        status
            .active
            .get_or_insert_default()
            .push(reference_to(&created));
        status.last_schedule_time = Some(from_chrono(scheduled));
        self.update_status = true;
        Ok(requeue(&self.cj))
    }

    /// Step 4 (`cleanupFinishedJobs`).
    async fn clean_up_finished(&mut self, jobs: &[Arc<Job>]) {
        let spec = self.cj.spec.clone();
        for (condition, limit) in [
            (COMPLETE, spec.successful_jobs_history_limit),
            (FAILED, spec.failed_jobs_history_limit),
        ] {
            let Some(limit) = limit else { continue };
            let mut finished: Vec<&Arc<Job>> = jobs
                .iter()
                .filter(|j| finished_condition(j) == Some(condition))
                .collect();
            let surplus = finished.len().saturating_sub(limit.max(0) as usize);
            if surplus == 0 {
                continue;
            }
            // Oldest first: by startTime (none last), then name.
            finished.sort_by(|a, b| {
                let start = |j: &Job| {
                    j.status
                        .as_ref()
                        .and_then(|s| s.start_time.as_ref())
                        .map(to_chrono)
                };
                match (start(a), start(b)) {
                    (Some(x), Some(y)) if x != y => x.cmp(&y),
                    (Some(_), None) => std::cmp::Ordering::Less,
                    (None, Some(_)) => std::cmp::Ordering::Greater,
                    _ => a.name_any().cmp(&b.name_any()),
                }
            });
            for job in finished.into_iter().take(surplus) {
                self.delete_job(job).await;
            }
        }
    }

    /// Step 5: the status, when it changed.
    async fn write_status(&self) -> Result<(), Error> {
        if !self.update_status {
            return Ok(());
        }
        let status = self.cj.status.clone().unwrap_or_default();
        let api: Api<CronJob> = Api::namespaced(
            self.ctx.client.clone(),
            self.cj.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let patch = json!({"status": {
            "active": status.active.filter(|a| !a.is_empty()),
            "lastScheduleTime": status.last_schedule_time,
            "lastSuccessfulTime": status.last_successful_time,
        }});
        match api
            .patch_status(
                &self.cj.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(Error::Api(format!(
                "updating the status of CronJob {}: {}",
                self.cj.name_any(),
                message_of(&e)
            ))),
        }
    }
}

/// One sync of `cj`; how long until the next one is due (None: only on a
/// change).
pub async fn sync(cj: &CronJob, ctx: &Context) -> Result<Option<Duration>, Error> {
    let now = ctx.clock.now();
    let jobs = jobs_of(ctx, cj);
    let mut s = Sync {
        ctx,
        jobs: Api::namespaced(
            ctx.client.clone(),
            cj.metadata.namespace.as_deref().unwrap_or("default"),
        ),
        cj: cj.clone(),
        reference: reference_to(cj),
        update_status: false,
    };
    let result = async {
        s.track_jobs(&jobs).await?;
        s.schedule(now).await
    }
    .await;
    let requeue = match result {
        Ok(requeue) => requeue,
        Err(e) => {
            s.write_status().await?;
            return Err(e);
        }
    };
    s.clean_up_finished(&jobs).await;
    s.write_status().await?;
    Ok(requeue)
}
