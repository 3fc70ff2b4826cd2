//! The controller against the real API handlers on an in-memory store,
//! with a fake clock. No agent runs: the tests play the node, moving pods
//! to Running, Succeeded or Failed through the status subresource.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use super::indexes::{INDEX_ENV, INDEX_KEY};
use super::sync::{
    BACKOFF_LIMIT_EXCEEDED, COMPLETE, DEADLINE_EXCEEDED, FAILED, FAILURE_TARGET,
    SUCCESS_CRITERIA_MET, SUSPENDED,
};
use super::*;
use crate::toolkit::testing::{eventually, TestApi};
use crate::toolkit::{to_chrono, Clock, Shared};

const WAIT: Duration = Duration::from_secs(10);
const BASE: Duration = Duration::from_secs(10);

/// Starts the controller with a back-off of 10 s doubling to 6 min.
fn run(shared: &Arc<Shared>) {
    run_with(shared, BASE);
}

fn run_with(shared: &Arc<Shared>, base: Duration) {
    let controller = start_with(shared, base, Duration::from_secs(360));
    shared.informers.start();
    tokio::spawn(controller);
}

fn job(name: &str, extra_spec: Value) -> Value {
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "busybox"}]}}}
    });
    if let Value::Object(extra) = extra_spec {
        for (k, v) in extra {
            if k == "restartPolicy" {
                job["spec"]["template"]["spec"][k] = v;
            } else {
                job["spec"][k] = v;
            }
        }
    }
    job
}

async fn get_job(api: &TestApi, name: &str) -> Job {
    api.api::<Job>(Some("default")).get(name).await.unwrap()
}

/// The Job's pods (all phases, terminating ones too).
async fn pods_of(api: &TestApi, job: &Job) -> Vec<Pod> {
    let mut pods: Vec<Pod> = api
        .api::<Pod>(Some("default"))
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| {
            p.owner_references()
                .iter()
                .any(|r| r.controller == Some(true) && Some(&r.uid) == job.metadata.uid.as_ref())
        })
        .collect();
    pods.sort_by_key(|p| p.metadata.creation_timestamp.clone());
    pods
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn unfinished(pods: &[Pod]) -> Vec<Pod> {
    pods.iter()
        .filter(|p| phase(p) != "Succeeded" && phase(p) != "Failed")
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .cloned()
        .collect()
}

/// Waits until the Job has `n` unfinished pods; returns them.
async fn wait_unfinished(api: &TestApi, job: &Job, n: usize) -> Vec<Pod> {
    eventually(&format!("{n} unfinished pods"), WAIT, || async {
        let u = unfinished(&pods_of(api, job).await);
        (u.len() == n).then_some(u)
    })
    .await
}

/// Plays the node: the pod ends in `phase` now (fake clock), its container
/// terminated with `exit`.
async fn finish(api: &TestApi, pod: &str, phase: &str) {
    let now = api
        .clock
        .now()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let exit = if phase == "Succeeded" { 0 } else { 1 };
    api.api::<Pod>(Some("default"))
        .patch_status(
            pod,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase, "containerStatuses": [{
                "name": "c", "image": "busybox", "imageID": "", "ready": false,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": exit, "finishedAt": now}}}]}})),
        )
        .await
        .unwrap();
}

/// Makes the controller sync the Job now (as its resync would).
async fn touch(api: &TestApi, name: &str) {
    let stamp = api.clock.now().to_rfc3339();
    api.api::<Job>(Some("default"))
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"test/touched": stamp}}})),
        )
        .await
        .unwrap();
}

fn condition(job: &Job, type_: &str) -> Option<(String, String)> {
    let c = job
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default()))
}

async fn wait_condition(api: &TestApi, name: &str, type_: &str) -> Job {
    eventually(&format!("condition {type_}"), WAIT, || async {
        let job = get_job(api, name).await;
        condition(&job, type_).is_some().then_some(job)
    })
    .await
}

async fn events(api: &TestApi, object: &str, reason: &str) -> Vec<String> {
    api.api::<Event>(Some("default"))
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(object))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.message)
        .collect()
}

/// Checks for a while that the Job makes no new pod: `total` stays.
async fn no_new_pod(api: &TestApi, job: &Job, total: usize) {
    touch(api, &job.name_any()).await;
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let n = pods_of(api, job).await.len();
        assert_eq!(n, total, "a pod was made during the back-off");
    }
}

#[tokio::test]
async fn completions_with_parallelism_run_at_most_parallelism_pods_and_complete() {
    let api = TestApi::start().await;
    run(&api.shared());
    let job: Job = api
        .create(job("work", json!({"completions": 5, "parallelism": 2})))
        .await;
    let mut done = 0;
    while done < 5 {
        let want = (5 - done).min(2);
        let running = wait_unfinished(&api, &job, want).await;
        // Never more than parallelism at once.
        let all = pods_of(&api, &job).await;
        assert!(
            unfinished(&all).len() <= 2,
            "{} active",
            unfinished(&all).len()
        );
        assert_eq!(all.len(), done + want, "pods made beyond what is needed");
        let p = &running[0];
        assert!(p.name_any().starts_with("work-"));
        assert_eq!(p.labels()["batch.kubernetes.io/job-name"], "work");
        api.clock.advance(Duration::from_secs(3));
        finish(&api, &p.name_any(), "Succeeded").await;
        done += 1;
        eventually("the success counted", WAIT, || async {
            let s = get_job(&api, "work").await.status?;
            (s.succeeded == Some(done as i32)).then_some(())
        })
        .await;
    }
    let finished = wait_condition(&api, "work", COMPLETE).await;
    let status = finished.status.clone().unwrap();
    assert_eq!(status.succeeded, Some(5));
    assert_eq!(status.active, None);
    assert_eq!(status.failed, None);
    assert!(status.start_time.is_some());
    let completed = status.completion_time.expect("completionTime");
    assert_eq!(to_chrono(&completed), api.clock.now());
    assert_eq!(
        condition(&finished, SUCCESS_CRITERIA_MET),
        Some(("True".into(), "CompletionsReached".into()))
    );
    assert_eq!(pods_of(&api, &job).await.len(), 5);
    assert_eq!(events(&api, "work", "SuccessfulCreate").await.len(), 5);
    eventually("the Completed event", WAIT, || async {
        (events(&api, "work", "Completed").await == vec!["Job completed".to_string()]).then_some(())
    })
    .await;
}

#[tokio::test]
async fn failures_are_replaced_after_a_growing_backoff_until_the_limit() {
    let api = TestApi::start().await;
    run(&api.shared());
    let job: Job = api.create(job("fail", json!({"backoffLimit": 2}))).await;
    // 1st pod fails: the 2nd only after 10 s.
    let first = wait_unfinished(&api, &job, 1).await;
    finish(&api, &first[0].name_any(), "Failed").await;
    eventually("failed 1", WAIT, || async {
        (get_job(&api, "fail").await.status?.failed == Some(1)).then_some(())
    })
    .await;
    no_new_pod(&api, &job, 1).await;
    api.clock.advance(Duration::from_secs(9));
    no_new_pod(&api, &job, 1).await;
    api.clock.advance(Duration::from_secs(1));
    touch(&api, "fail").await;
    let second = wait_unfinished(&api, &job, 1).await;
    // 2nd fails: the 3rd only after 20 s.
    finish(&api, &second[0].name_any(), "Failed").await;
    api.clock.advance(Duration::from_secs(19));
    no_new_pod(&api, &job, 2).await;
    api.clock.advance(Duration::from_secs(1));
    touch(&api, "fail").await;
    let third = wait_unfinished(&api, &job, 1).await;
    // 3rd fails: 3 > backoffLimit 2, the Job fails.
    finish(&api, &third[0].name_any(), "Failed").await;
    let failed = wait_condition(&api, "fail", FAILED).await;
    assert_eq!(
        condition(&failed, FAILED),
        Some(("True".into(), BACKOFF_LIMIT_EXCEEDED.into()))
    );
    assert_eq!(
        condition(&failed, FAILURE_TARGET),
        Some(("True".into(), BACKOFF_LIMIT_EXCEEDED.into()))
    );
    let status = failed.status.unwrap();
    assert_eq!((status.failed, status.active), (Some(3), None));
    assert!(status.completion_time.is_none());
    assert_eq!(condition(&get_job(&api, "fail").await, COMPLETE), None);
    no_new_pod(&api, &job, 3).await;
    eventually("the BackoffLimitExceeded event", WAIT, || async {
        (events(&api, "fail", BACKOFF_LIMIT_EXCEEDED).await
            == vec!["Job has reached the specified backoff limit".to_string()])
        .then_some(())
    })
    .await;
}

#[tokio::test]
async fn indexed_jobs_run_each_index_once_with_its_env_and_annotation() {
    let api = TestApi::start().await;
    run_with(&api.shared(), Duration::ZERO);
    let job: Job = api
        .create(job(
            "idx",
            json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
        ))
        .await;
    let pods = wait_unfinished(&api, &job, 3).await;
    let mut seen = Vec::new();
    for p in &pods {
        let index = p.annotations()[INDEX_KEY].clone();
        assert!(
            p.name_any().starts_with(&format!("idx-{index}-")),
            "{}",
            p.name_any()
        );
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(
            spec.hostname.as_deref(),
            Some(format!("idx-{index}").as_str())
        );
        let env = spec.containers[0].env.as_ref().unwrap();
        let var = env
            .iter()
            .find(|e| e.name == INDEX_ENV)
            .expect("the env var");
        let path = &var
            .value_from
            .as_ref()
            .unwrap()
            .field_ref
            .as_ref()
            .unwrap()
            .field_path;
        assert_eq!(path, &format!("metadata.annotations['{INDEX_KEY}']"));
        seen.push(index);
    }
    seen.sort();
    assert_eq!(seen, ["0", "1", "2"]);

    // Index 1 fails: a new pod for index 1, and only for it.
    let one = pods
        .iter()
        .find(|p| p.annotations()[INDEX_KEY] == "1")
        .unwrap();
    finish(&api, &one.name_any(), "Failed").await;
    let again = eventually("a new pod for index 1", WAIT, || async {
        let u = unfinished(&pods_of(&api, &job).await);
        let new: Vec<Pod> = u
            .into_iter()
            .filter(|p| p.annotations()[INDEX_KEY] == "1")
            .collect();
        (new.len() == 1).then(|| new[0].clone())
    })
    .await;
    assert_ne!(again.name_any(), one.name_any());
    for p in unfinished(&pods_of(&api, &job).await) {
        finish(&api, &p.name_any(), "Succeeded").await;
    }
    let done = wait_condition(&api, "idx", COMPLETE).await;
    let status = done.status.unwrap();
    assert_eq!(status.completed_indexes.as_deref(), Some("0-2"));
    assert_eq!((status.succeeded, status.failed), (Some(3), Some(1)));
    assert_eq!(pods_of(&api, &job).await.len(), 4);
}

#[tokio::test]
async fn without_completions_the_first_success_stops_new_pods_and_the_rest_finish() {
    let api = TestApi::start().await;
    run(&api.shared());
    let job: Job = api.create(job("queue", json!({"parallelism": 3}))).await;
    let pods = wait_unfinished(&api, &job, 3).await;
    finish(&api, &pods[0].name_any(), "Succeeded").await;
    eventually("succeeded 1", WAIT, || async {
        (get_job(&api, "queue").await.status?.succeeded == Some(1)).then_some(())
    })
    .await;
    // No replacement, and not complete while two still run.
    no_new_pod(&api, &job, 3).await;
    assert_eq!(condition(&get_job(&api, "queue").await, COMPLETE), None);
    finish(&api, &pods[1].name_any(), "Succeeded").await;
    finish(&api, &pods[2].name_any(), "Succeeded").await;
    let done = wait_condition(&api, "queue", COMPLETE).await;
    assert_eq!(done.status.unwrap().succeeded, Some(3));
    assert_eq!(pods_of(&api, &job).await.len(), 3);
}

#[tokio::test]
async fn on_failure_restarts_count_towards_the_backoff_limit() {
    let api = TestApi::start().await;
    run(&api.shared());
    let job: Job = api
        .create(job(
            "flaky",
            json!({"backoffLimit": 2, "restartPolicy": "OnFailure"}),
        ))
        .await;
    let pod = wait_unfinished(&api, &job, 1).await.remove(0).name_any();
    let restarted = |n: i32| {
        json!({"status": {"phase": "Running", "containerStatuses": [{
            "name": "c", "image": "busybox", "imageID": "", "ready": false,
            "restartCount": n, "state": {"running": {}}}]}})
    };
    let pods = api.api::<Pod>(Some("default"));
    pods.patch_status(&pod, &PatchParams::default(), &Patch::Merge(restarted(1)))
        .await
        .unwrap();
    touch(&api, "flaky").await;
    no_new_pod(&api, &job, 1).await;
    assert_eq!(
        condition(&get_job(&api, "flaky").await, FAILURE_TARGET),
        None
    );
    pods.patch_status(&pod, &PatchParams::default(), &Patch::Merge(restarted(2)))
        .await
        .unwrap();
    // The limit is reached: FailureTarget, the pod is deleted, then Failed
    // once it is gone.
    wait_condition(&api, "flaky", FAILURE_TARGET).await;
    eventually("the pod deleted", WAIT, || async {
        let p = pods.get_opt(&pod).await.unwrap();
        p.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
            .then_some(())
    })
    .await;
    // Play the node: the pod is gone.
    let _ = pods
        .delete(&pod, &DeleteParams::default().grace_period(0))
        .await;
    let failed = wait_condition(&api, "flaky", FAILED).await;
    assert_eq!(
        condition(&failed, FAILED),
        Some(("True".into(), BACKOFF_LIMIT_EXCEEDED.into()))
    );
}

/// Plays the node for pods the controller deleted: they go for good.
async fn remove_terminating(api: &TestApi, job: &Job) {
    let pods = api.api::<Pod>(Some("default"));
    for p in pods_of(api, job).await {
        if p.metadata.deletion_timestamp.is_some() {
            let _ = pods
                .delete(&p.name_any(), &DeleteParams::default().grace_period(0))
                .await;
        }
    }
}

/// Waits for the Job's `status.terminating` to be `n`.
async fn terminating_count(api: &TestApi, name: &str, n: i32) {
    eventually(&format!("status.terminating {n}"), WAIT, || async {
        let s = get_job(api, name).await.status?;
        (s.terminating == Some(n)).then_some(())
    })
    .await;
}

async fn set_suspend(api: &TestApi, name: &str, suspend: bool) {
    api.api::<Job>(Some("default"))
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": suspend}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn active_deadline_fails_the_job_and_stops_its_pods() {
    let api = TestApi::start().await;
    run(&api.shared());
    let job: Job = api
        .create(job(
            "slow",
            json!({"parallelism": 2, "completions": 4, "activeDeadlineSeconds": 30}),
        ))
        .await;
    for p in wait_unfinished(&api, &job, 2).await {
        api.bind(&p.name_any(), "n1").await;
    }
    api.clock.advance(Duration::from_secs(29));
    no_new_pod(&api, &job, 2).await;
    assert_eq!(
        condition(&get_job(&api, "slow").await, FAILURE_TARGET),
        None
    );
    api.clock.advance(Duration::from_secs(1));
    touch(&api, "slow").await;
    let target = wait_condition(&api, "slow", FAILURE_TARGET).await;
    assert_eq!(
        condition(&target, FAILURE_TARGET),
        Some(("True".into(), DEADLINE_EXCEEDED.into()))
    );
    wait_unfinished(&api, &job, 0).await;
    // The deleted pods wait for their node: the Job counts them as
    // terminating (`status.terminating`), then not once they are gone.
    let going = pods_of(&api, &job)
        .await
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some())
        .count();
    assert_eq!(going, 2);
    terminating_count(&api, "slow", 2).await;
    remove_terminating(&api, &job).await;
    terminating_count(&api, "slow", 0).await;
    let failed = wait_condition(&api, "slow", FAILED).await;
    assert_eq!(
        condition(&failed, FAILED),
        Some(("True".into(), DEADLINE_EXCEEDED.into()))
    );
    assert_eq!(pods_of(&api, &job).await.len(), 0);
}

#[tokio::test]
async fn suspend_deletes_active_pods_and_resume_continues() {
    let api = TestApi::start().await;
    run(&api.shared());
    let job: Job = api
        .create(job("pause", json!({"parallelism": 2, "completions": 3})))
        .await;
    let first = wait_unfinished(&api, &job, 2).await;
    finish(&api, &first[0].name_any(), "Succeeded").await;
    wait_unfinished(&api, &job, 2).await;
    set_suspend(&api, "pause", true).await;
    wait_unfinished(&api, &job, 0).await;
    remove_terminating(&api, &job).await;
    let suspended = eventually("Suspended, no pod active", WAIT, || async {
        let j = get_job(&api, "pause").await;
        let s = j.status.clone()?;
        (condition(&j, SUSPENDED) == Some(("True".into(), "JobSuspended".into()))
            && s.active.is_none())
        .then_some(j)
    })
    .await;
    assert_eq!(suspended.status.unwrap().succeeded, Some(1));
    no_new_pod(&api, &job, 1).await;

    api.clock.advance(Duration::from_secs(60));
    set_suspend(&api, "pause", false).await;
    let resumed = eventually("resumed", WAIT, || async {
        let j = get_job(&api, "pause").await;
        (condition(&j, SUSPENDED) == Some(("False".into(), "JobResumed".into()))).then_some(j)
    })
    .await;
    let start = resumed.status.unwrap().start_time.unwrap();
    assert_eq!(to_chrono(&start), api.clock.now(), "the deadline restarts");
    // Two more to do: two pods again.
    for p in wait_unfinished(&api, &job, 2).await {
        finish(&api, &p.name_any(), "Succeeded").await;
    }
    let done = wait_condition(&api, "pause", COMPLETE).await;
    assert_eq!(done.status.unwrap().succeeded, Some(3));
}

#[tokio::test]
async fn a_finished_job_goes_after_its_ttl() {
    let api = TestApi::start().await;
    run(&api.shared());
    let job: Job = api
        .create(job("brief", json!({"ttlSecondsAfterFinished": 60})))
        .await;
    let pod = wait_unfinished(&api, &job, 1).await.remove(0);
    finish(&api, &pod.name_any(), "Succeeded").await;
    wait_condition(&api, "brief", COMPLETE).await;
    let jobs = api.api::<Job>(Some("default"));
    let deleted = || async {
        jobs.get_opt("brief")
            .await
            .unwrap()
            .is_none_or(|j| j.metadata.deletion_timestamp.is_some())
    };
    api.clock.advance(Duration::from_secs(59));
    touch(&api, "brief").await;
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!deleted().await, "deleted before its ttl");
    }
    api.clock.advance(Duration::from_secs(1));
    touch(&api, "brief").await;
    eventually("the job deleted", WAIT, || async {
        deleted().await.then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_sync_on_a_stale_job_cannot_erase_a_newer_condition() {
    let api = TestApi::start().await;
    let shared = api.shared();
    let ctx = Context::new(&shared);
    let stale: Job = api
        .create(job(
            "flaky",
            json!({"backoffLimit": 2, "restartPolicy": "OnFailure"}),
        ))
        .await;
    // A newer sync recorded FailureTarget...
    let now = api.clock.now().to_rfc3339();
    api.api::<Job>(Some("default"))
        .patch_status(
            "flaky",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{"type": FAILURE_TARGET,
                "status": "True", "reason": "BackoffLimitExceeded",
                "lastTransitionTime": now, "lastProbeTime": now}]}})),
        )
        .await
        .unwrap();
    // ...and a sync that read the Job before it writes a status without it.
    let old = stale.status.clone().unwrap_or_default();
    let next = k8s_openapi::api::batch::v1::JobStatus {
        active: Some(1),
        ..old.clone()
    };
    let result = sync::update_status(&stale, &ctx, &old, next).await;
    assert!(result.is_err(), "a stale write must conflict");
    assert_eq!(
        condition(&get_job(&api, "flaky").await, FAILURE_TARGET),
        Some(("True".into(), "BackoffLimitExceeded".into()))
    );
}
