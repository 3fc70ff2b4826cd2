//! What `bosun up` makes a new cluster of, or finds of an existing one:
//! its name, port, ranges and node, checked against the other clusters
//! of this host and recorded ([`super::super::clusters`]).

use std::path::Path;

use anyhow::{bail, Context as _, Result};

use super::UpArgs;
use crate::cli::clusters::{self, ClusterRecord, Registry};

/// A free TCP port on every interface, for a cluster that keeps it.
fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind(("0.0.0.0", 0)).context("finding a free port")?;
    Ok(l.local_addr()?.port())
}

/// The cluster in `dir`: as recorded by an earlier `up` (the flags may not
/// change its ranges), else made now, with ranges and a port no other
/// cluster on this host holds, and registered.
pub(super) fn plan_cluster(args: &UpArgs, name: &str, dir: &Path) -> Result<ClusterRecord> {
    let registry = Registry::lock()?;
    let node = match (&args.node.node_name, name == clusters::DEFAULT_NAME) {
        (Some(n), _) => Some(n.clone()),
        (None, true) => Some(args.node.name()?),
        (None, false) => Some(name.to_string()),
    }
    .filter(|_| !args.no_agent);
    let others: Vec<ClusterRecord> = registry
        .clusters()
        .into_iter()
        .filter(|c| c.data_dir != dir)
        .collect();
    let record = match ClusterRecord::read(dir)? {
        Some(mut had) => {
            // Restored from a snapshot of another dir, or moved.
            had.data_dir = dir.to_path_buf();
            for (flag, given, fixed) in [
                ("--cluster-cidr", args.cluster_cidr, had.cluster_cidr),
                ("--service-cidr", args.service_cidr, had.service_cidr),
            ] {
                if given.is_some_and(|g| g != fixed) {
                    bail!(
                        "{flag}: cluster {:?} in {} was made with {fixed}, which cannot change \
                         (`bosun down --purge` removes the cluster)",
                        had.name,
                        dir.display()
                    );
                }
            }
            if let Some(port) = args.port {
                had.port = if port == 0 { free_port()? } else { port };
            }
            had.node = node.or(had.node);
            had
        }
        None => {
            // A store made before clusters were recorded used the fixed
            // ranges of that time; its objects hold addresses from them.
            let (cluster_cidr, service_cidr) = if dir.join("store.redb").exists() {
                (
                    args.cluster_cidr.unwrap_or("10.244.0.0/16".parse()?),
                    args.service_cidr.unwrap_or("10.96.0.0/12".parse()?),
                )
            } else {
                let routes = bosun::hostnet::ipv4_routes().context("reading this host's routes")?;
                clusters::choose_ranges(
                    &clusters::Wanted {
                        cluster_cidr: args.cluster_cidr,
                        service_cidr: args.service_cidr,
                    },
                    &others,
                    &routes,
                )?
            };
            let port = match args.port {
                Some(0) => free_port()?,
                Some(p) => p,
                None if name == clusters::DEFAULT_NAME => 6443,
                None => free_port()?,
            };
            ClusterRecord {
                name: name.to_string(),
                data_dir: dir.to_path_buf(),
                port,
                cluster_cidr,
                service_cidr,
                node,
            }
        }
    };
    if let Some(node) = &record.node {
        if let Some(o) = others.iter().find(|o| o.node.as_ref() == Some(node)) {
            bail!(
                "node name {node:?} is taken by bosun cluster {:?} ({}) on this host: \
                 two nodes of one name would share their Docker network; give --node-name",
                o.name,
                o.data_dir.display()
            );
        }
    }
    registry.register(&record)?;
    Ok(record)
}
