//! Server-side printing: the columns and cells of the `meta.k8s.io/v1` Table the API server
//! returns for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, for every served kind.
//!
//! Columns and cell formats follow kubectl's printers
//! (k8s.io/kubernetes/pkg/printers/internalversion/printers.go). Column names are sent as
//! Kubernetes sends them ("Name", "Up-to-date", "Nominated Node"); kubectl, and the bosun CLI,
//! print them upper-cased ([`header`]). Rows always carry every column, the `priority: 1` ones
//! included; a client shows those only with `-o wide`.
//!
//! Everything works on the object's JSON; missing fields print as kubectl prints them
//! (`<none>`, `<unknown>`, `0`) and never panic.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::owners::controller_of_json;
use crate::resources::ResourceInfo;
use crate::selector::{format_label_selector_json, label_selector_string_json};

/// One column of a Table (`meta.k8s.io/v1` TableColumnDefinition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    /// "string" or "integer".
    pub type_: &'static str,
    /// "name" for the column holding the object's name, "" otherwise.
    pub format: &'static str,
    pub description: &'static str,
    /// 0 = shown by default, 1 = only with `-o wide`.
    pub priority: i32,
}

impl Column {
    /// The TableColumnDefinition JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// The header kubectl prints for a column: its name upper-cased ("Up-to-date" → "UP-TO-DATE").
pub fn header(col: &Column) -> String {
    col.name.to_uppercase()
}

const fn c(
    name: &'static str,
    type_: &'static str,
    priority: i32,
    description: &'static str,
) -> Column {
    Column {
        name,
        type_,
        format: "",
        description,
        priority,
    }
}

const NAME: Column = Column {
    name: "Name",
    type_: "string",
    format: "name",
    description: "Name must be unique within a namespace.",
    priority: 0,
};
const AGE: Column = c(
    "Age",
    "string",
    0,
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
);
const CONTAINERS: Column = c(
    "Containers",
    "string",
    1,
    "Names of each container in the template.",
);
const IMAGES: Column = c(
    "Images",
    "string",
    1,
    "Images referenced by each container in the template.",
);
const SELECTOR: Column = c("Selector", "string", 1, "Label selector for pods.");

/// The Table columns for a resource, in kubectl's order.
pub fn columns(res: &ResourceInfo) -> Vec<Column> {
    match (res.group, res.kind) {
        ("", "Pod") => vec![
            NAME,
            c("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
            c("Status", "string", 0, "The aggregate status of the containers in this pod."),
            c("Restarts", "string", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
            AGE,
            c("IP", "string", 1, "IP address allocated to the pod."),
            c("Node", "string", 1, "NodeName is the node the pod is bound to."),
            c("Nominated Node", "string", 1, "nominatedNodeName is set when this pod preempts other pods on the node."),
            c("Readiness Gates", "string", 1, "If specified, all readiness gates will be evaluated for pod readiness."),
        ],
        ("", "Service") => vec![
            NAME,
            c("Type", "string", 0, "type determines how the Service is exposed."),
            c("Cluster-IP", "string", 0, "clusterIP is the IP address of the service."),
            c("External-IP", "string", 0, "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service."),
            c("Port(s)", "string", 0, "The list of ports that are exposed by this service."),
            AGE,
            c("Selector", "string", 1, "Route service traffic to pods with label keys and values matching this selector."),
        ],
        ("", "Endpoints") => vec![
            NAME,
            c("Endpoints", "string", 0, "Endpoints is the list of endpoints (address:port) backing the service."),
            AGE,
        ],
        ("", "Node") => vec![
            NAME,
            c("Status", "string", 0, "The status of the node."),
            c("Roles", "string", 0, "The roles of the node."),
            AGE,
            c("Version", "string", 0, "Kubelet Version reported by the node."),
            c("Internal-IP", "string", 1, "List of addresses reachable to the node."),
            c("External-IP", "string", 1, "List of addresses reachable to the node."),
            c("OS-Image", "string", 1, "OS Image reported by the node."),
            c("Kernel-Version", "string", 1, "Kernel Version reported by the node."),
            c("Container-Runtime", "string", 1, "Container Runtime Version reported by the node."),
        ],
        ("", "Namespace") => vec![
            NAME,
            c("Status", "string", 0, "The status of the namespace."),
            AGE,
        ],
        ("", "Event") => vec![
            c("Last Seen", "string", 0, "The time at which the most recent occurrence of this event was recorded."),
            c("Type", "string", 0, "Type of this event (Normal, Warning)."),
            c("Reason", "string", 0, "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
            c("Object", "string", 0, "The object that this event is about."),
            c("Subobject", "string", 1, "The field of the object the event is about, e.g. a container."),
            c("Source", "string", 1, "The component reporting this event."),
            c("Message", "string", 0, "A human-readable description of the status of this operation."),
            c("First Seen", "string", 1, "The time at which the event was first recorded."),
            c("Count", "integer", 1, "The number of times this event has occurred."),
            Column { priority: 1, ..NAME },
        ],
        ("", "PersistentVolume") => vec![
            NAME,
            c("Capacity", "string", 0, "capacity is the description of the persistent volume's resources and capacity."),
            c("Access Modes", "string", 0, "accessModes contains all ways the volume can be mounted."),
            c("Reclaim Policy", "string", 0, "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim."),
            c("Status", "string", 0, "phase indicates if a volume is available, bound to a claim, or released by a claim."),
            c("Claim", "string", 0, "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim."),
            c("StorageClass", "string", 0, "storageClassName is the name of StorageClass to which this persistent volume belongs."),
            c("VolumeAttributesClass", "string", 0, "Name of VolumeAttributesClass to which this persistent volume belongs."),
            c("Reason", "string", 0, "reason is a brief CamelCase string that describes any failure."),
            AGE,
            c("VolumeMode", "string", 1, "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state."),
        ],
        ("", "PersistentVolumeClaim") => vec![
            NAME,
            c("Status", "string", 0, "phase represents the current phase of PersistentVolumeClaim."),
            c("Volume", "string", 0, "volumeName is the binding reference to the PersistentVolume backing this claim."),
            c("Capacity", "string", 0, "capacity represents the actual resources of the underlying volume."),
            c("Access Modes", "string", 0, "accessModes contains the actual access modes the volume backing the PVC has."),
            c("StorageClass", "string", 0, "storageClassName is the name of the StorageClass required by the claim."),
            c("VolumeAttributesClass", "string", 0, "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim."),
            AGE,
            c("VolumeMode", "string", 1, "volumeMode defines what type of volume is required by the claim."),
        ],
        ("apps", "Deployment") => vec![
            NAME,
            c("Ready", "string", 0, "Number of the pod with ready state"),
            c("Up-to-date", "integer", 0, "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
            c("Available", "integer", 0, "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        ("apps", "ReplicaSet") => vec![
            NAME,
            c("Desired", "integer", 0, "Replicas is the number of desired replicas."),
            c("Current", "integer", 0, "Replicas is the most recently observed number of replicas."),
            c("Ready", "integer", 0, "The number of ready replicas for this replica set."),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        ("apps", "StatefulSet") => vec![
            NAME,
            c("Ready", "string", 0, "Number of the pod with ready state"),
            AGE,
            CONTAINERS,
            IMAGES,
        ],
        ("apps", "DaemonSet") => vec![
            NAME,
            c("Desired", "integer", 0, "The total number of nodes that should be running the daemon pod."),
            c("Current", "integer", 0, "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod."),
            c("Ready", "integer", 0, "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready."),
            c("Up-to-date", "integer", 0, "The total number of nodes that are running updated daemon pod."),
            c("Available", "integer", 0, "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available."),
            c("Node Selector", "string", 0, "NodeSelector is a selector which must be true for the pod to fit on a node."),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        ("apps", "ControllerRevision") => vec![
            NAME,
            c("Controller", "string", 0, "Controller of the object"),
            c("Revision", "integer", 0, "Revision indicates the revision of the state represented by Data."),
            AGE,
        ],
        ("batch", "Job") => vec![
            NAME,
            c("Status", "string", 0, "Status of the job."),
            c("Completions", "string", 0, "The desired number of successfully finished pods the job should be run with."),
            c("Duration", "string", 0, "Time required to complete the job."),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        ("batch", "CronJob") => vec![
            NAME,
            c("Schedule", "string", 0, "The schedule in Cron format."),
            c("Timezone", "string", 0, "The time zone name for the given schedule."),
            c("Suspend", "string", 0, "This flag tells the controller to suspend subsequent executions."),
            c("Active", "integer", 0, "A list of pointers to currently running jobs."),
            c("Last Schedule", "string", 0, "Information when was the last time the job was successfully scheduled."),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        ("autoscaling", "HorizontalPodAutoscaler") => vec![
            NAME,
            c("Reference", "string", 0, "reference to scaled resource; horizontal pod autoscaler will learn the current resource consumption and will set the desired number of pods by using its Scale subresource."),
            c("Targets", "string", 0, "metrics contains the specifications for which to use to calculate the desired replica count."),
            c("MinPods", "string", 0, "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down."),
            c("MaxPods", "integer", 0, "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up."),
            c("Replicas", "integer", 0, "currentReplicas is current number of replicas of pods managed by this autoscaler."),
            AGE,
        ],
        _ => vec![NAME, AGE],
    }
}

/// The cells of one row, one per column of [`columns`], computed as of `now`.
pub fn row_cells(res: &ResourceInfo, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = Value::from(s(obj, "/metadata/name"));
    let age = Value::from(age(obj, now));
    match (res.group, res.kind) {
        ("", "Pod") => pod_cells(obj, now),
        ("", "Service") => service_cells(obj, name, age),
        ("", "Endpoints") => vec![name, format_endpoints(obj).into(), age],
        ("", "Node") => node_cells(obj, name, age),
        ("", "Namespace") => vec![name, s(obj, "/status/phase").into(), age],
        ("", "Event") => event_cells(obj, now),
        ("", "PersistentVolume") => pv_cells(obj, name, age),
        ("", "PersistentVolumeClaim") => pvc_cells(obj, name, age),
        ("apps", "Deployment") => {
            let (names, images) = container_cells(obj, "/spec/template/spec/containers");
            vec![
                name,
                format!(
                    "{}/{}",
                    i(obj, "/status/readyReplicas"),
                    replicas(obj, "/spec/replicas")
                )
                .into(),
                i(obj, "/status/updatedReplicas").into(),
                i(obj, "/status/availableReplicas").into(),
                age,
                names,
                images,
                label_selector_string_json(obj.pointer("/spec/selector")).into(),
            ]
        }
        ("apps", "ReplicaSet") => {
            let (names, images) = container_cells(obj, "/spec/template/spec/containers");
            vec![
                name,
                replicas(obj, "/spec/replicas").into(),
                i(obj, "/status/replicas").into(),
                i(obj, "/status/readyReplicas").into(),
                age,
                names,
                images,
                label_selector_string_json(obj.pointer("/spec/selector")).into(),
            ]
        }
        ("apps", "StatefulSet") => {
            let (names, images) = container_cells(obj, "/spec/template/spec/containers");
            vec![
                name,
                format!(
                    "{}/{}",
                    i(obj, "/status/readyReplicas"),
                    replicas(obj, "/spec/replicas")
                )
                .into(),
                age,
                names,
                images,
            ]
        }
        ("apps", "DaemonSet") => {
            let (names, images) = container_cells(obj, "/spec/template/spec/containers");
            vec![
                name,
                i(obj, "/status/desiredNumberScheduled").into(),
                i(obj, "/status/currentNumberScheduled").into(),
                i(obj, "/status/numberReady").into(),
                i(obj, "/status/updatedNumberScheduled").into(),
                i(obj, "/status/numberAvailable").into(),
                format_labels(obj.pointer("/spec/template/spec/nodeSelector")).into(),
                age,
                names,
                images,
                label_selector_string_json(obj.pointer("/spec/selector")).into(),
            ]
        }
        ("apps", "ControllerRevision") => vec![
            name,
            controller_name(obj).into(),
            i(obj, "/revision").into(),
            age,
        ],
        ("batch", "Job") => job_cells(obj, name, age, now),
        ("batch", "CronJob") => {
            let (names, images) =
                container_cells(obj, "/spec/jobTemplate/spec/template/spec/containers");
            let last = match ts(obj, "/status/lastScheduleTime") {
                Some(t) => human_age(t, now),
                None => "<none>".to_string(),
            };
            let selector =
                format_label_selector_json(obj.pointer("/spec/jobTemplate/spec/selector"));
            vec![
                name,
                s(obj, "/spec/schedule").into(),
                or(s(obj, "/spec/timeZone"), "<none>").into(),
                match obj.pointer("/spec/suspend").and_then(Value::as_bool) {
                    Some(true) => "True",
                    Some(false) => "False",
                    None => "<unset>",
                }
                .into(),
                arr(obj, "/status/active").len().into(),
                last.into(),
                age,
                names,
                images,
                selector.into(),
            ]
        }
        ("autoscaling", "HorizontalPodAutoscaler") => {
            let min = match obj.pointer("/spec/minReplicas") {
                Some(v) if !v.is_null() => value_string(v),
                _ => "<unset>".to_string(),
            };
            vec![
                name,
                format!(
                    "{}/{}",
                    s(obj, "/spec/scaleTargetRef/kind"),
                    s(obj, "/spec/scaleTargetRef/name")
                )
                .into(),
                hpa_targets(obj).into(),
                min.into(),
                i(obj, "/spec/maxReplicas").into(),
                i(obj, "/status/currentReplicas").into(),
                age,
            ]
        }
        _ => vec![name, age],
    }
}

/// What each Table row carries besides its cells (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    /// The object's metadata as a PartialObjectMetadata, the default: enough for a client
    /// to print a NAMESPACE column or labels.
    Metadata,
    Object,
}

impl IncludeObject {
    /// The `includeObject` query parameter; anything but `None` or `Object` is `Metadata`.
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// A whole `meta.k8s.io/v1` Table for `items`: the kind's column definitions and one row per
/// object, with its cells as of `now` and the object as `include` asks.
pub fn table(
    res: &ResourceInfo,
    items: &[Value],
    resource_version: &str,
    include: IncludeObject,
    now: DateTime<Utc>,
) -> Value {
    let columns: Vec<Value> = columns(res).iter().map(Column::to_json).collect();
    let rows: Vec<Value> = items
        .iter()
        .map(|obj| {
            let mut row = json!({"cells": row_cells(res, obj, now)});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
                    })
                }
                IncludeObject::Object => row["object"] = obj.clone(),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

// ---------------------------------------------------------------------------------------------
// JSON helpers
// ---------------------------------------------------------------------------------------------

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn i(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

/// `spec.replicas`, which defaults to 1.
fn replicas(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(1)
}

fn arr<'a>(v: &'a Value, ptr: &str) -> &'a [Value] {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn ts(v: &Value, ptr: &str) -> Option<DateTime<Utc>> {
    let raw = v.pointer(ptr)?.as_str()?;
    DateTime::parse_from_rfc3339(raw)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn or<'a>(v: &'a str, default: &'a str) -> &'a str {
    if v.is_empty() {
        default
    } else {
        v
    }
}

/// A scalar as text: strings as they are (quantities like "1Gi"), numbers printed.
fn value_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// kubectl's translateTimestampSince on `metadata.creationTimestamp`.
fn age(obj: &Value, now: DateTime<Utc>) -> String {
    since(ts(obj, "/metadata/creationTimestamp"), now)
}

fn since(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match t {
        Some(t) => human_age(t, now),
        None => "<unknown>".to_string(),
    }
}

/// kubectl's age format: 5s, 4m15s, 3h20m, 2d3h, 45d: [`human_duration`] of the time since
/// `created`.
pub fn human_age(created: DateTime<Utc>, now: DateTime<Utc>) -> String {
    human_duration(now.signed_duration_since(created))
}

/// Kubernetes' `duration.HumanDuration`, which kubectl prints ages and durations with in both
/// `get` and `describe`: about two significant figures (`119s`, `9m59s`, `179m`, `7h59m`,
/// `47h`, `7d23h`, `729d`, `2y`, `7y364d`, `8y`); `0s` for clock skew under two seconds,
/// `<invalid>` for more.
pub fn human_duration(d: chrono::Duration) -> String {
    // Whole seconds, truncated toward zero like Go's int(d.Seconds()).
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".to_string();
    } else if seconds < 0 {
        return "0s".to_string();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return with_remainder(minutes, "m", seconds % 60, "s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return with_remainder(hours, "h", minutes % 60, "m");
    } else if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if days < 8 {
        return with_remainder(days, "d", hours % 24, "h");
    } else if days < 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if years < 8 {
        return with_remainder(years, "y", days % 365, "d");
    }
    format!("{years}y")
}

/// `2m`, `2m1s`: a count and unit, then the remainder in the next unit unless it is zero.
fn with_remainder(count: i64, unit: &str, remainder: i64, remainder_unit: &str) -> String {
    if remainder == 0 {
        format!("{count}{unit}")
    } else {
        format!("{count}{unit}{remainder}{remainder_unit}")
    }
}

/// labels.FormatLabels: `a=1,b=2` sorted by key, `<none>` when empty.
fn format_labels(map: Option<&Value>) -> String {
    let Some(map) = map.and_then(Value::as_object) else {
        return "<none>".to_string();
    };
    if map.is_empty() {
        return "<none>".to_string();
    }
    let mut pairs: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{k}={}", value_string(v)))
        .collect();
    pairs.sort();
    pairs.join(",")
}

/// The CONTAINERS and IMAGES cells: names and images joined by commas.
fn container_cells(obj: &Value, ptr: &str) -> (Value, Value) {
    let cs = arr(obj, ptr);
    let names: Vec<&str> = cs.iter().map(|c| s(c, "/name")).collect();
    let images: Vec<&str> = cs.iter().map(|c| s(c, "/image")).collect();
    (names.join(",").into(), images.join(",").into())
}

fn has_condition(obj: &Value, ptr: &str, type_: &str) -> bool {
    arr(obj, ptr)
        .iter()
        .any(|c| s(c, "/type") == type_ && s(c, "/status") == "True")
}

// ---------------------------------------------------------------------------------------------
// Pods
// ---------------------------------------------------------------------------------------------

struct PodSummary {
    ready: usize,
    total: usize,
    reason: String,
    restarts: i64,
    last_restart: Option<DateTime<Utc>>,
}

fn is_restartable_init(pod: &Value, name: &str) -> bool {
    arr(pod, "/spec/initContainers")
        .iter()
        .any(|c| s(c, "/name") == name && s(c, "/restartPolicy") == "Always")
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
    let mut total = arr(pod, "/spec/containers").len();
    let mut ready = 0;
    let mut last_restart: Option<DateTime<Utc>> = None;
    let mut last_restartable_init_restart: Option<DateTime<Utc>> = None;

    let phase = s(pod, "/status/phase");
    let mut reason = or(s(pod, "/status/reason"), phase).to_string();
    for cond in arr(pod, "/status/conditions") {
        if s(cond, "/type") == "PodScheduled" && s(cond, "/reason") == "SchedulingGated" {
            reason = "SchedulingGated".to_string();
        }
    }

    let init_specs = arr(pod, "/spec/initContainers");
    total += init_specs
        .iter()
        .filter(|c| s(c, "/restartPolicy") == "Always")
        .count();

    let mut initializing = false;
    for (idx, cs) in arr(pod, "/status/initContainerStatuses").iter().enumerate() {
        let name = s(cs, "/name");
        let finished = ts(cs, "/lastState/terminated/finishedAt");
        restarts += i(cs, "/restartCount");
        last_restart = later(last_restart, finished);
        let restartable = is_restartable_init(pod, name);
        if restartable {
            restartable_init_restarts += i(cs, "/restartCount");
            last_restartable_init_restart = later(last_restartable_init_restart, finished);
        }
        let terminated = cs.pointer("/state/terminated").filter(|v| v.is_object());
        let waiting_reason = s(cs, "/state/waiting/reason");
        if terminated.is_some_and(|t| i(t, "/exitCode") == 0) {
            continue;
        }
        if restartable && cs.get("started").and_then(Value::as_bool) == Some(true) {
            if cs.get("ready").and_then(Value::as_bool) == Some(true) {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            let r = s(t, "/reason");
            reason = if !r.is_empty() {
                format!("Init:{r}")
            } else if i(t, "/signal") != 0 {
                format!("Init:Signal:{}", i(t, "/signal"))
            } else {
                format!("Init:ExitCode:{}", i(t, "/exitCode"))
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
        for cs in arr(pod, "/status/containerStatuses").iter().rev() {
            restarts += i(cs, "/restartCount");
            last_restart = later(last_restart, ts(cs, "/lastState/terminated/finishedAt"));
            let waiting_reason = s(cs, "/state/waiting/reason");
            let terminated = cs.pointer("/state/terminated").filter(|v| v.is_object());
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                let r = s(t, "/reason");
                reason = if !r.is_empty() {
                    r.to_string()
                } else if i(t, "/signal") != 0 {
                    format!("Signal:{}", i(t, "/signal"))
                } else {
                    format!("ExitCode:{}", i(t, "/exitCode"))
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
    if deleting && s(pod, "/status/reason") == "NodeLost" {
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

/// kubectl's STATUS column for a pod (Running, Completed, Error, CrashLoopBackOff,
/// ImagePullBackOff, ContainerCreating, Pending, Init:0/2, Init:Error, PodInitializing,
/// Terminating, Unknown, or the pod's `status.reason` such as Evicted), following kubectl's
/// printPod logic.
pub fn pod_status(pod: &Value) -> String {
    summarize_pod(pod).reason
}

fn pod_cells(pod: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let p = summarize_pod(pod);
    let restarts = match p.last_restart {
        Some(t) if p.restarts != 0 => format!("{} ({} ago)", p.restarts, human_age(t, now)),
        _ => p.restarts.to_string(),
    };
    let ip = arr(pod, "/status/podIPs")
        .first()
        .map(|x| s(x, "/ip"))
        .filter(|x| !x.is_empty())
        .unwrap_or_else(|| s(pod, "/status/podIP"));
    let gates = arr(pod, "/spec/readinessGates");
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conditions = arr(pod, "/status/conditions");
        let true_count = gates
            .iter()
            .filter(|g| {
                let t = s(g, "/conditionType");
                conditions
                    .iter()
                    .find(|c| s(c, "/type") == t)
                    .is_some_and(|c| s(c, "/status") == "True")
            })
            .count();
        format!("{true_count}/{}", gates.len())
    };
    vec![
        s(pod, "/metadata/name").into(),
        format!("{}/{}", p.ready, p.total).into(),
        p.reason.into(),
        restarts.into(),
        age(pod, now).into(),
        or(ip, "<none>").into(),
        or(s(pod, "/spec/nodeName"), "<none>").into(),
        or(s(pod, "/status/nominatedNodeName"), "<none>").into(),
        readiness_gates.into(),
    ]
}

// ---------------------------------------------------------------------------------------------
// Services, endpoints, nodes, events
// ---------------------------------------------------------------------------------------------

/// The PORT(S) cell: `80/TCP`, `80:30080/TCP`, comma-separated; "" when there are none.
fn service_ports(svc: &Value) -> String {
    arr(svc, "/spec/ports")
        .iter()
        .map(|p| {
            let protocol = or(s(p, "/protocol"), "TCP");
            let node_port = i(p, "/nodePort");
            if node_port > 0 {
                format!("{}:{node_port}/{protocol}", i(p, "/port"))
            } else {
                format!("{}/{protocol}", i(p, "/port"))
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn external_ip(svc: &Value) -> String {
    let external: Vec<&str> = arr(svc, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match s(svc, "/spec/type") {
        "ClusterIP" | "NodePort" | "" if !external.is_empty() => external.join(","),
        "ClusterIP" | "NodePort" => "<none>".to_string(),
        "LoadBalancer" => {
            let mut ips: Vec<&str> = arr(svc, "/status/loadBalancer/ingress")
                .iter()
                .map(|ing| or(s(ing, "/ip"), s(ing, "/hostname")))
                .filter(|x| !x.is_empty())
                .collect();
            ips.extend(external);
            if ips.is_empty() {
                "<pending>".to_string()
            } else {
                ips.join(",")
            }
        }
        "ExternalName" => s(svc, "/spec/externalName").to_string(),
        _ => "<unknown>".to_string(),
    }
}

fn service_cells(svc: &Value, name: Value, age: Value) -> Vec<Value> {
    let cluster_ip = arr(svc, "/spec/clusterIPs")
        .first()
        .and_then(Value::as_str)
        .unwrap_or_else(|| s(svc, "/spec/clusterIP"));
    vec![
        name,
        s(svc, "/spec/type").into(),
        or(cluster_ip, "<none>").into(),
        external_ip(svc).into(),
        or(&service_ports(svc), "<none>").into(),
        age,
        format_labels(svc.pointer("/spec/selector")).into(),
    ]
}

fn join_host_port(ip: &str, port: i64) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// The ENDPOINTS cell: at most three `ip:port`, then ` + N more...`; `<none>` when empty.
fn format_endpoints(ep: &Value) -> String {
    const MAX: usize = 3;
    let subsets = arr(ep, "/subsets");
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0;
    for ss in subsets {
        let addresses = arr(ss, "/addresses");
        let ports = arr(ss, "/ports");
        if ports.is_empty() {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(s(a, "/ip").to_string());
            }
            continue;
        }
        for p in ports {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(join_host_port(s(a, "/ip"), i(p, "/port")));
            }
        }
    }
    let ret = list.join(",");
    if more {
        return format!("{ret} + {} more...", count - MAX);
    }
    or(&ret, "<none>").to_string()
}

fn node_address(node: &Value, type_: &str) -> String {
    arr(node, "/status/addresses")
        .iter()
        .find(|a| s(a, "/type") == type_)
        .map(|a| s(a, "/address").to_string())
        .unwrap_or_else(|| "<none>".to_string())
}

fn node_cells(node: &Value, name: Value, age: Value) -> Vec<Value> {
    let mut status: Vec<&str> = Vec::new();
    if let Some(ready) = arr(node, "/status/conditions")
        .iter()
        .rev()
        .find(|c| s(c, "/type") == "Ready")
    {
        status.push(if s(ready, "/status") == "True" {
            "Ready"
        } else {
            "NotReady"
        });
    }
    if status.is_empty() {
        status.push("Unknown");
    }
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled");
    }
    let mut roles = BTreeSet::new();
    if let Some(labels) = node.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if k == "kubernetes.io/role" {
                let v = value_string(v);
                if !v.is_empty() {
                    roles.insert(v);
                }
            }
        }
    }
    let roles = roles.into_iter().collect::<Vec<_>>().join(",");
    vec![
        name,
        status.join(",").into(),
        or(&roles, "<none>").into(),
        age,
        s(node, "/status/nodeInfo/kubeletVersion").into(),
        node_address(node, "InternalIP").into(),
        node_address(node, "ExternalIP").into(),
        or(s(node, "/status/nodeInfo/osImage"), "<unknown>").into(),
        or(s(node, "/status/nodeInfo/kernelVersion"), "<unknown>").into(),
        or(
            s(node, "/status/nodeInfo/containerRuntimeVersion"),
            "<unknown>",
        )
        .into(),
    ]
}

fn event_cells(ev: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let first = ts(ev, "/firstTimestamp").or_else(|| ts(ev, "/eventTime"));
    let first_seen = since(first, now);
    let mut last_seen = match ts(ev, "/lastTimestamp") {
        Some(t) => human_age(t, now),
        None => first_seen.clone(),
    };
    let mut count = i(ev, "/count");
    if ev.get("series").is_some_and(Value::is_object) {
        last_seen = since(ts(ev, "/series/lastObservedTime"), now);
        count = i(ev, "/series/count");
    } else if count == 0 {
        count = 1;
    }
    let kind = s(ev, "/involvedObject/kind").to_lowercase();
    let obj_name = s(ev, "/involvedObject/name");
    let target = if obj_name.is_empty() {
        kind
    } else {
        format!("{kind}/{obj_name}")
    };
    let component = or(s(ev, "/source/component"), s(ev, "/reportingComponent"));
    let instance = or(s(ev, "/source/host"), s(ev, "/reportingInstance"));
    let source = match (component.is_empty(), instance.is_empty()) {
        (true, _) => "<unknown>".to_string(),
        (false, true) => component.to_string(),
        (false, false) => format!("{component}, {instance}"),
    };
    vec![
        last_seen.into(),
        s(ev, "/type").into(),
        s(ev, "/reason").into(),
        target.into(),
        s(ev, "/involvedObject/fieldPath").into(),
        source.into(),
        s(ev, "/message").trim().into(),
        first_seen.into(),
        count.into(),
        s(ev, "/metadata/name").into(),
    ]
}

// ---------------------------------------------------------------------------------------------
// Volumes
// ---------------------------------------------------------------------------------------------

/// Access modes as kubectl abbreviates them: RWO, ROX, RWX, RWOP, in that order.
fn access_modes(modes: &[Value]) -> String {
    let has = |m: &str| modes.iter().any(|x| x.as_str() == Some(m));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(m, _)| has(m))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

fn quantity(v: &Value, ptr: &str) -> String {
    match v.pointer(ptr) {
        Some(q) if !q.is_null() => value_string(q),
        _ => "0".to_string(),
    }
}

fn storage_class(obj: &Value) -> String {
    match obj.pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class") {
        Some(Value::String(class)) => class.clone(),
        _ => s(obj, "/spec/storageClassName").to_string(),
    }
}

fn deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

fn unset_or(obj: &Value, ptr: &str) -> String {
    match obj.pointer(ptr) {
        Some(Value::String(x)) => x.clone(),
        _ => "<unset>".to_string(),
    }
}

fn pv_cells(pv: &Value, name: Value, age: Value) -> Vec<Value> {
    let claim = if pv.pointer("/spec/claimRef").is_some_and(Value::is_object) {
        format!(
            "{}/{}",
            s(pv, "/spec/claimRef/namespace"),
            s(pv, "/spec/claimRef/name")
        )
    } else {
        String::new()
    };
    let phase = if deleting(pv) {
        "Terminating"
    } else {
        s(pv, "/status/phase")
    };
    vec![
        name,
        quantity(pv, "/spec/capacity/storage").into(),
        access_modes(arr(pv, "/spec/accessModes")).into(),
        s(pv, "/spec/persistentVolumeReclaimPolicy").into(),
        phase.into(),
        claim.into(),
        storage_class(pv).into(),
        unset_or(pv, "/spec/volumeAttributesClassName").into(),
        s(pv, "/status/reason").into(),
        age,
        unset_or(pv, "/spec/volumeMode").into(),
    ]
}

fn pvc_cells(pvc: &Value, name: Value, age: Value) -> Vec<Value> {
    let phase = if deleting(pvc) {
        "Terminating"
    } else {
        s(pvc, "/status/phase")
    };
    let volume = s(pvc, "/spec/volumeName");
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            quantity(pvc, "/status/capacity/storage"),
            access_modes(arr(pvc, "/status/accessModes")),
        )
    };
    vec![
        name,
        phase.into(),
        volume.into(),
        capacity.into(),
        modes.into(),
        storage_class(pvc).into(),
        unset_or(pvc, "/spec/volumeAttributesClassName").into(),
        age,
        unset_or(pvc, "/spec/volumeMode").into(),
    ]
}

// ---------------------------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------------------------

/// The controlling owner as `kind.group/name` (`daemonset.apps/fluentd`), `<none>` without one.
fn controller_name(obj: &Value) -> String {
    let Some(owner) = obj.get("metadata").and_then(controller_of_json) else {
        return "<none>".to_string();
    };
    let kind = s(owner, "/kind");
    let name = s(owner, "/name");
    let group = s(owner, "/apiVersion")
        .rsplit_once('/')
        .map(|(g, _)| g)
        .unwrap_or("");
    match (kind.is_empty(), group.is_empty()) {
        (true, _) => name.to_string(),
        (false, true) => format!("{}/{name}", kind.to_lowercase()),
        (false, false) => format!("{}.{group}/{name}", kind.to_lowercase()),
    }
}

fn job_cells(job: &Value, name: Value, age: Value, now: DateTime<Utc>) -> Vec<Value> {
    let succeeded = i(job, "/status/succeeded");
    let completions = match job.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(n) => format!("{succeeded}/{n}"),
        None => {
            let parallelism = i(job, "/spec/parallelism");
            if parallelism > 1 {
                format!("{succeeded}/1 of {parallelism}")
            } else {
                format!("{succeeded}/1")
            }
        }
    };
    let duration = match (
        ts(job, "/status/startTime"),
        ts(job, "/status/completionTime"),
    ) {
        (None, _) => String::new(),
        (Some(start), None) => human_age(start, now),
        (Some(start), Some(done)) => human_age(start, done),
    };
    let cond = |t: &str| has_condition(job, "/status/conditions", t);
    let status = if cond("Complete") {
        "Complete"
    } else if cond("Failed") {
        "Failed"
    } else if deleting(job) {
        "Terminating"
    } else if cond("Suspended") {
        "Suspended"
    } else if cond("FailureTarget") {
        "FailureTarget"
    } else if cond("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let (names, images) = container_cells(job, "/spec/template/spec/containers");
    vec![
        name,
        status.into(),
        completions.into(),
        duration.into(),
        age,
        names,
        images,
        format_label_selector_json(job.pointer("/spec/selector")).into(),
    ]
}

/// The TARGETS cell of an HPA: `cpu: 3%/5%`, `memory: <unknown>/10%`, at most two then
/// ` + N more...`; `<none>` without metrics. Reads autoscaling/v2 and autoscaling/v1 shapes.
fn hpa_targets(hpa: &Value) -> String {
    let specs = arr(hpa, "/spec/metrics");
    if specs.is_empty() {
        // autoscaling/v1
        return match hpa.pointer("/spec/targetCPUUtilizationPercentage") {
            Some(t) if !t.is_null() => {
                let current = match hpa.pointer("/status/currentCPUUtilizationPercentage") {
                    Some(c) if !c.is_null() => format!("{}%", value_string(c)),
                    _ => "<unknown>".to_string(),
                };
                format!("cpu: {current}/{}%", value_string(t))
            }
            _ => "<none>".to_string(),
        };
    }
    let statuses = arr(hpa, "/status/currentMetrics");
    let quantity_or_unknown = |v: Option<&Value>| match v {
        Some(q) if !q.is_null() => value_string(q),
        _ => "<unknown>".to_string(),
    };
    let mut list: Vec<String> = Vec::new();
    for (idx, spec) in specs.iter().enumerate() {
        let status = statuses.get(idx).unwrap_or(&Value::Null);
        let text = match s(spec, "/type") {
            t @ ("External" | "Object") => {
                let field = if t == "External" {
                    "external"
                } else {
                    "object"
                };
                let target = spec.pointer(&format!("/{field}/target"));
                let current = status.pointer(&format!("/{field}/current"));
                match target
                    .and_then(|t| t.get("averageValue"))
                    .filter(|v| !v.is_null())
                {
                    Some(avg) => format!(
                        "{}/{} (avg)",
                        quantity_or_unknown(current.and_then(|c| c.get("averageValue"))),
                        value_string(avg)
                    ),
                    None => format!(
                        "{}/{}",
                        quantity_or_unknown(current.and_then(|c| c.get("value"))),
                        target
                            .and_then(|t| t.get("value"))
                            .map(value_string)
                            .unwrap_or_default()
                    ),
                }
            }
            "Pods" => format!(
                "{}/{}",
                quantity_or_unknown(status.pointer("/pods/current/averageValue")),
                spec.pointer("/pods/target/averageValue")
                    .map(value_string)
                    .unwrap_or_default()
            ),
            t @ ("Resource" | "ContainerResource") => {
                let field = if t == "Resource" {
                    "resource"
                } else {
                    "containerResource"
                };
                let name = s(spec, &format!("/{field}/name"));
                let target = spec.pointer(&format!("/{field}/target"));
                let current = status.pointer(&format!("/{field}/current"));
                match target
                    .and_then(|t| t.get("averageValue"))
                    .filter(|v| !v.is_null())
                {
                    Some(avg) => format!(
                        "{name}: {}/{}",
                        quantity_or_unknown(current.and_then(|c| c.get("averageValue"))),
                        value_string(avg)
                    ),
                    None => {
                        let current = match current
                            .and_then(|c| c.get("averageUtilization"))
                            .filter(|v| !v.is_null())
                        {
                            Some(u) => format!("{}%", value_string(u)),
                            None => "<unknown>".to_string(),
                        };
                        let target = match target
                            .and_then(|t| t.get("averageUtilization"))
                            .filter(|v| !v.is_null())
                        {
                            Some(u) => format!("{}%", value_string(u)),
                            None => "<auto>".to_string(),
                        };
                        format!("{name}: {current}/{target}")
                    }
                }
            }
            _ => "<unknown type>".to_string(),
        };
        list.push(text);
    }
    const MAX: usize = 2;
    let count = list.len();
    if count > MAX {
        list.truncate(MAX);
        return format!("{} + {} more...", list.join(", "), count - MAX);
    }
    list.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{by_name, RESOURCES};
    use chrono::Duration;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2024-05-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    /// An RFC 3339 timestamp `secs` seconds before `now()`.
    fn ago(secs: i64) -> String {
        (now() - Duration::seconds(secs)).to_rfc3339()
    }

    fn cells(kind: &str, obj: &Value) -> Vec<Value> {
        let res = by_name(kind).unwrap();
        let cells = row_cells(res, obj, now());
        assert_eq!(
            cells.len(),
            columns(res).len(),
            "{kind}: one cell per column"
        );
        cells
    }

    fn headers(kind: &str, wide: bool) -> Vec<String> {
        columns(by_name(kind).unwrap())
            .iter()
            .filter(|c| wide || c.priority == 0)
            .map(header)
            .collect()
    }

    #[test]
    fn seed_deployment_prints_like_kubectl() {
        let deploy = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx-dev", "labels": {"app": "nginx-dev"},
                         "creationTimestamp": ago(4 * 60 + 15)},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "nginx-dev"}},
                     "template": {"metadata": {"labels": {"app": "nginx-dev"}},
                                  "spec": {"containers": [{"image": "nginx:1.19", "name": "nginx"}]}}},
            "status": {"replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3}
        });
        assert_eq!(
            headers("deploy", false),
            ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
        );
        assert_eq!(
            headers("deploy", true)[5..],
            ["CONTAINERS", "IMAGES", "SELECTOR"]
        );
        assert_eq!(
            cells("deploy", &deploy),
            vec![
                json!("nginx-dev"),
                json!("3/3"),
                json!(3),
                json!(3),
                json!("4m15s"),
                json!("nginx"),
                json!("nginx:1.19"),
                json!("app=nginx-dev"),
            ]
        );
        // A freshly created deployment without status.
        let mut fresh = deploy.clone();
        fresh.as_object_mut().unwrap().remove("status");
        assert_eq!(
            cells("deploy", &fresh)[1..4],
            [json!("0/3"), json!(0), json!(0)]
        );
    }

    #[test]
    fn every_kind_prints_an_empty_object_without_panicking() {
        for res in RESOURCES {
            let cols = columns(res);
            assert_eq!(
                cols[0].format == "name",
                res.kind != "Event",
                "{}",
                res.kind
            );
            let cells = row_cells(res, &json!({}), now());
            assert_eq!(cells.len(), cols.len(), "{}", res.kind);
            let cells = row_cells(res, &json!({"status": null, "spec": 3}), now());
            assert_eq!(cells.len(), cols.len(), "{}", res.kind);
        }
        let t = table(
            by_name("po").unwrap(),
            &[json!({"metadata":{"name":"a","namespace":"ns"}})],
            "7",
            IncludeObject::parse(None),
            now(),
        );
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["columnDefinitions"][0]["name"], "Name");
        assert_eq!(t["rows"][0]["cells"][0], "a");
        assert_eq!(t["rows"][0]["object"]["metadata"]["namespace"], "ns");
        assert_eq!(t["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn human_age_boundaries() {
        let age = |secs: i64| human_age(now() - Duration::seconds(secs), now());
        assert_eq!(age(0), "0s");
        assert_eq!(age(-1), "0s");
        assert_eq!(age(-5), "<invalid>");
        assert_eq!(age(5), "5s");
        assert_eq!(age(119), "119s");
        assert_eq!(age(120), "2m");
        assert_eq!(age(4 * 60 + 15), "4m15s");
        assert_eq!(age(10 * 60 + 15), "10m");
        assert_eq!(age(179 * 60), "179m");
        assert_eq!(age(3 * 3600), "3h");
        assert_eq!(age(3 * 3600 + 20 * 60), "3h20m");
        assert_eq!(age(8 * 3600 + 59 * 60), "8h");
        assert_eq!(age(47 * 3600), "47h");
        assert_eq!(age(48 * 3600), "2d");
        assert_eq!(age(51 * 3600), "2d3h");
        assert_eq!(age(8 * 86400 + 3600), "8d");
        assert_eq!(age(45 * 86400), "45d");
        assert_eq!(age(2 * 365 * 86400), "2y");
        assert_eq!(age(2 * 365 * 86400 + 10 * 86400), "2y10d");
        assert_eq!(age(9 * 365 * 86400), "9y");
    }

    /// Kubernetes' own cases for duration.HumanDuration (apimachinery's duration_test.go),
    /// and the ones `describe` relied on.
    #[test]
    fn human_duration_like_kubernetes() {
        let ms = Duration::milliseconds;
        let (second, minute, hour, day) = (1000, 60_000, 3_600_000, 86_400_000);
        let year = 365 * day;
        let cases: &[(i64, &str)] = &[
            (second, "1s"),
            (70 * second, "70s"),
            (190 * second, "3m10s"),
            (70 * minute, "70m"),
            (47 * hour, "47h"),
            (49 * hour, "2d1h"),
            ((8 * 24 + 2) * hour, "8d"),
            (367 * day, "367d"),
            (2 * year + 25 * hour, "2y1d"),
            (8 * year + 2 * hour, "8y"),
            // Boundaries.
            (-2 * second, "<invalid>"),
            (-2 * second + 1, "0s"),
            (0, "0s"),
            (second - 1, "0s"),
            (2 * minute - 1, "119s"),
            (2 * minute, "2m"),
            (2 * minute + second, "2m1s"),
            (10 * minute - 1, "9m59s"),
            (10 * minute, "10m"),
            (10 * minute + second, "10m"),
            (3 * hour - 1, "179m"),
            (3 * hour, "3h"),
            (3 * hour + minute, "3h1m"),
            (8 * hour - 1, "7h59m"),
            (8 * hour, "8h"),
            (8 * hour + 59 * minute, "8h"),
            (2 * day - 1, "47h"),
            (2 * day, "2d"),
            (2 * day + hour, "2d1h"),
            (8 * day - 1, "7d23h"),
            (8 * day, "8d"),
            (8 * day + 23 * hour, "8d"),
            (2 * year - 1, "729d"),
            (2 * year, "2y"),
            (2 * year + 23 * hour, "2y"),
            (2 * year + 23 * hour + 59 * minute, "2y"),
            (2 * year + day - 1, "2y"),
            (2 * year + day, "2y1d"),
            (3 * year, "3y"),
            (4 * year, "4y"),
            (5 * year, "5y"),
            (6 * year, "6y"),
            (7 * year, "7y"),
            (8 * year - 1, "7y364d"),
            (8 * year, "8y"),
            (8 * year + 364 * day, "8y"),
            (9 * year, "9y"),
            // What describe's events showed before sharing this function.
            (45 * second, "45s"),
            (150 * second, "2m30s"),
            (180 * second, "3m"),
            (25 * minute, "25m"),
            (5 * hour + 10 * minute, "5h10m"),
            (3 * day, "3d"),
        ];
        for &(millis, want) in cases {
            assert_eq!(human_duration(ms(millis)), want, "{millis}ms");
        }
    }

    fn pod(phase: &str, containers: Value, statuses: Value) -> Value {
        json!({
            "metadata": {"name": "web-0", "creationTimestamp": ago(30)},
            "spec": {"containers": containers, "nodeName": "node-1"},
            "status": {"phase": phase, "containerStatuses": statuses, "podIP": "10.1.0.5",
                       "podIPs": [{"ip": "10.1.0.5"}]}
        })
    }

    fn one(name: &str) -> Value {
        json!([{"name": name, "image": "nginx"}])
    }

    fn waiting(reason: &str) -> Value {
        json!([{"name": "c", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": reason}}}])
    }

    #[test]
    fn pod_status_for_running_completed_and_failing_containers() {
        let running = pod(
            "Running",
            one("c"),
            json!([{"name":"c","ready":true,"restartCount":0,"started":true,
                    "state":{"running":{"startedAt":ago(20)}}}]),
        );
        assert_eq!(pod_status(&running), "Running");
        assert_eq!(
            cells("po", &running),
            vec![
                json!("web-0"),
                json!("1/1"),
                json!("Running"),
                json!("0"),
                json!("30s"),
                json!("10.1.0.5"),
                json!("node-1"),
                json!("<none>"),
                json!("<none>"),
            ]
        );

        let completed = pod(
            "Succeeded",
            one("c"),
            json!([{"name":"c","ready":false,"restartCount":0,
                    "state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]),
        );
        assert_eq!(pod_status(&completed), "Completed");
        assert_eq!(cells("po", &completed)[1], "0/1");

        let error = pod(
            "Failed",
            one("c"),
            json!([{"name":"c","ready":false,"restartCount":0,
                    "state":{"terminated":{"exitCode":1,"reason":"Error"}}}]),
        );
        assert_eq!(pod_status(&error), "Error");

        let no_reason = pod(
            "Failed",
            one("c"),
            json!([{"name":"c","state":{"terminated":{"exitCode":137}}}]),
        );
        assert_eq!(pod_status(&no_reason), "ExitCode:137");

        let crash = pod(
            "Running",
            one("c"),
            json!([{"name":"c","ready":false,"restartCount":2,
                    "state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off 20s"}},
                    "lastState":{"terminated":{"exitCode":1,"reason":"Error","finishedAt":ago(300)}}}]),
        );
        assert_eq!(pod_status(&crash), "CrashLoopBackOff");
        assert_eq!(cells("po", &crash)[3], "2 (5m ago)");

        assert_eq!(
            pod_status(&pod("Pending", one("c"), waiting("ImagePullBackOff"))),
            "ImagePullBackOff"
        );
        assert_eq!(
            pod_status(&pod("Pending", one("c"), waiting("ContainerCreating"))),
            "ContainerCreating"
        );
        let pending = json!({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}]},
                             "status":{"phase":"Pending"}});
        assert_eq!(pod_status(&pending), "Pending");
        assert_eq!(
            cells("po", &pending)[1..4],
            [json!("0/1"), json!("Pending"), json!("0")]
        );
        assert_eq!(
            cells("po", &pending)[5..7],
            [json!("<none>"), json!("<none>")]
        );
    }

    #[test]
    fn pod_status_with_one_of_two_containers_finished() {
        // One container completed, the other still running and the pod Ready: Running.
        let mut p = pod(
            "Running",
            json!([{"name":"a"},{"name":"b"}]),
            json!([
                {"name":"a","ready":false,"state":{"terminated":{"exitCode":0,"reason":"Completed"}}},
                {"name":"b","ready":true,"state":{"running":{}}}
            ]),
        );
        p["status"]["conditions"] = json!([{"type":"Ready","status":"True"}]);
        assert_eq!(pod_status(&p), "Running");
        assert_eq!(cells("po", &p)[1], "1/2");
        p["status"]["conditions"] = json!([{"type":"Ready","status":"False"}]);
        assert_eq!(pod_status(&p), "NotReady");
    }

    fn init_pod(init_statuses: Value) -> Value {
        json!({
            "metadata": {"name": "p"},
            "spec": {"initContainers": [{"name":"i1"},{"name":"i2"}], "containers": [{"name":"c"}]},
            "status": {"phase": "Pending",
                       "initContainerStatuses": init_statuses,
                       "containerStatuses": [{"name":"c","ready":false,
                                              "state":{"waiting":{"reason":"PodInitializing"}}}]}
        })
    }

    #[test]
    fn pod_status_while_initializing() {
        let first_running = init_pod(json!([
            {"name":"i1","ready":false,"state":{"running":{}}},
            {"name":"i2","ready":false,"state":{"waiting":{"reason":"PodInitializing"}}}
        ]));
        assert_eq!(pod_status(&first_running), "Init:0/2");

        let second_running = init_pod(json!([
            {"name":"i1","state":{"terminated":{"exitCode":0,"reason":"Completed"}}},
            {"name":"i2","state":{"running":{}}}
        ]));
        assert_eq!(pod_status(&second_running), "Init:1/2");

        let failed = init_pod(json!([
            {"name":"i1","state":{"terminated":{"exitCode":1,"reason":"Error"}}},
            {"name":"i2","state":{"waiting":{"reason":"PodInitializing"}}}
        ]));
        assert_eq!(pod_status(&failed), "Init:Error");

        let crashing = init_pod(json!([
            {"name":"i1","restartCount":3,"state":{"waiting":{"reason":"CrashLoopBackOff"}},
             "lastState":{"terminated":{"exitCode":1,"finishedAt":ago(60)}}},
            {"name":"i2","state":{"waiting":{"reason":"PodInitializing"}}}
        ]));
        assert_eq!(pod_status(&crashing), "Init:CrashLoopBackOff");
        assert_eq!(cells("po", &crashing)[3], "3 (60s ago)");

        let done = init_pod(json!([
            {"name":"i1","state":{"terminated":{"exitCode":0,"reason":"Completed"}}},
            {"name":"i2","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}
        ]));
        assert_eq!(pod_status(&done), "PodInitializing");
    }

    #[test]
    fn pod_status_reasons_and_deletion() {
        let mut evicted = pod("Failed", one("c"), json!([]));
        evicted["status"]["reason"] = json!("Evicted");
        assert_eq!(pod_status(&evicted), "Evicted");

        let mut lost = pod(
            "Running",
            one("c"),
            json!([{"name":"c","ready":true,"state":{"running":{}}}]),
        );
        lost["status"]["reason"] = json!("NodeLost");
        // The pod's reason wins over running containers, as in kubectl.
        assert_eq!(pod_status(&lost), "NodeLost");
        assert_eq!(cells("po", &lost)[1], "1/1");
        lost["metadata"]["deletionTimestamp"] = json!(ago(5));
        assert_eq!(pod_status(&lost), "Unknown");

        let mut terminating = pod(
            "Running",
            one("c"),
            json!([{"name":"c","ready":true,"state":{"running":{}}}]),
        );
        terminating["metadata"]["deletionTimestamp"] = json!(ago(5));
        assert_eq!(pod_status(&terminating), "Terminating");
        // A finished pod being deleted keeps its final status.
        let mut finished = pod(
            "Succeeded",
            one("c"),
            json!([{"name":"c","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]),
        );
        finished["metadata"]["deletionTimestamp"] = json!(ago(5));
        assert_eq!(pod_status(&finished), "Completed");
    }

    #[test]
    fn pv_and_pvc_columns() {
        assert_eq!(
            headers("pv", false),
            [
                "NAME",
                "CAPACITY",
                "ACCESS MODES",
                "RECLAIM POLICY",
                "STATUS",
                "CLAIM",
                "STORAGECLASS",
                "VOLUMEATTRIBUTESCLASS",
                "REASON",
                "AGE"
            ]
        );
        let pv = json!({"metadata":{"name":"pv1","creationTimestamp":ago(29)},
            "spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy":"Retain","hostPath":{"path":"/data"}},
            "status":{"phase":"Available"}});
        assert_eq!(
            cells("pv", &pv),
            vec![
                json!("pv1"),
                json!("1Gi"),
                json!("RWO"),
                json!("Retain"),
                json!("Available"),
                json!(""),
                json!(""),
                json!("<unset>"),
                json!(""),
                json!("29s"),
                json!("<unset>")
            ]
        );
        let modes = json!([
            "ReadWriteOncePod",
            "ReadWriteMany",
            "ReadOnlyMany",
            "ReadWriteOnce"
        ]);
        assert_eq!(access_modes(modes.as_array().unwrap()), "RWO,ROX,RWX,RWOP");

        let mut bound = pv.clone();
        bound["spec"]["claimRef"] = json!({"namespace":"default","name":"www-web-0"});
        bound["spec"]["storageClassName"] = json!("local");
        bound["status"]["phase"] = json!("Bound");
        assert_eq!(
            cells("pv", &bound)[4..7],
            [json!("Bound"), json!("default/www-web-0"), json!("local")]
        );

        let pvc = json!({"metadata":{"name":"www-web-0","creationTimestamp":ago(90)},
            "spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}},
                    "volumeName":"pv1","storageClassName":"local"},
            "status":{"phase":"Bound","accessModes":["ReadWriteOnce"],"capacity":{"storage":"1Gi"}}});
        assert_eq!(
            cells("pvc", &pvc)[..8],
            [
                json!("www-web-0"),
                json!("Bound"),
                json!("pv1"),
                json!("1Gi"),
                json!("RWO"),
                json!("local"),
                json!("<unset>"),
                json!("90s")
            ]
        );
        let pending = json!({"metadata":{"name":"c"},"spec":{"resources":{"requests":{"storage":"1Gi"}}},
                             "status":{"phase":"Pending"}});
        assert_eq!(
            cells("pvc", &pending)[1..5],
            [json!("Pending"), json!(""), json!(""), json!("")]
        );
    }

    #[test]
    fn service_ports_and_ips() {
        let svc = json!({"metadata":{"name":"nginx","creationTimestamp":ago(60)},
            "spec":{"type":"NodePort","clusterIP":"10.96.0.10","clusterIPs":["10.96.0.10"],
                    "selector":{"app":"nginx","tier":"web"},
                    "ports":[{"port":80,"nodePort":30080,"protocol":"TCP"},{"port":53,"protocol":"UDP"}]}});
        assert_eq!(
            cells("svc", &svc),
            vec![
                json!("nginx"),
                json!("NodePort"),
                json!("10.96.0.10"),
                json!("<none>"),
                json!("80:30080/TCP,53/UDP"),
                json!("60s"),
                json!("app=nginx,tier=web")
            ]
        );
        let headless = json!({"metadata":{"name":"web"},
            "spec":{"type":"ClusterIP","clusterIP":"None","ports":[{"port":80}]}});
        assert_eq!(
            cells("svc", &headless)[2..5],
            [json!("None"), json!("<none>"), json!("80/TCP")]
        );
        let lb = json!({"metadata":{"name":"lb"},"spec":{"type":"LoadBalancer","clusterIPs":["10.96.0.11"]}});
        assert_eq!(
            cells("svc", &lb)[3..5],
            [json!("<pending>"), json!("<none>")]
        );
        let mut lb_ready = lb.clone();
        lb_ready["status"] = json!({"loadBalancer":{"ingress":[{"ip":"1.2.3.4"}]}});
        assert_eq!(cells("svc", &lb_ready)[3], "1.2.3.4");
        let ext = json!({"metadata":{"name":"x"},"spec":{"type":"ExternalName","externalName":"example.com"}});
        assert_eq!(
            cells("svc", &ext)[2..4],
            [json!("<none>"), json!("example.com")]
        );
        assert_eq!(cells("svc", &ext)[6], "<none>");
    }

    #[test]
    fn endpoints_truncate_after_three() {
        let addrs = |ips: &[&str]| -> Value { ips.iter().map(|ip| json!({"ip": ip})).collect() };
        let ep = json!({"metadata":{"name":"web"},"subsets":[
            {"addresses": addrs(&["10.0.0.1","10.0.0.2"]), "ports":[{"port":80}]}]});
        assert_eq!(cells("ep", &ep)[1], "10.0.0.1:80,10.0.0.2:80");
        let ep = json!({"metadata":{"name":"web"},"subsets":[
            {"addresses": addrs(&["10.0.0.1","10.0.0.2","10.0.0.3","10.0.0.4"]), "ports":[{"port":80}]}]});
        assert_eq!(
            cells("ep", &ep)[1],
            "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 1 more..."
        );
        let ep = json!({"metadata":{"name":"web"},"subsets":[
            {"addresses": addrs(&["10.0.0.1","10.0.0.2"]), "ports":[{"port":80},{"port":443}]}]});
        assert_eq!(
            cells("ep", &ep)[1],
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."
        );
        assert_eq!(
            cells("ep", &json!({"metadata":{"name":"web"}}))[1],
            "<none>"
        );
        assert_eq!(
            cells("ep", &json!({"subsets":[{"addresses":[]}]}))[1],
            "<none>"
        );
        let headless = json!({"subsets":[{"addresses": addrs(&["10.0.0.1"])}]});
        assert_eq!(cells("ep", &headless)[1], "10.0.0.1");
    }

    #[test]
    fn node_status_roles_and_wide_columns() {
        let node = json!({"metadata":{"name":"node-1","creationTimestamp":ago(3 * 86400),
                "labels":{"node-role.kubernetes.io/control-plane":"","kubernetes.io/hostname":"node-1"}},
            "spec":{},
            "status":{"conditions":[{"type":"MemoryPressure","status":"False"},{"type":"Ready","status":"True"}],
                "addresses":[{"type":"InternalIP","address":"172.17.0.2"},{"type":"Hostname","address":"node-1"}],
                "nodeInfo":{"kubeletVersion":"v1.31.0-bosun","osImage":"Ubuntu 24.04","kernelVersion":"6.8.0",
                            "containerRuntimeVersion":"docker://27.0.3"}}});
        assert_eq!(
            cells("no", &node),
            vec![
                json!("node-1"),
                json!("Ready"),
                json!("control-plane"),
                json!("3d"),
                json!("v1.31.0-bosun"),
                json!("172.17.0.2"),
                json!("<none>"),
                json!("Ubuntu 24.04"),
                json!("6.8.0"),
                json!("docker://27.0.3")
            ]
        );
        let mut cordoned = node.clone();
        cordoned["spec"]["unschedulable"] = json!(true);
        assert_eq!(cells("no", &cordoned)[1], "Ready,SchedulingDisabled");
        let mut down = node.clone();
        down["status"]["conditions"][1]["status"] = json!("Unknown");
        assert_eq!(cells("no", &down)[1], "NotReady");
        assert_eq!(
            cells("no", &json!({"metadata":{"name":"n"}}))[1..3],
            [json!("Unknown"), json!("<none>")]
        );
    }

    #[test]
    fn workload_columns() {
        let rs = json!({"metadata":{"name":"nginx-dev-58c688cc59","creationTimestamp":ago(86 * 60)},
            "spec":{"replicas":4},"status":{"replicas":4,"readyReplicas":4}});
        assert_eq!(
            cells("rs", &rs)[..5],
            [
                json!("nginx-dev-58c688cc59"),
                json!(4),
                json!(4),
                json!(4),
                json!("86m")
            ]
        );

        let sts =
            json!({"metadata":{"name":"web"},"spec":{"replicas":2},"status":{"readyReplicas":1}});
        assert_eq!(cells("sts", &sts)[1], "1/2");

        let ds = json!({"metadata":{"name":"fluentd"},
            "spec":{"selector":{"matchLabels":{"name":"fluentd"}},
                    "template":{"spec":{"nodeSelector":{"disk":"ssd"},
                        "containers":[{"name":"fluentd","image":"fluentd:v2"},{"name":"x","image":"busybox"}]}}},
            "status":{"desiredNumberScheduled":2,"currentNumberScheduled":2,"numberReady":1,
                      "updatedNumberScheduled":2,"numberAvailable":1}});
        assert_eq!(
            cells("ds", &ds),
            vec![
                json!("fluentd"),
                json!(2),
                json!(2),
                json!(1),
                json!(2),
                json!(1),
                json!("disk=ssd"),
                json!("<unknown>"),
                json!("fluentd,x"),
                json!("fluentd:v2,busybox"),
                json!("name=fluentd")
            ]
        );

        let rev = json!({"metadata":{"name":"fluentd-elasticsearch-64dc6799c9",
                "ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"fluentd-elasticsearch",
                                    "uid":"u","controller":true}]},
            "revision":2});
        assert_eq!(
            cells("controllerrevisions", &rev)[1..3],
            [json!("daemonset.apps/fluentd-elasticsearch"), json!(2)]
        );

        let sel = json!({"matchLabels":{"app":"web"},"matchExpressions":[
            {"key":"tier","operator":"In","values":["b","a"]},{"key":"legacy","operator":"DoesNotExist"}]});
        assert_eq!(
            label_selector_string_json(Some(&sel)),
            "app=web,!legacy,tier in (a,b)"
        );
    }

    #[test]
    fn job_and_cronjob_columns() {
        let job = json!({"metadata":{"name":"pi","creationTimestamp":ago(120)},
            "spec":{"completions":3,"parallelism":1,"selector":{"matchLabels":{"batch.kubernetes.io/controller-uid":"u1"}},
                    "template":{"spec":{"containers":[{"name":"pi","image":"perl"}]}}},
            "status":{"succeeded":3,"startTime":ago(120),"completionTime":ago(60),
                      "conditions":[{"type":"Complete","status":"True"}]}});
        assert_eq!(
            cells("job", &job),
            vec![
                json!("pi"),
                json!("Complete"),
                json!("3/3"),
                json!("60s"),
                json!("2m"),
                json!("pi"),
                json!("perl"),
                json!("batch.kubernetes.io/controller-uid=u1")
            ]
        );
        let running = json!({"metadata":{"name":"w"},"spec":{"parallelism":2},
                             "status":{"startTime":ago(10),"active":2}});
        assert_eq!(
            cells("job", &running)[1..4],
            [json!("Running"), json!("0/1 of 2"), json!("10s")]
        );
        let failed = json!({"spec":{},"status":{"conditions":[{"type":"Failed","status":"True"}]}});
        assert_eq!(
            cells("job", &failed)[1..4],
            [json!("Failed"), json!("0/1"), json!("")]
        );

        let cj = json!({"metadata":{"name":"hello","creationTimestamp":ago(300)},
            "spec":{"schedule":"*/1 * * * *","suspend":false,
                    "jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"hello","image":"busybox"}]}}}}},
            "status":{"active":[{"name":"hello-1"}],"lastScheduleTime":ago(40)}});
        assert_eq!(
            cells("cj", &cj),
            vec![
                json!("hello"),
                json!("*/1 * * * *"),
                json!("<none>"),
                json!("False"),
                json!(1),
                json!("40s"),
                json!("5m"),
                json!("hello"),
                json!("busybox"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn hpa_targets_like_kubectl() {
        let v2 = json!({"metadata":{"name":"hpa-demo"},
            "spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"hpa-demo"},
                    "minReplicas":1,"maxReplicas":10,
                    "metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":5}}}]},
            "status":{"currentReplicas":1}});
        assert_eq!(
            cells("hpa", &v2)[..6],
            [
                json!("hpa-demo"),
                json!("Deployment/hpa-demo"),
                json!("cpu: <unknown>/5%"),
                json!("1"),
                json!(10),
                json!(1)
            ]
        );
        let mut measured = v2.clone();
        measured["status"]["currentMetrics"] = json!([{"type":"Resource",
            "resource":{"name":"cpu","current":{"averageUtilization":3,"averageValue":"15m"}}}]);
        assert_eq!(cells("hpa", &measured)[2], "cpu: 3%/5%");

        let mut many = v2.clone();
        many["spec"]["metrics"] = json!([
            {"type":"Resource","resource":{"name":"memory","target":{"type":"Utilization","averageUtilization":10}}},
            {"type":"Resource","resource":{"name":"cpu","target":{"type":"AverageValue","averageValue":"500m"}}},
            {"type":"Pods","pods":{"metric":{"name":"qps"},"target":{"type":"AverageValue","averageValue":"1k"}}}
        ]);
        assert_eq!(
            cells("hpa", &many)[2],
            "memory: <unknown>/10%, cpu: <unknown>/500m + 1 more..."
        );

        let v1 = json!({"metadata":{"name":"hpa-demo"},
            "spec":{"scaleTargetRef":{"kind":"Deployment","name":"hpa-demo"},"maxReplicas":10,
                    "targetCPUUtilizationPercentage":5},
            "status":{"currentReplicas":1,"currentCPUUtilizationPercentage":3}});
        let res =
            crate::resources::by_path("autoscaling", "v1", "horizontalpodautoscalers").unwrap();
        let row = row_cells(res, &v1, now());
        assert_eq!(row[2..4], [json!("cpu: 3%/5%"), json!("<unset>")]);
        assert_eq!(cells("hpa", &json!({}))[2], "<none>");
    }

    #[test]
    fn event_and_namespace_columns() {
        assert_eq!(
            headers("ev", false),
            ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
        );
        let ev = json!({"metadata":{"name":"web-0.17c","namespace":"default"},
            "involvedObject":{"kind":"Pod","name":"web-0","fieldPath":"spec.containers{nginx}"},
            "reason":"Pulled","message":"Container image \"nginx\" already present on machine\n",
            "type":"Normal","source":{"component":"kubelet","host":"node-1"},
            "firstTimestamp":ago(600),"lastTimestamp":ago(30),"count":4});
        assert_eq!(
            cells("ev", &ev),
            vec![
                json!("30s"),
                json!("Normal"),
                json!("Pulled"),
                json!("pod/web-0"),
                json!("spec.containers{nginx}"),
                json!("kubelet, node-1"),
                json!("Container image \"nginx\" already present on machine"),
                json!("10m"),
                json!(4),
                json!("web-0.17c")
            ]
        );
        let ns = json!({"metadata":{"name":"default","creationTimestamp":ago(45 * 86400)},
                        "status":{"phase":"Active"}});
        assert_eq!(
            cells("ns", &ns),
            vec![json!("default"), json!("Active"), json!("45d")]
        );
    }
}
