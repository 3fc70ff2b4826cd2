//! `describe persistentvolume` and `describe persistentvolumeclaim`: kubectl's layouts
//! (`describePersistentVolume`, `describePersistentVolumeClaim` in kubectl's describe.go).

use chrono::Utc;
use serde_json::Value;

use bosun::printers::{access_modes, human_duration, storage_class};

use super::sections::labels_and_annotations;
use super::writer::{parse_time, rfc1123z, str_of, Out};

/// `Finalizers:  [a b]`, as Go prints a `[]string` with `%v`.
fn finalizers(out: &mut Out, meta: &Value) {
    let list: Vec<&str> = meta["finalizers"]
        .as_array()
        .map(|a| a.iter().map(str_of).collect())
        .unwrap_or_default();
    out.kv(0, "Finalizers", &format!("[{}]", list.join(" ")));
}

/// `Status:` the phase, or `Terminating (lasts 5s)` once deletion has begun.
fn status(out: &mut Out, obj: &Value) {
    match parse_time(&obj["metadata"]["deletionTimestamp"]) {
        Some(t) => out.kv(
            0,
            "Status",
            &format!("Terminating (lasts {})", human_duration(Utc::now() - t)),
        ),
        None => out.kv(0, "Status", str_of(&obj["status"]["phase"])),
    }
}

fn modes(v: &Value) -> String {
    access_modes(v.as_array().map(Vec::as_slice).unwrap_or_default())
}

/// `Node Affinity:` with each required term's match expressions (`key in [a, b]`).
fn node_affinity(out: &mut Out, affinity: &Value) {
    let required = &affinity["required"];
    if required.is_null() {
        out.kv(0, "Node Affinity", "<none>");
        return;
    }
    out.kv(0, "Node Affinity", "");
    let terms = required["nodeSelectorTerms"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if terms.is_empty() {
        out.kv(2, "Required Terms", "<none>");
        return;
    }
    out.kv(2, "Required Terms", "");
    for (i, term) in terms.iter().enumerate() {
        let exprs = term["matchExpressions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if exprs.is_empty() {
            out.kv(4, &format!("Term {i}"), "<none>");
        }
        for (j, req) in exprs.iter().enumerate() {
            let mut expr = format!(
                "{} {}",
                str_of(&req["key"]),
                str_of(&req["operator"]).to_lowercase()
            );
            let values: Vec<&str> = req["values"]
                .as_array()
                .map(|a| a.iter().map(str_of).collect())
                .unwrap_or_default();
            if !values.is_empty() {
                expr = format!("{expr} [{}]", values.join(", "));
            }
            if j == 0 {
                out.kv(4, &format!("Term {i}"), &expr);
            } else {
                out.line(4, &format!("\t{expr}"));
            }
        }
    }
}

/// `Source:` and the volume's type with its fields.
fn source(out: &mut Out, spec: &Value) {
    out.line(0, "Source:");
    if let Some(hp) = spec.get("hostPath").filter(|v| !v.is_null()) {
        out.kv(4, "Type", "HostPath (bare host directory volume)");
        out.kv(4, "Path", str_of(&hp["path"]));
        let kind = hp["type"].as_str().unwrap_or("<none>");
        out.kv(4, "HostPathType", kind);
    } else if let Some(local) = spec.get("local").filter(|v| !v.is_null()) {
        out.kv(
            4,
            "Type",
            "LocalVolume (a persistent volume backed by local storage on a node)",
        );
        out.kv(4, "Path", str_of(&local["path"]));
    } else {
        out.line(2, "<unknown>");
    }
}

pub(super) fn describe_persistent_volume(pv: &Value) -> Out {
    let mut out = Out::default();
    let meta = &pv["metadata"];
    let spec = &pv["spec"];
    out.kv(0, "Name", str_of(&meta["name"]));
    labels_and_annotations(&mut out, meta);
    finalizers(&mut out, meta);
    out.kv(0, "StorageClass", &storage_class(pv));
    status(&mut out, pv);
    let claim = &spec["claimRef"];
    let claim = if claim.is_object() {
        format!("{}/{}", str_of(&claim["namespace"]), str_of(&claim["name"]))
    } else {
        String::new()
    };
    out.kv(0, "Claim", &claim);
    out.kv(
        0,
        "Reclaim Policy",
        str_of(&spec["persistentVolumeReclaimPolicy"]),
    );
    out.kv(0, "Access Modes", &modes(&spec["accessModes"]));
    if let Some(mode) = spec["volumeMode"].as_str() {
        out.kv(0, "VolumeMode", mode);
    }
    out.kv(0, "Capacity", str_of(&spec["capacity"]["storage"]));
    node_affinity(&mut out, &spec["nodeAffinity"]);
    out.kv(0, "Message", str_of(&pv["status"]["message"]));
    source(&mut out, spec);
    out
}

/// The pods of the claim's namespace that use it: by a volume naming the claim, or as the
/// claim's owner (kubectl's `getPodsForPVC`), sorted by name.
pub(super) fn pods_using_claim<'a>(pvc: &Value, pods: &'a [Value]) -> Vec<&'a str> {
    let name = str_of(&pvc["metadata"]["name"]);
    let mut using: Vec<&Value> = pods
        .iter()
        .filter(|p| {
            p["spec"]["volumes"].as_array().is_some_and(|vols| {
                vols.iter()
                    .any(|v| v["persistentVolumeClaim"]["claimName"].as_str() == Some(name))
            })
        })
        .collect();
    for owner in pvc["metadata"]["ownerReferences"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        if owner["kind"] != "Pod" {
            continue;
        }
        let uid = &owner["uid"];
        if let Some(pod) = pods.iter().find(|p| &p["metadata"]["uid"] == uid) {
            if !using.iter().any(|u| &u["metadata"]["uid"] == uid) {
                using.push(pod);
            }
        }
    }
    let mut names: Vec<&str> = using
        .iter()
        .map(|p| str_of(&p["metadata"]["name"]))
        .collect();
    names.sort();
    names
}

pub(super) fn describe_persistent_volume_claim(pvc: &Value, pods: &[Value]) -> Out {
    let mut out = Out::default();
    let meta = &pvc["metadata"];
    let spec = &pvc["spec"];
    out.kv(0, "Name", str_of(&meta["name"]));
    out.kv(0, "Namespace", str_of(&meta["namespace"]));
    out.kv(0, "StorageClass", &storage_class(pvc));
    status(&mut out, pvc);
    let volume = str_of(&spec["volumeName"]);
    out.kv(0, "Volume", volume);
    labels_and_annotations(&mut out, meta);
    finalizers(&mut out, meta);
    // Capacity and access modes are the bound volume's, blank until bound.
    let (capacity, access) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            str_of(&pvc["status"]["capacity"]["storage"]).to_string(),
            modes(&pvc["status"]["accessModes"]),
        )
    };
    out.kv(0, "Capacity", &capacity);
    out.kv(0, "Access Modes", &access);
    if let Some(mode) = spec["volumeMode"].as_str() {
        out.kv(0, "VolumeMode", mode);
    }
    let source = &spec["dataSource"];
    if source.is_object() {
        out.line(0, "DataSource:");
        if let Some(group) = source["apiGroup"].as_str() {
            out.kv(2, "APIGroup", group);
        }
        out.kv(2, "Kind", str_of(&source["kind"]));
        out.kv(2, "Name", str_of(&source["name"]));
    }
    out.list(0, "Used By", &pods_using_claim(pvc, pods));
    let conditions = pvc["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !conditions.is_empty() {
        out.line(0, "Conditions:");
        out.line(
            2,
            "Type\tStatus\tLastProbeTime\tLastTransitionTime\tReason\tMessage",
        );
        out.line(
            2,
            "----\t------\t-----------------\t------------------\t------\t-------",
        );
        // Go formats a missing time as its zero value.
        let time = |v: &Value| {
            if v.is_null() {
                "Mon, 01 Jan 0001 00:00:00 +0000".to_string()
            } else {
                rfc1123z(v)
            }
        };
        for c in &conditions {
            out.line(
                2,
                &format!(
                    "{} \t{} \t{} \t{} \t{} \t{}",
                    str_of(&c["type"]),
                    str_of(&c["status"]),
                    time(&c["lastProbeTime"]),
                    time(&c["lastTransitionTime"]),
                    str_of(&c["reason"]),
                    str_of(&c["message"])
                ),
            );
        }
    }
    out
}
