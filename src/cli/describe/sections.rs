//! The sections several layouts share: containers (with their state in a pod), volumes,
//! conditions and the pod template.

use serde_json::Value;

use bosun::owners::controller_of_json;

use super::writer::{rfc1123z, str_of, title_case, Out};
use crate::cli::apply::LAST_APPLIED;

/// `Name:` and `Namespace:`.
pub(super) fn name_and_namespace(out: &mut Out, meta: &Value) {
    out.kv(0, "Name", str_of(&meta["name"]));
    out.kv(0, "Namespace", str_of(&meta["namespace"]));
}

/// `Labels:` and `Annotations:` (without the last-applied configuration, as kubectl).
pub(super) fn labels_and_annotations(out: &mut Out, meta: &Value) {
    out.map(0, "Labels", &meta["labels"], "=", &[]);
    out.map(
        0,
        "Annotations",
        &meta["annotations"],
        ": ",
        &[LAST_APPLIED],
    );
}

/// `Controlled By:  Kind/name` when the object has a controller.
pub(super) fn controlled_by(out: &mut Out, meta: &Value) {
    if let Some(owner) = controller_of_json(meta) {
        out.kv(
            0,
            "Controlled By",
            &format!("{}/{}", str_of(&owner["kind"]), str_of(&owner["name"])),
        );
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

pub(super) fn container_spec(out: &mut Out, c: &Value, status: Option<&Value>, pod: bool) {
    out.line(if pod { 2 } else { 3 }, &format!("{}:", str_of(&c["name"])));
    let ind = 4;
    if let Some(st) = status {
        out.kv(ind, "Container ID", str_of(&st["containerID"]));
    }
    out.kv(ind, "Image", str_of(&c["image"]));
    if let Some(st) = status {
        out.kv(ind, "Image ID", str_of(&st["imageID"]));
    }
    let (port, host) = ports_string(c);
    out.kv(ind, "Port", &port);
    out.kv(ind, "Host Port", &host);
    if let Some(cmd) = c["command"].as_array() {
        out.line(ind, "Command:");
        for a in cmd {
            out.line(ind + 2, str_of(a));
        }
    }
    if let Some(args) = c["args"].as_array() {
        out.line(ind, "Args:");
        for a in args {
            out.line(ind + 2, str_of(a));
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
                str_of(&e["value"]).to_string()
            } else {
                "<set from a reference>".to_string()
            };
            out.kv(ind + 2, str_of(&e["name"]), &value);
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
                &format!(
                    "{} from {} ({ro})",
                    str_of(&m["mountPath"]),
                    str_of(&m["name"])
                ),
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

pub(super) fn volumes(out: &mut Out, indent: usize, vols: &Value) {
    let vols = vols.as_array().cloned().unwrap_or_default();
    if vols.is_empty() {
        out.kv(indent, "Volumes", "<none>");
        return;
    }
    out.line(indent, "Volumes:");
    for v in vols {
        out.line(indent + 2, &format!("{}:", str_of(&v["name"])));
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

pub(super) fn conditions(out: &mut Out, conds: &Value, with_reason: bool) {
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
                    str_of(&c["type"]),
                    str_of(&c["status"]),
                    str_of(&c["reason"])
                ),
            );
        }
    } else {
        out.line(2, "Type\tStatus");
        for c in conds {
            out.line(
                2,
                &format!("{}\t{}", str_of(&c["type"]), str_of(&c["status"])),
            );
        }
    }
}

pub(super) fn pod_template(out: &mut Out, template: &Value) {
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
    out.list(2, "Tolerations", &tolerations);
}

/// `key=value:NoSchedule op=Exists for 300s`, as kubectl shows a toleration.
fn toleration_string(t: &Value) -> String {
    let mut out = str_of(&t["key"]).to_string();
    if !str_of(&t["value"]).is_empty() {
        out.push_str(&format!("={}", str_of(&t["value"])));
    }
    if !str_of(&t["effect"]).is_empty() {
        out.push_str(&format!(":{}", str_of(&t["effect"])));
    }
    if t["operator"] == "Exists" && str_of(&t["value"]).is_empty() {
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
