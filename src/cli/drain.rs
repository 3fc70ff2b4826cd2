//! `bosun drain NODE`: cordons the node and evicts its pods through the
//! eviction API, as kubectl drain does: DaemonSet pods are left (with
//! `--ignore-daemonsets`), pods with emptyDir data need
//! `--delete-emptydir-data`, pods no controller will replace need
//! `--force`; it waits until every evicted pod is gone.

use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use kube::ResourceExt;
use serde_json::json;

use super::client::Ctx;
use super::nodes::{select_nodes, set_unschedulable};
use bosun::owners::controller_of;

#[derive(Debug, Args)]
pub struct DrainArgs {
    /// The nodes.
    #[arg(value_name = "NODE")]
    pub nodes: Vec<String>,
    /// Selector (label query) to filter on.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Leave DaemonSet-managed pods in place.
    #[arg(long)]
    pub ignore_daemonsets: bool,
    /// Evict pods with emptyDir volumes too (their data is lost).
    #[arg(long)]
    pub delete_emptydir_data: bool,
    /// Evict pods no controller manages too (they are not replaced).
    #[arg(long)]
    pub force: bool,
    /// Seconds each pod gets to stop; -1: the pod's own.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub grace_period: i64,
    /// How long to wait before giving up (e.g. 60s, 5m); 0: for ever.
    #[arg(long, default_value = "0s")]
    pub timeout: String,
}

/// What drain does with each pod of the node, kubectl's filters in order.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub evict: Vec<String>,
    /// (message, pods) pairs, as kubectl prints them.
    pub warnings: Vec<(String, Vec<String>)>,
    pub errors: Vec<(String, Vec<String>)>,
}

fn add(list: &mut Vec<(String, Vec<String>)>, message: &str, pod: String) {
    match list.iter_mut().find(|(m, _)| m == message) {
        Some((_, pods)) => pods.push(pod),
        None => list.push((message.to_string(), vec![pod])),
    }
}

/// kubectl's pod filters: finished pods go, DaemonSet pods stay or fail
/// the drain, emptyDir and unmanaged pods need their flags.
pub fn plan(pods: &[Pod], args: &DrainArgs) -> Plan {
    let mut plan = Plan::default();
    for pod in pods {
        let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
        let finished = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded") | Some("Failed")
        );
        if pod
            .annotations()
            .contains_key("kubernetes.io/config.mirror")
        {
            continue;
        }
        let owner = controller_of(&pod.metadata);
        if !finished && owner.is_some_and(|o| o.kind == "DaemonSet") {
            if args.ignore_daemonsets {
                add(&mut plan.warnings, "ignoring DaemonSet-managed Pods", key);
            } else {
                add(
                    &mut plan.errors,
                    "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)",
                    key,
                );
            }
            continue;
        }
        let mut blocked = false;
        let empty_dir = pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .is_some_and(|v| v.iter().any(|v| v.empty_dir.is_some()));
        if !finished && empty_dir {
            if args.delete_emptydir_data {
                add(
                    &mut plan.warnings,
                    "deleting Pods with local storage",
                    key.clone(),
                );
            } else {
                add(
                    &mut plan.errors,
                    "cannot delete Pods with local storage (use --delete-emptydir-data to override)",
                    key.clone(),
                );
                blocked = true;
            }
        }
        if !finished && owner.is_none() {
            if args.force {
                add(
                    &mut plan.warnings,
                    "deleting Pods that declare no controller",
                    key.clone(),
                );
            } else {
                add(
                    &mut plan.errors,
                    "cannot delete Pods that declare no controller (use --force to override)",
                    key.clone(),
                );
                blocked = true;
            }
        }
        if !blocked {
            plan.evict.push(key);
        }
    }
    plan
}

fn joined(list: &[(String, Vec<String>)]) -> String {
    list.iter()
        .map(|(m, pods)| format!("{m}: {}", pods.join(", ")))
        .collect::<Vec<_>>()
        .join(", ")
}

fn parse_timeout(s: &str) -> Result<Option<Duration>> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits
        .parse()
        .map_err(|_| anyhow::anyhow!("invalid argument {s:?} for \"--timeout\" flag"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => anyhow::bail!("invalid argument {s:?} for \"--timeout\" flag"),
    };
    Ok((secs > 0).then(|| Duration::from_secs(secs)))
}

pub async fn drain(ctx: &Ctx, args: &DrainArgs) -> Result<bool> {
    let timeout = parse_timeout(&args.timeout)?;
    let nodes = select_nodes(ctx, "drain", &args.nodes, args.selector.as_deref()).await?;
    let names: Vec<String> = nodes.iter().map(|n| n.name_any()).collect();
    for node in &nodes {
        println!("{}", set_unschedulable(ctx, node, true).await?);
    }
    for (i, name) in names.iter().enumerate() {
        if let Err(e) = drain_one(ctx, name, args, timeout).await {
            eprintln!(
                "error: unable to drain node {name:?} due to error: {e}, continuing command..."
            );
            eprintln!("There are pending nodes to be drained:");
            for n in &names[i..] {
                eprintln!(" {n}");
            }
            eprintln!("error: {e}");
            return Ok(false);
        }
        println!("node/{name} drained");
    }
    Ok(true)
}

async fn drain_one(
    ctx: &Ctx,
    node: &str,
    args: &DrainArgs,
    timeout: Option<Duration>,
) -> Result<()> {
    let all: Api<Pod> = Api::all(ctx.client.clone());
    let pods = all
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await?
        .items;
    let plan = plan(&pods, args);
    for (message, pods) in &plan.warnings {
        eprintln!("Warning: {message}: {}", pods.join(", "));
    }
    if !plan.errors.is_empty() {
        anyhow::bail!(joined(&plan.errors));
    }
    let started = Instant::now();
    let mut evicted = Vec::new();
    for key in &plan.evict {
        let pod = pods
            .iter()
            .find(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()) == *key)
            .expect("planned from this list");
        let (ns, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
        println!("evicting pod {key}");
        let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
        let mut eviction = json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": ns},
        });
        if args.grace_period >= 0 {
            eviction["deleteOptions"] = json!({"gracePeriodSeconds": args.grace_period});
        }
        match api
            .create_subresource::<serde_json::Value, serde_json::Value>(
                "eviction",
                &name,
                &PostParams::default(),
                &eviction,
            )
            .await
        {
            Ok(_) => evicted.push((api, name, pod.metadata.uid.clone())),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    // Wait until each is gone (or replaced by a new pod of that name).
    for (api, name, uid) in evicted {
        loop {
            match api.get_opt(&name).await? {
                Some(p) if p.metadata.uid == uid => {}
                _ => break,
            }
            if timeout.is_some_and(|t| started.elapsed() > t) {
                anyhow::bail!(
                    "error when waiting for pod {name:?} in namespace {:?} to terminate: global timeout reached: {}",
                    api.namespace().unwrap_or_default(),
                    args.timeout
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        println!("pod/{name} evicted");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: DrainArgs,
    }

    fn args(flags: &[&str]) -> DrainArgs {
        Cli::parse_from(std::iter::once("drain").chain(flags.iter().copied())).args
    }

    fn pod(name: &str, owner: Option<&str>, empty_dir: bool, phase: &str) -> Pod {
        let owners = owner.map(|kind| {
            json!([{"apiVersion": "apps/v1", "kind": kind, "name": "o", "uid": "u", "controller": true}])
        });
        let volumes = empty_dir.then(|| json!([{"name": "v", "emptyDir": {}}]));
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "ownerReferences": owners},
            "spec": {"containers": [], "volumes": volumes},
            "status": {"phase": phase},
        }))
        .unwrap()
    }

    #[test]
    fn drain_filters_pods_as_kubectl_does() {
        let pods = [
            pod("rs", Some("ReplicaSet"), false, "Running"),
            pod("ds", Some("DaemonSet"), false, "Running"),
            pod("cache", Some("ReplicaSet"), true, "Running"),
            pod("solo", None, false, "Running"),
            pod("done", None, false, "Succeeded"),
        ];
        let p = plan(&pods, &args(&["n1"]));
        assert_eq!(p.evict, ["default/rs", "default/done"]);
        assert_eq!(
            joined(&p.errors),
            "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): default/ds, \
             cannot delete Pods with local storage (use --delete-emptydir-data to override): default/cache, \
             cannot delete Pods that declare no controller (use --force to override): default/solo"
        );
        let p = plan(
            &pods,
            &args(&[
                "n1",
                "--ignore-daemonsets",
                "--delete-emptydir-data",
                "--force",
            ]),
        );
        assert!(p.errors.is_empty());
        assert_eq!(
            p.evict,
            [
                "default/rs",
                "default/cache",
                "default/solo",
                "default/done"
            ]
        );
        assert_eq!(
            p.warnings,
            [
                (
                    "ignoring DaemonSet-managed Pods".to_string(),
                    vec!["default/ds".to_string()]
                ),
                (
                    "deleting Pods with local storage".to_string(),
                    vec!["default/cache".to_string()]
                ),
                (
                    "deleting Pods that declare no controller".to_string(),
                    vec!["default/solo".to_string()]
                ),
            ]
        );
        assert_eq!(parse_timeout("0s").unwrap(), None);
        assert_eq!(parse_timeout("2m").unwrap(), Some(Duration::from_secs(120)));
        assert!(parse_timeout("soon").is_err());
    }
}
