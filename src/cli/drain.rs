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

/// What one filter says about a pod (kubectl's PodDeleteStatus).
enum Status {
    Okay,
    Skip,
    Warning { delete: bool, message: &'static str },
    Error(&'static str),
}

impl Status {
    fn deletes(&self) -> bool {
        matches!(self, Status::Okay | Status::Warning { delete: true, .. })
    }
}

/// kubectl's pod filters, in its order: a pod runs through them until one
/// says not to delete it, and the last word is its status. Finished pods
/// always go; DaemonSet pods stay (warning) or fail the drain; mirror pods
/// are skipped; emptyDir data and pods without a controller need their
/// flags.
pub fn plan(pods: &[Pod], args: &DrainArgs) -> Plan {
    let mut plan = Plan::default();
    for pod in pods {
        let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
        let finished = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded") | Some("Failed")
        );
        let owner = controller_of(&pod.metadata);
        let daemon = |_: &Pod| match owner {
            Some(o) if o.kind == "DaemonSet" && !finished => {
                if args.ignore_daemonsets {
                    Status::Warning {
                        delete: false,
                        message: "ignoring DaemonSet-managed Pods",
                    }
                } else {
                    Status::Error(
                        "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)",
                    )
                }
            }
            _ => Status::Okay,
        };
        let mirror = |p: &Pod| {
            if p.annotations().contains_key("kubernetes.io/config.mirror") {
                Status::Skip
            } else {
                Status::Okay
            }
        };
        let local_storage = |p: &Pod| {
            let empty_dir = p
                .spec
                .as_ref()
                .and_then(|s| s.volumes.as_ref())
                .is_some_and(|v| v.iter().any(|v| v.empty_dir.is_some()));
            match (empty_dir && !finished, args.delete_emptydir_data) {
                (false, _) => Status::Okay,
                (true, true) => Status::Warning {
                    delete: true,
                    message: "deleting Pods with local storage",
                },
                (true, false) => Status::Error(
                    "cannot delete Pods with local storage (use --delete-emptydir-data to override)",
                ),
            }
        };
        let unreplicated = |_: &Pod| match (owner.is_none() && !finished, args.force) {
            (false, _) => Status::Okay,
            (true, true) => Status::Warning {
                delete: true,
                message: "deleting Pods that declare no controller",
            },
            (true, false) => Status::Error(
                "cannot delete Pods that declare no controller (use --force to override)",
            ),
        };
        let filters: [&dyn Fn(&Pod) -> Status; 4] =
            [&daemon, &mirror, &local_storage, &unreplicated];
        let mut status = Status::Okay;
        for filter in filters {
            status = filter(pod);
            if !status.deletes() {
                break;
            }
        }
        match &status {
            Status::Warning { message, .. } => add(&mut plan.warnings, message, key.clone()),
            Status::Error(message) => add(&mut plan.errors, message, key.clone()),
            Status::Okay | Status::Skip => {}
        }
        if status.deletes() {
            plan.evict.push(key);
        }
    }
    plan
}

/// kubectl's rendering of the errors: one, or an aggregate in brackets.
fn errors_message(list: &[(String, Vec<String>)]) -> String {
    let each: Vec<String> = list
        .iter()
        .map(|(m, pods)| format!("{m}: {}", pods.join(", ")))
        .collect();
    if each.len() == 1 {
        each[0].clone()
    } else {
        format!("[{}]", each.join(", "))
    }
}

/// kubectl's warning line: each message with its pods, joined by `; `.
fn warnings_message(list: &[(String, Vec<String>)]) -> String {
    list.iter()
        .map(|(m, pods)| format!("{m}: {}", pods.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
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
    if !plan.warnings.is_empty() {
        eprintln!("Warning: {}", warnings_message(&plan.warnings));
    }
    if !plan.errors.is_empty() {
        anyhow::bail!(errors_message(&plan.errors));
    }
    let started = Instant::now();
    // Every pod at once, each retrying while a disruption budget says no
    // (429), then waiting until it is gone, as kubectl's evictPods.
    let evictions = plan.evict.iter().map(|key| {
        let pod = pods
            .iter()
            .find(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()) == *key)
            .expect("planned from this list");
        evict_and_wait(ctx, pod, args, started, timeout)
    });
    for result in futures::future::join_all(evictions).await {
        result?;
    }
    Ok(())
}

/// How long drain waits before asking again when a disruption budget
/// refuses an eviction (kubectl's 5 s).
const EVICTION_RETRY: Duration = Duration::from_secs(5);

async fn evict_and_wait(
    ctx: &Ctx,
    pod: &Pod,
    args: &DrainArgs,
    started: Instant,
    timeout: Option<Duration>,
) -> Result<()> {
    let (ns, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
    println!("evicting pod {ns}/{name}");
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    // A 429 from a disruption budget is reported and retried here.
    let evictions: Api<Pod> = Api::namespaced(ctx.client_no_retry.clone(), &ns);
    let mut eviction = json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": ns},
    });
    if args.grace_period >= 0 {
        eviction["deleteOptions"] = json!({"gracePeriodSeconds": args.grace_period});
    }
    let timed_out = || timeout.is_some_and(|t| started.elapsed() > t);
    loop {
        if timed_out() {
            anyhow::bail!(
                "error when evicting pods/{name:?} -n {ns:?}: global timeout reached: {}",
                args.timeout
            );
        }
        match evictions
            .create_subresource::<serde_json::Value, serde_json::Value>(
                "eviction",
                &name,
                &PostParams::default(),
                &eviction,
            )
            .await
        {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 429 => {
                eprintln!(
                    "error when evicting pods/{name:?} -n {ns:?} (will retry after 5s): {}",
                    s.message
                );
                tokio::time::sleep(EVICTION_RETRY).await;
            }
            Err(kube::Error::Api(s)) => {
                anyhow::bail!("error when evicting pods/{name:?} -n {ns:?}: {}", s.message)
            }
            Err(e) => return Err(e.into()),
        }
    }
    // Wait until it is gone (or replaced by a new pod of that name).
    let uid = pod.metadata.uid.clone();
    loop {
        match api.get_opt(&name).await? {
            Some(p) if p.metadata.uid == uid => {}
            _ => break,
        }
        if timed_out() {
            anyhow::bail!(
                "error when waiting for pod {name:?} in namespace {ns:?} to terminate: global timeout reached: {}",
                args.timeout
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    println!("pod/{name} evicted");
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
            errors_message(&p.errors),
            "[cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): default/ds, \
             cannot delete Pods with local storage (use --delete-emptydir-data to override): default/cache, \
             cannot delete Pods that declare no controller (use --force to override): default/solo]"
        );
        // A pod's last filter decides: emptyDir allowed, but no controller.
        let lone_cache = [pod("tmp", None, true, "Running")];
        let p = plan(&lone_cache, &args(&["n1", "--delete-emptydir-data"]));
        assert!(p.evict.is_empty() && p.warnings.is_empty());
        assert_eq!(
            errors_message(&p.errors),
            "cannot delete Pods that declare no controller (use --force to override): default/tmp"
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
        // kubectl keeps a pod's last word only: the managed pod with an
        // emptyDir ends on the controller filter's Okay, so no warning.
        assert_eq!(
            warnings_message(&p.warnings),
            "ignoring DaemonSet-managed Pods: default/ds; \
             deleting Pods that declare no controller: default/solo"
        );
        let p = plan(
            &[pod("tmp", None, true, "Running")],
            &args(&["n1", "--delete-emptydir-data", "--force"]),
        );
        assert_eq!(
            warnings_message(&p.warnings),
            "deleting Pods that declare no controller: default/tmp"
        );
        assert_eq!(parse_timeout("0s").unwrap(), None);
        assert_eq!(parse_timeout("2m").unwrap(), Some(Duration::from_secs(120)));
        assert!(parse_timeout("soon").is_err());
    }
}
