//! `bosun list`: the clusters on this host, from the registry, with
//! whether their control planes run.

use anyhow::Result;

use super::ha::Layout;
use crate::cli::clusters::Registry;
use crate::cli::component::CONTROL;

/// `bosun list`: the clusters on this host.
pub fn list() -> Result<bool> {
    let clusters = Registry::lock()?.clusters();
    if clusters.is_empty() {
        println!("No bosun clusters on this host.");
        return Ok(true);
    }
    let mut rows: Vec<Vec<String>> = vec![[
        "NAME",
        "STATUS",
        "SERVER",
        "CLUSTER-CIDR",
        "SERVICE-CIDR",
        "NODE",
        "DATA",
    ]
    .map(String::from)
    .to_vec()];
    for c in clusters {
        let running = CONTROL.is_running(&c.data_dir);
        let status = match Layout::read(&c.data_dir).ok().flatten() {
            // HA: how many of its control planes run.
            Some(ha) => match ha.running_controls(&c.data_dir) {
                0 => "Stopped (HA)".to_string(),
                n => format!("Running (HA {n}/{})", ha.members.len()),
            },
            None if running => "Running".into(),
            None => "Stopped".into(),
        };
        rows.push(vec![
            c.name.clone(),
            status,
            format!("https://127.0.0.1:{}", c.port),
            c.cluster_cidr.to_string(),
            c.service_cidr.to_string(),
            c.node.clone().unwrap_or_else(|| "<none>".into()),
            c.data_dir.display().to_string(),
        ]);
    }
    print!("{}", crate::cli::table::align(&rows));
    Ok(true)
}
