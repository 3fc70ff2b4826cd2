//! `describe deployment` and `describe replicaset`: kubectl's layouts, with the replica
//! sets or pods the object controls.

use serde_json::Value;

use bosun::selector::{format_label_selector_json, label_selector_string_json};

use super::sections::{
    conditions, controlled_by, labels_and_annotations, name_and_namespace, pod_template,
};
use super::writer::{rfc1123z, str_of, Out};
use crate::cli::replica_sets::without_hash;

/// Whether two pod templates are the same but for the `pod-template-hash`
/// label (how kubectl finds a deployment's new ReplicaSet).
fn same_template(a: &Value, b: &Value) -> bool {
    without_hash(a) == without_hash(b)
}

fn replicaset_summary(rs: &Value) -> String {
    format!(
        "{} ({}/{} replicas created)",
        str_of(&rs["metadata"]["name"]),
        rs["status"]["replicas"].as_i64().unwrap_or(0),
        rs["spec"]["replicas"].as_i64().unwrap_or(1)
    )
}

/// The deployment's layout, given the replica sets it owns.
pub(super) fn describe_deployment(obj: &Value, owned: &[Value]) -> Out {
    let mut out = Out::default();
    let (meta, spec, status) = (&obj["metadata"], &obj["spec"], &obj["status"]);
    name_and_namespace(&mut out, meta);
    out.kv(
        0,
        "CreationTimestamp",
        &rfc1123z(&meta["creationTimestamp"]),
    );
    labels_and_annotations(&mut out, meta);
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
        .min_by_key(|rs| str_of(&rs["metadata"]["creationTimestamp"]).to_string());
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
pub(super) fn describe_replicaset(obj: &Value, pods: &[Value]) -> Out {
    let mut out = Out::default();
    let meta = &obj["metadata"];
    let spec = &obj["spec"];
    name_and_namespace(&mut out, meta);
    out.kv(
        0,
        "Selector",
        &format_label_selector_json(Some(&spec["selector"])),
    );
    labels_and_annotations(&mut out, meta);
    controlled_by(&mut out, meta);
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
