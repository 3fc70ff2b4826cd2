//! `rollout status|history|undo|restart` for DaemonSets, with kubectl's
//! messages (its `DaemonSetStatusViewer`, `DaemonSetHistoryViewer` and
//! `DaemonSetRollbacker`). A DaemonSet keeps its revisions as a
//! StatefulSet does (ControllerRevisions holding the patch that sets the
//! pod template), so history and undo are shared with StatefulSets.

use anyhow::{bail, Result};
use serde_json::{json, Value};

use bosun::resources::{by_name, ResourceInfo};

use super::statefulset::{history_of, undo_of};
use crate::cli::client::Ctx;

pub fn daemonset_info() -> &'static ResourceInfo {
    by_name("daemonsets").expect("daemonsets are in the resource table")
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// The status line of a set's rollout and whether it is done.
pub fn status_message(ds: &Value) -> Result<(String, bool)> {
    let strategy = ds["spec"]["updateStrategy"]["type"]
        .as_str()
        .unwrap_or("RollingUpdate");
    if strategy != "RollingUpdate" {
        bail!("rollout status is only available for RollingUpdate strategy type");
    }
    let name = ds["metadata"]["name"].as_str().unwrap_or_default();
    let status = &ds["status"];
    if int(&ds["metadata"]["generation"]) > int(&status["observedGeneration"]) {
        return Ok((
            "Waiting for daemon set spec update to be observed...".into(),
            false,
        ));
    }
    let desired = int(&status["desiredNumberScheduled"]);
    let updated = int(&status["updatedNumberScheduled"]);
    if updated < desired {
        return Ok((
            format!(
                "Waiting for daemon set {name:?} rollout to finish: {updated} out of {desired} new pods have been updated..."
            ),
            false,
        ));
    }
    let available = int(&status["numberAvailable"]);
    if available < desired {
        return Ok((
            format!(
                "Waiting for daemon set {name:?} rollout to finish: {available} of {desired} updated pods are available..."
            ),
            false,
        ));
    }
    Ok((format!("daemon set {name:?} successfully rolled out"), true))
}

pub async fn history(ctx: &Ctx, name: &str, revision: i64) -> Result<String> {
    history_of(ctx, daemonset_info(), name, revision).await
}

pub async fn undo(ctx: &Ctx, name: &str, to_revision: i64) -> Result<String> {
    undo_of(ctx, daemonset_info(), name, to_revision).await
}

/// Restarts the set's pods by stamping the template (a rolling update
/// replaces them; with OnDelete they are replaced as they are deleted).
pub async fn restart(ctx: &Ctx, name: &str, restarted_at_key: &str) -> Result<String> {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let path = Ctx::object_path(daemonset_info(), Some(&ctx.namespace), name);
    let patch =
        json!({"spec": {"template": {"metadata": {"annotations": {restarted_at_key: now}}}}});
    ctx.patch_json(&path, true, &patch).await?;
    Ok(format!(
        "{}/{name} restarted\n",
        daemonset_info().kind_group()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ds(generation: i64, status: Value) -> Value {
        json!({"metadata": {"name": "fluentd", "generation": generation},
            "spec": {"updateStrategy": {"type": "RollingUpdate"}}, "status": status})
    }

    fn message(d: &Value) -> String {
        status_message(d).unwrap().0
    }

    #[test]
    fn status_lines_follow_kubectl() {
        assert_eq!(
            message(&ds(2, json!({"observedGeneration": 1}))),
            "Waiting for daemon set spec update to be observed..."
        );
        assert_eq!(
            message(&ds(2, json!({"observedGeneration": 2, "desiredNumberScheduled": 3,
                "updatedNumberScheduled": 1}))),
            "Waiting for daemon set \"fluentd\" rollout to finish: 1 out of 3 new pods have been updated..."
        );
        assert_eq!(
            message(&ds(2, json!({"observedGeneration": 2, "desiredNumberScheduled": 3,
                "updatedNumberScheduled": 3, "numberAvailable": 2}))),
            "Waiting for daemon set \"fluentd\" rollout to finish: 2 of 3 updated pods are available..."
        );
        let (line, done) = status_message(&ds(
            2,
            json!({"observedGeneration": 2,
            "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberAvailable": 3}),
        ))
        .unwrap();
        assert_eq!(line, "daemon set \"fluentd\" successfully rolled out");
        assert!(done);
        let mut on_delete = ds(1, json!({}));
        on_delete["spec"]["updateStrategy"]["type"] = json!("OnDelete");
        assert!(status_message(&on_delete).is_err());
    }
}
