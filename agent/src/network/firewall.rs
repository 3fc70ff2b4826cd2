//! The host firewall rules of the pod network (filter table): bosun's
//! chain `BOSUN-FORWARD`, jumped to from Docker's `DOCKER-USER`, lets pods
//! of nodes sharing one engine reach each other across Docker's bridges;
//! and the `iptables` runner the pod network's rules go through. The chain
//! stays when the agent stops (its pods keep running); `bosun-agent
//! --purge` removes it.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

/// bosun's chain in the filter table, jumped to from Docker's `DOCKER-USER`.
pub const FORWARD_CHAIN: &str = "BOSUN-FORWARD";

const FORWARD_COMMENT: &str = "bosun: pods of nodes sharing one engine reach each other";

/// Runs `iptables -w ARGS`: its stdout, or an error with its stderr.
pub async fn iptables(args: &[&str]) -> std::result::Result<String, String> {
    let out = tokio::process::Command::new("iptables")
        .arg("-w")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| format!("running iptables {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "iptables {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The rule in [`FORWARD_CHAIN`] for the pod network `cidr` (after `-C`,
/// `-A` or `-D` and the chain).
fn forward_rule(cidr: &str) -> [&str; 10] {
    [
        "-s",
        cidr,
        "-d",
        cidr,
        "-m",
        "comment",
        "--comment",
        FORWARD_COMMENT,
        "-j",
        "ACCEPT",
    ]
}

/// Docker isolates bridge networks from each other, and pods of two nodes
/// that share one engine must reach each other: bosun's chain
/// `BOSUN-FORWARD` accepts traffic from `cidr` to `cidr`, and one jump to
/// it from `DOCKER-USER` (the chain Docker leaves to its users and keeps
/// across its restarts) sends forwarded traffic there. Idempotent: the
/// chain, the rule and the jump are each added only when missing, so it
/// runs on every network sync and puts back what someone removed. A rule
/// of older agents directly in `DOCKER-USER` is moved into the chain.
pub async fn ensure_forward_chain(cidr: &str) -> std::result::Result<(), String> {
    if iptables(&["-S", FORWARD_CHAIN]).await.is_err() {
        if let Err(e) = iptables(&["-N", FORWARD_CHAIN]).await {
            // Another agent on this host may have made it meanwhile.
            if iptables(&["-S", FORWARD_CHAIN]).await.is_err() {
                return Err(e);
            }
        }
    }
    let mut check = vec!["-C", FORWARD_CHAIN];
    check.extend(forward_rule(cidr));
    if iptables(&check).await.is_err() {
        let mut add = check.clone();
        add[0] = "-A";
        iptables(&add).await?;
        tracing::info!(%cidr, chain = FORWARD_CHAIN, "pods of nodes on this engine may reach each other");
    }
    if iptables(&["-C", "DOCKER-USER", "-j", FORWARD_CHAIN])
        .await
        .is_err()
    {
        iptables(&["-I", "DOCKER-USER", "1", "-j", FORWARD_CHAIN])
            .await
            .map_err(|e| format!("{e} (does Docker run here with iptables on?)"))?;
        tracing::info!("jump from DOCKER-USER to {FORWARD_CHAIN} added");
        // Agents sharing this host may have checked and inserted at the
        // same time: keep one jump.
        let jump = format!("-A DOCKER-USER -j {FORWARD_CHAIN}");
        let rules = iptables(&["-S", "DOCKER-USER"]).await?;
        for _ in 1..rules.lines().filter(|l| *l == jump).count() {
            iptables(&["-D", "DOCKER-USER", "-j", FORWARD_CHAIN]).await?;
        }
    }
    remove_legacy_rule(cidr).await;
    Ok(())
}

/// Deletes every copy of the rule agents before `BOSUN-FORWARD` put
/// straight into `DOCKER-USER`; how many went.
async fn remove_legacy_rule(cidr: &str) -> usize {
    let legacy = |op| [op, "DOCKER-USER", "-s", cidr, "-d", cidr, "-j", "ACCEPT"];
    let mut removed = 0;
    while iptables(&legacy("-C")).await.is_ok() && iptables(&legacy("-D")).await.is_ok() {
        removed += 1;
    }
    removed
}

/// Takes `cidr`'s rule out of [`FORWARD_CHAIN`] (and an older agent's out
/// of `DOCKER-USER`); when the chain is left empty, removes the jump and
/// the chain too. Returns what went, as `iptables` names it.
pub async fn remove_forward_rule(cidr: &str) -> std::result::Result<Vec<String>, String> {
    let mut removed = Vec::new();
    if remove_legacy_rule(cidr).await > 0 {
        removed.push(format!("DOCKER-USER {cidr}"));
    }
    if iptables(&["-S", FORWARD_CHAIN]).await.is_err() {
        return Ok(removed);
    }
    let mut delete = vec!["-D", FORWARD_CHAIN];
    delete.extend(forward_rule(cidr));
    while iptables(&delete).await.is_ok() {
        removed.push(format!("{FORWARD_CHAIN} {cidr}"));
    }
    let rules = iptables(&["-S", FORWARD_CHAIN]).await?;
    if rules.lines().any(|l| l.starts_with("-A ")) {
        return Ok(removed);
    }
    while iptables(&["-D", "DOCKER-USER", "-j", FORWARD_CHAIN])
        .await
        .is_ok()
    {}
    iptables(&["-X", FORWARD_CHAIN]).await?;
    removed.push(format!("filter {FORWARD_CHAIN}"));
    Ok(removed)
}

/// The /16 that holds an IPv4 CIDR (or address): `10.244.1.0/24` →
/// `10.244.0.0/16`.
pub fn supernet16(subnet: &str) -> Option<String> {
    let (addr, _) = subnet.split_once('/').unwrap_or((subnet, "32"));
    let ip: Ipv4Addr = addr.parse().ok()?;
    let net = Ipv4Net::new(ip, 16).ok()?.trunc();
    Some(net.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_traffic_rule_covers_the_slash_16() {
        assert_eq!(
            supernet16("10.244.1.0/24").as_deref(),
            Some("10.244.0.0/16")
        );
        assert_eq!(
            supernet16("172.20.3.0/24").as_deref(),
            Some("172.20.0.0/16")
        );
        assert_eq!(supernet16("fd00::/64"), None);
    }
}
