//! `rollout status|history|undo|restart` for StatefulSets, with kubectl's
//! messages (its `StatefulSetStatusViewer`, `StatefulSetHistoryViewer` and
//! `StatefulSetRollbacker`). A StatefulSet's revisions are the
//! ControllerRevisions it controls; each holds the patch that sets the pod
//! template (`{"spec": {"template": {..., "$patch": "replace"}}}`), so undo
//! sends that patch back to the set. DaemonSets keep their revisions the
//! same way, so [`history_of`] and [`undo_of`] serve both.

use anyhow::{anyhow, bail, Result};
use serde_json::{json, Value};

use bosun::resources::{by_name, ResourceInfo};

use crate::cli::client::{with_query, Ctx};
use crate::cli::describe::{pod_template_text, tabwrite};
use crate::cli::record::CHANGE_CAUSE;
use crate::cli::replica_sets::controlled_by;

pub fn statefulset_info() -> &'static ResourceInfo {
    by_name("statefulsets").expect("statefulsets are in the resource table")
}

fn revisions_info() -> &'static ResourceInfo {
    by_name("controllerrevisions").expect("controllerrevisions are in the resource table")
}

pub fn shown(name: &str) -> String {
    format!("{}/{name}", statefulset_info().kind_group())
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// The status line of a set's rollout and whether it is done.
pub fn status_message(sts: &Value) -> Result<(String, bool)> {
    let strategy = &sts["spec"]["updateStrategy"];
    if strategy["type"].as_str().unwrap_or("RollingUpdate") != "RollingUpdate" {
        bail!("rollout status is only available for RollingUpdate strategy type");
    }
    let status = &sts["status"];
    let observed = int(&status["observedGeneration"]);
    if observed == 0 || int(&sts["metadata"]["generation"]) > observed {
        return Ok((
            "Waiting for statefulset spec update to be observed...".into(),
            false,
        ));
    }
    let replicas = sts["spec"]["replicas"].as_i64().unwrap_or(1);
    let ready = int(&status["readyReplicas"]);
    if ready < replicas {
        return Ok((
            format!("Waiting for {} pods to be ready...", replicas - ready),
            false,
        ));
    }
    let updated = int(&status["updatedReplicas"]);
    if let Some(partition) = strategy["rollingUpdate"]["partition"].as_i64() {
        if updated < replicas - partition {
            return Ok((
                format!(
                    "Waiting for partitioned roll out to finish: {updated} out of {} new pods have been updated...",
                    replicas - partition
                ),
                false,
            ));
        }
        return Ok((
            format!("partitioned roll out complete: {updated} new pods have been updated..."),
            true,
        ));
    }
    let (current, update) = (&status["currentRevision"], &status["updateRevision"]);
    if current != update {
        return Ok((
            format!(
                "waiting for statefulset rolling update to complete {updated} pods at revision {}...",
                update.as_str().unwrap_or_default()
            ),
            false,
        ));
    }
    Ok((
        format!(
            "statefulset rolling update complete {} pods at revision {}...",
            int(&status["currentReplicas"]),
            current.as_str().unwrap_or_default()
        ),
        true,
    ))
}

async fn get_set(ctx: &Ctx, info: &ResourceInfo, name: &str) -> Result<Value> {
    let path = Ctx::object_path(info, Some(&ctx.namespace), name);
    Ok(ctx.get_json(&path).await?)
}

/// The ControllerRevisions the set controls, by revision number.
async fn owned_revisions(ctx: &Ctx, sts: &Value) -> Result<Vec<Value>> {
    let uid = sts["metadata"]["uid"].as_str().unwrap_or_default();
    let path = with_query(&revisions_info().collection_path(Some(&ctx.namespace)), &[]);
    let list = ctx.get_json(&path).await?;
    let mut revisions: Vec<Value> = list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| controlled_by(r, uid))
        .collect();
    revisions.sort_by_key(|r| int(&r["revision"]));
    Ok(revisions)
}

/// The pod template a revision holds (its patch, without `$patch`).
pub fn revision_template(revision: &Value) -> Value {
    let mut template = revision["data"]["spec"]["template"].clone();
    if let Some(map) = template.as_object_mut() {
        map.remove("$patch");
    }
    template
}

/// `REVISION  CHANGE-CAUSE` rows, by revision number.
pub fn history_table(revisions: &[Value]) -> String {
    let mut text = String::from("REVISION\tCHANGE-CAUSE\n");
    for r in revisions {
        let cause = r["metadata"]["annotations"][CHANGE_CAUSE]
            .as_str()
            .filter(|c| !c.is_empty())
            .unwrap_or("<none>");
        text.push_str(&format!("{}\t{cause}\n", int(&r["revision"])));
    }
    tabwrite(&text, 0, 2)
}

pub async fn history(ctx: &Ctx, name: &str, revision: i64) -> Result<String> {
    history_of(ctx, statefulset_info(), name, revision).await
}

/// `rollout history` of a StatefulSet or DaemonSet (`info`): its
/// revisions, or the pod template of one.
pub async fn history_of(
    ctx: &Ctx,
    info: &ResourceInfo,
    name: &str,
    revision: i64,
) -> Result<String> {
    let shown = |name: &str| format!("{}/{name}", info.kind_group());
    let sts = get_set(ctx, info, name).await?;
    let revisions = owned_revisions(ctx, &sts).await?;
    if revisions.is_empty() {
        return Ok(format!("{} \nNo rollout history found.\n", shown(name)));
    }
    if revision > 0 {
        let r = revisions
            .iter()
            .find(|r| int(&r["revision"]) == revision)
            .ok_or_else(|| anyhow!("unable to find the specified revision"))?;
        return Ok(format!(
            "{} with revision #{revision}\n{}\n",
            shown(name),
            pod_template_text(&revision_template(r))
        ));
    }
    Ok(format!("{} \n{}\n", shown(name), history_table(&revisions)))
}

/// The revision an undo goes back to: `to_revision`, or else the
/// second-highest.
pub fn rollback_target(revisions: &[Value], to_revision: i64) -> Result<Value> {
    if to_revision > 0 {
        return revisions
            .iter()
            .find(|r| int(&r["revision"]) == to_revision)
            .cloned()
            .ok_or_else(|| anyhow!("unable to find specified revision {to_revision} in history"));
    }
    if revisions.len() < 2 {
        bail!("no last revision to roll back to");
    }
    Ok(revisions[revisions.len() - 2].clone())
}

pub async fn undo(ctx: &Ctx, name: &str, to_revision: i64) -> Result<String> {
    undo_of(ctx, statefulset_info(), name, to_revision).await
}

/// `rollout undo` of a StatefulSet or DaemonSet (`info`): the chosen
/// revision's patch sent back to it.
pub async fn undo_of(
    ctx: &Ctx,
    info: &ResourceInfo,
    name: &str,
    to_revision: i64,
) -> Result<String> {
    let shown = |name: &str| format!("{}/{name}", info.kind_group());
    let sts = get_set(ctx, info, name).await?;
    let revisions = owned_revisions(ctx, &sts).await?;
    let target = rollback_target(&revisions, to_revision)?;
    let revision = int(&target["revision"]);
    if revision_template(&target) == sts["spec"]["template"] {
        return Ok(format!(
            "{} skipped rollback (current template already matches revision {revision})\n",
            shown(name)
        ));
    }
    let path = Ctx::object_path(info, Some(&ctx.namespace), name);
    ctx.patch_json(&path, true, &target["data"])
        .await
        .map_err(|e| {
            anyhow::Error::from(e).context(format!("failed restoring revision {revision}"))
        })?;
    Ok(format!("{} rolled back\n", shown(name)))
}

/// Restarts the set's pods by stamping the template; an OnDelete set
/// would not roll them, so kubectl refuses it.
pub async fn restart(ctx: &Ctx, name: &str, restarted_at_key: &str) -> Result<String> {
    let sts = get_set(ctx, statefulset_info(), name).await?;
    if sts["spec"]["updateStrategy"]["type"] == "OnDelete" {
        bail!("restart has no effect on statefulset with OnDelete strategy");
    }
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let path = Ctx::object_path(statefulset_info(), Some(&ctx.namespace), name);
    let patch =
        json!({"spec": {"template": {"metadata": {"annotations": {restarted_at_key: now}}}}});
    ctx.patch_json(&path, true, &patch).await?;
    Ok(format!("{} restarted\n", shown(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sts(generation: i64, partition: Option<i64>, status: Value) -> Value {
        let mut s = json!({"metadata": {"name": "web", "generation": generation},
            "spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate"}},
            "status": status});
        if let Some(p) = partition {
            s["spec"]["updateStrategy"]["rollingUpdate"] = json!({"partition": p});
        }
        s
    }

    fn message(s: &Value) -> String {
        status_message(s).unwrap().0
    }

    #[test]
    fn status_lines_follow_kubectl() {
        assert_eq!(
            message(&sts(2, Some(0), json!({"observedGeneration": 1}))),
            "Waiting for statefulset spec update to be observed..."
        );
        assert_eq!(
            message(&sts(
                1,
                Some(0),
                json!({"observedGeneration": 1, "readyReplicas": 1})
            )),
            "Waiting for 2 pods to be ready..."
        );
        let ready = json!({"observedGeneration": 1, "readyReplicas": 3, "updatedReplicas": 1});
        assert_eq!(
            message(&sts(1, Some(1), ready.clone())),
            "Waiting for partitioned roll out to finish: 1 out of 2 new pods have been updated..."
        );
        let (line, done) = status_message(&sts(1, Some(2), ready)).unwrap();
        assert_eq!(
            line,
            "partitioned roll out complete: 1 new pods have been updated..."
        );
        assert!(done);
        let rolling = json!({"observedGeneration": 1, "readyReplicas": 3, "updatedReplicas": 2,
            "currentReplicas": 1, "currentRevision": "web-a", "updateRevision": "web-b"});
        assert_eq!(
            message(&sts(1, None, rolling)),
            "waiting for statefulset rolling update to complete 2 pods at revision web-b..."
        );
        let mut on_delete = sts(1, None, json!({}));
        on_delete["spec"]["updateStrategy"]["type"] = json!("OnDelete");
        assert!(status_message(&on_delete).is_err());
    }

    #[test]
    fn history_and_rollback_targets() {
        let rev = |n: i64, image: &str, cause: Option<&str>| {
            let mut r = json!({"revision": n, "metadata": {"name": format!("web-{n}")},
                "data": {"spec": {"template": {"$patch": "replace",
                    "spec": {"containers": [{"name": "nginx", "image": image}]}}}}});
            if let Some(c) = cause {
                r["metadata"]["annotations"] = json!({CHANGE_CAUSE: c});
            }
            r
        };
        let revisions = [rev(1, "web:1", None), rev(2, "web:2", Some("set image"))];
        let table = history_table(&revisions);
        assert_eq!(
            table,
            "REVISION  CHANGE-CAUSE\n1         <none>\n2         set image\n"
        );
        assert_eq!(int(&rollback_target(&revisions, 0).unwrap()["revision"]), 1);
        assert_eq!(int(&rollback_target(&revisions, 2).unwrap()["revision"]), 2);
        assert!(rollback_target(&revisions, 7).is_err());
        assert!(rollback_target(&revisions[..1], 0).is_err());
        assert!(revision_template(&revisions[0]).get("$patch").is_none());
    }
}
