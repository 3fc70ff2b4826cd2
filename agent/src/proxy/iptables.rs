//! Runs `iptables-restore --noflush` (one transaction per sync: the
//! kernel applies all of it or none) and `iptables-save`, for the
//! iptables mode's chains ([`super::render_iptables`]), and removes them.

use std::process::Stdio;

use anyhow::{bail, Context};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::render::Settings;
use super::render_iptables::{chain_prefix, install, removal, Ruleset};

/// `iptables-restore` and `iptables-save`, or a clear error.
pub async fn check_installed() -> anyhow::Result<()> {
    for tool in ["iptables-restore", "iptables-save"] {
        match Command::new(tool).arg("--version").output().await {
            Ok(o) if o.status.success() => {}
            Ok(o) => bail!(
                "the service proxy's iptables mode needs `{tool}`: `{tool} --version` failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => bail!(
                "the service proxy's iptables mode needs `{tool}`, which is not installed ({e}); \
                 install iptables or run the agent with --no-proxy"
            ),
        }
    }
    Ok(())
}

/// Applies `script` with `iptables-restore -w --noflush` in one
/// transaction per table.
pub async fn restore(script: &str) -> anyhow::Result<()> {
    let mut child = Command::new("iptables-restore")
        .args(["-w", "--noflush"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("running iptables-restore")?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin
        .write_all(script.as_bytes())
        .await
        .context("writing to iptables-restore")?;
    drop(stdin);
    let out = child
        .wait_with_output()
        .await
        .context("running iptables-restore")?;
    if !out.status.success() {
        bail!(
            "iptables-restore rejected the rules: {}\n{script}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// `iptables-save` of the filter and nat tables.
pub async fn save() -> anyhow::Result<String> {
    let mut all = String::new();
    for table in ["filter", "nat"] {
        let out = Command::new("iptables-save")
            .args(["-t", table])
            .stdin(Stdio::null())
            .output()
            .await
            .context("running iptables-save")?;
        if !out.status.success() {
            bail!(
                "iptables-save -t {table} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        all.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    Ok(all)
}

/// Removes the chains of the agent with table (node) name `table` and the
/// jumps to them; false if there were none.
pub async fn remove(table: &str) -> anyhow::Result<bool> {
    let Some((flush, delete)) = removal(&save().await?, &chain_prefix(table)) else {
        return Ok(false);
    };
    restore(&flush).await?;
    if !delete.is_empty() {
        restore(&delete).await?;
    }
    Ok(true)
}

/// Makes the agent's chains `rules`, whatever of them is there (left by a
/// killed agent of the same node, or half-made by a failed sync).
pub async fn replace(settings: &Settings, rules: &Ruleset) -> anyhow::Result<()> {
    remove(&settings.table).await?;
    let docker_user = Command::new("iptables")
        .args(["-w", "-S", "DOCKER-USER"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success());
    let forward_from = if docker_user {
        "DOCKER-USER"
    } else {
        "FORWARD"
    };
    restore(&install(settings, rules, forward_from)).await
}
