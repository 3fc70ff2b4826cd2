//! Runs `nft`: one `nft -f -` transaction per sync (the kernel applies all
//! of it or none), and the table's removal.

use std::process::Stdio;

use anyhow::{bail, Context};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// The `nft` program, or a clear error when it is not installed.
pub async fn check_installed() -> anyhow::Result<()> {
    match Command::new("nft").arg("--version").output().await {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => bail!(
            "the service proxy needs nftables: `nft --version` failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => bail!(
            "the service proxy needs nftables' `nft` command, which is not installed ({e}); \
             install it (Debian/Ubuntu: apt-get install nftables) or run the agent with --no-proxy"
        ),
    }
}

/// Applies `script` with `nft -f -` in one transaction.
pub async fn apply(script: &str) -> anyhow::Result<()> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("running nft")?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin
        .write_all(script.as_bytes())
        .await
        .context("writing to nft")?;
    drop(stdin);
    let out = child.wait_with_output().await.context("running nft")?;
    if !out.status.success() {
        bail!(
            "nft -f rejected the ruleset: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Deletes table `ip <table>`; false if there was none.
pub async fn delete_table(table: &str) -> anyhow::Result<bool> {
    let exists = Command::new("nft")
        .args(["list", "table", "ip", table])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .context("running nft")?
        .success();
    if !exists {
        return Ok(false);
    }
    apply(&format!("delete table ip {table}\n")).await?;
    Ok(true)
}
