//! `bosun down --purge`: after stopping bosun, removes everything it made
//! on this host: the node's pods' containers, its Docker network and
//! pod-traffic iptables rule (through `bosun-agent --purge`, which owns
//! Docker), the data of the control plane and the agent (pod volumes
//! included), and bosun's entries in the kubeconfig `bosun up` wrote.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::clusters::{KubeconfigNames, DEFAULT_NAME};

/// What a purge removes, as `bosun up` recorded it.
pub struct Plan {
    pub node: Option<String>,
    pub dirs: Vec<PathBuf>,
    pub kubeconfig: Option<PathBuf>,
    /// The cluster's entries in that kubeconfig.
    pub kubeconfig_names: KubeconfigNames,
}

impl Plan {
    /// Read from the control plane's data dir: `agent.node` names the
    /// node `bosun up` started, `kubeconfig.path` the kubeconfig it wrote.
    pub fn read(dir: &Path, agent_dir: &Path) -> Plan {
        let read = |f: &str| {
            std::fs::read_to_string(dir.join(f))
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        // A node started before `agent.node` was recorded: up's default.
        let node = read(NODE_FILE).or_else(|| {
            agent_dir
                .exists()
                .then(|| nix::unistd::gethostname().ok())
                .flatten()
                .map(|h| h.to_string_lossy().into_owned())
        });
        Plan {
            node,
            dirs: [dir, agent_dir]
                .into_iter()
                .enumerate()
                // `bosun join` keeps the agent's data inside its own dir.
                .filter(|(i, d)| d.exists() && !(*i == 1 && d.starts_with(dir)))
                .map(|(_, d)| d)
                .map(Path::to_path_buf)
                .collect(),
            kubeconfig: read(KUBECONFIG_FILE).map(PathBuf::from),
            kubeconfig_names: KubeconfigNames::of(DEFAULT_NAME),
        }
    }

    /// What goes, in words.
    pub fn describe(&self) -> String {
        let mut what = Vec::new();
        if let Some(node) = &self.node {
            what.push(format!(
                "the containers, Docker network and iptables rule of node {node}"
            ));
        }
        for d in &self.dirs {
            what.push(d.display().to_string());
        }
        if let Some(k) = &self.kubeconfig {
            what.push(format!("the bosun entries of {}", k.display()));
        }
        what.join(", ")
    }
}

/// In the control plane's data dir: the node `bosun up` started.
pub const NODE_FILE: &str = "agent.node";
/// In `bosun join`'s data dir: the node's kubeconfig (its credential).
pub const NODE_KUBECONFIG: &str = "node.kubeconfig";
/// In the data dir of `bosun join --control-plane`: what its control
/// plane was started with (its agent, if any, lives inside that dir).
pub const JOINED_CONTROL_PLANE: &str = "control-plane.json";
/// In the control plane's data dir: the kubeconfig `bosun up` wrote.
pub const KUBECONFIG_FILE: &str = "kubeconfig.path";

/// Asks before anything is removed, unless `yes`; without a terminal to
/// ask on, refuses.
pub fn confirm(plan: &Plan, yes: bool) -> Result<()> {
    confirm_action("--purge", &format!("removes {}", plan.describe()), yes)
}

/// Asks whether `command` may do `what` ("removes ..."), unless `yes`;
/// without a terminal to ask on, refuses.
pub fn confirm_action(command: &str, what: &str, yes: bool) -> Result<()> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        bail!("{command} {what}; pass --yes to confirm without a terminal");
    }
    print!("This {what}. Continue? [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if !matches!(answer.trim(), "y" | "Y" | "yes") {
        bail!(
            "{} cancelled; nothing removed",
            command.trim_start_matches('-')
        );
    }
    Ok(())
}

/// Removes what `plan` names; `agent` finds the bosun-agent binary.
pub fn purge(plan: &Plan, agent: impl FnOnce() -> Result<PathBuf>) -> Result<()> {
    if let Some(node) = &plan.node {
        let agent = agent()?;
        let out = std::process::Command::new(&agent)
            .args(["--purge", "--node-name", node])
            .output()
            .with_context(|| format!("running {} --purge", agent.display()))?;
        if !out.status.success() {
            bail!(
                "{} --purge failed: {}",
                agent.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }
    if let Some(path) = &plan.kubeconfig {
        remove_kubeconfig_entries(path, &plan.kubeconfig_names)?;
    }
    for dir in &plan.dirs {
        unmount_under(dir)?;
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
        println!("removed {}", dir.display());
    }
    Ok(())
}

/// Unmounts what is mounted under `dir` (the tmpfs of secret and memory
/// volumes of pods whose agent was stopped before it removed them),
/// deepest first, so the dir can be removed.
fn unmount_under(dir: &Path) -> Result<()> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut points: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|p| Path::new(p).starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for point in points {
        let out = std::process::Command::new("umount")
            .arg(point)
            .output()
            .with_context(|| format!("running umount {point}"))?;
        if !out.status.success() {
            bail!(
                "umount {point} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    Ok(())
}

/// Removes the cluster, context and user that `bosun up` wrote (`bosun`
/// and `bosun-admin` for the default cluster); the file goes if nothing
/// else is left in it.
pub fn remove_kubeconfig_entries(path: &Path, names: &KubeconfigNames) -> Result<()> {
    use serde_yaml::Value;
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    let mut doc: Value =
        serde_yaml::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
    let Some(map) = doc.as_mapping_mut() else {
        return Ok(());
    };
    let mut left = 0;
    for (list, name) in [
        ("clusters", &names.cluster),
        ("users", &names.user),
        ("contexts", &names.context),
    ] {
        if let Some(seq) = map.get_mut(list).and_then(Value::as_sequence_mut) {
            seq.retain(|e| e.get("name").and_then(Value::as_str) != Some(name.as_str()));
            left += seq.len();
        }
    }
    if map.get("current-context").and_then(Value::as_str) == Some(names.context.as_str()) {
        map.remove("current-context");
    }
    if left == 0 {
        std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
        println!("removed {}", path.display());
    } else {
        std::fs::write(path, serde_yaml::to_string(&doc)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("removed bosun's entries from {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bosuns_kubeconfig_entries_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\ncurrent-context: bosun\nclusters:\n- name: bosun\n  cluster: {server: 'https://127.0.0.1:6443'}\n- name: prod\n  cluster: {server: 'https://prod'}\nusers:\n- name: bosun-admin\n  user: {token: t}\ncontexts:\n- name: bosun\n  context: {cluster: bosun, user: bosun-admin}\n",
        )
        .unwrap();
        let names = KubeconfigNames::of(DEFAULT_NAME);
        remove_kubeconfig_entries(&path, &names).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("prod"), "{text}");
        assert!(!text.contains("bosun"), "{text}");

        // A kubeconfig holding only bosun's entries goes altogether.
        let only = dir.path().join("only");
        crate::cli::up::write_kubeconfig(
            &only,
            &names,
            &serde_yaml::from_str("server: https://127.0.0.1:1").unwrap(),
            "t",
        )
        .unwrap();
        remove_kubeconfig_entries(&only, &names).unwrap();
        assert!(!only.exists());
    }
}
