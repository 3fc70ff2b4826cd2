//! Unit tests of the pod worker on the recording fake runtime: sync
//! steps in order, restarts and back-off, probes and hooks, killing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::*;
use crate::config::AgentConfig;
use crate::events::PodEvent;
use crate::runtime::fake::FakeRuntime;
use serde_json::json;

fn setup(backoff: Duration) -> (Arc<FakeRuntime>, PodWorker, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let rt = Arc::new(FakeRuntime::new());
    rt.add_image("bosun.local/busybox:1.35");
    let mut cfg = AgentConfig::for_tests("n1", dir.path().to_path_buf());
    cfg.backoff_base = backoff;
    let w = PodWorker::new(rt.clone(), Arc::new(cfg));
    (rt, w, dir)
}

fn pod(spec: Value) -> Pod {
    serde_json::from_value(
        json!({"metadata": {"name": "p", "namespace": "default", "uid": "u1"},
        "spec": spec}),
    )
    .unwrap()
}

fn with_status(mut p: Pod, status: &Value) -> Pod {
    p.status = serde_json::from_value(status.clone()).unwrap();
    p
}

fn id_of(rt: &FakeRuntime, name: &str) -> String {
    rt.containers()
        .into_iter()
        .filter(|c| c.info.name == name)
        .max_by_key(|c| c.info.restart_count)
        .unwrap()
        .info
        .id
}

#[tokio::test]
async fn sandbox_first_then_app_containers() {
    let (rt, mut w, _d) = setup(Duration::from_secs(10));
    let p = pod(json!({"containers": [{"name": "a", "image": "bosun.local/busybox:1.35"}]}));
    let s = w.sync_pod(&p).await.unwrap();
    assert_eq!(
        rt.calls()
            .iter()
            .filter(|c| !c.starts_with("network"))
            .cloned()
            .collect::<Vec<_>>(),
        ["sandbox p", "create app a", "start a"]
    );
    assert_eq!(s.status_json()["phase"], "Running");
    assert!(s.status_json()["podIP"]
        .as_str()
        .unwrap()
        .starts_with("10.244."));
    let reasons: Vec<&str> = s.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, ["Pulled", "Created", "Started"]);
    // A second sync changes nothing.
    let before = rt.calls().len();
    w.sync_pod(&with_status(p, &s.status_json())).await.unwrap();
    assert_eq!(rt.calls().len(), before);
}

#[tokio::test]
async fn init_containers_run_in_order() {
    let (rt, mut w, _d) = setup(Duration::from_secs(10));
    let p = pod(json!({
        "initContainers": [{"name": "i1", "image": "bosun.local/busybox:1.35"},
                           {"name": "i2", "image": "bosun.local/busybox:1.35"}],
        "containers": [{"name": "a", "image": "bosun.local/busybox:1.35"}]}));
    let s = w.sync_pod(&p).await.unwrap();
    assert_eq!(
        bosun::printers::pod_status(&json!({"spec": p.spec, "status": s.status_json()})),
        "Init:0/2"
    );
    assert!(rt.calls().contains(&"start i1".to_string()));
    assert!(!rt.calls().contains(&"start i2".to_string()));
    rt.exit(&id_of(&rt, "i1"), 0);
    w.sync_pod(&p).await.unwrap();
    assert!(rt.calls().contains(&"start i2".to_string()));
    assert!(!rt.calls().contains(&"start a".to_string()));
    rt.exit(&id_of(&rt, "i2"), 0);
    let s = w.sync_pod(&p).await.unwrap();
    assert!(rt.calls().contains(&"start a".to_string()));
    assert_eq!(s.status_json()["phase"], "Running");
}

#[tokio::test]
async fn crash_loop_backs_off_and_counts_restarts() {
    let (rt, mut w, _d) = setup(Duration::from_millis(300));
    let p = pod(json!({"containers": [{"name": "a", "image": "bosun.local/busybox:1.35"}]}));
    w.sync_pod(&p).await.unwrap();
    rt.exit(&id_of(&rt, "a"), 1);
    // The first restart is immediate.
    let s = w.sync_pod(&p).await.unwrap();
    assert_eq!(s.status_json()["containerStatuses"][0]["restartCount"], 1);
    assert_eq!(
        s.status_json()["containerStatuses"][0]["lastState"]["terminated"]["exitCode"],
        1
    );
    rt.exit(&id_of(&rt, "a"), 1);
    // The second waits out the back-off.
    let s = w.sync_pod(&p).await.unwrap();
    assert_eq!(
        s.status_json()["containerStatuses"][0]["state"]["waiting"]["reason"],
        "CrashLoopBackOff"
    );
    assert_eq!(s.status_json()["phase"], "Running");
    assert!(s.wake_after <= Duration::from_millis(400));
    assert!(s.events.iter().any(|e| e.reason == "BackOff"));
    tokio::time::sleep(s.wake_after).await;
    let s = w.sync_pod(&p).await.unwrap();
    assert_eq!(s.status_json()["containerStatuses"][0]["restartCount"], 2);
    assert!(s.status_json()["containerStatuses"][0]["state"]["running"].is_object());
}

#[tokio::test]
async fn restart_policies() {
    for (policy, code, phase) in [
        ("Never", 1, "Failed"),
        ("OnFailure", 0, "Succeeded"),
        ("Never", 0, "Succeeded"),
    ] {
        let (rt, mut w, _d) = setup(Duration::from_secs(10));
        let p = pod(json!({"restartPolicy": policy,
            "containers": [{"name": "a", "image": "bosun.local/busybox:1.35"}]}));
        w.sync_pod(&p).await.unwrap();
        rt.exit(&id_of(&rt, "a"), code);
        let s = w.sync_pod(&p).await.unwrap();
        assert_eq!(s.status_json()["phase"], phase, "{policy} exit {code}");
        assert_eq!(s.status_json()["containerStatuses"][0]["restartCount"], 0);
    }
}

#[tokio::test]
async fn missing_image_with_never_and_failed_pull() {
    let (_rt, mut w, _d) = setup(Duration::from_secs(10));
    let p = pod(json!({"containers": [
        {"name": "a", "image": "nothere:1", "imagePullPolicy": "Never"},
        {"name": "b", "image": "elsewhere:1", "imagePullPolicy": "IfNotPresent"}]}));
    let s = w.sync_pod(&p).await.unwrap();
    assert_eq!(
        s.status_json()["containerStatuses"][0]["state"]["waiting"]["reason"],
        "ErrImageNeverPull"
    );
    assert_eq!(
        s.status_json()["containerStatuses"][1]["state"]["waiting"]["reason"],
        "ErrImagePull"
    );
    let s = w.sync_pod(&p).await.unwrap();
    assert_eq!(
        s.status_json()["containerStatuses"][1]["state"]["waiting"]["reason"],
        "ImagePullBackOff"
    );
    assert_eq!(s.status_json()["phase"], "Pending");
}

#[tokio::test]
async fn dead_sandbox_recreates_the_pod() {
    let (rt, mut w, _d) = setup(Duration::from_secs(10));
    let p = pod(json!({"containers": [{"name": "a", "image": "bosun.local/busybox:1.35"}]}));
    w.sync_pod(&p).await.unwrap();
    rt.exit(&id_of(&rt, "POD"), 137);
    let s = w.sync_pod(&p).await.unwrap();
    assert!(s.events.iter().any(|e| e.reason == "SandboxChanged"));
    let live: Vec<_> = rt.containers().into_iter().map(|c| c.info.name).collect();
    assert_eq!(
        live.len(),
        2,
        "one new sandbox and one new app container: {live:?}"
    );
    assert_eq!(s.status_json()["containerStatuses"][0]["restartCount"], 1);
}

/// Syncs whenever the worker's probes wake it until `check` holds;
/// returns the last result and every event recorded on the way.
async fn sync_until(
    w: &mut PodWorker,
    p: &Pod,
    what: &str,
    check: impl Fn(&Synced) -> bool,
) -> (Synced, Vec<PodEvent>) {
    let wake = w.wake_handle();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut events = Vec::new();
    loop {
        let s = w.sync_pod(p).await.unwrap();
        events.extend(s.events.iter().cloned());
        if check(&s) {
            return (s, events);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            tokio::time::timeout(left, wake.notified()).await.is_ok(),
            "timed out waiting for {what}: {:#}\nevents: {events:?}",
            s.status_json()
        );
    }
}

fn cstatus(s: &Synced) -> Value {
    s.status_json()["containerStatuses"][0].clone()
}

fn condition(s: &Synced, kind: &str) -> String {
    s.status_json()["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == kind)
        .map(|c| c["status"].as_str().unwrap().to_string())
        .unwrap()
}

#[tokio::test]
async fn failed_liveness_kills_and_restarts_the_container() {
    let (rt, mut w, _d) = setup(Duration::from_secs(10));
    let p = pod(json!({"terminationGracePeriodSeconds": 3, "containers": [{
        "name": "a", "image": "bosun.local/busybox:1.35",
        "livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]},
                          "periodSeconds": 1, "failureThreshold": 1}}]}));
    let s = w.sync_pod(&p).await.unwrap();
    assert_eq!(
        cstatus(&s)["ready"],
        true,
        "no readiness probe: ready once running"
    );
    let first = id_of(&rt, "a");
    rt.set_exec_result(&first, 1);
    let (s, events) =
        sync_until(&mut w, &p, "a restart", |s| cstatus(s)["restartCount"] == 1).await;
    let reasons: Vec<&str> = events.iter().map(|e| e.reason).collect();
    let unhealthy = events.iter().position(|e| e.reason == "Unhealthy").unwrap();
    let killing = events.iter().position(|e| e.reason == "Killing").unwrap();
    assert!(unhealthy < killing, "{reasons:?}");
    assert!(events[unhealthy]
        .message
        .starts_with("Liveness probe failed: "));
    assert_eq!(
        events[killing].message,
        "Container a failed liveness probe, will be restarted"
    );
    assert_eq!(
        events[killing].field_path.as_deref(),
        Some("spec.containers{a}")
    );
    assert!(
        reasons.ends_with(&["Killing", "Pulled", "Created", "Started"]),
        "{reasons:?}"
    );
    assert_eq!(s.status_json()["phase"], "Running");
    assert!(cstatus(&s)["state"]["running"].is_object());
    assert_eq!(cstatus(&s)["lastState"]["terminated"]["exitCode"], 137);
    let calls = rt.calls();
    let stop = calls.iter().position(|c| c == "stop a").unwrap();
    assert_eq!(calls[stop + 1..stop + 3], ["create app a", "start a"]);
    // The new instance is probed afresh (and is healthy).
    let second = id_of(&rt, "a");
    assert_ne!(first, second);
    let probed = |id: &str| {
        rt.calls()
            .iter()
            .filter(|c| c.starts_with(&format!("exec {id} ")))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while probed(&second) == 0 {
        assert!(
            Instant::now() < deadline,
            "the new instance is never probed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let s = w.sync_pod(&p).await.unwrap();
    assert_eq!(cstatus(&s)["restartCount"], 1);
    assert!(!s.events.iter().any(|e| e.reason == "Killing"));
}

#[tokio::test]
async fn readiness_drives_ready_and_conditions_without_restarts() {
    let (rt, mut w, _d) = setup(Duration::from_secs(10));
    let p = pod(json!({"containers": [{
        "name": "a", "image": "bosun.local/busybox:1.35",
        "readinessProbe": {"exec": {"command": ["ready"]},
                           "periodSeconds": 1, "failureThreshold": 1}}]}));
    let s = w.sync_pod(&p).await.unwrap();
    assert_eq!(s.status_json()["phase"], "Running");
    assert_eq!(
        cstatus(&s)["ready"],
        false,
        "not ready before the first probe"
    );
    assert_eq!(cstatus(&s)["started"], true);
    assert_eq!(condition(&s, "Ready"), "False");
    assert_eq!(condition(&s, "ContainersReady"), "False");
    let (s, _) = sync_until(&mut w, &p, "ready", |s| cstatus(s)["ready"] == true).await;
    assert_eq!(condition(&s, "Ready"), "True");
    assert_eq!(condition(&s, "ContainersReady"), "True");
    rt.set_exec_result(&id_of(&rt, "a"), 1);
    let (s, events) = sync_until(&mut w, &p, "not ready", |s| cstatus(s)["ready"] == false).await;
    assert_eq!(condition(&s, "Ready"), "False");
    assert!(events
        .iter()
        .any(|e| e.reason == "Unhealthy" && e.message.starts_with("Readiness probe failed")));
    assert!(!events.iter().any(|e| e.reason == "Killing"));
    assert_eq!(cstatus(&s)["restartCount"], 0);
    assert!(!rt.calls().contains(&"stop a".to_string()));
}

#[tokio::test]
async fn startup_probe_holds_started_and_ready() {
    let (rt, mut w, _d) = setup(Duration::from_secs(10));
    let p = pod(json!({"containers": [{
        "name": "a", "image": "bosun.local/busybox:1.35",
        "startupProbe": {"exec": {"command": ["started"]},
                         "periodSeconds": 1, "failureThreshold": 30}}]}));
    let s = w.sync_pod(&p).await.unwrap();
    rt.set_exec_result(&id_of(&rt, "a"), 1);
    assert_eq!(cstatus(&s)["started"], false);
    assert_eq!(cstatus(&s)["ready"], false);
    assert_eq!(s.status_json()["phase"], "Running");
    // Let it fail once, then pass.
    let (s, _) = sync_until(&mut w, &p, "a failed startup probe", |s| {
        s.events.iter().any(|e| e.reason == "Unhealthy")
    })
    .await;
    assert_eq!(cstatus(&s)["started"], false);
    rt.set_exec_result(&id_of(&rt, "a"), 0);
    let (s, _) = sync_until(&mut w, &p, "started", |s| cstatus(s)["started"] == true).await;
    assert_eq!(
        cstatus(&s)["ready"],
        true,
        "no readiness probe: ready once started"
    );
    assert_eq!(condition(&s, "Ready"), "True");
}

#[tokio::test]
async fn post_start_holds_the_container_and_its_failure_restarts_it() {
    let (rt, mut w, _d) = setup(Duration::from_secs(10));
    let p = pod(json!({"containers": [{
        "name": "a", "image": "bosun.local/busybox:1.35",
        "lifecycle": {"postStart": {"exec": {"command": ["hook"]}}}}]}));
    let s = w.sync_pod(&p).await.unwrap();
    let first = id_of(&rt, "a");
    rt.set_exec_result(&first, 1);
    // Not running until the hook is done.
    assert_eq!(
        cstatus(&s)["state"]["waiting"]["reason"],
        "ContainerCreating"
    );
    assert_eq!(s.status_json()["phase"], "Pending");
    let (_, events) =
        sync_until(&mut w, &p, "a restart", |s| cstatus(s)["restartCount"] == 1).await;
    let failed = events
        .iter()
        .find(|e| e.reason == "FailedPostStartHook")
        .expect("a FailedPostStartHook event");
    assert!(
        failed.message.contains("Exec lifecycle hook ([hook])")
            && failed.message.contains("Container \"a\""),
        "{}",
        failed.message
    );
    assert!(events
        .iter()
        .any(|e| e.reason == "Killing" && e.message == "FailedPostStartHook"));
    // The new instance runs its hook again; it passes this time.
    let (s, _) = sync_until(&mut w, &p, "running", |s| {
        cstatus(s)["state"]["running"].is_object()
    })
    .await;
    assert_eq!(s.status_json()["phase"], "Running");
    let second = id_of(&rt, "a");
    assert!(rt.calls().contains(&format!("exec {second} hook")));
    // A sync that finds the instance running does not run the hook again.
    let hooks = rt.calls().iter().filter(|c| c.ends_with(" hook")).count();
    w.sync_pod(&p).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        rt.calls().iter().filter(|c| c.ends_with(" hook")).count(),
        hooks
    );
}

#[tokio::test]
async fn kill_pod_runs_pre_stop_before_the_stop_signal() {
    let (rt, mut w, _d) = setup(Duration::from_secs(10));
    let p = pod(json!({"containers": [
        {"name": "a", "image": "bosun.local/busybox:1.35",
         "lifecycle": {"preStop": {"exec": {"command": ["drain"]}}}},
        {"name": "b", "image": "bosun.local/busybox:1.35",
         "lifecycle": {"preStop": {"exec": {"command": ["fails"]}}}}]}));
    w.sync_pod(&p).await.unwrap();
    let a = id_of(&rt, "a");
    rt.set_exec_result(&id_of(&rt, "b"), 1);
    let events = w.kill_pod(&p, Duration::from_secs(5)).await.unwrap();
    let calls = rt.calls();
    let hook = calls
        .iter()
        .position(|c| *c == format!("exec {a} drain"))
        .unwrap();
    let stop = calls.iter().position(|c| c == "stop a").unwrap();
    assert!(hook < stop, "{calls:?}");
    // A failed hook is reported and the container is stopped anyway.
    assert!(events.iter().any(|e| e.reason == "FailedPreStopHook"
        && e.field_path.as_deref() == Some("spec.containers{b}")));
    assert!(calls.contains(&"stop b".to_string()));
    assert!(rt.containers().is_empty());
}

#[tokio::test]
async fn kill_pod_removes_everything() {
    let (rt, mut w, dir) = setup(Duration::from_secs(10));
    let p = pod(
        json!({"containers": [{"name": "a", "image": "bosun.local/busybox:1.35",
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
        "volumes": [{"name": "scratch", "emptyDir": {}}]}),
    );
    w.sync_pod(&p).await.unwrap();
    assert!(dir
        .path()
        .join("pods/u1/volumes/empty-dir/scratch")
        .is_dir());
    let events = w.kill_pod(&p, Duration::from_secs(1)).await.unwrap();
    assert_eq!(events[0].reason, "Killing");
    assert!(rt.containers().is_empty());
    assert!(!dir.path().join("pods/u1").exists());
}

#[tokio::test]
async fn a_stopped_pod_reports_its_terminal_status_before_its_containers_go() {
    let (rt, mut w, _d) = setup(Duration::from_secs(10));
    let p = pod(json!({"containers": [{"name": "a", "image": "bosun.local/busybox:1.35"}]}));
    let s = w.sync_pod(&p).await.unwrap();
    let p = with_status(p, &s.status_json());
    w.stop_pod(&p, Duration::from_secs(1)).await.unwrap();
    // Stopped, not yet removed: the exit code is still there to report.
    assert!(!rt.containers().is_empty());
    let terminal = w.terminal_status(&p).await.unwrap().unwrap();
    let t = crate::status::to_json(&terminal);
    assert_eq!(t["phase"], "Failed");
    assert_eq!(
        t["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        137
    );
    let ready = t["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap();
    assert_eq!(ready["status"], "False");
    assert_eq!(t["podIP"], s.status_json()["podIP"]);
    w.remove_pod(&p).await.unwrap();
    assert!(rt.containers().is_empty());
    // A pod that had finished keeps the status it has.
    let done = with_status(p, &json!({"phase": "Succeeded"}));
    assert!(w.terminal_status(&done).await.unwrap().is_none());
}
