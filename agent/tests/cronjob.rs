//! CronJobs on real Docker, end to end, at real minutes: the seeds'
//! `hello` CronJob (`*/1 * * * *`) creates a Job at the start of the next
//! minute that completes; `bosun create job --from=cronjob/hello` runs the
//! template at once; with those manual Jobs (which the CronJob controls,
//! as kubectl makes them) the successful-history limit of 3 deletes the
//! oldest finished Job and its pods; a Forbid CronJob whose Job sleeps
//! skips the next minute's run; `patch` suspends it; `get cj` has
//! kubectl's columns.
//!
//! Both CronJobs run side by side in one cluster, so the test takes at
//! most two scheduled minutes (about 2 min).

mod cluster;

use std::collections::BTreeSet;
use std::time::Duration;

use cluster::{ok, Cluster, BUSYBOX};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

/// A scheduled minute, the pod start and a little slack.
const MINUTE: Duration = Duration::from_secs(90);

fn is_complete(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
}

/// The Jobs the CronJob `cj` controls.
async fn jobs_of(client: &Client, cj: &str) -> Vec<Job> {
    Api::<Job>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|j| {
            j.owner_references()
                .iter()
                .any(|r| r.kind == "CronJob" && r.name == cj && r.controller == Some(true))
        })
        .collect()
}

async fn pods_of_job(client: &Client, job: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
        .await
        .unwrap()
        .items
}

async fn has_event(client: &Client, name: &str, reason: &str) -> bool {
    Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .any(|e| {
            e.involved_object.name.as_deref() == Some(name) && e.reason.as_deref() == Some(reason)
        })
}

const SLEEPER: &str = r#"apiVersion: batch/v1
kind: CronJob
metadata:
  name: sleeper
spec:
  schedule: "*/1 * * * *"
  concurrencyPolicy: Forbid
  jobTemplate:
    spec:
      template:
        spec:
          terminationGracePeriodSeconds: 1
          restartPolicy: Never
          containers:
          - name: sleep
            image: IMAGE
            command: ["sleep", "600"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cronjobs_run_on_schedule_on_docker() {
    let c = Cluster::start();
    let client = c.client().await;
    let seed = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/cronjob.yaml");
    assert_eq!(
        ok(c.bosun().args(["apply", "-f", seed])).trim(),
        "cronjob.batch/hello created"
    );
    let sleeper = c.dir.path().join("sleeper.yaml");
    std::fs::write(&sleeper, SLEEPER.replace("IMAGE", BUSYBOX)).unwrap();
    ok(c.bosun().arg("apply").arg("-f").arg(&sleeper));

    // Three runs by hand, at once: Jobs from the template.
    for i in 1..=3 {
        assert_eq!(
            ok(c.bosun().args([
                "create",
                "job",
                &format!("manual-{i}"),
                "--from=cronjob/hello"
            ]))
            .trim(),
            format!("job.batch/manual-{i} created")
        );
    }
    let manual = Api::<Job>::namespaced(client.clone(), "default")
        .get("manual-1")
        .await
        .unwrap();
    assert_eq!(
        manual.annotations()["cronjob.kubernetes.io/instantiate"],
        "manual"
    );
    c.poll("manual-1 Complete", MINUTE, || async {
        let job = Api::<Job>::namespaced(client.clone(), "default")
            .get("manual-1")
            .await
            .ok()?;
        is_complete(&job).then_some(())
    })
    .await;

    // The next minute's scheduled run: named after its minute, complete.
    let scheduled = c
        .poll("a scheduled hello Job Complete", MINUTE, || async {
            jobs_of(&client, "hello")
                .await
                .into_iter()
                .find(|j| !j.name_any().starts_with("manual-") && is_complete(j))
        })
        .await;
    let at = &scheduled.annotations()["batch.kubernetes.io/cronjob-scheduled-timestamp"];
    let at = chrono::DateTime::parse_from_rfc3339(at).expect("an RFC 3339 time");
    assert_eq!(at.timestamp() % 60, 0, "on a whole minute: {at}");
    assert_eq!(
        scheduled.name_any(),
        format!("hello-{}", at.timestamp() / 60)
    );
    let pod = pods_of_job(&client, &scheduled.name_any()).await.remove(0);
    let logs = ok(c.bosun().args(["logs", &pod.name_any()]));
    assert!(logs.contains("Hello from the Kubernetes cluster"), "{logs}");

    // Four finished Jobs, a limit of 3: the oldest goes, with its pods.
    let seen = std::sync::Mutex::new(BTreeSet::new());
    let deleted = c
        .poll("hello's history trimmed to 3", MINUTE, || {
            let client = client.clone();
            let seen = &seen;
            async move {
                let jobs = jobs_of(&client, "hello").await;
                let now: BTreeSet<String> = jobs.iter().map(|j| j.name_any()).collect();
                let mut seen = seen.lock().unwrap();
                seen.extend(now.iter().cloned());
                let complete = jobs.iter().filter(|j| is_complete(j)).count();
                let gone: Vec<String> = seen.difference(&now).cloned().collect();
                (complete == 3 && !gone.is_empty()).then_some(gone)
            }
        })
        .await;
    assert!(has_event(&client, "hello", "SuccessfulDelete").await);
    c.poll("the deleted Job's pods gone", MINUTE, || async {
        for job in &deleted {
            if !pods_of_job(&client, job).await.is_empty() {
                return None;
            }
        }
        Some(())
    })
    .await;

    let listed = ok(c.bosun().args(["get", "cj"]));
    let header: Vec<&str> = listed.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"],
        "{listed}"
    );
    let hello_row = listed.lines().find(|l| l.starts_with("hello ")).unwrap();
    assert!(
        hello_row.contains("*/1 * * * *") && hello_row.contains("<none>"),
        "{listed}"
    );

    // Forbid: while the first sleeper Job runs, the next minute's run is
    // skipped.
    c.poll("sleeper's first Job running", MINUTE, || async {
        let jobs = jobs_of(&client, "sleeper").await;
        let job = jobs.first()?;
        let pods = pods_of_job(&client, &job.name_any()).await;
        pods.iter()
            .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .then_some(())
    })
    .await;
    c.poll("sleeper's next run skipped", MINUTE, || async {
        has_event(&client, "sleeper", "JobAlreadyActive")
            .await
            .then_some(())
    })
    .await;
    assert_eq!(jobs_of(&client, "sleeper").await.len(), 1, "one Job only");
    let cj = Api::<CronJob>::namespaced(client.clone(), "default")
        .get("sleeper")
        .await
        .unwrap();
    assert_eq!(cj.status.unwrap().active.unwrap_or_default().len(), 1);

    // Suspended by a patch, as the seeds do it.
    assert_eq!(
        ok(c.bosun().args([
            "patch",
            "cronjob",
            "sleeper",
            "-p",
            r#"{"spec":{"suspend":true}}"#
        ]))
        .trim(),
        "cronjob.batch/sleeper patched"
    );
    let row = ok(c.bosun().args(["get", "cj", "sleeper", "--no-headers"]));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells.get(6..9), Some(&["<none>", "True", "1"][..]), "{row}");
}
