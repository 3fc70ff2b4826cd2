//! A pod's status from its containers, by Kubernetes' rules: each
//! container's state (waiting, running, terminated) with its last state
//! and restart count, the pod's phase, and its conditions, as the typed
//! [`PodStatus`]; [`to_json`] is what the status manager writes.

pub mod status_manager;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{
    Container, ContainerState as State, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use crate::runtime::{ContainerInfo, ContainerState};

/// A time as the API has it (whole seconds).
fn ts(t: DateTime<Utc>) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(t.timestamp()).unwrap_or_default())
}

/// The status as JSON, as the kubelet writes it: a condition's unset
/// `lastProbeTime` is `null` (Go's zero `metav1.Time`), not left out.
pub fn to_json(status: &PodStatus) -> Value {
    let mut v = serde_json::to_value(status).unwrap_or_else(|_| Value::Object(Default::default()));
    for c in v["conditions"].as_array_mut().into_iter().flatten() {
        if let Some(c) = c.as_object_mut() {
            c.entry("lastProbeTime").or_insert(Value::Null);
        }
    }
    v
}

/// Why a container is waiting, when the agent knows better than "it has
/// not been created yet" (CrashLoopBackOff, ErrImagePull, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub reason: String,
    pub message: String,
}

/// Everything the status is computed from.
pub struct Observed<'a> {
    pub pod: &'a Pod,
    /// The pod's containers (every instance, any state), sandbox excluded.
    pub containers: &'a [ContainerInfo],
    /// Waiting reasons the worker set, by container name.
    pub waiting: &'a BTreeMap<String, Waiting>,
    /// Readiness by container name (absent = no readiness probe).
    pub ready: &'a BTreeMap<String, bool>,
    /// Startup probe passed, by container name (absent = no startup probe).
    pub started: &'a BTreeMap<String, bool>,
    pub pod_ip: Option<String>,
    pub host_ip: String,
    /// Set when the pod failed as a whole (e.g. an init container failed
    /// with restartPolicy Never).
    pub failed: Option<(String, String)>,
    /// The pod is being deleted and its containers have been stopped: it
    /// gets a terminal phase whatever its restartPolicy (the kubelet's
    /// `podIsTerminal`, since 1.27), and a container that never ran is
    /// reported terminated with ContainerStatusUnknown (its `TerminatePod`).
    pub terminal: bool,
    pub now: DateTime<Utc>,
}

/// The newest instance of each container name, and the one before it.
fn instances<'a>(
    containers: &'a [ContainerInfo],
    name: &str,
) -> (Option<&'a ContainerInfo>, Option<&'a ContainerInfo>) {
    let mut mine: Vec<&ContainerInfo> = containers.iter().filter(|c| c.name == name).collect();
    mine.sort_by_key(|c| (c.restart_count, c.created_at));
    let latest = mine.pop();
    (latest, mine.pop())
}

fn terminated(c: &ContainerInfo) -> State {
    let code = c.exit_code.unwrap_or(0);
    let reason = c
        .reason
        .clone()
        .unwrap_or_else(|| if code == 0 { "Completed" } else { "Error" }.into());
    State {
        terminated: Some(ContainerStateTerminated {
            exit_code: code as i32,
            reason: Some(reason),
            started_at: c.started_at.map(ts),
            finished_at: c.finished_at.map(ts),
            container_id: Some(format!("docker://{}", c.id)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn waiting(reason: &str, message: &str) -> State {
    State {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_string()),
            message: Some(message.to_string()).filter(|m| !m.is_empty()),
        }),
        ..Default::default()
    }
}

/// The state of a container a terminated pod has no record of having
/// run, as the kubelet reports it.
fn unknown_at_termination() -> State {
    State {
        terminated: Some(ContainerStateTerminated {
            exit_code: 137,
            reason: Some("ContainerStatusUnknown".into()),
            message: Some("The container could not be located when the pod was terminated".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Whether `state` is a terminated one with exit code 0.
fn exited_ok(state: &State) -> bool {
    state.terminated.as_ref().is_some_and(|t| t.exit_code == 0)
}

/// One container's status.
fn container_status(
    spec: &Container,
    obs: &Observed<'_>,
    default_waiting: &str,
) -> (ContainerStatus, Option<&'static str>) {
    let (latest, previous) = instances(obs.containers, &spec.name);
    let waiting_override = obs.waiting.get(&spec.name);
    let mut last_state = State::default();
    let (state, class) = match (latest, waiting_override) {
        (_, Some(w)) => {
            if let Some(l) = latest.filter(|l| l.state == ContainerState::Exited) {
                last_state = terminated(l);
            }
            (waiting(&w.reason, &w.message), "waiting")
        }
        (None, None) => (waiting(default_waiting, ""), "waiting"),
        (Some(l), None) => match l.state {
            ContainerState::Running => (
                State {
                    running: Some(ContainerStateRunning {
                        started_at: l.started_at.map(ts),
                    }),
                    ..Default::default()
                },
                "running",
            ),
            ContainerState::Exited => (
                terminated(l),
                if l.exit_code == Some(0) {
                    "succeeded"
                } else {
                    "failed"
                },
            ),
            ContainerState::Created => (waiting("ContainerCreating", ""), "waiting"),
            ContainerState::Unknown => (waiting("Unknown", ""), "unknown"),
        },
    };
    if last_state == State::default() {
        if let Some(p) = previous.filter(|p| p.state == ContainerState::Exited) {
            last_state = terminated(p);
        }
    }
    let running = class == "running";
    let started = running && obs.started.get(&spec.name).copied().unwrap_or(true);
    let ready = started && obs.ready.get(&spec.name).copied().unwrap_or(true);
    let class = match class {
        "running" => Some("running"),
        "succeeded" => Some("succeeded"),
        "failed" => Some("failed"),
        "unknown" => Some("unknown"),
        // A container waiting to restart after a failure counts as stopped.
        _ if last_state.terminated.is_some() => {
            if exited_ok(&last_state) {
                Some("succeeded")
            } else {
                Some("failed")
            }
        }
        _ => None,
    };
    let status = ContainerStatus {
        name: spec.name.clone(),
        state: Some(state),
        last_state: Some(last_state),
        ready,
        started: Some(started),
        restart_count: latest.map(|l| l.restart_count as i32).unwrap_or(0),
        image: spec.image.clone().unwrap_or_default(),
        image_id: latest.map(|l| l.image_id.clone()).unwrap_or_default(),
        container_id: latest.map(|l| format!("docker://{}", l.id)),
        ..Default::default()
    };
    (status, class)
}

fn condition(
    previous: &[PodCondition],
    kind: &str,
    ok: bool,
    reason: Option<&str>,
    now: DateTime<Utc>,
) -> PodCondition {
    let status = if ok { "True" } else { "False" };
    let since = previous
        .iter()
        .find(|c| c.type_ == kind && c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| ts(now));
    PodCondition {
        type_: kind.to_string(),
        status: status.to_string(),
        last_transition_time: Some(since),
        reason: reason.filter(|_| !ok).map(String::from),
        ..Default::default()
    }
}

/// The pod's status.
pub fn pod_status(obs: &Observed<'_>) -> PodStatus {
    let spec = obs.pod.spec.clone().unwrap_or_default();
    let previous = obs.pod.status.clone().unwrap_or_default();
    let prev_conditions = previous.conditions.clone().unwrap_or_default();
    let restart_policy = spec.restart_policy.as_deref().unwrap_or("Always");

    let inits = spec.init_containers.clone().unwrap_or_default();
    let mut init_statuses = Vec::new();
    let mut initialized = true;
    let mut init_failed_for_good = false;
    for c in &inits {
        let (s, class) = container_status(c, obs, "PodInitializing");
        if !s.state.as_ref().is_some_and(exited_ok) {
            initialized = false;
            if class == Some("failed") && restart_policy == "Never" {
                init_failed_for_good = true;
            }
        }
        init_statuses.push(s);
    }
    let app_default = if initialized {
        "ContainerCreating"
    } else {
        "PodInitializing"
    };
    let (mut running, mut waiting, mut stopped, mut succeeded, mut unknown) = (0, 0, 0, 0, 0);
    let mut statuses = Vec::new();
    let mut all_ready = true;
    for c in &spec.containers {
        let (s, class) = container_status(c, obs, app_default);
        all_ready &= s.ready;
        match class {
            Some("running") => running += 1,
            Some("succeeded") => {
                stopped += 1;
                succeeded += 1
            }
            Some("failed") => stopped += 1,
            Some("unknown") => unknown += 1,
            _ => waiting += 1,
        }
        statuses.push(s);
    }
    let phase = if obs.failed.is_some() || init_failed_for_good {
        "Failed"
    } else if !initialized || waiting > 0 {
        "Pending"
    } else if running > 0 && unknown == 0 {
        "Running"
    } else if running == 0 && stopped > 0 && unknown == 0 {
        if obs.terminal {
            if stopped == succeeded {
                "Succeeded"
            } else {
                "Failed"
            }
        } else if restart_policy == "Always" {
            "Running"
        } else if stopped == succeeded {
            "Succeeded"
        } else if restart_policy == "Never" {
            "Failed"
        } else {
            "Running"
        }
    } else if running == 0 && stopped == 0 && unknown == 0 {
        "Pending"
    } else {
        "Unknown"
    };
    // A deleted pod whose containers are stopped is terminal: what never
    // ran (or still waits) failed, as the kubelet's `TerminatePod` says.
    let ended = phase == "Succeeded" || phase == "Failed";
    let phase = if obs.terminal && running == 0 && !ended {
        for s in &mut statuses {
            if s.state.as_ref().is_none_or(|st| st.terminated.is_none()) {
                s.state = Some(unknown_at_termination());
                s.ready = false;
                s.started = Some(false);
            }
        }
        "Failed"
    } else {
        phase
    };

    let containers_ready = all_ready && running == spec.containers.len();
    let ready_reason = if containers_ready {
        None
    } else if phase == "Succeeded" || phase == "Failed" {
        Some("PodCompleted")
    } else {
        Some("ContainersNotReady")
    };
    let init_reason = if phase == "Succeeded" || phase == "Failed" {
        "PodCompleted"
    } else {
        "ContainersNotInitialized"
    };
    let conditions = vec![
        condition(
            &prev_conditions,
            "PodReadyToStartContainers",
            obs.pod_ip.is_some(),
            None,
            obs.now,
        ),
        condition(
            &prev_conditions,
            "Initialized",
            initialized,
            Some(init_reason),
            obs.now,
        ),
        condition(
            &prev_conditions,
            "Ready",
            containers_ready,
            ready_reason,
            obs.now,
        ),
        condition(
            &prev_conditions,
            "ContainersReady",
            containers_ready,
            ready_reason,
            obs.now,
        ),
        condition(&prev_conditions, "PodScheduled", true, None, obs.now),
    ];
    // Ephemeral containers count for neither phase nor readiness; they
    // are never ready, and no probe says they started.
    let ephemeral_statuses: Vec<ContainerStatus> = crate::spec::ephemeral_containers(obs.pod)
        .iter()
        .map(|(c, _)| {
            let (mut s, _) = container_status(c, obs, "ContainerCreating");
            s.ready = false;
            s.started = None;
            s
        })
        .collect();
    let start_time = previous.start_time.clone().unwrap_or_else(|| ts(obs.now));
    let (reason, message) = obs.failed.clone().unzip();
    PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions),
        host_ip: Some(obs.host_ip.clone()),
        host_ips: Some(vec![HostIP {
            ip: obs.host_ip.clone(),
        }]),
        start_time: Some(start_time),
        container_statuses: Some(statuses),
        init_container_statuses: Some(init_statuses).filter(|_| !inits.is_empty()),
        ephemeral_container_statuses: Some(ephemeral_statuses).filter(|s| !s.is_empty()),
        qos_class: Some(previous.qos_class.unwrap_or_else(|| "BestEffort".into())),
        pod_ip: obs.pod_ip.clone(),
        pod_ips: obs.pod_ip.clone().map(|ip| vec![PodIP { ip }]),
        reason,
        message,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{PodRef, Role};
    use serde_json::json;

    fn pod(spec: Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": spec}),
        )
        .unwrap()
    }

    fn container(
        name: &str,
        state: ContainerState,
        exit: Option<i64>,
        restarts: u32,
    ) -> ContainerInfo {
        ContainerInfo {
            id: format!("{name}-{restarts}"),
            pod: PodRef {
                namespace: "default".into(),
                name: "p".into(),
                uid: "u".into(),
            },
            role: Role::App,
            name: name.into(),
            state,
            exit_code: exit,
            reason: None,
            created_at: Some(Utc::now()),
            started_at: Some(Utc::now()),
            finished_at: exit.map(|_| Utc::now()),
            image: "busybox".into(),
            image_id: "sha256:1".into(),
            restart_count: restarts,
            spec_hash: String::new(),
            ip: None,
        }
    }

    fn status_of(spec: Value, containers: &[ContainerInfo], waiting: &[(&str, &str)]) -> Value {
        observe(spec, containers, waiting, false)
    }

    /// The status of a deleted pod whose containers have been stopped.
    fn terminal_status_of(spec: Value, containers: &[ContainerInfo]) -> Value {
        observe(spec, containers, &[], true)
    }

    fn observe(
        spec: Value,
        containers: &[ContainerInfo],
        waiting: &[(&str, &str)],
        terminal: bool,
    ) -> Value {
        let pod = pod(spec);
        let waiting: BTreeMap<String, Waiting> = waiting
            .iter()
            .map(|(n, r)| {
                (
                    n.to_string(),
                    Waiting {
                        reason: r.to_string(),
                        message: String::new(),
                    },
                )
            })
            .collect();
        to_json(&pod_status(&Observed {
            pod: &pod,
            containers,
            waiting: &waiting,
            ready: &BTreeMap::new(),
            started: &BTreeMap::new(),
            pod_ip: Some("10.244.0.2".into()),
            host_ip: "192.168.1.10".into(),
            failed: None,
            terminal,
            now: Utc::now(),
        }))
    }

    fn one(policy: &str) -> Value {
        json!({"restartPolicy": policy, "containers": [{"name": "a", "image": "busybox"}]})
    }

    fn two(policy: &str) -> Value {
        json!({"restartPolicy": policy,
            "containers": [{"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}]})
    }

    #[test]
    fn phases_follow_the_seeds_rules() {
        let run = container("a", ContainerState::Running, None, 0);
        assert_eq!(
            status_of(one("Always"), std::slice::from_ref(&run), &[])["phase"],
            "Running"
        );
        let failed = container("a", ContainerState::Exited, Some(1), 0);
        assert_eq!(
            status_of(one("Never"), std::slice::from_ref(&failed), &[])["phase"],
            "Failed"
        );
        let ok = container("a", ContainerState::Exited, Some(0), 0);
        assert_eq!(
            status_of(one("OnFailure"), std::slice::from_ref(&ok), &[])["phase"],
            "Succeeded"
        );
        assert_eq!(status_of(one("Never"), &[ok], &[])["phase"], "Succeeded");
        // A crash-looping container keeps the pod Running.
        let s = status_of(
            one("Always"),
            std::slice::from_ref(&failed),
            &[("a", "CrashLoopBackOff")],
        );
        assert_eq!(s["phase"], "Running");
        assert_eq!(
            s["containerStatuses"][0]["state"]["waiting"]["reason"],
            "CrashLoopBackOff"
        );
        assert_eq!(
            s["containerStatuses"][0]["lastState"]["terminated"]["exitCode"],
            1
        );
        // Two containers, one failed for good, one running: Running.
        let b = container("b", ContainerState::Running, None, 0);
        assert_eq!(
            status_of(two("Never"), &[failed, b], &[])["phase"],
            "Running"
        );
        // Nothing created yet: Pending, ContainerCreating.
        let s = status_of(one("Always"), &[], &[]);
        assert_eq!(s["phase"], "Pending");
        assert_eq!(
            s["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
    }

    fn condition_of<'a>(status: &'a Value, kind: &str) -> &'a Value {
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == kind)
            .unwrap()
    }

    #[test]
    fn a_deleted_pod_whose_containers_stopped_is_terminal_and_not_ready() {
        // SIGKILLed at the end of the grace period: Failed whatever the
        // restartPolicy, where a live pod with Always would be Running.
        let killed = container("a", ContainerState::Exited, Some(137), 0);
        let live = status_of(one("Always"), std::slice::from_ref(&killed), &[]);
        assert_eq!(live["phase"], "Running");
        let s = terminal_status_of(one("Always"), std::slice::from_ref(&killed));
        assert_eq!(s["phase"], "Failed");
        let c = &s["containerStatuses"][0];
        assert_eq!(c["state"]["terminated"]["exitCode"], 137);
        assert_eq!(c["state"]["terminated"]["reason"], "Error");
        assert_eq!(c["ready"], false);
        for kind in ["Ready", "ContainersReady"] {
            let cond = condition_of(&s, kind);
            assert_eq!(cond["status"], "False", "{kind}");
            assert_eq!(cond["reason"], "PodCompleted", "{kind}");
        }
        // Every container exited 0 on SIGTERM: Succeeded.
        let ok = container("a", ContainerState::Exited, Some(0), 0);
        assert_eq!(
            terminal_status_of(one("Always"), &[ok])["phase"],
            "Succeeded"
        );
        // A container that never ran is reported as the kubelet does.
        let s = terminal_status_of(one("Always"), &[]);
        assert_eq!(s["phase"], "Failed");
        let t = &s["containerStatuses"][0]["state"]["terminated"];
        assert_eq!(t["reason"], "ContainerStatusUnknown");
        assert_eq!(t["exitCode"], 137);
        // One that still runs keeps the pod Running (never terminal with a
        // live container).
        let run = container("a", ContainerState::Running, None, 0);
        assert_eq!(
            terminal_status_of(one("Always"), &[run])["phase"],
            "Running"
        );
    }

    #[test]
    fn restarts_and_last_state() {
        let old = container("a", ContainerState::Exited, Some(137), 0);
        let new = container("a", ContainerState::Running, None, 1);
        let s = status_of(one("Always"), &[old, new], &[]);
        let c = &s["containerStatuses"][0];
        assert_eq!(c["restartCount"], 1);
        assert_eq!(c["ready"], true);
        assert!(c["state"]["running"].is_object());
        assert_eq!(c["lastState"]["terminated"]["exitCode"], 137);
        assert_eq!(c["lastState"]["terminated"]["reason"], "Error");
        let ready = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready["status"], "True");
    }

    #[test]
    fn init_containers_gate_the_pod() {
        let spec = json!({"restartPolicy": "Always",
            "initContainers": [{"name": "i1", "image": "busybox"}, {"name": "i2", "image": "busybox"}],
            "containers": [{"name": "a", "image": "busybox"}]});
        let mut i1 = container("i1", ContainerState::Running, None, 0);
        i1.role = Role::Init;
        let s = status_of(spec.clone(), &[i1.clone()], &[]);
        assert_eq!(s["phase"], "Pending");
        assert_eq!(
            s["containerStatuses"][0]["state"]["waiting"]["reason"],
            "PodInitializing"
        );
        assert_eq!(
            bosun::printers::pod_status(&json!({"spec": spec, "status": s})),
            "Init:0/2"
        );
        let never = json!({"restartPolicy": "Never",
            "initContainers": [{"name": "i1", "image": "busybox"}],
            "containers": [{"name": "a", "image": "busybox"}]});
        let mut bad = container("i1", ContainerState::Exited, Some(2), 0);
        bad.role = Role::Init;
        assert_eq!(status_of(never, &[bad], &[])["phase"], "Failed");
    }
}
