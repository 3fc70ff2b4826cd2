//! `bosun describe`: kubectl's layouts for pods and deployments, a generic
//! `key: value` layout for other kinds, and the object's events.

use anyhow::{anyhow, bail, Result};
use chrono::{DateTime, Utc};
use clap::Args;
use serde_json::Value;

use bosun::owners::controller_of_json;
use bosun::printers::human_duration;
use bosun::resources::{by_name, ResourceInfo};
use bosun::selector::{format_label_selector_json, label_selector_string_json};

use super::apply::LAST_APPLIED;
use super::client::{with_query, Ctx};
use super::errors;
use super::targets::parse_targets;

#[derive(Debug, Args)]
pub struct DescribeArgs {
    /// TYPE [NAME...] or TYPE/NAME.
    #[arg(required = true, value_name = "TYPE [NAME...]")]
    resources: Vec<String>,
    /// Describe the objects matching this label selector.
    #[arg(short = 'l', long)]
    selector: Option<String>,
}

/// Go's text/tabwriter as kubectl's describe uses it (min width 0,
/// padding 2): a column block is a run of consecutive lines that have a
/// tab-terminated cell in that column; the last cell of a line is not padded.
pub fn tabwrite(text: &str, minwidth: usize, padding: usize) -> String {
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    let mut widths: Vec<Vec<usize>> = lines.iter().map(|l| vec![0; l.len()]).collect();
    fn format(
        lines: &[Vec<&str>],
        widths: &mut [Vec<usize>],
        column: usize,
        start: usize,
        end: usize,
        minwidth: usize,
        padding: usize,
    ) {
        let mut this = start;
        while this < end {
            if column + 1 >= lines[this].len() {
                this += 1;
                continue;
            }
            let block_start = this;
            let mut width = minwidth;
            while this < end && column + 1 < lines[this].len() {
                width = width.max(lines[this][column].chars().count() + padding);
                this += 1;
            }
            for w in widths.iter_mut().take(this).skip(block_start) {
                w[column] = width;
            }
            format(
                lines,
                widths,
                column + 1,
                block_start,
                this,
                minwidth,
                padding,
            );
        }
    }
    format(&lines, &mut widths, 0, 0, lines.len(), minwidth, padding);
    let mut out = String::new();
    for (line, w) in lines.iter().zip(&widths) {
        for (i, cell) in line.iter().enumerate() {
            out.push_str(cell);
            if i + 1 < line.len() {
                let pad = w[i].saturating_sub(cell.chars().count());
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push('\n');
    }
    out
}

fn parse_time(v: &Value) -> Option<DateTime<Utc>> {
    v.as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
}

fn rfc1123z(v: &Value) -> String {
    parse_time(v)
        .map(|t| t.format("%a, %d %b %Y %H:%M:%S %z").to_string())
        .unwrap_or_else(|| "<unknown>".to_string())
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "<none>"
    } else {
        s
    }
}

/// Output collected with tabs, aligned at the end.
#[derive(Default)]
struct Out(String);

impl Out {
    fn line(&mut self, indent: usize, text: &str) {
        self.0.push_str(&" ".repeat(indent));
        self.0.push_str(text);
        self.0.push('\n');
    }
    fn kv(&mut self, indent: usize, key: &str, value: &str) {
        self.line(indent, &format!("{key}:\t{value}"));
    }
    /// `Labels:  a=b` with further pairs on their own lines.
    fn map(&mut self, indent: usize, key: &str, map: &Value, sep: &str, skip: &[&str]) {
        let mut pairs: Vec<String> = map
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| !skip.contains(&k.as_str()))
                    .map(|(k, v)| format!("{k}{sep}{}", v.as_str().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default();
        pairs.sort();
        if pairs.is_empty() {
            self.kv(indent, key, "<none>");
            return;
        }
        self.kv(indent, key, &pairs[0]);
        // kubectl writes further pairs as `\tpair`, without the key's indent.
        for p in &pairs[1..] {
            self.line(0, &format!("\t{p}"));
        }
    }
    fn finish(self) -> String {
        tabwrite(&self.0, 0, 2)
    }
}

fn ports_string(c: &Value) -> (String, String) {
    let ports = c["ports"].as_array().cloned().unwrap_or_default();
    if ports.is_empty() {
        return ("<none>".into(), "<none>".into());
    }
    let proto = |p: &Value| p["protocol"].as_str().unwrap_or("TCP").to_string();
    let port = ports
        .iter()
        .map(|p| format!("{}/{}", p["containerPort"], proto(p)))
        .collect::<Vec<_>>()
        .join(", ");
    let host = ports
        .iter()
        .map(|p| format!("{}/{}", p["hostPort"].as_i64().unwrap_or(0), proto(p)))
        .collect::<Vec<_>>()
        .join(", ");
    (port, host)
}

fn container_spec(out: &mut Out, c: &Value, status: Option<&Value>, pod: bool) {
    out.line(if pod { 2 } else { 3 }, &format!("{}:", s(&c["name"])));
    let ind = 4;
    if let Some(st) = status {
        out.kv(ind, "Container ID", s(&st["containerID"]));
    }
    out.kv(ind, "Image", s(&c["image"]));
    if let Some(st) = status {
        out.kv(ind, "Image ID", s(&st["imageID"]));
    }
    let (port, host) = ports_string(c);
    out.kv(ind, "Port", &port);
    out.kv(ind, "Host Port", &host);
    if let Some(cmd) = c["command"].as_array() {
        out.line(ind, "Command:");
        for a in cmd {
            out.line(ind + 2, s(a));
        }
    }
    if let Some(args) = c["args"].as_array() {
        out.line(ind, "Args:");
        for a in args {
            out.line(ind + 2, s(a));
        }
    }
    if pod {
        let st = status.cloned().unwrap_or(Value::Null);
        describe_state(out, ind, "State", &st["state"]);
        if st["lastState"].as_object().is_some_and(|m| !m.is_empty()) {
            describe_state(out, ind, "Last State", &st["lastState"]);
        }
        out.kv(
            ind,
            "Ready",
            if st["ready"].as_bool().unwrap_or(false) {
                "True"
            } else {
                "False"
            },
        );
        out.kv(
            ind,
            "Restart Count",
            &st["restartCount"].as_i64().unwrap_or(0).to_string(),
        );
    }
    let env = c["env"].as_array().cloned().unwrap_or_default();
    if env.is_empty() {
        out.kv(ind, "Environment", "<none>");
    } else {
        out.line(ind, "Environment:");
        for e in env {
            let value = if e.get("value").is_some() {
                s(&e["value"]).to_string()
            } else {
                "<set from a reference>".to_string()
            };
            out.kv(ind + 2, s(&e["name"]), &value);
        }
    }
    let mounts = c["volumeMounts"].as_array().cloned().unwrap_or_default();
    if mounts.is_empty() {
        out.kv(ind, "Mounts", "<none>");
    } else {
        out.line(ind, "Mounts:");
        for m in mounts {
            let ro = if m["readOnly"].as_bool().unwrap_or(false) {
                "ro"
            } else {
                "rw"
            };
            out.line(
                ind + 2,
                &format!("{} from {} ({ro})", s(&m["mountPath"]), s(&m["name"])),
            );
        }
    }
}

fn describe_state(out: &mut Out, ind: usize, label: &str, state: &Value) {
    if let Some(r) = state.get("running") {
        out.kv(ind, label, "Running");
        out.kv(ind + 2, "Started", &rfc1123z(&r["startedAt"]));
    } else if let Some(w) = state.get("waiting") {
        out.kv(ind, label, "Waiting");
        if let Some(reason) = w["reason"].as_str() {
            out.kv(ind + 2, "Reason", reason);
        }
    } else if let Some(t) = state.get("terminated") {
        out.kv(ind, label, "Terminated");
        if let Some(reason) = t["reason"].as_str() {
            out.kv(ind + 2, "Reason", reason);
        }
        out.kv(
            ind + 2,
            "Exit Code",
            &t["exitCode"].as_i64().unwrap_or(0).to_string(),
        );
        out.kv(ind + 2, "Started", &rfc1123z(&t["startedAt"]));
        out.kv(ind + 2, "Finished", &rfc1123z(&t["finishedAt"]));
    } else {
        out.kv(ind, label, "Waiting");
    }
}

fn volumes(out: &mut Out, indent: usize, vols: &Value) {
    let vols = vols.as_array().cloned().unwrap_or_default();
    if vols.is_empty() {
        out.kv(indent, "Volumes", "<none>");
        return;
    }
    out.line(indent, "Volumes:");
    for v in vols {
        out.line(indent + 2, &format!("{}:", s(&v["name"])));
        let Some((kind, body)) = v
            .as_object()
            .and_then(|m| m.iter().find(|(k, _)| k.as_str() != "name"))
        else {
            continue;
        };
        let (title, note) = match kind.as_str() {
            "emptyDir" => (
                "EmptyDir",
                " (a temporary directory that shares a pod's lifetime)",
            ),
            "hostPath" => ("HostPath", " (bare host directory volume)"),
            "configMap" => ("ConfigMap", " (a volume populated by a ConfigMap)"),
            "secret" => ("Secret", " (a volume populated by a Secret)"),
            "persistentVolumeClaim" => (
                "PersistentVolumeClaim",
                " (a reference to a PersistentVolumeClaim in the same namespace)",
            ),
            "projected" => (
                "Projected",
                " (a volume that contains injected data from multiple sources)",
            ),
            other => (other, ""),
        };
        out.kv(indent + 4, "Type", &format!("{title}{note}"));
        if let Some(m) = body.as_object() {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for k in keys {
                let val = match &m[k] {
                    Value::String(x) => x.clone(),
                    other => other.to_string(),
                };
                out.kv(indent + 4, &title_case(k), &val);
            }
        }
    }
}

/// `claimName` -> `ClaimName`, as kubectl's generic describer shows keys.
fn title_case(k: &str) -> String {
    let mut c = k.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

fn conditions(out: &mut Out, conds: &Value, with_reason: bool) {
    let conds = conds.as_array().cloned().unwrap_or_default();
    if conds.is_empty() {
        return;
    }
    out.line(0, "Conditions:");
    if with_reason {
        out.line(2, "Type\tStatus\tReason");
        out.line(2, "----\t------\t------");
        for c in conds {
            out.line(
                2,
                &format!(
                    "{} \t{}\t{}",
                    s(&c["type"]),
                    s(&c["status"]),
                    s(&c["reason"])
                ),
            );
        }
    } else {
        out.line(2, "Type\tStatus");
        for c in conds {
            out.line(2, &format!("{}\t{}", s(&c["type"]), s(&c["status"])));
        }
    }
}

/// The Events section from `events` whose involvedObject is this object.
async fn events(ctx: &Ctx, info: &ResourceInfo, obj: &Value, out: &mut Out) {
    let Some(events_info) = by_name("events") else {
        return;
    };
    let name = s(&obj["metadata"]["name"]);
    let ns = obj["metadata"]["namespace"].as_str();
    let uid = s(&obj["metadata"]["uid"]);
    let path = with_query(
        &events_info.collection_path(ns),
        &[("fieldSelector", &format!("involvedObject.name={name}"))],
    );
    let list = ctx.get_json(&path).await.unwrap_or(Value::Null);
    let mut items: Vec<Value> = list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            let io = &e["involvedObject"];
            (io["kind"].as_str().is_none_or(|k| k == info.kind))
                && (io["uid"].as_str().is_none_or(|u| u.is_empty() || u == uid))
        })
        .collect();
    if items.is_empty() {
        out.kv(0, "Events", "<none>");
        return;
    }
    let last = |e: &Value| {
        parse_time(&e["lastTimestamp"])
            .or_else(|| parse_time(&e["eventTime"]))
            .or_else(|| parse_time(&e["metadata"]["creationTimestamp"]))
    };
    items.sort_by_key(|e| last(e));
    let now = Utc::now();
    out.line(0, "Events:");
    out.line(2, "Type\tReason\tAge\tFrom\tMessage");
    out.line(2, "----\t------\t----\t----\t-------");
    for e in &items {
        let age_of = |t: Option<DateTime<Utc>>| {
            t.map(|t| human_duration(now - t))
                .unwrap_or_else(|| "<unknown>".to_string())
        };
        let count = e["count"].as_i64().unwrap_or(1);
        let age = if count > 1 {
            format!(
                "{} (x{count} over {})",
                age_of(last(e)),
                age_of(parse_time(&e["firstTimestamp"]))
            )
        } else {
            age_of(last(e))
        };
        let from = e["source"]["component"]
            .as_str()
            .or(e["reportingComponent"].as_str())
            .unwrap_or("");
        out.line(
            2,
            &format!(
                "{}\t{}\t{age}\t{from}\t{}",
                s(&e["type"]),
                s(&e["reason"]),
                s(&e["message"]).trim()
            ),
        );
    }
}

fn common_header(out: &mut Out, obj: &Value, info: &ResourceInfo) {
    let meta = &obj["metadata"];
    out.kv(0, "Name", s(&meta["name"]));
    if info.namespaced {
        out.kv(0, "Namespace", s(&meta["namespace"]));
    }
}

fn describe_pod(obj: &Value) -> Out {
    let mut out = Out::default();
    let meta = &obj["metadata"];
    let spec = &obj["spec"];
    let status = &obj["status"];
    out.kv(0, "Name", s(&meta["name"]));
    out.kv(0, "Namespace", s(&meta["namespace"]));
    out.kv(
        0,
        "Priority",
        &spec["priority"].as_i64().unwrap_or(0).to_string(),
    );
    out.kv(
        0,
        "Service Account",
        spec["serviceAccountName"].as_str().unwrap_or("default"),
    );
    let node = s(&spec["nodeName"]);
    let node = match (node, status["hostIP"].as_str()) {
        ("", _) => "<none>".to_string(),
        (n, Some(ip)) => format!("{n}/{ip}"),
        (n, None) => n.to_string(),
    };
    out.kv(0, "Node", &node);
    if status.get("startTime").is_some() {
        out.kv(0, "Start Time", &rfc1123z(&status["startTime"]));
    }
    out.map(0, "Labels", &meta["labels"], "=", &[]);
    out.map(
        0,
        "Annotations",
        &meta["annotations"],
        ": ",
        &[LAST_APPLIED],
    );
    let mut phase = status["phase"].as_str().unwrap_or("Pending").to_string();
    if meta.get("deletionTimestamp").is_some() {
        phase = "Terminating".to_string();
    }
    out.kv(0, "Status", &phase);
    if let Some(reason) = status["reason"].as_str() {
        out.kv(0, "Reason", reason);
    }
    out.kv(0, "IP", or_none(s(&status["podIP"])));
    let ips = status["podIPs"].as_array().cloned().unwrap_or_default();
    if ips.is_empty() {
        out.kv(0, "IPs", "<none>");
    } else {
        out.line(0, "IPs:");
        for ip in ips {
            out.kv(2, "IP", s(&ip["ip"]));
        }
    }
    if let Some(owner) = controller_of_json(meta) {
        out.kv(
            0,
            "Controlled By",
            &format!("{}/{}", s(&owner["kind"]), s(&owner["name"])),
        );
    }
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
            let cs = status_of(&st, s(&c["name"])).unwrap_or(Value::Null);
            container_spec(&mut out, c, Some(&cs), true);
        }
    }
    out.line(0, "Containers:");
    let st = statuses("containerStatuses");
    for c in spec["containers"].as_array().cloned().unwrap_or_default() {
        let cs = status_of(&st, s(&c["name"])).unwrap_or(Value::Null);
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

fn pod_template(out: &mut Out, template: &Value) {
    out.line(0, "Pod Template:");
    out.map(2, "Labels", &template["metadata"]["labels"], "=", &[]);
    if template["metadata"]["annotations"]
        .as_object()
        .is_some_and(|m| !m.is_empty())
    {
        out.map(
            2,
            "Annotations",
            &template["metadata"]["annotations"],
            ": ",
            &[],
        );
    }
    let spec = &template["spec"];
    let init = spec["initContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !init.is_empty() {
        out.line(2, "Init Containers:");
        for c in &init {
            container_spec(out, c, None, false);
        }
    }
    out.line(2, "Containers:");
    for c in spec["containers"].as_array().cloned().unwrap_or_default() {
        container_spec(out, &c, None, false);
    }
    volumes(out, 2, &spec["volumes"]);
    out.map(2, "Node-Selectors", &spec["nodeSelector"], "=", &[]);
    let tolerations: Vec<String> = spec["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(toleration_string)
        .collect();
    match tolerations.split_first() {
        None => out.kv(2, "Tolerations", "<none>"),
        Some((first, rest)) => {
            out.kv(2, "Tolerations", first);
            for t in rest {
                out.line(0, &format!("\t{t}"));
            }
        }
    }
}

/// `key=value:NoSchedule op=Exists for 300s`, as kubectl shows a toleration.
fn toleration_string(t: &Value) -> String {
    let mut out = s(&t["key"]).to_string();
    if !s(&t["value"]).is_empty() {
        out.push_str(&format!("={}", s(&t["value"])));
    }
    if !s(&t["effect"]).is_empty() {
        out.push_str(&format!(":{}", s(&t["effect"])));
    }
    if t["operator"] == "Exists" && s(&t["value"]).is_empty() {
        if out.is_empty() {
            out.push_str("op=Exists");
        } else {
            out.push_str(" op=Exists");
        }
    }
    if let Some(secs) = t["tolerationSeconds"].as_i64() {
        out.push_str(&format!(" for {secs}s"));
    }
    out
}

/// The pod template as `rollout history --revision` prints it: kubectl's
/// describe lines with their tabs left in (it does not align them there).
pub fn pod_template_text(template: &Value) -> String {
    let mut out = Out::default();
    pod_template(&mut out, template);
    out.0
}

/// Whether two pod templates are the same but for the `pod-template-hash`
/// label (how kubectl finds a deployment's new ReplicaSet).
fn same_template(a: &Value, b: &Value) -> bool {
    super::rollout::without_hash(a) == super::rollout::without_hash(b)
}

fn replicaset_summary(rs: &Value) -> String {
    format!(
        "{} ({}/{} replicas created)",
        s(&rs["metadata"]["name"]),
        rs["status"]["replicas"].as_i64().unwrap_or(0),
        rs["spec"]["replicas"].as_i64().unwrap_or(1)
    )
}

/// The deployment's layout, given the replica sets it owns.
fn describe_deployment(obj: &Value, owned: &[Value]) -> Out {
    let mut out = Out::default();
    let meta = &obj["metadata"];
    let spec = &obj["spec"];
    let status = &obj["status"];
    out.kv(0, "Name", s(&meta["name"]));
    out.kv(0, "Namespace", s(&meta["namespace"]));
    out.kv(
        0,
        "CreationTimestamp",
        &rfc1123z(&meta["creationTimestamp"]),
    );
    out.map(0, "Labels", &meta["labels"], "=", &[]);
    out.map(
        0,
        "Annotations",
        &meta["annotations"],
        ": ",
        &[LAST_APPLIED],
    );
    out.kv(
        0,
        "Selector",
        &label_selector_string_json(Some(&spec["selector"])),
    );
    let n = |v: &Value| v.as_i64().unwrap_or(0);
    out.kv(
        0,
        "Replicas",
        &format!(
            "{} desired | {} updated | {} total | {} available | {} unavailable",
            spec["replicas"].as_i64().unwrap_or(1),
            n(&status["updatedReplicas"]),
            n(&status["replicas"]),
            n(&status["availableReplicas"]),
            n(&status["unavailableReplicas"]),
        ),
    );
    let strategy = spec["strategy"]["type"].as_str().unwrap_or("RollingUpdate");
    out.kv(0, "StrategyType", strategy);
    out.kv(
        0,
        "MinReadySeconds",
        &n(&spec["minReadySeconds"]).to_string(),
    );
    if strategy == "RollingUpdate" {
        let ru = &spec["strategy"]["rollingUpdate"];
        let val = |v: &Value| match v {
            Value::Null => "25%".to_string(),
            Value::String(x) => x.clone(),
            other => other.to_string(),
        };
        out.kv(
            0,
            "RollingUpdateStrategy",
            &format!(
                "{} max unavailable, {} max surge",
                val(&ru["maxUnavailable"]),
                val(&ru["maxSurge"])
            ),
        );
    }
    pod_template(&mut out, &spec["template"]);
    conditions(&mut out, &status["conditions"], true);
    // The new set has the deployment's template (the oldest one if several do).
    let new_rs = owned
        .iter()
        .filter(|rs| same_template(&rs["spec"]["template"], &spec["template"]))
        .min_by_key(|rs| s(&rs["metadata"]["creationTimestamp"]).to_string());
    let old: Vec<String> = owned
        .iter()
        // kubectl 1.32 lists every old set, scaled down or not.
        .filter(|rs| Some(*rs) != new_rs)
        .map(replicaset_summary)
        .collect();
    out.kv(
        0,
        "OldReplicaSets",
        &if old.is_empty() {
            "<none>".to_string()
        } else {
            old.join(", ")
        },
    );
    out.kv(
        0,
        "NewReplicaSet",
        &new_rs
            .map(replicaset_summary)
            .unwrap_or_else(|| "<none>".to_string()),
    );
    out
}

/// Pod counts by phase: running, waiting (pending), succeeded, failed.
fn pod_phases(pods: &[Value]) -> (usize, usize, usize, usize) {
    let count = |phase: &str| {
        pods.iter()
            .filter(|p| p["status"]["phase"] == phase)
            .count()
    };
    (
        count("Running"),
        count("Pending"),
        count("Succeeded"),
        count("Failed"),
    )
}

/// The ReplicaSet's layout, given the pods it controls.
fn describe_replicaset(obj: &Value, pods: &[Value]) -> Out {
    let mut out = Out::default();
    let meta = &obj["metadata"];
    let spec = &obj["spec"];
    out.kv(0, "Name", s(&meta["name"]));
    out.kv(0, "Namespace", s(&meta["namespace"]));
    out.kv(
        0,
        "Selector",
        &format_label_selector_json(Some(&spec["selector"])),
    );
    out.map(0, "Labels", &meta["labels"], "=", &[]);
    out.map(
        0,
        "Annotations",
        &meta["annotations"],
        ": ",
        &[LAST_APPLIED],
    );
    if let Some(owner) = controller_of_json(meta) {
        out.kv(
            0,
            "Controlled By",
            &format!("{}/{}", s(&owner["kind"]), s(&owner["name"])),
        );
    }
    out.kv(
        0,
        "Replicas",
        &format!(
            "{} current / {} desired",
            obj["status"]["replicas"].as_i64().unwrap_or(0),
            spec["replicas"].as_i64().unwrap_or(1)
        ),
    );
    let (running, waiting, succeeded, failed) = pod_phases(pods);
    out.kv(
        0,
        "Pods Status",
        &format!("{running} Running / {waiting} Waiting / {succeeded} Succeeded / {failed} Failed"),
    );
    pod_template(&mut out, &spec["template"]);
    conditions(&mut out, &obj["status"]["conditions"], true);
    out
}

/// The objects of `plural` in the object's namespace controlled by it.
async fn controlled(ctx: &Ctx, obj: &Value, plural: &str) -> Result<Vec<Value>> {
    let info = by_name(plural).ok_or_else(|| anyhow!("{plural} not served"))?;
    let uid = s(&obj["metadata"]["uid"]);
    let list = ctx
        .get_json(&info.collection_path(obj["metadata"]["namespace"].as_str()))
        .await
        .unwrap_or(Value::Null);
    Ok(list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| super::rollout::controlled_by(r, uid))
        .collect())
}

/// Everything but metadata, as indented `Key:  value` lines.
fn generic_value(out: &mut Out, indent: usize, key: &str, v: &Value) {
    match v {
        Value::Object(m) if m.is_empty() => out.kv(indent, key, "<none>"),
        Value::Object(m) => {
            out.line(indent, &format!("{key}:"));
            for (k, v) in m {
                generic_value(out, indent + 2, &title_case(k), v);
            }
        }
        Value::Array(a) if a.is_empty() => out.kv(indent, key, "<none>"),
        Value::Array(a) => {
            out.line(indent, &format!("{key}:"));
            for item in a {
                match item {
                    Value::Object(m) => {
                        let mut first = true;
                        for (k, v) in m {
                            let k = title_case(k);
                            if first {
                                generic_value(out, indent + 2, &k, v);
                                first = false;
                            } else {
                                generic_value(out, indent + 4, &k, v);
                            }
                        }
                    }
                    Value::String(x) => out.line(indent + 2, x),
                    other => out.line(indent + 2, &other.to_string()),
                }
            }
        }
        Value::String(x) => out.kv(indent, key, x),
        Value::Null => out.kv(indent, key, "<none>"),
        other => out.kv(indent, key, &other.to_string()),
    }
}

fn describe_generic(obj: &Value, info: &ResourceInfo) -> Out {
    let mut out = Out::default();
    common_header(&mut out, obj, info);
    let meta = &obj["metadata"];
    out.map(0, "Labels", &meta["labels"], "=", &[]);
    out.map(
        0,
        "Annotations",
        &meta["annotations"],
        ": ",
        &[LAST_APPLIED],
    );
    out.kv(0, "API Version", s(&obj["apiVersion"]));
    out.kv(0, "Kind", s(&obj["kind"]));
    if let Some(m) = obj.as_object() {
        for (k, v) in m {
            if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            generic_value(&mut out, 0, &title_case(k), v);
        }
    }
    out
}

async fn describe_one(ctx: &Ctx, info: &'static ResourceInfo, obj: Value) -> Result<String> {
    let obj = super::output::with_type(info, obj);
    let mut out = match info.kind {
        "Pod" => describe_pod(&obj),
        "Deployment" => describe_deployment(&obj, &controlled(ctx, &obj, "replicasets").await?),
        "ReplicaSet" => describe_replicaset(&obj, &controlled(ctx, &obj, "pods").await?),
        _ => describe_generic(&obj, info),
    };
    events(ctx, info, &obj, &mut out).await;
    Ok(out.finish())
}

pub async fn describe(ctx: &Ctx, args: &DescribeArgs) -> Result<bool> {
    let targets = parse_targets(&args.resources).map_err(|e| anyhow!(e))?;
    let mut ok = true;
    let mut first = true;
    for t in &targets {
        let ns = ctx.ns_for(t.info, None);
        let objects: Vec<Result<Value, kube::Error>> = if t.names.is_empty() {
            let path = with_query(
                &t.info.collection_path(ns),
                &[("labelSelector", args.selector.as_deref().unwrap_or(""))],
            );
            let list = ctx.get_json(&path).await?;
            list["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(Ok)
                .collect()
        } else {
            let mut v = Vec::new();
            for name in &t.names {
                v.push(ctx.get_json(&Ctx::object_path(t.info, ns, name)).await);
            }
            v
        };
        for obj in objects {
            match obj {
                Ok(obj) => {
                    if !first {
                        println!();
                        println!();
                    }
                    first = false;
                    print!("{}", describe_one(ctx, t.info, obj).await?);
                }
                Err(e @ kube::Error::Api(_)) => {
                    eprintln!("{}", errors::render(&e.into()));
                    ok = false;
                }
                Err(e) => bail!(e),
            }
        }
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tabwriter_blocks_like_go() {
        // "IPs:" has no tab, so it ends the first block; "  IP:" and
        // "Controlled By:" form the next one, exactly as kubectl prints them.
        let text = "Name:\tnginx\nNamespace:\tdefault\nIPs:\n  IP:\t10.0.0.1\nControlled By:\tReplicaSet/x\n";
        assert_eq!(
            tabwrite(text, 0, 2),
            "Name:       nginx\nNamespace:  default\nIPs:\n  IP:           10.0.0.1\nControlled By:  ReplicaSet/x\n"
        );
    }

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx-deployment", "namespace": "default", "uid": "d1",
                "creationTimestamp": "2024-12-02T15:00:00Z",
                "labels": {"app": "nginx"},
                "annotations": {"deployment.kubernetes.io/revision": "2", LAST_APPLIED: "{}"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "nginx"}},
                "template": {"metadata": {"labels": {"app": "nginx"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9",
                        "ports": [{"containerPort": 80}]}]}}},
            "status": {"replicas": 3, "updatedReplicas": 3, "availableReplicas": 3,
                "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}
        })
    }

    #[test]
    fn deployment_layout() {
        // The new set is the one with the deployment's template (but for the hash label).
        let rs = |name: &str, rev: &str, replicas: i64, image: &str| {
            json!({"metadata": {"name": name, "annotations": {"deployment.kubernetes.io/revision": rev}},
                   "spec": {"replicas": replicas,
                       "template": {"metadata": {"labels": {"app": "nginx", "pod-template-hash": name}},
                           "spec": {"containers": [{"name": "nginx", "image": image,
                               "ports": [{"containerPort": 80}]}]}}},
                   "status": {"replicas": replicas}})
        };
        let owned = vec![
            rs("nginx-old", "1", 1, "nginx:1.7.8"),
            rs("nginx-new", "2", 3, "nginx:1.7.9"),
            rs("nginx-older", "0", 0, "nginx:1.7.7"),
        ];
        let text = describe_deployment(&deployment(), &owned).finish();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Name:                   nginx-deployment");
        assert!(
            lines.contains(&"Annotations:            deployment.kubernetes.io/revision: 2"),
            "{text}"
        );
        assert!(!text.contains(LAST_APPLIED));
        assert!(
            lines.contains(&"Selector:               app=nginx"),
            "{text}"
        );
        assert!(lines.contains(
            &"Replicas:               3 desired | 3 updated | 3 total | 3 available | 0 unavailable"
        ), "{text}");
        assert!(lines.contains(&"StrategyType:           RollingUpdate"));
        assert!(lines.contains(&"RollingUpdateStrategy:  25% max unavailable, 25% max surge"));
        assert!(lines.contains(&"    Image:         nginx:1.7.9"), "{text}");
        assert!(lines.contains(&"    Port:          80/TCP"), "{text}");
        assert!(lines.contains(&"  Node-Selectors:  <none>"), "{text}");
        assert!(
            lines.contains(&"  Available      True    MinimumReplicasAvailable"),
            "{text}"
        );
        assert!(
            lines.contains(&"OldReplicaSets:  nginx-old (1/1 replicas created), nginx-older (0/0 replicas created)"),
            "{text}"
        );
        assert!(
            lines.contains(&"NewReplicaSet:   nginx-new (3/3 replicas created)"),
            "{text}"
        );
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.starts_with("CreationTimestamp:"))
                .count(),
            1
        );
        assert!(text.contains("Mon, 02 Dec 2024 15:00:00 +0000"));
    }

    #[test]
    fn pod_layout() {
        let pod = json!({
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "nginx", "tier": "fe"}},
            "spec": {"nodeName": "node1", "containers": [{"name": "nginx", "image": "nginx:1.7.9"}],
                     "volumes": [{"name": "data", "emptyDir": {}}]},
            "status": {"phase": "Running", "podIP": "10.1.0.5", "hostIP": "192.168.1.2",
                "containerStatuses": [{"name": "nginx", "ready": true, "restartCount": 2,
                    "state": {"running": {"startedAt": "2024-12-02T15:00:00Z"}}}],
                "conditions": [{"type": "Ready", "status": "True"}]}
        });
        let text = describe_pod(&pod).finish();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines.contains(&"Node:             node1/192.168.1.2"),
            "{text}"
        );
        assert!(lines.contains(&"Labels:           app=nginx"), "{text}");
        assert!(lines.contains(&"                  tier=fe"), "{text}");
        assert!(lines.contains(&"Status:           Running"), "{text}");
        assert!(lines.contains(&"IP:               10.1.0.5"), "{text}");
        assert!(lines
            .iter()
            .any(|l| l.trim_start().starts_with("State:") && l.ends_with("Running")));
        assert!(
            lines.iter().any(|l| l.trim() == "Ready:          True"),
            "{text}"
        );
        assert!(
            lines.iter().any(|l| l.trim() == "Restart Count:  2"),
            "{text}"
        );
        assert!(text.contains("EmptyDir (a temporary directory that shares a pod's lifetime)"));
    }
}
