//! `bosun down`: stops a cluster's agent, then its control plane (their
//! supervisors or systemd units), and with `--purge` removes what bosun
//! made on this host.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use super::super::clusters::{self, ClusterRecord, Registry};
use super::super::component::{AGENT, CONTROL};
use super::super::delete::parse_duration;
use super::super::purge;
use super::ha::Layout;
use super::{agent_data_dir, pretty};

#[derive(Debug, Args)]
pub struct DownArgs {
    /// The cluster to stop, by the name given to `bosun up --name`.
    #[arg(long, conflicts_with = "data_dir")]
    name: Option<String>,
    /// The data directory given to `bosun up`.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// How long to wait for each process to exit.
    #[arg(long, default_value = "30s")]
    timeout: String,
    /// Also remove everything bosun made on this host: the node's pods'
    /// containers, its Docker network and iptables rule, the control
    /// plane's and the agent's data, and bosun's kubeconfig entries.
    #[arg(long)]
    purge: bool,
    /// With --purge: do not ask first.
    #[arg(long, short = 'y')]
    yes: bool,
}

/// The data dir `bosun down` acts on: `--data-dir`, the cluster named by
/// `--name`, or the default cluster's.
fn down_dir(args: &DownArgs) -> Result<PathBuf> {
    Ok(match (&args.data_dir, &args.name) {
        (Some(d), _) => d.clone(),
        (None, Some(name)) => clusters::data_dir_of(name)?,
        (None, None) => clusters::default_data_dir(None),
    })
}

pub fn down(args: &DownArgs) -> Result<bool> {
    let dir = down_dir(args)?;
    let timeout = parse_duration(&args.timeout)?;
    if args.purge {
        let record = ClusterRecord::read(&dir).ok().flatten();
        let mut plan = purge::Plan::read(&dir, &agent_data_dir(&dir));
        if let Some(r) = &record {
            plan.kubeconfig_names = r.kubeconfig_names();
        }
        purge::confirm(&plan, args.yes)?;
        stop_all(&dir, timeout)?;
        purge::purge(&plan, || AGENT.find_binary())?;
        if let Ok(registry) = Registry::lock() {
            registry.unregister(&dir.canonicalize().unwrap_or(dir.clone()));
        }
        // A named cluster's folder (~/.bosun/clusters/NAME), now empty.
        if let (Some(name), None) = (&args.name, &args.data_dir) {
            if let Some(folder) = clusters::default_data_dir(Some(name)).parent() {
                let _ = std::fs::remove_dir(folder);
            }
        }
        println!("bosun is purged from this host.");
        return Ok(true);
    }
    stop_all(&dir, timeout)
}

/// Stops the agent, then the control plane(s), then an HA cluster's
/// etcd (reverse start order).
fn stop_all(dir: &Path, timeout: Duration) -> Result<bool> {
    if let Some(pid) = AGENT.stop(dir, timeout)? {
        println!(
            "bosun {} stopped (pid {pid}); pods' containers keep running and are adopted by the next `bosun up`.",
            AGENT.title
        );
    }
    let stopped = CONTROL.stop(dir, timeout)?;
    if let Some(layout) = Layout::read(dir)? {
        layout.stop(dir, timeout)?;
    }
    let Some(pid) = stopped else {
        println!(
            "bosun is not running (no live {} in {}).",
            CONTROL.binary,
            pretty(dir)
        );
        return Ok(true);
    };
    let _ = std::fs::remove_file(dir.join("address"));
    println!(
        "bosun {} stopped (pid {pid}); data kept in {}.",
        CONTROL.title,
        pretty(dir)
    );
    Ok(true)
}
