//! Printers for the core (`""`) group but pods: Service, Endpoints, Node, Namespace, Event,
//! PersistentVolume and PersistentVolumeClaim, as kubectl's printers show them.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::{age_cell, human_age, time_since};
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{
    array_at, format_labels, int_at, is_deleting, name_cell, non_empty_or, str_at, time_at,
    value_string,
};

// Services and endpoints.

pub(super) const SERVICE: KindPrinter = KindPrinter {
    group: "",
    kind: "Service",
    columns: &[
        NAME,
        Column::text("Type", "type determines how the Service is exposed."),
        Column::text("Cluster-IP", "clusterIP is the IP address of the service."),
        Column::text("External-IP", "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service."),
        Column::text("Port(s)", "The list of ports that are exposed by this service."),
        AGE,
        Column::text("Selector", "Route service traffic to pods with label keys and values matching this selector.").wide(),
    ],
    cells: service_cells,
};

fn service_cells(svc: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (name, age) = (name_cell(svc), age_cell(svc, now));
    let cluster_ip = array_at(svc, "/spec/clusterIPs")
        .first()
        .and_then(Value::as_str)
        .unwrap_or_else(|| str_at(svc, "/spec/clusterIP"));
    vec![
        name,
        str_at(svc, "/spec/type").into(),
        non_empty_or(cluster_ip, "<none>").into(),
        external_ip(svc).into(),
        non_empty_or(&service_ports(svc), "<none>").into(),
        age,
        format_labels(svc.pointer("/spec/selector")).into(),
    ]
}

/// The PORT(S) cell: `80/TCP`, `80:30080/TCP`, comma-separated; "" when there are none.
fn service_ports(svc: &Value) -> String {
    array_at(svc, "/spec/ports")
        .iter()
        .map(|p| {
            let protocol = non_empty_or(str_at(p, "/protocol"), "TCP");
            let node_port = int_at(p, "/nodePort");
            if node_port > 0 {
                format!("{}:{node_port}/{protocol}", int_at(p, "/port"))
            } else {
                format!("{}/{protocol}", int_at(p, "/port"))
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn external_ip(svc: &Value) -> String {
    let external: Vec<&str> = array_at(svc, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match str_at(svc, "/spec/type") {
        "ClusterIP" | "NodePort" | "" if !external.is_empty() => external.join(","),
        "ClusterIP" | "NodePort" => "<none>".to_string(),
        "LoadBalancer" => {
            let mut ips: Vec<&str> = array_at(svc, "/status/loadBalancer/ingress")
                .iter()
                .map(|ing| non_empty_or(str_at(ing, "/ip"), str_at(ing, "/hostname")))
                .filter(|x| !x.is_empty())
                .collect();
            ips.extend(external);
            if ips.is_empty() {
                "<pending>".to_string()
            } else {
                ips.join(",")
            }
        }
        "ExternalName" => str_at(svc, "/spec/externalName").to_string(),
        _ => "<unknown>".to_string(),
    }
}

pub(super) const ENDPOINTS: KindPrinter = KindPrinter {
    group: "",
    kind: "Endpoints",
    columns: &[
        NAME,
        Column::text(
            "Endpoints",
            "Endpoints is the list of endpoints (address:port) backing the service.",
        ),
        AGE,
    ],
    cells: endpoints_cells,
};

fn endpoints_cells(ep: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(ep),
        format_endpoints(ep).into(),
        age_cell(ep, now),
    ]
}

/// The ENDPOINTS cell: at most three `ip:port`, then ` + N more...`; `<none>` when empty.
fn format_endpoints(ep: &Value) -> String {
    const MAX: usize = 3;
    let subsets = array_at(ep, "/subsets");
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0;
    for ss in subsets {
        let addresses = array_at(ss, "/addresses");
        let ports = array_at(ss, "/ports");
        if ports.is_empty() {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(str_at(a, "/ip").to_string());
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
                list.push(join_host_port(str_at(a, "/ip"), int_at(p, "/port")));
            }
        }
    }
    let ret = list.join(",");
    if more {
        return format!("{ret} + {} more...", count - MAX);
    }
    non_empty_or(&ret, "<none>").to_string()
}

fn join_host_port(ip: &str, port: i64) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

// Nodes, namespaces and events.

pub(super) const NODE: KindPrinter = KindPrinter {
    group: "",
    kind: "Node",
    columns: &[
        NAME,
        Column::text("Status", "The status of the node."),
        Column::text("Roles", "The roles of the node."),
        AGE,
        Column::text("Version", "Kubelet Version reported by the node."),
        Column::text("Internal-IP", "List of addresses reachable to the node.").wide(),
        Column::text("External-IP", "List of addresses reachable to the node.").wide(),
        Column::text("OS-Image", "OS Image reported by the node.").wide(),
        Column::text("Kernel-Version", "Kernel Version reported by the node.").wide(),
        Column::text(
            "Container-Runtime",
            "Container Runtime Version reported by the node.",
        )
        .wide(),
    ],
    cells: node_cells,
};

fn node_cells(node: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (name, age) = (name_cell(node), age_cell(node, now));
    let mut status: Vec<&str> = Vec::new();
    if let Some(ready) = array_at(node, "/status/conditions")
        .iter()
        .rev()
        .find(|c| str_at(c, "/type") == "Ready")
    {
        status.push(if str_at(ready, "/status") == "True" {
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
        non_empty_or(&roles, "<none>").into(),
        age,
        str_at(node, "/status/nodeInfo/kubeletVersion").into(),
        node_address(node, "InternalIP").into(),
        node_address(node, "ExternalIP").into(),
        non_empty_or(str_at(node, "/status/nodeInfo/osImage"), "<unknown>").into(),
        non_empty_or(str_at(node, "/status/nodeInfo/kernelVersion"), "<unknown>").into(),
        non_empty_or(
            str_at(node, "/status/nodeInfo/containerRuntimeVersion"),
            "<unknown>",
        )
        .into(),
    ]
}

fn node_address(node: &Value, type_: &str) -> String {
    array_at(node, "/status/addresses")
        .iter()
        .find(|a| str_at(a, "/type") == type_)
        .map(|a| str_at(a, "/address").to_string())
        .unwrap_or_else(|| "<none>".to_string())
}

pub(super) const NAMESPACE: KindPrinter = KindPrinter {
    group: "",
    kind: "Namespace",
    columns: &[
        NAME,
        Column::text("Status", "The status of the namespace."),
        AGE,
    ],
    cells: namespace_cells,
};

fn namespace_cells(ns: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(ns),
        str_at(ns, "/status/phase").into(),
        age_cell(ns, now),
    ]
}

pub(super) const EVENT: KindPrinter = KindPrinter {
    group: "",
    kind: "Event",
    columns: &[
        Column::text("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
        Column::text("Type", "Type of this event (Normal, Warning)."),
        Column::text("Reason", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
        Column::text("Object", "The object that this event is about."),
        Column::text("Subobject", "The field of the object the event is about, e.g. a container.").wide(),
        Column::text("Source", "The component reporting this event.").wide(),
        Column::text("Message", "A human-readable description of the status of this operation."),
        Column::text("First Seen", "The time at which the event was first recorded.").wide(),
        Column::integer("Count", "The number of times this event has occurred.").wide(),
        NAME.wide(),
    ],
    cells: event_cells,
};

pub(super) fn event_cells(ev: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let first = time_at(ev, "/firstTimestamp").or_else(|| time_at(ev, "/eventTime"));
    let first_seen = time_since(first, now);
    let mut last_seen = match time_at(ev, "/lastTimestamp") {
        Some(t) => human_age(t, now),
        None => first_seen.clone(),
    };
    let mut count = int_at(ev, "/count");
    if ev.get("series").is_some_and(Value::is_object) {
        last_seen = time_since(time_at(ev, "/series/lastObservedTime"), now);
        count = int_at(ev, "/series/count");
    } else if count == 0 {
        count = 1;
    }
    let kind = str_at(ev, "/involvedObject/kind").to_lowercase();
    let obj_name = str_at(ev, "/involvedObject/name");
    let target = if obj_name.is_empty() {
        kind
    } else {
        format!("{kind}/{obj_name}")
    };
    let component = non_empty_or(
        str_at(ev, "/source/component"),
        str_at(ev, "/reportingComponent"),
    );
    let instance = non_empty_or(str_at(ev, "/source/host"), str_at(ev, "/reportingInstance"));
    let source = match (component.is_empty(), instance.is_empty()) {
        (true, _) => "<unknown>".to_string(),
        (false, true) => component.to_string(),
        (false, false) => format!("{component}, {instance}"),
    };
    vec![
        last_seen.into(),
        str_at(ev, "/type").into(),
        str_at(ev, "/reason").into(),
        target.into(),
        str_at(ev, "/involvedObject/fieldPath").into(),
        source.into(),
        str_at(ev, "/message").trim().into(),
        first_seen.into(),
        count.into(),
        str_at(ev, "/metadata/name").into(),
    ]
}

// Volumes.

pub(super) const PERSISTENT_VOLUME: KindPrinter = KindPrinter {
    group: "",
    kind: "PersistentVolume",
    columns: &[
        NAME,
        Column::text("Capacity", "capacity is the description of the persistent volume's resources and capacity."),
        Column::text("Access Modes", "accessModes contains all ways the volume can be mounted."),
        Column::text("Reclaim Policy", "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim."),
        Column::text("Status", "phase indicates if a volume is available, bound to a claim, or released by a claim."),
        Column::text("Claim", "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim."),
        Column::text("StorageClass", "storageClassName is the name of StorageClass to which this persistent volume belongs."),
        Column::text("VolumeAttributesClass", "Name of VolumeAttributesClass to which this persistent volume belongs."),
        Column::text("Reason", "reason is a brief CamelCase string that describes any failure."),
        AGE,
        Column::text("VolumeMode", "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.").wide(),
    ],
    cells: pv_cells,
};

fn pv_cells(pv: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (name, age) = (name_cell(pv), age_cell(pv, now));
    let claim = if pv.pointer("/spec/claimRef").is_some_and(Value::is_object) {
        format!(
            "{}/{}",
            str_at(pv, "/spec/claimRef/namespace"),
            str_at(pv, "/spec/claimRef/name")
        )
    } else {
        String::new()
    };
    let phase = if is_deleting(pv) {
        "Terminating"
    } else {
        str_at(pv, "/status/phase")
    };
    vec![
        name,
        quantity_or_zero(pv, "/spec/capacity/storage").into(),
        access_modes(array_at(pv, "/spec/accessModes")).into(),
        str_at(pv, "/spec/persistentVolumeReclaimPolicy").into(),
        phase.into(),
        claim.into(),
        storage_class(pv).into(),
        string_or_unset(pv, "/spec/volumeAttributesClassName").into(),
        str_at(pv, "/status/reason").into(),
        age,
        string_or_unset(pv, "/spec/volumeMode").into(),
    ]
}

pub(super) const PERSISTENT_VOLUME_CLAIM: KindPrinter = KindPrinter {
    group: "",
    kind: "PersistentVolumeClaim",
    columns: &[
        NAME,
        Column::text("Status", "phase represents the current phase of PersistentVolumeClaim."),
        Column::text("Volume", "volumeName is the binding reference to the PersistentVolume backing this claim."),
        Column::text("Capacity", "capacity represents the actual resources of the underlying volume."),
        Column::text("Access Modes", "accessModes contains the actual access modes the volume backing the PVC has."),
        Column::text("StorageClass", "storageClassName is the name of the StorageClass required by the claim."),
        Column::text("VolumeAttributesClass", "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim."),
        AGE,
        Column::text("VolumeMode", "volumeMode defines what type of volume is required by the claim.").wide(),
    ],
    cells: pvc_cells,
};

fn pvc_cells(pvc: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (name, age) = (name_cell(pvc), age_cell(pvc, now));
    let phase = if is_deleting(pvc) {
        "Terminating"
    } else {
        str_at(pvc, "/status/phase")
    };
    let volume = str_at(pvc, "/spec/volumeName");
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            quantity_or_zero(pvc, "/status/capacity/storage"),
            access_modes(array_at(pvc, "/status/accessModes")),
        )
    };
    vec![
        name,
        phase.into(),
        volume.into(),
        capacity.into(),
        modes.into(),
        storage_class(pvc).into(),
        string_or_unset(pvc, "/spec/volumeAttributesClassName").into(),
        age,
        string_or_unset(pvc, "/spec/volumeMode").into(),
    ]
}

/// Access modes as kubectl abbreviates them: RWO, ROX, RWX, RWOP, in that order.
pub fn access_modes(modes: &[Value]) -> String {
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

fn quantity_or_zero(v: &Value, ptr: &str) -> String {
    match v.pointer(ptr) {
        Some(q) if !q.is_null() => value_string(q),
        _ => "0".to_string(),
    }
}

/// The class of a PV or PVC: the beta annotation, else `spec.storageClassName`.
pub fn storage_class(obj: &Value) -> String {
    match obj.pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class") {
        Some(Value::String(class)) => class.clone(),
        _ => str_at(obj, "/spec/storageClassName").to_string(),
    }
}

fn string_or_unset(obj: &Value, ptr: &str) -> String {
    match obj.pointer(ptr) {
        Some(Value::String(x)) => x.clone(),
        _ => "<unset>".to_string(),
    }
}

// ConfigMaps and Secrets.

pub(super) const CONFIG_MAP: KindPrinter = KindPrinter {
    group: "",
    kind: "ConfigMap",
    columns: &[
        NAME,
        Column::integer("Data", "Number of data in configmap"),
        AGE,
    ],
    cells: config_map_cells,
};

/// DATA counts the keys of `data` and `binaryData`.
fn data_count(obj: &Value) -> i64 {
    ["data", "binaryData"]
        .iter()
        .filter_map(|k| obj.get(k).and_then(Value::as_object))
        .map(|m| m.len() as i64)
        .sum()
}

fn config_map_cells(cm: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![name_cell(cm), data_count(cm).into(), age_cell(cm, now)]
}

pub(super) const SECRET: KindPrinter = KindPrinter {
    group: "",
    kind: "Secret",
    columns: &[
        NAME,
        Column::text("Type", "The type of the secret"),
        Column::integer("Data", "Number of data in secret"),
        AGE,
    ],
    cells: secret_cells,
};

fn secret_cells(secret: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(secret),
        str_at(secret, "/type").into(),
        data_count(secret).into(),
        age_cell(secret, now),
    ]
}

pub(super) const SERVICE_ACCOUNT: KindPrinter = KindPrinter {
    group: "",
    kind: "ServiceAccount",
    columns: &[
        NAME,
        Column::text("Secrets", "Secrets is the list of secrets allowed to be used by pods running using this ServiceAccount."),
        AGE,
    ],
    cells: service_account_cells,
};

/// SECRETS counts `secrets`, as kubectl's printer does.
fn service_account_cells(sa: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let secrets = sa
        .get("secrets")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    vec![name_cell(sa), (secrets as i64).into(), age_cell(sa, now)]
}
