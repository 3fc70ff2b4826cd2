//! The Pod printer: kubectl's printPod, whose STATUS logic the node agent shares
//! ([`pod_status`]).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::{age_cell, human_age};
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{array_at, has_condition, int_at, non_empty_or, str_at, time_at};

pub(super) const POD: KindPrinter = KindPrinter {
    group: "",
    kind: "Pod",
    columns: &[
        NAME,
        Column::text("Ready", "The aggregate readiness state of this pod for accepting traffic."),
        Column::text("Status", "The aggregate status of the containers in this pod."),
        Column::text("Restarts", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
        AGE,
        Column::text("IP", "IP address allocated to the pod.").wide(),
        Column::text("Node", "NodeName is the node the pod is bound to.").wide(),
        Column::text("Nominated Node", "nominatedNodeName is set when this pod preempts other pods on the node.").wide(),
        Column::text("Readiness Gates", "If specified, all readiness gates will be evaluated for pod readiness.").wide(),
    ],
    cells: pod_cells,
};

fn pod_cells(pod: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let p = summarize_pod(pod);
    let restarts = match p.last_restart {
        Some(t) if p.restarts != 0 => format!("{} ({} ago)", p.restarts, human_age(t, now)),
        _ => p.restarts.to_string(),
    };
    let ip = array_at(pod, "/status/podIPs")
        .first()
        .map(|x| str_at(x, "/ip"))
        .filter(|x| !x.is_empty())
        .unwrap_or_else(|| str_at(pod, "/status/podIP"));
    let gates = array_at(pod, "/spec/readinessGates");
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conditions = array_at(pod, "/status/conditions");
        let true_count = gates
            .iter()
            .filter(|g| {
                let t = str_at(g, "/conditionType");
                conditions
                    .iter()
                    .find(|c| str_at(c, "/type") == t)
                    .is_some_and(|c| str_at(c, "/status") == "True")
            })
            .count();
        format!("{true_count}/{}", gates.len())
    };
    vec![
        str_at(pod, "/metadata/name").into(),
        format!("{}/{}", p.ready, p.total).into(),
        p.reason.into(),
        restarts.into(),
        age_cell(pod, now),
        non_empty_or(ip, "<none>").into(),
        non_empty_or(str_at(pod, "/spec/nodeName"), "<none>").into(),
        non_empty_or(str_at(pod, "/status/nominatedNodeName"), "<none>").into(),
        readiness_gates.into(),
    ]
}

/// kubectl's STATUS column for a pod (Running, Completed, Error, CrashLoopBackOff,
/// ImagePullBackOff, ContainerCreating, Pending, Init:0/2, Init:Error, PodInitializing,
/// Terminating, Unknown, or the pod's `status.reason` such as Evicted), following kubectl's
/// printPod logic.
pub fn pod_status(pod: &Value) -> String {
    summarize_pod(pod).reason
}

struct PodSummary {
    ready: usize,
    total: usize,
    reason: String,
    restarts: i64,
    last_restart: Option<DateTime<Utc>>,
}

fn is_restartable_init(pod: &Value, name: &str) -> bool {
    array_at(pod, "/spec/initContainers")
        .iter()
        .any(|c| str_at(c, "/name") == name && str_at(c, "/restartPolicy") == "Always")
}

fn later(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// kubectl's printPod logic.
fn summarize_pod(pod: &Value) -> PodSummary {
    let mut restarts = 0;
    let mut restartable_init_restarts = 0;
    let mut total = array_at(pod, "/spec/containers").len();
    let mut ready = 0;
    let mut last_restart: Option<DateTime<Utc>> = None;
    let mut last_restartable_init_restart: Option<DateTime<Utc>> = None;

    let phase = str_at(pod, "/status/phase");
    let mut reason = non_empty_or(str_at(pod, "/status/reason"), phase).to_string();
    for cond in array_at(pod, "/status/conditions") {
        if str_at(cond, "/type") == "PodScheduled" && str_at(cond, "/reason") == "SchedulingGated" {
            reason = "SchedulingGated".to_string();
        }
    }

    let init_specs = array_at(pod, "/spec/initContainers");
    total += init_specs
        .iter()
        .filter(|c| str_at(c, "/restartPolicy") == "Always")
        .count();

    let mut initializing = false;
    for (idx, cs) in array_at(pod, "/status/initContainerStatuses")
        .iter()
        .enumerate()
    {
        let name = str_at(cs, "/name");
        let finished = time_at(cs, "/lastState/terminated/finishedAt");
        restarts += int_at(cs, "/restartCount");
        last_restart = later(last_restart, finished);
        let restartable = is_restartable_init(pod, name);
        if restartable {
            restartable_init_restarts += int_at(cs, "/restartCount");
            last_restartable_init_restart = later(last_restartable_init_restart, finished);
        }
        let terminated = cs.pointer("/state/terminated").filter(|v| v.is_object());
        let waiting_reason = str_at(cs, "/state/waiting/reason");
        if terminated.is_some_and(|t| int_at(t, "/exitCode") == 0) {
            continue;
        }
        if restartable && cs.get("started").and_then(Value::as_bool) == Some(true) {
            if cs.get("ready").and_then(Value::as_bool) == Some(true) {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            let r = str_at(t, "/reason");
            reason = if !r.is_empty() {
                format!("Init:{r}")
            } else if int_at(t, "/signal") != 0 {
                format!("Init:Signal:{}", int_at(t, "/signal"))
            } else {
                format!("Init:ExitCode:{}", int_at(t, "/exitCode"))
            };
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            reason = format!("Init:{waiting_reason}");
        } else {
            reason = format!("Init:{idx}/{}", init_specs.len());
        }
        initializing = true;
        break;
    }

    if !initializing || has_condition(pod, "/status/conditions", "Initialized") {
        restarts = restartable_init_restarts;
        last_restart = last_restartable_init_restart;
        let mut has_running = false;
        for cs in array_at(pod, "/status/containerStatuses").iter().rev() {
            restarts += int_at(cs, "/restartCount");
            last_restart = later(
                last_restart,
                time_at(cs, "/lastState/terminated/finishedAt"),
            );
            let waiting_reason = str_at(cs, "/state/waiting/reason");
            let terminated = cs.pointer("/state/terminated").filter(|v| v.is_object());
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                let r = str_at(t, "/reason");
                reason = if !r.is_empty() {
                    r.to_string()
                } else if int_at(t, "/signal") != 0 {
                    format!("Signal:{}", int_at(t, "/signal"))
                } else {
                    format!("ExitCode:{}", int_at(t, "/exitCode"))
                };
            } else if cs.get("ready").and_then(Value::as_bool) == Some(true)
                && cs.pointer("/state/running").is_some_and(Value::is_object)
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if has_condition(pod, "/status/conditions", "Ready") {
                "Running".to_string()
            } else {
                "NotReady".to_string()
            };
        }
    }

    let deleting = pod
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null());
    if deleting && str_at(pod, "/status/reason") == "NodeLost" {
        reason = "Unknown".to_string();
    } else if deleting && phase != "Failed" && phase != "Succeeded" {
        reason = "Terminating".to_string();
    }

    PodSummary {
        ready,
        total,
        reason,
        restarts,
        last_restart,
    }
}
