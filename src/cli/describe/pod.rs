//! `describe pod`: kubectl's pod layout.

use serde_json::Value;

use super::sections::{
    conditions, container_spec, controlled_by, labels_and_annotations, name_and_namespace, volumes,
};
use super::writer::{or_none, rfc1123z, str_of, Out};

pub(super) fn describe_pod(obj: &Value) -> Out {
    let mut out = Out::default();
    let (meta, spec, status) = (&obj["metadata"], &obj["spec"], &obj["status"]);
    name_and_namespace(&mut out, meta);
    out.kv(
        0,
        "Priority",
        &spec["priority"].as_i64().unwrap_or(0).to_string(),
    );
    if let Some(class) = spec["priorityClassName"].as_str().filter(|c| !c.is_empty()) {
        out.kv(0, "Priority Class Name", class);
    }
    out.kv(
        0,
        "Service Account",
        spec["serviceAccountName"].as_str().unwrap_or("default"),
    );
    let node = str_of(&spec["nodeName"]);
    let node = match (node, status["hostIP"].as_str()) {
        ("", _) => "<none>".to_string(),
        (n, Some(ip)) => format!("{n}/{ip}"),
        (n, None) => n.to_string(),
    };
    out.kv(0, "Node", &node);
    if status.get("startTime").is_some() {
        out.kv(0, "Start Time", &rfc1123z(&status["startTime"]));
    }
    labels_and_annotations(&mut out, meta);
    let mut phase = status["phase"].as_str().unwrap_or("Pending").to_string();
    if meta.get("deletionTimestamp").is_some() {
        phase = "Terminating".to_string();
    }
    out.kv(0, "Status", &phase);
    if let Some(reason) = status["reason"].as_str() {
        out.kv(0, "Reason", reason);
    }
    out.kv(0, "IP", or_none(str_of(&status["podIP"])));
    let ips = status["podIPs"].as_array().cloned().unwrap_or_default();
    if ips.is_empty() {
        out.kv(0, "IPs", "<none>");
    } else {
        out.line(0, "IPs:");
        for ip in ips {
            out.kv(2, "IP", str_of(&ip["ip"]));
        }
    }
    controlled_by(&mut out, meta);
    let statuses = |key: &str| status[key].as_array().cloned().unwrap_or_default();
    let status_of = |list: &[Value], name: &str| list.iter().find(|c| c["name"] == name).cloned();
    let init = spec["initContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !init.is_empty() {
        out.line(0, "Init Containers:");
        let st = statuses("initContainerStatuses");
        for c in &init {
            let cs = status_of(&st, str_of(&c["name"])).unwrap_or(Value::Null);
            container_spec(&mut out, c, Some(&cs), true);
        }
    }
    out.line(0, "Containers:");
    let st = statuses("containerStatuses");
    for c in spec["containers"].as_array().cloned().unwrap_or_default() {
        let cs = status_of(&st, str_of(&c["name"])).unwrap_or(Value::Null);
        container_spec(&mut out, &c, Some(&cs), true);
    }
    conditions(&mut out, &status["conditions"], false);
    volumes(&mut out, 0, &spec["volumes"]);
    if let Some(qos) = status["qosClass"].as_str() {
        out.kv(0, "QoS Class", qos);
    }
    out.map(0, "Node-Selectors", &spec["nodeSelector"], "=", &[]);
    out
}
