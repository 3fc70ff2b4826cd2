//! Jobs on real Docker, end to end, with the control plane's real failure
//! back-off (10 s, 20 s): the seeds' `job.yaml` completes and `bosun get
//! jobs` shows `1/1`; a job with completions 5 / parallelism 2 never has
//! more than 2 pods running at once (from a watch that must not end early)
//! and completes; a failing job stops at its backoffLimit with
//! BackoffLimitExceeded, exactly backoffLimit + 1 failed pods and growing
//! delays between them; an Indexed job gives each pod its index; a job
//! with ttlSecondsAfterFinished 0 is deleted with its pod once complete.
//!
//! The five jobs run side by side in one cluster, so the test takes about
//! as long as the failing job's back-off (~35 s).

mod cluster;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster::{ok, Cluster, BUSYBOX};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

const UP: Duration = Duration::from_secs(90);

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

async fn pods_of(client: &Client, job: &str) -> Vec<Pod> {
    let mut pods = Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
        .await
        .unwrap()
        .items;
    pods.sort_by_key(|p| p.metadata.creation_timestamp.clone());
    pods
}

/// The Job's condition `type_` as (status, reason), once it has it.
async fn condition(client: &Client, job: &str, type_: &str) -> Option<(String, String)> {
    let job = Api::<Job>::namespaced(client.clone(), "default")
        .get(job)
        .await
        .ok()?;
    let c = job
        .status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status, c.reason.unwrap_or_default()))
}

/// The most pods of a job running (not finished, not terminating) at
/// once, from a watch that must not end early.
struct Concurrency {
    max: Arc<Mutex<usize>>,
    ended: Arc<Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Concurrency {
    fn watch(client: &Client, job: &str) -> Concurrency {
        let api: Api<Pod> = Api::namespaced(client.clone(), "default");
        let config =
            watcher::Config::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
        let max = Arc::new(Mutex::new(0));
        let ended = Arc::new(Mutex::new(None));
        let (m, e) = (max.clone(), ended.clone());
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, config).boxed();
            let mut running: HashMap<String, bool> = HashMap::new();
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                        let live = p.metadata.deletion_timestamp.is_none()
                            && phase(&p) != "Succeeded"
                            && phase(&p) != "Failed";
                        running.insert(p.uid().unwrap_or_default(), live);
                    }
                    Ok(watcher::Event::Delete(p)) => {
                        running.remove(&p.uid().unwrap_or_default());
                    }
                    Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
                    Err(err) => {
                        *e.lock().unwrap() = Some(format!("watch error: {err}"));
                        return;
                    }
                }
                let now = running.values().filter(|live| **live).count();
                let mut max = m.lock().unwrap();
                *max = (*max).max(now);
            }
            *e.lock().unwrap() = Some("the watch ended".into());
        });
        Concurrency { max, ended, task }
    }

    /// The maximum so far; fails the test if the watch stopped.
    fn max(&self) -> usize {
        if let Some(why) = self.ended.lock().unwrap().clone() {
            panic!("the pod watch stopped early: {why}");
        }
        *self.max.lock().unwrap()
    }
}

impl Drop for Concurrency {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn job_manifest(name: &str, spec: &str, command: &str) -> String {
    format!(
        r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
spec:
{spec}
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: {BUSYBOX}
        command: ["sh", "-c", {command:?}]
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_to_completion_or_failure_on_docker() {
    let c = Cluster::start();
    let client = c.client().await;
    let par = Concurrency::watch(&client, "par");
    let manifests = [
        job_manifest("par", "  completions: 5\n  parallelism: 2", "sleep 2"),
        job_manifest("fail", "  backoffLimit: 2", "exit 1"),
        job_manifest("brief", "  ttlSecondsAfterFinished: 0", "true"),
        job_manifest(
            "idx",
            "  completions: 3\n  parallelism: 3\n  completionMode: Indexed",
            "echo index=$JOB_COMPLETION_INDEX",
        ),
    ];
    for (i, m) in manifests.iter().enumerate() {
        let path = c.dir.path().join(format!("job-{i}.yaml"));
        std::fs::write(&path, m).unwrap();
        ok(c.bosun().arg("apply").arg("-f").arg(&path));
    }
    let seed = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/job.yaml");
    ok(c.bosun().args(["apply", "-f", seed]));

    // The seed's job counts to 10 and completes: 1/1.
    c.poll("job1 Complete", UP, || async {
        condition(&client, "job1", "Complete").await
    })
    .await;
    let listed = ok(c.bosun().args(["get", "jobs", "job1"]));
    let row = listed.lines().nth(1).unwrap_or_default().to_string();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells.get(..3),
        Some(&["job1", "Complete", "1/1"][..]),
        "{listed}"
    );
    let pods = pods_of(&client, "job1").await;
    assert_eq!(pods.len(), 1);
    assert_eq!(phase(&pods[0]), "Succeeded");

    // ttlSecondsAfterFinished 0: the finished job and its pod are deleted.
    c.poll("job brief and its pod gone", UP, || async {
        let job = Api::<Job>::namespaced(client.clone(), "default")
            .get_opt("brief")
            .await
            .unwrap();
        (job.is_none() && pods_of(&client, "brief").await.is_empty()).then_some(())
    })
    .await;
    let completed = Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .any(|e| {
            e.involved_object.name.as_deref() == Some("brief")
                && e.reason.as_deref() == Some("Completed")
        });
    assert!(completed, "it completed before it went");

    // Indexed: each pod prints its own index.
    c.poll("idx Complete", UP, || async {
        condition(&client, "idx", "Complete").await
    })
    .await;
    let pods = pods_of(&client, "idx").await;
    assert_eq!(pods.len(), 3, "one pod per index");
    let mut indexes = Vec::new();
    for p in &pods {
        let index = p.annotations()["batch.kubernetes.io/job-completion-index"].clone();
        assert!(
            p.name_any().starts_with(&format!("idx-{index}-")),
            "{}",
            p.name_any()
        );
        let logs = ok(c.bosun().args(["logs", &p.name_any()]));
        assert_eq!(logs.trim(), format!("index={index}"), "{}", p.name_any());
        indexes.push(index);
    }
    indexes.sort();
    assert_eq!(indexes, ["0", "1", "2"]);

    // completions 5 / parallelism 2: 5 pods, never more than 2 at once.
    c.poll("par Complete", UP, || async {
        condition(&client, "par", "Complete").await
    })
    .await;
    let pods = pods_of(&client, "par").await;
    assert_eq!(pods.len(), 5);
    assert!(pods.iter().all(|p| phase(p) == "Succeeded"));
    assert_eq!(
        par.max(),
        2,
        "at most (and, with 5 to do, exactly) 2 at once"
    );
    let listed = ok(c.bosun().args(["get", "jobs", "par"]));
    assert!(listed.contains("5/5"), "{listed}");

    // The failing job: 3 failed pods (backoffLimit 2), 10 s then 20 s
    // between them, then Failed with BackoffLimitExceeded.
    let (status, reason) = c
        .poll("fail Failed", UP, || async {
            condition(&client, "fail", "Failed").await
        })
        .await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "BackoffLimitExceeded")
    );
    let pods = pods_of(&client, "fail").await;
    assert_eq!(pods.len(), 3, "exactly backoffLimit + 1 pods");
    assert!(pods.iter().all(|p| phase(p) == "Failed"));
    let created: Vec<i64> = pods
        .iter()
        .map(|p| {
            p.metadata
                .creation_timestamp
                .as_ref()
                .unwrap()
                .0
                .as_second()
        })
        .collect();
    let (first_gap, second_gap) = (created[1] - created[0], created[2] - created[1]);
    assert!(first_gap >= 10, "the first back-off is 10 s: {first_gap}");
    assert!(
        second_gap >= 20,
        "the second back-off is 20 s: {second_gap}"
    );
    let listed = ok(c.bosun().args(["get", "jobs", "fail"]));
    assert!(
        listed.contains("Failed") && listed.contains("0/1"),
        "{listed}"
    );
}
