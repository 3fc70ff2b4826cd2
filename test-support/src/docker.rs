//! A test node's Docker objects (containers labelled `io.bosun.node`, the
//! `bosun-<node>` network), and removing them after the test.

use std::path::Path;
use std::process::{Command, Stdio};

/// The ids of `node`'s containers (all states) that also carry every
/// label of `labels` (`key=value`).
pub fn node_containers(node: &str, labels: &[&str]) -> Vec<String> {
    let mut cmd = Command::new("docker");
    cmd.args(["ps", "-aq", "--filter"])
        .arg(format!("label=io.bosun.node={node}"));
    for l in labels {
        cmd.args(["--filter", &format!("label={l}")]);
    }
    let out = cmd.output().expect("docker ps");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Removes these containers and their anonymous volumes.
pub fn remove_containers(ids: &[String]) {
    if !ids.is_empty() {
        let _ = Command::new("docker")
            .args(["rm", "-f", "-v"])
            .args(ids)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Removes Docker network `name`, if it is there.
pub fn remove_network(name: &str) {
    let _ = Command::new("docker")
        .args(["network", "rm", name])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Removes what an agent of `node` made on Docker and the host: its
/// containers, its `bosun-<node>` network, its service proxy's nftables
/// table (which a killed agent leaves) and its network policies' table
/// `bosun-np-<node>` (which a stopped agent leaves while it isolates pods).
pub fn remove_node(node: &str) {
    remove_containers(&node_containers(node, &[]));
    remove_network(&format!("bosun-{node}"));
    let _ = Command::new("nft")
        .args(["delete", "table", "ip", &format!("bosun-{node}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let _ = Command::new("nft")
        .args(["delete", "table", "ip", &format!("bosun-np-{node}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Unmounts what is mounted under any of `dirs` (tmpfs volumes of pods an
/// agent had no time to remove).
pub fn unmount_under(dirs: &[&Path]) {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    for point in mounts.lines().filter_map(|l| l.split_whitespace().nth(1)) {
        if dirs.iter().any(|d| Path::new(point).starts_with(d)) {
            let _ = Command::new("umount").arg(point).status();
        }
    }
}
