//! The controller against the real API handlers on an in-memory store,
//! with a fake clock. Each test calls one sync at a time (the loop would
//! requeue at real times), after the Job cache has caught up with the
//! API; no Job controller runs, so the tests finish Jobs by hand.

use std::time::Duration;

use chrono::{DateTime, TimeZone as _, Utc};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Event;
use kube::api::{ListParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use super::schedule::{most_recent_schedule_time, requeue_after};
use super::sync::{job_name, sync, SCHEDULED_TIMESTAMP};
use super::Context;
use crate::toolkit::from_chrono;
use crate::toolkit::testing::{eventually, TestApi};
use bosun::cron::{Schedule, TimeZone};

const WAIT: Duration = Duration::from_secs(10);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

fn secs(n: i64) -> chrono::Duration {
    chrono::Duration::seconds(n)
}

struct Env {
    api: TestApi,
    ctx: Context,
}

async fn env() -> Env {
    let api = TestApi::start().await;
    let shared = api.shared();
    let ctx = Context::new(&shared);
    shared.informers.start();
    shared.informers.wait_ready().await;
    Env { api, ctx }
}

fn cronjob(name: &str, schedule: &str, extra_spec: Value) -> Value {
    let mut cj = json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedule": schedule, "jobTemplate": {
            "metadata": {"labels": {"app": "hello"}, "annotations": {"note": "from-template"}},
            "spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                "containers": [{"name": "c", "image": "busybox"}]}}}}}
    });
    if let Value::Object(extra) = extra_spec {
        for (k, v) in extra {
            cj["spec"][k] = v;
        }
    }
    cj
}

impl Env {
    /// Creates the CronJob with lastScheduleTime `last` (so the schedule
    /// counts from a fixed time, not the real creation time).
    async fn create(&self, cj: Value, last: DateTime<Utc>) -> CronJob {
        let cj: CronJob = self.api.create(cj).await;
        self.api
            .api::<CronJob>(Some("default"))
            .patch_status(
                &cj.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"lastScheduleTime": from_chrono(last)}})),
            )
            .await
            .unwrap()
    }

    async fn get(&self, name: &str) -> CronJob {
        self.api
            .api::<CronJob>(Some("default"))
            .get(name)
            .await
            .unwrap()
    }

    async fn jobs(&self) -> Vec<Job> {
        let mut jobs = self
            .api
            .api::<Job>(Some("default"))
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        jobs.sort_by_key(|j| j.name_any());
        jobs
    }

    /// Waits until the Job cache holds what the API holds.
    async fn settle(&self) {
        let want: Vec<(String, Option<String>)> = self
            .jobs()
            .await
            .iter()
            .map(|j| (j.name_any(), j.resource_version()))
            .collect();
        eventually("the job cache to catch up", WAIT, || async {
            let mut have: Vec<(String, Option<String>)> = self
                .ctx
                .jobs
                .state()
                .iter()
                .map(|j| (j.name_any(), j.resource_version()))
                .collect();
            have.sort();
            (have == want).then_some(())
        })
        .await;
    }

    /// One sync of `name` at `now`, as the loop would run it.
    async fn sync_at(&self, name: &str, now: DateTime<Utc>) -> Option<Duration> {
        self.api.clock.set(now);
        self.settle().await;
        let cj = self.get(name).await;
        sync(&cj, &self.ctx).await.expect("sync")
    }

    /// Marks a Job Complete or Failed, started at `start`.
    async fn finish(&self, job: &str, condition: &str, start: DateTime<Utc>) {
        let mut status = json!({"startTime": from_chrono(start), "conditions": [
            {"type": condition, "status": "True"}]});
        if condition == "Complete" {
            status["completionTime"] = json!(from_chrono(start + secs(5)));
        }
        self.api
            .api::<Job>(Some("default"))
            .patch_status(
                job,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .unwrap();
    }

    /// The reasons of the events about CronJob `name`, once `reason` is
    /// among them.
    async fn events_with(&self, name: &str, reason: &str) -> Vec<Event> {
        eventually(&format!("a {reason} event"), WAIT, || async {
            let events = self.events(name).await;
            events
                .iter()
                .any(|e| e.reason.as_deref() == Some(reason))
                .then_some(events)
        })
        .await
    }

    async fn events(&self, name: &str) -> Vec<Event> {
        self.api
            .api::<Event>(Some("default"))
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name))
            .collect()
    }

    async fn count_events(&self, name: &str, reason: &str) -> i32 {
        self.events(name)
            .await
            .iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .map(|e| e.count.unwrap_or(1))
            .sum()
    }
}

fn minutes(t: DateTime<Utc>) -> i64 {
    t.timestamp() / 60
}

fn active_names(cj: &CronJob) -> Vec<String> {
    cj.status
        .as_ref()
        .and_then(|s| s.active.as_ref())
        .map(|a| a.iter().filter_map(|r| r.name.clone()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn creates_the_job_at_the_scheduled_time_and_requeues_for_the_next() {
    let env = env().await;
    let cj = env
        .create(cronjob("hello", "*/1 * * * *", json!({})), t0())
        .await;

    // Half a minute in: nothing due; back just after the next minute.
    let requeue = env.sync_at("hello", t0() + secs(30)).await;
    assert_eq!(requeue, Some(Duration::from_millis(30_100)));
    assert!(env.jobs().await.is_empty());

    let requeue = env.sync_at("hello", t0() + secs(60)).await;
    assert_eq!(requeue, Some(Duration::from_millis(60_100)));
    let jobs = env.jobs().await;
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!(job.name_any(), format!("hello-{}", minutes(t0()) + 1));
    let owner = &job.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("CronJob", cj.metadata.uid.as_deref().unwrap(), Some(true))
    );
    assert_eq!(job.labels()["app"], "hello");
    assert_eq!(job.annotations()["note"], "from-template");
    assert_eq!(
        job.annotations()[SCHEDULED_TIMESTAMP],
        "2026-01-01T00:01:00Z"
    );
    let cj = env.get("hello").await;
    assert_eq!(active_names(&cj), [job.name_any()]);
    let status = cj.status.unwrap();
    assert_eq!(
        status.last_schedule_time,
        Some(from_chrono(t0() + secs(60)))
    );
    assert_eq!(status.active.unwrap()[0].uid, job.metadata.uid);
    env.events_with("hello", "SuccessfulCreate").await;

    // Once more at the same time: the run is done, no second Job.
    env.sync_at("hello", t0() + secs(61)).await;
    assert_eq!(env.jobs().await.len(), 1);
}

#[tokio::test]
async fn a_job_that_already_exists_is_not_made_twice() {
    let env = env().await;
    env.create(cronjob("hello", "*/1 * * * *", json!({})), t0())
        .await;
    let stale = env.get("hello").await;
    env.sync_at("hello", t0() + secs(60)).await;
    // A sync from a cache that has not seen the status write yet.
    env.settle().await;
    sync(&stale, &env.ctx).await.unwrap();
    assert_eq!(env.jobs().await.len(), 1);
    let cj = env.get("hello").await;
    assert_eq!(active_names(&cj).len(), 1, "one entry in status.active");
    env.events_with("hello", "SuccessfulCreate").await;
    assert_eq!(env.count_events("hello", "SuccessfulCreate").await, 1);

    // The status write lost (a crash right after the create): the next
    // sync meets the Job by name, AlreadyExists, and takes it as its own.
    env.api
        .api::<CronJob>(Some("default"))
        .patch_status(
            "hello",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"active": null,
                "lastScheduleTime": from_chrono(t0())}})),
        )
        .await
        .unwrap();
    env.sync_at("hello", t0() + secs(61)).await;
    let jobs = env.jobs().await;
    assert_eq!(jobs.len(), 1);
    let cj = env.get("hello").await;
    assert_eq!(active_names(&cj), [jobs[0].name_any()]);
    assert_eq!(
        cj.status.unwrap().last_schedule_time,
        Some(from_chrono(t0() + secs(60)))
    );
    assert_eq!(env.count_events("hello", "SuccessfulCreate").await, 1);
}

#[tokio::test]
async fn forbid_skips_a_run_while_a_job_is_active() {
    let env = env().await;
    env.create(
        cronjob(
            "lock",
            "*/1 * * * *",
            json!({"concurrencyPolicy": "Forbid"}),
        ),
        t0(),
    )
    .await;
    env.sync_at("lock", t0() + secs(60)).await;
    let first = env.jobs().await[0].name_any();

    let requeue = env.sync_at("lock", t0() + secs(120)).await;
    assert_eq!(env.jobs().await.len(), 1, "no second job while one runs");
    assert_eq!(requeue, Some(Duration::from_millis(60_100)));
    env.events_with("lock", "JobAlreadyActive").await;

    // Once the first is done, the next run goes.
    env.finish(&first, "Complete", t0() + secs(60)).await;
    env.sync_at("lock", t0() + secs(180)).await;
    let cj = env.get("lock").await;
    assert_eq!(active_names(&cj), [format!("lock-{}", minutes(t0()) + 3)]);
    // As upstream, the sync that sees it finish drops it from active; the
    // next (woken by that status write) records its success.
    env.sync_at("lock", t0() + secs(181)).await;
    let status = env.get("lock").await.status.unwrap();
    assert_eq!(
        status.last_successful_time,
        Some(from_chrono(t0() + secs(65)))
    );
    env.events_with("lock", "SawCompletedJob").await;
}

#[tokio::test]
async fn allow_runs_jobs_side_by_side() {
    let env = env().await;
    env.create(cronjob("many", "*/1 * * * *", json!({})), t0())
        .await;
    env.sync_at("many", t0() + secs(60)).await;
    env.sync_at("many", t0() + secs(120)).await;
    assert_eq!(active_names(&env.get("many").await).len(), 2);
}

#[tokio::test]
async fn replace_deletes_the_active_job_then_creates() {
    let env = env().await;
    env.create(
        cronjob(
            "swap",
            "*/1 * * * *",
            json!({"concurrencyPolicy": "Replace"}),
        ),
        t0(),
    )
    .await;
    env.sync_at("swap", t0() + secs(60)).await;
    let first = format!("swap-{}", minutes(t0()) + 1);
    env.sync_at("swap", t0() + secs(120)).await;
    let second = format!("swap-{}", minutes(t0()) + 2);
    let names: Vec<String> = env.jobs().await.iter().map(|j| j.name_any()).collect();
    assert_eq!(
        names,
        std::slice::from_ref(&second),
        "the first job is deleted"
    );
    assert_eq!(active_names(&env.get("swap").await), [second]);
    let deleted = env.events_with("swap", "SuccessfulDelete").await;
    assert!(deleted
        .iter()
        .any(|e| e.message.as_deref() == Some(&format!("Deleted job {first}"))));
}

#[tokio::test]
async fn more_than_100_missed_runs_start_only_the_latest_with_a_warning() {
    let env = env().await;
    env.create(cronjob("late", "*/1 * * * *", json!({})), t0())
        .await;
    let now = t0() + secs(200 * 60 + 30);
    env.sync_at("late", now).await;
    let names: Vec<String> = env.jobs().await.iter().map(|j| j.name_any()).collect();
    assert_eq!(names, [format!("late-{}", minutes(t0()) + 200)]);
    let events = env.events_with("late", "TooManyMissedTimes").await;
    let warning = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("TooManyMissedTimes"))
        .unwrap();
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert!(warning
        .message
        .as_deref()
        .unwrap()
        .contains("too many missed start times: 200"));

    // A few missed: the latest only, and no warning.
    env.create(cronjob("few", "*/1 * * * *", json!({})), t0())
        .await;
    env.sync_at("few", t0() + secs(5 * 60 + 30)).await;
    let cj = env.get("few").await;
    assert_eq!(active_names(&cj), [format!("few-{}", minutes(t0()) + 5)]);
    assert_eq!(env.count_events("few", "TooManyMissedTimes").await, 0);
}

#[tokio::test]
async fn a_run_later_than_starting_deadline_seconds_is_skipped() {
    let env = env().await;
    env.create(
        cronjob(
            "strict",
            "*/1 * * * *",
            json!({"startingDeadlineSeconds": 10}),
        ),
        t0(),
    )
    .await;
    env.create(cronjob("lenient", "*/1 * * * *", json!({})), t0())
        .await;
    // 30 s after the 00:01 run: too late for one, not for the other.
    env.sync_at("strict", t0() + secs(90)).await;
    env.sync_at("lenient", t0() + secs(90)).await;
    let names: Vec<String> = env.jobs().await.iter().map(|j| j.name_any()).collect();
    assert_eq!(names, [format!("lenient-{}", minutes(t0()) + 1)]);
    // 5 s after the 00:02 run: in time.
    env.sync_at("strict", t0() + secs(125)).await;
    let cj = env.get("strict").await;
    assert_eq!(active_names(&cj), [format!("strict-{}", minutes(t0()) + 2)]);
}

#[tokio::test]
async fn suspended_cronjobs_start_nothing() {
    let env = env().await;
    env.create(
        cronjob("paused", "*/1 * * * *", json!({"suspend": true})),
        t0(),
    )
    .await;
    assert_eq!(env.sync_at("paused", t0() + secs(120)).await, None);
    assert!(env.jobs().await.is_empty());
    // Resumed: the missed run starts.
    env.api
        .api::<CronJob>(Some("default"))
        .patch(
            "paused",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": false}})),
        )
        .await
        .unwrap();
    env.sync_at("paused", t0() + secs(121)).await;
    assert_eq!(env.jobs().await.len(), 1);
}

#[tokio::test]
async fn finished_jobs_beyond_the_history_limits_are_deleted_oldest_first() {
    let env = env().await;
    let cj = env
        .create(
            cronjob(
                "tidy",
                "0 0 1 1 *",
                json!({"successfulJobsHistoryLimit": 2, "failedJobsHistoryLimit": 1}),
            ),
            t0(),
        )
        .await;
    let owner = crate::toolkit::controller_ref(&cj);
    // Five succeeded (started in the order 3, 1, 4, 0, 2), two failed.
    let runs = [
        ("ok-a", "Complete", 3),
        ("ok-b", "Complete", 1),
        ("ok-c", "Complete", 4),
        ("ok-d", "Complete", 0),
        ("ok-e", "Complete", 2),
        ("bad-a", "Failed", 1),
        ("bad-b", "Failed", 0),
    ];
    for (name, condition, start) in runs {
        let _: Job = env
            .api
            .create(json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "namespace": "default",
                             "ownerReferences": [owner]},
                "spec": {"template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}]}}}
            }))
            .await;
        env.finish(name, condition, t0() + secs(60 * start)).await;
    }
    // A finished Job of someone else is not ours to delete.
    let _: Job = env
        .api
        .create(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "other", "namespace": "default"},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}}}
        }))
        .await;
    env.finish("other", "Complete", t0()).await;

    env.sync_at("tidy", t0() + secs(3600)).await;
    let names: Vec<String> = env.jobs().await.iter().map(|j| j.name_any()).collect();
    assert_eq!(names, ["bad-a", "ok-a", "ok-c", "other"]);
    env.events_with("tidy", "SuccessfulDelete").await;
    assert_eq!(env.count_events("tidy", "SuccessfulDelete").await, 4);
}

#[tokio::test]
async fn a_job_that_went_missing_leaves_the_active_list() {
    let env = env().await;
    env.create(cronjob("gone", "*/1 * * * *", json!({})), t0())
        .await;
    env.sync_at("gone", t0() + secs(60)).await;
    let name = env.jobs().await[0].name_any();
    env.api
        .api::<Job>(Some("default"))
        .delete(&name, &Default::default())
        .await
        .unwrap();
    env.sync_at("gone", t0() + secs(70)).await;
    assert!(active_names(&env.get("gone").await).is_empty());
    env.events_with("gone", "MissingJob").await;
}

#[tokio::test]
async fn jobs_run_at_times_of_the_cronjobs_zone() {
    let env = env().await;
    // 09:00 in Berlin: 08:00Z in winter; the clocks go forward on
    // 2026-03-29, so that day it is 07:00Z.
    let last = Utc.with_ymd_and_hms(2026, 3, 28, 8, 0, 0).unwrap();
    env.create(
        cronjob("berlin", "0 9 * * *", json!({"timeZone": "Europe/Berlin"})),
        last,
    )
    .await;
    let due = Utc.with_ymd_and_hms(2026, 3, 29, 7, 0, 0).unwrap();
    let requeue = env.sync_at("berlin", due - secs(60)).await;
    assert_eq!(requeue, Some(Duration::from_millis(60_100)));
    env.sync_at("berlin", due + secs(1)).await;
    let jobs = env.jobs().await;
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].name_any(), format!("berlin-{}", minutes(due)));
    assert_eq!(
        jobs[0].annotations()[SCHEDULED_TIMESTAMP],
        "2026-03-29T09:00:00+02:00"
    );
}

// The schedule arithmetic alone (utils.go), on CronJob values.

fn cj_value(schedule: &str, created: DateTime<Utc>, last: Option<DateTime<Utc>>) -> CronJob {
    let mut cj: CronJob = serde_json::from_value(cronjob("x", schedule, json!({}))).unwrap();
    cj.metadata.creation_timestamp = Some(from_chrono(created));
    if let Some(last) = last {
        cj.status = Some(k8s_openapi::api::batch::v1::CronJobStatus {
            last_schedule_time: Some(from_chrono(last)),
            ..Default::default()
        });
    }
    cj
}

#[test]
fn the_most_recent_time_counts_from_creation_then_from_the_last_run() {
    let s = Schedule::parse("*/5 * * * *").unwrap();
    let utc = TimeZone::UTC;
    let cj = cj_value("*/5 * * * *", t0() + secs(60), None);
    let r = most_recent_schedule_time(&cj, t0() + secs(4 * 60), &s, &utc, false).unwrap();
    assert_eq!(r.time, None);
    let r = most_recent_schedule_time(&cj, t0() + secs(7 * 60), &s, &utc, false).unwrap();
    assert_eq!(r.time, Some(t0() + secs(5 * 60)));
    let cj = cj_value("*/5 * * * *", t0(), Some(t0() + secs(5 * 60)));
    let r = most_recent_schedule_time(&cj, t0() + secs(23 * 60), &s, &utc, false).unwrap();
    assert_eq!(r.time, Some(t0() + secs(20 * 60)));
    assert_eq!(r.missed, 3);
}

#[test]
fn uneven_schedules_find_the_exact_most_recent_time() {
    // 06:30, 10:30, 14:30 on weekdays; 2026-01-02 is a Friday.
    let s = Schedule::parse("30 6-16/4 * * 1-5").unwrap();
    let cj = cj_value("30 6-16/4 * * 1-5", t0(), None);
    let now = Utc.with_ymd_and_hms(2026, 1, 5, 7, 0, 0).unwrap(); // Monday
    let r = most_recent_schedule_time(&cj, now, &s, &TimeZone::UTC, false).unwrap();
    assert_eq!(
        r.time,
        Some(Utc.with_ymd_and_hms(2026, 1, 5, 6, 30, 0).unwrap())
    );
}

#[test]
fn schedules_that_never_fire_are_an_error_and_not_requeued() {
    let s = Schedule::parse("0 0 30 2 *").unwrap();
    let cj = cj_value("0 0 30 2 *", t0(), None);
    let now = t0() + secs(3600);
    assert!(most_recent_schedule_time(&cj, now, &s, &TimeZone::UTC, true).is_err());
    assert_eq!(requeue_after(&cj, now, &s, &TimeZone::UTC), None);
}

#[test]
fn job_names_are_minutes_since_the_epoch() {
    let cj = cj_value("@hourly", t0(), None);
    assert_eq!(job_name(&cj, t0()), format!("x-{}", 1767225600 / 60));
}

#[tokio::test]
async fn the_controller_loop_creates_jobs_on_its_own() {
    // The real loop (with the fake clock): a CronJob due now gets its Job
    // without any sync called by hand.
    let api = TestApi::start().await;
    let shared = api.shared();
    let controller = super::start(&shared);
    shared.informers.start();
    tokio::spawn(controller);
    api.clock.set(Utc::now());
    let cj: CronJob = api.create(cronjob("auto", "*/1 * * * *", json!({}))).await;
    let created = crate::toolkit::to_chrono(cj.metadata.creation_timestamp.as_ref().unwrap());
    // Two minutes on: the run at the minute after creation is due.
    api.clock.set(created + secs(120));
    api.api::<CronJob>(Some("default"))
        .patch(
            "auto",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"poke": "1"}}})),
        )
        .await
        .unwrap();
    eventually("the loop to create a job", WAIT, || async {
        let jobs = api
            .api::<Job>(Some("default"))
            .list(&ListParams::default())
            .await
            .unwrap();
        (!jobs.items.is_empty()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_job_made_by_hand_is_reported_not_adopted_into_active() {
    let env = env().await;
    let cj = env
        .create(cronjob("hello", "0 0 1 1 *", json!({})), t0())
        .await;
    // What `create job --from=cronjob/hello` makes: controlled, unfinished.
    let _: Job = env
        .api
        .create(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "manual", "namespace": "default",
                "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
                    "name": "hello", "uid": cj.metadata.uid, "controller": true}]},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}}}
        }))
        .await;
    env.sync_at("hello", t0() + secs(60)).await;
    assert!(active_names(&env.get("hello").await).is_empty());
    env.events_with("hello", "UnexpectedJob").await;
    // Once it succeeds, it counts as the last success.
    env.finish("manual", "Complete", t0()).await;
    env.sync_at("hello", t0() + secs(120)).await;
    let status = env.get("hello").await.status.unwrap();
    assert_eq!(
        status.last_successful_time,
        Some(from_chrono(t0() + secs(5)))
    );
}
