//! `bosun leave`: takes this host's node out of the cluster and removes
//! everything bosun made for it here, as `kubeadm reset` (plus the
//! `kubectl delete node` an admin runs after it) does:
//!
//! 1. marks the Node unschedulable, so nothing new is placed on it;
//! 2. stops the agent;
//! 3. deletes the Node. A joined host does it with its own credential:
//!    NodeRestriction lets a node modify and delete its own Node object
//!    and no other (Kubernetes' rule too: the Node authorizer grants
//!    nodes `delete` on nodes, and NodeRestriction limits it to the
//!    node's own). The first host's agent uses the admin kubeconfig its
//!    control plane wrote. The pods bound to the node are then removed by
//!    the control plane's pod garbage collector, and their controllers
//!    make new ones elsewhere; the other nodes drop their routes to its
//!    pod CIDR. When the control plane cannot be reached the host is
//!    still cleaned up, and leave says how to delete the Node later;
//! 4. removes the node's containers, Docker network, routes, iptables and
//!    nftables rules (`bosun-agent --purge`, as `bosun down --purge`
//!    does), then the agent's data: on a joined host the whole data dir,
//!    its credential included; on the first host the agent's data only
//!    (the control plane stays).
//!
//! It asks first unless `--yes`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, Patch, PatchParams};

use super::client::home_dir;
use super::component::AGENT;
use super::delete::parse_duration;
use super::purge::{self, Plan, NODE_FILE, NODE_KUBECONFIG};
use super::up;

#[derive(Debug, Args)]
pub struct LeaveArgs {
    /// The data dir given to `bosun join` (default ~/.bosun/join when it
    /// holds a node credential), or to `bosun up` to take the first
    /// host's agent out (default ~/.bosun/control).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Do not ask first.
    #[arg(long, short = 'y')]
    yes: bool,
    /// How long to wait for the agent to stop and for the control plane
    /// to answer.
    #[arg(long, default_value = "30s")]
    timeout: String,
}

/// Where this host's node was started from: a joined host's data dir holds
/// its credential; the first host's holds the control plane's admin
/// kubeconfig and, beside it, the agent's data.
#[derive(Debug, PartialEq)]
struct Host {
    /// The kubeconfig to delete the Node with.
    kubeconfig: PathBuf,
    /// What goes: the node's Docker objects and these dirs.
    plan_dirs: Vec<PathBuf>,
    joined: bool,
}

fn host_of(dir: &Path) -> Host {
    let credential = dir.join(NODE_KUBECONFIG);
    if credential.exists() {
        Host {
            kubeconfig: credential,
            plan_dirs: vec![dir.to_path_buf()],
            joined: true,
        }
    } else {
        let agent_dir = up::agent_data_dir(dir);
        Host {
            kubeconfig: dir.join("admin.kubeconfig"),
            plan_dirs: agent_dir
                .exists()
                .then_some(agent_dir)
                .into_iter()
                .collect(),
            joined: false,
        }
    }
}

fn default_data_dir() -> PathBuf {
    let joined = home_dir().join(".bosun").join("join");
    if joined.join(NODE_KUBECONFIG).exists() {
        joined
    } else {
        home_dir().join(".bosun").join("control")
    }
}

pub async fn leave(args: &LeaveArgs) -> Result<bool> {
    let dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    let timeout = parse_duration(&args.timeout)?;
    if !dir.exists() {
        bail!("--data-dir {}: no such directory", dir.display());
    }
    let host = host_of(&dir);
    let Some(node) = Plan::read(&dir, &up::agent_data_dir(&dir)).node else {
        bail!(
            "--data-dir {}: no node was started from it (no {NODE_FILE})",
            dir.display()
        );
    };
    let plan = Plan {
        node: Some(node.clone()),
        dirs: host.plan_dirs.clone(),
        kubeconfig: None,
        kubeconfig_names: super::clusters::KubeconfigNames::of(super::clusters::DEFAULT_NAME),
    };
    purge::confirm_action(
        "leave",
        &format!(
            "deletes Node {node} from the cluster and removes {}",
            plan.describe()
        ),
        args.yes,
    )?;
    let client = client_of(&host.kubeconfig).await;
    let nodes = client.as_ref().map(|c| kube::Api::<Node>::all(c.clone()));
    match &nodes {
        Ok(nodes) => {
            let cordon = Patch::Merge(serde_json::json!({"spec": {"unschedulable": true}}));
            match tokio::time::timeout(
                timeout,
                nodes.patch(&node, &PatchParams::default(), &cordon),
            )
            .await
            {
                Ok(Ok(_)) => println!("node/{node} cordoned"),
                Ok(Err(e)) => println!("warning: could not cordon node/{node}: {e}"),
                Err(_) => println!("warning: could not cordon node/{node}: timed out"),
            }
        }
        Err(e) => println!("warning: no client for the control plane: {e:#}"),
    }
    stop_agent(&dir, timeout)?;
    let deleted = match &nodes {
        Ok(nodes) => {
            match tokio::time::timeout(timeout, nodes.delete(&node, &DeleteParams::default())).await
            {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(kube::Error::Api(s))) if s.code == 404 => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("timed out".to_string()),
            }
        }
        Err(e) => Err(format!("{e:#}")),
    };
    match deleted {
        Ok(()) => println!("node/{node} deleted"),
        Err(e) => println!(
            "warning: could not delete node/{node} ({e}); delete it on the first host with `bosun delete node {node}`"
        ),
    }
    purge::purge(&plan, || AGENT.find_binary())?;
    if !host.joined {
        // The first host's control plane stays; `bosun up` starts a new
        // agent, which registers the node again.
        let _ = std::fs::remove_file(dir.join(NODE_FILE));
    }
    println!(
        "node {node} left the cluster; bosun is removed from this host's Docker, routes and rules."
    );
    Ok(true)
}

async fn client_of(kubeconfig: &Path) -> Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// Stops the agent started from `dir` (and its supervisor) with SIGTERM;
/// its pods' containers are removed after, with the rest.
fn stop_agent(dir: &Path, timeout: Duration) -> Result<()> {
    if let Some(pid) = AGENT.stop(dir, timeout)? {
        println!("bosun agent stopped (pid {pid})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_joined_host_loses_its_whole_dir_the_first_host_its_agent_only() {
        let tmp = tempfile::tempdir().unwrap();
        let joined = tmp.path().join("join");
        std::fs::create_dir_all(joined.join("agent")).unwrap();
        std::fs::write(joined.join(NODE_KUBECONFIG), "").unwrap();
        assert_eq!(
            host_of(&joined),
            Host {
                kubeconfig: joined.join(NODE_KUBECONFIG),
                plan_dirs: vec![joined.clone()],
                joined: true,
            }
        );
        let first = tmp.path().join("control");
        std::fs::create_dir_all(&first).unwrap();
        let agent = up::agent_data_dir(&first);
        std::fs::create_dir_all(&agent).unwrap();
        let host = host_of(&first);
        assert_eq!(host.kubeconfig, first.join("admin.kubeconfig"));
        assert_eq!(host.plan_dirs, vec![agent.clone()]);
        assert!(!host.plan_dirs.iter().any(|d| d == &first));
    }
}
