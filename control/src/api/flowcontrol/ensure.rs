//! The API server's own upkeep of the flow-control configuration, as
//! upstream's bootstrap configuration ensurer and its FlowSchema status
//! writer, run on every change to either kind:
//!
//! - the mandatory objects (`exempt`, `catch-all`) are recreated when
//!   deleted and their spec restored when changed (the `exempt` level's
//!   numbers aside);
//! - the suggested ones are created when missing and their spec kept at
//!   the bootstrap value while `apf.kubernetes.io/autoupdate-spec` is
//!   `"true"` (or absent on an object never edited, `generation` 1);
//!   with `"false"` they are the user's;
//! - every FlowSchema's `Dangling` condition says whether the level it
//!   names exists.
//!
//! Writes go to the store with the revision read (a conflicting write by
//! someone else wins; the change it makes brings another round).

use std::collections::HashMap;

use bosun::flowcontrol as boot;
use k8s_openapi::api::flowcontrol::v1 as fc;
use serde_json::{json, Value};

use crate::store::{KeyValue, Store, StoreError};

const GROUP: &str = "flowcontrol.apiserver.k8s.io";

fn resource(plural: &str) -> &'static bosun::resources::ResourceInfo {
    bosun::resources::by_path(GROUP, "v1", plural).expect("flowcontrol kinds are served")
}

pub fn prefix(plural: &str) -> String {
    resource(plural).storage_prefix()
}

async fn list(
    store: &dyn Store,
    plural: &str,
) -> Result<(Vec<(KeyValue, Value)>, u64), StoreError> {
    let (kvs, rev) = store
        .list(&prefix(plural))
        .await
        .map_err(|e| crate::store::reading(plural, e))?;
    let mut out = Vec::with_capacity(kvs.len());
    for kv in kvs {
        let bytes: &[u8] = &kv.value;
        match serde_json::from_slice::<Value>(bytes) {
            Ok(v) => out.push((kv, v)),
            Err(e) => tracing::warn!(key = %kv.key, error = %e, "flowcontrol: unreadable"),
        }
    }
    Ok((out, rev))
}

/// Writes `value` over `kv`; false when someone else wrote first.
async fn write(store: &dyn Store, kv: &KeyValue, value: &Value) -> Result<bool, StoreError> {
    let bytes = serde_json::to_vec(value).expect("JSON");
    match store.update(&kv.key, kv.mod_revision, bytes).await {
        Ok(_) => Ok(true),
        Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

fn annotation(obj: &Value) -> Option<&str> {
    obj["metadata"]["annotations"][boot::AUTOUPDATE_ANNOTATION].as_str()
}

/// `shouldUpdateSpec`: the annotation's boolean, else whether the object
/// is as the bootstrap made it (generation 1).
fn auto_update(obj: &Value) -> bool {
    match annotation(obj).and_then(|a| a.parse::<bool>().ok()) {
        Some(b) => b,
        None => obj["metadata"]["generation"].as_i64().unwrap_or(1) == 1,
    }
}

/// Whether a stored spec is the bootstrap one (for the mandatory
/// `exempt` level: its type).
fn spec_current(kind: &str, name: &str, have: &Value, want: &Value) -> bool {
    if kind == "PriorityLevelConfiguration" && name == boot::EXEMPT {
        return have["type"] == want["type"];
    }
    have == want
}

/// Creates or restores one bootstrap object; true if it wrote.
async fn ensure_one(
    store: &dyn Store,
    plural: &str,
    stored: &HashMap<String, (KeyValue, Value)>,
    want: Value,
    mandatory: bool,
) -> Result<bool, StoreError> {
    let name = want["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let kind = want["kind"].as_str().unwrap_or_default().to_string();
    let Some((kv, have)) = stored.get(&name) else {
        let mut obj = want;
        obj["metadata"]["uid"] = json!(uuid::Uuid::new_v4().to_string());
        obj["metadata"]["creationTimestamp"] = json!(bosun::time::now_rfc3339());
        obj["metadata"]["generation"] = json!(1);
        let key = resource(plural).storage_key(None, &name);
        return match store
            .create(&key, serde_json::to_vec(&obj).expect("JSON"))
            .await
        {
            Ok(_) => {
                tracing::info!(%kind, %name, "flowcontrol: created the bootstrap object");
                Ok(true)
            }
            Err(StoreError::AlreadyExists(_)) => Ok(false),
            Err(e) => Err(e),
        };
    };
    if !mandatory && !auto_update(have) {
        return Ok(false);
    }
    let spec_ok = spec_current(&kind, &name, &have["spec"], &want["spec"]);
    if spec_ok && annotation(have) == Some("true") {
        return Ok(false);
    }
    let mut obj = have.clone();
    if !spec_ok {
        obj["spec"] = want["spec"].clone();
        let generation = have["metadata"]["generation"].as_i64().unwrap_or(1);
        obj["metadata"]["generation"] = json!(generation + 1);
    }
    if !obj["metadata"]["annotations"].is_object() {
        obj["metadata"]["annotations"] = json!({});
    }
    obj["metadata"]["annotations"][boot::AUTOUPDATE_ANNOTATION] = json!("true");
    let wrote = write(store, kv, &obj).await?;
    if wrote && !spec_ok {
        tracing::info!(%kind, %name, "flowcontrol: restored the bootstrap spec");
    }
    Ok(wrote)
}

/// The `Dangling` condition a FlowSchema should carry.
fn dangling_condition(level: &str, exists: bool) -> Value {
    let (status, reason, message) = if exists {
        (
            "False",
            "Found",
            format!("This FlowSchema references the PriorityLevelConfiguration object named \"{level}\" and it exists"),
        )
    } else {
        (
            "True",
            "NotFound",
            format!("This FlowSchema references the PriorityLevelConfiguration object named \"{level}\" but there is no such object"),
        )
    };
    json!({
        "type": "Dangling",
        "status": status,
        "lastTransitionTime": bosun::time::now_rfc3339(),
        "reason": reason,
        "message": message,
    })
}

/// Sets a schema's `Dangling` condition if it says otherwise; true if it wrote.
async fn ensure_condition(
    store: &dyn Store,
    kv: &KeyValue,
    fs: &Value,
    levels: &HashMap<String, (KeyValue, Value)>,
) -> Result<bool, StoreError> {
    let level = fs["spec"]["priorityLevelConfiguration"]["name"]
        .as_str()
        .unwrap_or_default();
    let want = dangling_condition(level, levels.contains_key(level));
    let conditions = fs["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let current = conditions.iter().find(|c| c["type"] == "Dangling");
    if current.is_some_and(|c| c["status"] == want["status"] && c["message"] == want["message"]) {
        return Ok(false);
    }
    let mut conditions: Vec<Value> = conditions
        .into_iter()
        .filter(|c| c["type"] != "Dangling")
        .collect();
    conditions.push(want);
    let mut obj = fs.clone();
    if !obj["status"].is_object() {
        obj["status"] = json!({});
    }
    obj["status"]["conditions"] = json!(conditions);
    write(store, kv, &obj).await
}

fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> Option<T> {
    serde_json::from_value(v.clone())
        .map_err(|e| tracing::warn!(name = %v["metadata"]["name"], error = %e, "flowcontrol: unreadable"))
        .ok()
}

fn by_name(list: Vec<(KeyValue, Value)>) -> HashMap<String, (KeyValue, Value)> {
    list.into_iter()
        .map(|(kv, v)| {
            (
                v["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                (kv, v),
            )
        })
        .collect()
}

/// One round: the bootstrap objects and the conditions brought up to
/// date, then both kinds as stored, with the revision they were read at.
pub async fn ensure(
    store: &dyn Store,
) -> Result<
    (
        Vec<fc::FlowSchema>,
        Vec<fc::PriorityLevelConfiguration>,
        u64,
    ),
    StoreError,
> {
    let (levels, _) = list(store, "prioritylevelconfigurations").await?;
    let levels = by_name(levels);
    let bootstrap_levels = boot::mandatory_priority_levels()
        .into_iter()
        .map(|o| (o, true))
        .chain(
            boot::suggested_priority_levels()
                .into_iter()
                .map(|o| (o, false)),
        );
    for (want, mandatory) in bootstrap_levels {
        ensure_one(
            store,
            "prioritylevelconfigurations",
            &levels,
            want,
            mandatory,
        )
        .await?;
    }
    let (levels, _) = list(store, "prioritylevelconfigurations").await?;
    let levels = by_name(levels);
    let (schemas, _) = list(store, "flowschemas").await?;
    let schemas = by_name(schemas);
    let bootstrap_schemas = boot::mandatory_flow_schemas()
        .into_iter()
        .map(|o| (o, true))
        .chain(
            boot::suggested_flow_schemas()
                .into_iter()
                .map(|o| (o, false)),
        );
    for (want, mandatory) in bootstrap_schemas {
        ensure_one(store, "flowschemas", &schemas, want, mandatory).await?;
    }
    let (schemas, _) = list(store, "flowschemas").await?;
    for (kv, fs) in &schemas {
        ensure_condition(store, kv, fs, &levels).await?;
    }
    // What is stored now, and the revision to follow changes from.
    let (levels, rev_l) = list(store, "prioritylevelconfigurations").await?;
    let (schemas, rev_s) = list(store, "flowschemas").await?;
    let levels: Vec<fc::PriorityLevelConfiguration> =
        levels.iter().filter_map(|(_, v)| typed(v)).collect();
    let schemas: Vec<fc::FlowSchema> = schemas.iter().filter_map(|(_, v)| typed(v)).collect();
    Ok((schemas, levels, rev_l.min(rev_s)))
}
