//! `bosun rollout status|history|undo|pause|resume|restart` for
//! deployments, with kubectl's messages. Revisions live on the
//! deployment's ReplicaSets (`deployment.kubernetes.io/revision`); undo is
//! done on the client, as kubectl does: the chosen set's template is
//! patched back into the deployment. DaemonSets and StatefulSets keep
//! theirs in ControllerRevisions (`daemonset.rs`, `statefulset.rs`).

mod daemonset;
mod statefulset;
#[cfg(test)]
mod tests;

use anyhow::{anyhow, bail, Result};
use clap::{ArgAction, Args, Subcommand};
use futures::StreamExt;
use serde_json::{json, Map, Value};

use bosun::resources::{by_name, ResourceInfo};
// Deployment annotations an undo keeps from the deployment rather than
// taking from the ReplicaSet (kubectl's `annotationsToSkip`).
use bosun::well_known::{
    CHANGE_CAUSE, DEPLOYMENT_ANNOTATIONS_TO_SKIP as ANNOTATIONS_TO_SKIP, REVISION,
};

use super::client::{with_query, Ctx};
use super::delete::parse_duration;
use super::describe::{pod_template_text, tabwrite};
use super::errors;
use super::replica_sets::{controlled_by, without_hash};
use super::targets::parse_targets;

const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";

#[derive(Debug, Args)]
pub struct RolloutArgs {
    #[command(subcommand)]
    command: RolloutCommand,
}

#[derive(Debug, Subcommand)]
enum RolloutCommand {
    /// Show the status of the rollout, waiting until it is done.
    Status(StatusArgs),
    /// View the rollout history: revisions and their change-causes.
    History(HistoryArgs),
    /// Roll back to the previous revision, or to --to-revision.
    Undo(UndoArgs),
    /// Mark the deployment as paused: template changes start no rollout.
    Pause(TargetArgs),
    /// Resume a paused deployment.
    Resume(TargetArgs),
    /// Restart the deployment's pods with a rolling update.
    Restart(TargetArgs),
}

#[derive(Debug, Args)]
pub struct TargetArgs {
    /// deployment/NAME or deployment NAME.
    #[arg(required = true, value_name = "TYPE NAME")]
    resources: Vec<String>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// deployment/NAME or deployment NAME.
    #[arg(required = true, value_name = "TYPE NAME")]
    resources: Vec<String>,
    /// Watch until the rollout is done (`--watch=false` prints the status once).
    #[arg(short = 'w', long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    watch: bool,
    /// How long to wait before giving up (0: forever), e.g. 30s, 5m.
    #[arg(long, default_value = "0s")]
    timeout: String,
    /// Fail unless the deployment is at this revision (0: any).
    #[arg(long, default_value_t = 0)]
    revision: i64,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// deployment/NAME or deployment NAME.
    #[arg(required = true, value_name = "TYPE NAME")]
    resources: Vec<String>,
    /// Show the pod template of this revision.
    #[arg(long, default_value_t = 0)]
    revision: i64,
}

#[derive(Debug, Args)]
pub struct UndoArgs {
    /// deployment/NAME or deployment NAME.
    #[arg(required = true, value_name = "TYPE NAME")]
    resources: Vec<String>,
    /// The revision to roll back to (0: the previous one).
    #[arg(long, default_value_t = 0)]
    to_revision: i64,
}

pub async fn rollout(ctx: &Ctx, args: &RolloutArgs) -> Result<bool> {
    let (resources, what) = match &args.command {
        RolloutCommand::Status(a) => (&a.resources, "status viewer"),
        RolloutCommand::History(a) => (&a.resources, "history viewer"),
        RolloutCommand::Undo(a) => (&a.resources, "rollbacker"),
        RolloutCommand::Pause(a) => (&a.resources, "pauser"),
        RolloutCommand::Resume(a) => (&a.resources, "resumer"),
        RolloutCommand::Restart(a) => (&a.resources, "restarter"),
    };
    let targets = rollout_targets(resources, what)?;
    // An error is printed and the command goes on with the next object,
    // failing at the end, as kubectl does.
    let mut ok = true;
    for (kind, name) in &targets {
        let result = match (kind, &args.command) {
            (Kind::Deployment, RolloutCommand::Status(a)) => status(ctx, name, a).await,
            (Kind::Deployment, RolloutCommand::History(a)) => history(ctx, name, a.revision).await,
            (Kind::Deployment, RolloutCommand::Undo(a)) => undo(ctx, name, a.to_revision).await,
            (Kind::Deployment, RolloutCommand::Pause(_)) => pause(ctx, name, true).await,
            (Kind::Deployment, RolloutCommand::Resume(_)) => pause(ctx, name, false).await,
            (Kind::Deployment, RolloutCommand::Restart(_)) => restart(ctx, name).await,
            (Kind::StatefulSet, RolloutCommand::Status(a)) => {
                status_of(ctx, statefulset::statefulset_info(), name, a).await
            }
            (Kind::StatefulSet, RolloutCommand::History(a)) => {
                statefulset::history(ctx, name, a.revision).await
            }
            (Kind::StatefulSet, RolloutCommand::Undo(a)) => {
                statefulset::undo(ctx, name, a.to_revision).await
            }
            // Only Deployments pause (kubectl's ObjectPauser/ObjectResumer).
            (
                Kind::StatefulSet | Kind::DaemonSet,
                RolloutCommand::Pause(_) | RolloutCommand::Resume(_),
            ) => {
                let verb = if matches!(args.command, RolloutCommand::Pause(_)) {
                    "pausing"
                } else {
                    "resuming"
                };
                let info = if *kind == Kind::StatefulSet {
                    statefulset::statefulset_info()
                } else {
                    daemonset::daemonset_info()
                };
                Err(anyhow!(
                    "{} {name:?} {verb} is not supported",
                    info.plural_group()
                ))
            }
            (Kind::StatefulSet, RolloutCommand::Restart(_)) => {
                statefulset::restart(ctx, name, RESTARTED_AT).await
            }
            (Kind::DaemonSet, RolloutCommand::Status(a)) => {
                status_of(ctx, daemonset::daemonset_info(), name, a).await
            }
            (Kind::DaemonSet, RolloutCommand::History(a)) => {
                daemonset::history(ctx, name, a.revision).await
            }
            (Kind::DaemonSet, RolloutCommand::Undo(a)) => {
                daemonset::undo(ctx, name, a.to_revision).await
            }
            (Kind::DaemonSet, RolloutCommand::Restart(_)) => {
                daemonset::restart(ctx, name, RESTARTED_AT).await
            }
        };
        if let Some(text) = errors::report(result, &mut ok) {
            print!("{text}");
        }
    }
    Ok(ok)
}

fn deployment_info() -> &'static ResourceInfo {
    by_name("deployments").expect("deployments are in the resource table")
}

fn replicaset_info() -> &'static ResourceInfo {
    by_name("replicasets").expect("replicasets are in the resource table")
}

/// The kinds `rollout` works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Deployment,
    StatefulSet,
    DaemonSet,
}

/// The objects in `deployment/x sts y` arguments; other kinds get
/// kubectl's "no ... has been implemented" error.
fn rollout_targets(resources: &[String], what: &str) -> Result<Vec<(Kind, String)>> {
    let targets = parse_targets(resources).map_err(|e| anyhow!(e))?;
    let mut out = Vec::new();
    for t in targets {
        let kind = match t.info.kind {
            "Deployment" => Kind::Deployment,
            "StatefulSet" => Kind::StatefulSet,
            "DaemonSet" => Kind::DaemonSet,
            other => bail!("no {what} has been implemented for {other:?}"),
        };
        if t.names.is_empty() {
            bail!("required resource name not specified");
        }
        out.extend(t.names.into_iter().map(|n| (kind, n)));
    }
    Ok(out)
}

fn shown(name: &str) -> String {
    format!("{}/{name}", deployment_info().kind_group())
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// The revision of a ReplicaSet or deployment, if it has a valid one.
pub fn revision_of(obj: &Value) -> Option<i64> {
    obj["metadata"]["annotations"][REVISION]
        .as_str()
        .and_then(|r| r.parse().ok())
}

/// The rollout status line of a deployment and whether the rollout is
/// done (kubectl's `DeploymentStatusViewer`), or the error that ends the wait.
pub fn status_message(d: &Value, revision: i64) -> Result<(String, bool)> {
    let name = d["metadata"]["name"].as_str().unwrap_or_default();
    if revision > 0 {
        let current = revision_of(d).ok_or_else(|| {
            anyhow!("cannot get the revision of deployment {name:?}: no revision annotation")
        })?;
        if current != revision {
            bail!(
                "desired revision ({revision}) is different from the running revision ({current})"
            );
        }
    }
    if int(&d["metadata"]["generation"]) > int(&d["status"]["observedGeneration"]) {
        return Ok((
            "Waiting for deployment spec update to be observed...".to_string(),
            false,
        ));
    }
    let progressing = d["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Progressing");
    if progressing.is_some_and(|c| c["reason"] == "ProgressDeadlineExceeded") {
        bail!("deployment {name:?} exceeded its progress deadline");
    }
    let st = &d["status"];
    let (replicas, updated) = (int(&st["replicas"]), int(&st["updatedReplicas"]));
    let available = int(&st["availableReplicas"]);
    let wanted = d["spec"]["replicas"].as_i64().unwrap_or(1);
    let waiting = |what: String| {
        Ok((
            format!("Waiting for deployment {name:?} rollout to finish: {what}..."),
            false,
        ))
    };
    if updated < wanted {
        return waiting(format!(
            "{updated} out of {wanted} new replicas have been updated"
        ));
    }
    if replicas > updated {
        return waiting(format!(
            "{} old replicas are pending termination",
            replicas - updated
        ));
    }
    if available < updated {
        return waiting(format!(
            "{available} of {updated} updated replicas are available"
        ));
    }
    Ok((format!("deployment {name:?} successfully rolled out"), true))
}

/// Follows the deployment with a watch on the single object and prints
/// each new status line until the rollout is done, fails or times out.
async fn status(ctx: &Ctx, name: &str, args: &StatusArgs) -> Result<String> {
    status_of(ctx, deployment_info(), name, args).await
}

/// The status line of either kind and whether its rollout is done.
fn message_of(obj: &Value, revision: i64) -> Result<(String, bool)> {
    match obj["kind"].as_str() {
        Some("StatefulSet") => statefulset::status_message(obj),
        Some("DaemonSet") => daemonset::status_message(obj),
        _ => status_message(obj, revision),
    }
}

async fn status_of(
    ctx: &Ctx,
    info: &'static ResourceInfo,
    name: &str,
    args: &StatusArgs,
) -> Result<String> {
    let path = Ctx::object_path(info, Some(&ctx.namespace), name);
    let first = ctx.get_json(&path).await?;
    if !args.watch {
        let (message, _) = message_of(&first, args.revision)?;
        return Ok(format!("{message}\n"));
    }
    let timeout = parse_duration(&args.timeout)?;
    let api = ctx.api(info, Some(&ctx.namespace));
    let follow = async {
        let mut last = String::new();
        let mut events = Box::pin(kube::runtime::watcher::watch_object(api, name));
        while let Some(event) = events.next().await {
            let Some(obj) =
                event.map_err(|e| anyhow!("watching {} {name:?}: {e}", info.singular))?
            else {
                bail!("object has been deleted");
            };
            let mut d = serde_json::to_value(&obj)?;
            d["kind"] = json!(info.kind);
            let (message, done) = message_of(&d, args.revision)?;
            if message != last {
                println!("{message}");
                last = message;
            }
            if done {
                return Ok(String::new());
            }
        }
        bail!("the watch of {} {name:?} ended", info.singular)
    };
    if timeout.is_zero() {
        return follow.await;
    }
    tokio::time::timeout(timeout, follow)
        .await
        .unwrap_or_else(|_| Err(anyhow!("timed out waiting for the condition")))
}

async fn get_deployment(ctx: &Ctx, name: &str) -> Result<Value> {
    let path = Ctx::object_path(deployment_info(), Some(&ctx.namespace), name);
    Ok(ctx.get_json(&path).await?)
}

/// The ReplicaSets the deployment controls (by controller ownerReference).
async fn owned_replicasets(ctx: &Ctx, d: &Value) -> Result<Vec<Value>> {
    let uid = d["metadata"]["uid"].as_str().unwrap_or_default();
    let path = with_query(
        &replicaset_info().collection_path(Some(&ctx.namespace)),
        &[],
    );
    let list = ctx.get_json(&path).await?;
    Ok(list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|rs| controlled_by(rs, uid))
        .collect())
}

/// `REVISION  CHANGE-CAUSE` rows, sorted by revision.
pub fn history_table(replicasets: &[Value]) -> String {
    let mut rows: Vec<(i64, String)> = replicasets
        .iter()
        .filter_map(|rs| {
            let rev = revision_of(rs)?;
            let cause = rs["metadata"]["annotations"][CHANGE_CAUSE]
                .as_str()
                .filter(|c| !c.is_empty())
                .unwrap_or("<none>");
            Some((rev, cause.to_string()))
        })
        .collect();
    rows.sort_by_key(|(rev, _)| *rev);
    rows.dedup_by_key(|(rev, _)| *rev);
    let mut text = String::from("REVISION\tCHANGE-CAUSE\n");
    for (rev, cause) in rows {
        text.push_str(&format!("{rev}\t{cause}\n"));
    }
    tabwrite(&text, 0, 2)
}

/// The template of one revision, with the set's change-cause as a
/// template annotation (as kubectl shows it).
pub fn revision_template(replicasets: &[Value], revision: i64) -> Option<Value> {
    let rs = replicasets
        .iter()
        .find(|rs| revision_of(rs) == Some(revision))?;
    let mut template = rs["spec"]["template"].clone();
    if let Some(cause) = rs["metadata"]["annotations"][CHANGE_CAUSE]
        .as_str()
        .filter(|c| !c.is_empty())
    {
        template["metadata"]["annotations"][CHANGE_CAUSE] = json!(cause);
    }
    Some(template)
}

async fn history(ctx: &Ctx, name: &str, revision: i64) -> Result<String> {
    let d = get_deployment(ctx, name).await?;
    let sets = owned_replicasets(ctx, &d).await?;
    if !sets.iter().any(|rs| revision_of(rs).is_some()) {
        return Ok(format!("{} \nNo rollout history found.\n", shown(name)));
    }
    if revision > 0 {
        let template = revision_template(&sets, revision)
            .ok_or_else(|| anyhow!("unable to find the specified revision"))?;
        return Ok(format!(
            "{} with revision #{revision}\n{}\n",
            shown(name),
            pod_template_text(&template)
        ));
    }
    Ok(format!("{} \n{}\n", shown(name), history_table(&sets)))
}

/// What an undo does: the ReplicaSet to go back to (kubectl's
/// `deploymentRevision`: `to_revision`, or else the second-highest revision).
pub fn rollback_target(deployment: &Value, sets: &[Value], to_revision: i64) -> Result<Value> {
    let name = deployment["metadata"]["name"].as_str().unwrap_or_default();
    let mut by_rev: Vec<(i64, &Value)> = sets
        .iter()
        .filter_map(|rs| revision_of(rs).map(|r| (r, rs)))
        .collect();
    if to_revision > 0 {
        return by_rev
            .iter()
            .find(|(r, _)| *r == to_revision)
            .map(|(_, rs)| (*rs).clone())
            .ok_or_else(|| anyhow!("unable to find specified revision {to_revision} in history"));
    }
    by_rev.sort_by_key(|(r, _)| std::cmp::Reverse(*r));
    by_rev
        .get(1)
        .map(|(_, rs)| (*rs).clone())
        .ok_or_else(|| anyhow!("no rollout history found for deployment {name:?}"))
}

/// The JSON patch that restores `rs`'s template and its annotations onto
/// the deployment, or `None` when the deployment already has that template.
pub fn rollback_patch(deployment: &Value, rs: &Value) -> Option<Value> {
    let template = without_hash(&rs["spec"]["template"]);
    if template == without_hash(&deployment["spec"]["template"]) {
        return None;
    }
    let mut annotations = Map::new();
    if let Some(current) = deployment["metadata"]["annotations"].as_object() {
        for (k, v) in current {
            if ANNOTATIONS_TO_SKIP.contains(&k.as_str()) {
                annotations.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(from_rs) = rs["metadata"]["annotations"].as_object() {
        for (k, v) in from_rs {
            if !ANNOTATIONS_TO_SKIP.contains(&k.as_str()) {
                annotations.insert(k.clone(), v.clone());
            }
        }
    }
    Some(json!([
        {"op": "replace", "path": "/spec/template", "value": template},
        {"op": "add", "path": "/metadata/annotations", "value": annotations},
    ]))
}

async fn undo(ctx: &Ctx, name: &str, to_revision: i64) -> Result<String> {
    let d = get_deployment(ctx, name).await?;
    // kubectl looks for the revision before it looks at `paused`.
    let sets = owned_replicasets(ctx, &d).await?;
    let rs = rollback_target(&d, &sets, to_revision)?;
    if d["spec"]["paused"].as_bool() == Some(true) {
        bail!("you cannot rollback a paused deployment; resume it first with 'bosun rollout resume deployment/{name}' and try again");
    }
    let revision = revision_of(&rs).unwrap_or(0);
    let Some(patch) = rollback_patch(&d, &rs) else {
        return Ok(format!(
            "{} skipped rollback (current template already matches revision {revision})\n",
            shown(name)
        ));
    };
    let path = Ctx::object_path(deployment_info(), Some(&ctx.namespace), name);
    ctx.request_json(
        http::Method::PATCH,
        &path,
        None,
        Some("application/json-patch+json"),
        Some(&patch),
    )
    .await
    .map_err(|e| anyhow::Error::from(e).context(format!("failed restoring revision {revision}")))?;
    Ok(format!("{} rolled back\n", shown(name)))
}

async fn pause(ctx: &Ctx, name: &str, paused: bool) -> Result<String> {
    let d = get_deployment(ctx, name).await?;
    let is_paused = d["spec"]["paused"].as_bool() == Some(true);
    let qualified = format!("{} {name:?}", deployment_info().plural_group());
    match (paused, is_paused) {
        (true, true) => bail!("{qualified} is already paused"),
        (false, false) => bail!("{qualified} is not paused"),
        _ => {}
    }
    let path = Ctx::object_path(deployment_info(), Some(&ctx.namespace), name);
    ctx.patch_json(
        &path,
        false,
        &json!({"spec": {"paused": if paused { json!(true) } else { Value::Null }}}),
    )
    .await?;
    Ok(format!(
        "{} {}\n",
        shown(name),
        if paused { "paused" } else { "resumed" }
    ))
}

async fn restart(ctx: &Ctx, name: &str) -> Result<String> {
    let d = get_deployment(ctx, name).await?;
    if d["spec"]["paused"].as_bool() == Some(true) {
        bail!(
            "{} {name:?} can't restart paused deployment (run rollout resume first)",
            deployment_info().plural_group()
        );
    }
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let path = Ctx::object_path(deployment_info(), Some(&ctx.namespace), name);
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: now}}}}});
    ctx.patch_json(&path, true, &patch).await?;
    Ok(format!("{} restarted\n", shown(name)))
}
