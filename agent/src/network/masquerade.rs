//! Pod-to-pod traffic between hosts keeps the pods' own addresses:
//! Docker masquerades everything leaving a bridge for another interface,
//! so bosun's chain `BOSUN-POSTROUTING` in the `nat` table, jumped to
//! first from `POSTROUTING`, accepts (does not NAT) traffic from the pod
//! network to the pod network. Traffic leaving the cluster still meets
//! Docker's masquerade, and so does traffic the service proxy marked for
//! masquerading (kube-proxy's mark 0x4000: a pod reaching its own service,
//! which must come back from the gateway's address), so its chain, later
//! in POSTROUTING, still sees it. Forwarding itself is allowed by bosun's filter
//! chain `BOSUN-FORWARD`, jumped to from `DOCKER-USER` (see
//! [`super::firewall`]).

use super::firewall::iptables;

/// bosun's chain in the nat table.
pub const CHAIN: &str = "BOSUN-POSTROUTING";

/// The chain's one rule for the pod network `cidr` (what follows `-A
/// CHAIN` or `-C CHAIN`).
fn rule(cidr: &str) -> [&str; 15] {
    [
        "-s",
        cidr,
        "-d",
        cidr,
        "-m",
        "mark",
        "!",
        "--mark",
        MARK,
        "-m",
        "comment",
        "--comment",
        COMMENT,
        "-j",
        "ACCEPT",
    ]
}

const COMMENT: &str = "bosun: pod-to-pod traffic keeps pod IPs";

/// The service proxy's masquerade mark (kube-proxy's).
const MARK: &str = "0x4000/0x4000";

/// Makes sure pod-to-pod traffic inside `cidr` is not masqueraded: the
/// chain, its rule, and the jump to it as POSTROUTING's first rule (Docker
/// inserts its own at the top when it makes a network, so this is checked
/// on every call).
pub async fn ensure(cidr: &str) -> Result<(), String> {
    let have = match iptables(&["-t", "nat", "-S", CHAIN]).await {
        Ok(rules) => rules,
        Err(_) => {
            iptables(&["-t", "nat", "-N", CHAIN]).await?;
            String::new()
        }
    };
    let with = |op| {
        let mut args = vec!["-t", "nat", op, CHAIN];
        args.extend(rule(cidr));
        args
    };
    let rules = have.lines().filter(|l| l.starts_with("-A ")).count();
    if rules != 1 || iptables(&with("-C")).await.is_err() {
        // An older agent's rule, or another cluster CIDR: start over.
        iptables(&["-t", "nat", "-F", CHAIN]).await?;
        iptables(&with("-A")).await?;
        tracing::info!(%cidr, "pod-to-pod traffic between hosts is not masqueraded");
    }
    let rules = iptables(&["-t", "nat", "-S", "POSTROUTING"]).await?;
    let jump = format!("-A POSTROUTING -j {CHAIN}");
    let first = rules.lines().find(|l| l.starts_with("-A "));
    if first != Some(jump.as_str()) {
        while iptables(&["-t", "nat", "-D", "POSTROUTING", "-j", CHAIN])
            .await
            .is_ok()
        {}
        iptables(&["-t", "nat", "-I", "POSTROUTING", "1", "-j", CHAIN]).await?;
    }
    Ok(())
}

/// Removes the jump and the chain; true if there was one.
pub async fn remove() -> Result<bool, String> {
    if iptables(&["-t", "nat", "-S", CHAIN]).await.is_err() {
        return Ok(false);
    }
    while iptables(&["-t", "nat", "-D", "POSTROUTING", "-j", CHAIN])
        .await
        .is_ok()
    {}
    iptables(&["-t", "nat", "-F", CHAIN]).await?;
    iptables(&["-t", "nat", "-X", CHAIN]).await?;
    Ok(true)
}
