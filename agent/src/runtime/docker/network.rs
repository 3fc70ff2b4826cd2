//! The node's pod network: a Docker bridge network with the node's pod
//! CIDR, and bosun's iptables chain `BOSUN-FORWARD` that lets pods of
//! nodes sharing one engine reach each other. The chain stays when the
//! agent stops (its pods keep running); `bosun-agent --purge` removes it.

use std::collections::HashMap;

use bollard::models::{Ipam, IpamConfig, NetworkCreateRequest};
use bollard::query_parameters::InspectNetworkOptions;

use super::errors::{docker_err, message, status};
use super::DockerRuntime;
use crate::runtime::{labels, Result, RuntimeError};

impl DockerRuntime {
    /// Removes a network; a missing one is not an error.
    pub async fn remove_network(&self, name: &str) -> Result<()> {
        match self.client().await?.remove_network(name).await {
            Ok(()) => Ok(()),
            Err(e) if status(&e) == Some(404) => Ok(()),
            Err(e) => Err(docker_err(e)),
        }
    }

    pub(super) async fn ensure_bridge_network(
        &self,
        name: &str,
        subnet: &str,
        node: &str,
    ) -> Result<()> {
        let docker = self.client().await?;
        for _ in 0..2 {
            match docker
                .inspect_network(name, None::<InspectNetworkOptions>)
                .await
            {
                Ok(net) => {
                    let subnets = subnets_of(net.ipam);
                    if !subnets.iter().any(|s| s == subnet) {
                        return Err(RuntimeError::Docker(format!(
                            "Docker network {name} exists with subnet {} instead of {subnet}; \
                             remove it (docker network rm {name}) or pick another pod CIDR",
                            if subnets.is_empty() {
                                "(none)".to_string()
                            } else {
                                subnets.join(", ")
                            }
                        )));
                    }
                    self.ensure_pod_traffic_rule(subnet).await;
                    return Ok(());
                }
                Err(e) if status(&e) == Some(404) => {}
                Err(e) => return Err(docker_err(e)),
            }
            refuse_overlap(subnet)?;
            let request = NetworkCreateRequest {
                name: name.to_string(),
                driver: Some("bridge".to_string()),
                ipam: Some(Ipam {
                    driver: Some("default".to_string()),
                    config: Some(vec![IpamConfig {
                        subnet: Some(subnet.to_string()),
                        ..Default::default()
                    }]),
                    options: None,
                }),
                labels: Some(HashMap::from([(
                    labels::NODE.to_string(),
                    node.to_string(),
                )])),
                ..Default::default()
            };
            match docker.create_network(request).await {
                Ok(_) => {
                    tracing::info!(network = name, subnet, "created the pod network");
                }
                // Made meanwhile by someone else: inspect it again.
                Err(e) if status(&e) == Some(409) => {}
                Err(e) => {
                    return Err(RuntimeError::Docker(format!(
                        "creating network {name} ({subnet}): {}",
                        message(&e)
                    )))
                }
            }
        }
        Err(RuntimeError::Docker(format!(
            "network {name} vanished while it was being made"
        )))
    }

    /// Makes sure pods of the /16 holding `subnet` may reach each other
    /// across bridges (see [`ensure_forward_chain`]); checked once per
    /// runtime here, and again on every pass of the agent's network sync.
    /// Failures are logged, not returned.
    async fn ensure_pod_traffic_rule(&self, subnet: &str) {
        let Some(cidr) = supernet16(subnet) else {
            tracing::warn!(subnet, "not an IPv4 CIDR; no iptables rule for pod traffic");
            return;
        };
        if self.iptables_done.lock().expect("poisoned").contains(&cidr) {
            return;
        }
        match ensure_forward_chain(&cidr).await {
            Ok(()) => {
                self.iptables_done.lock().expect("poisoned").insert(cidr);
            }
            Err(e) => {
                tracing::warn!(%cidr, "{e}; pods of other nodes on this engine may be unreachable");
            }
        }
    }
}

/// The subnets of a network's IPAM configuration.
/// Refuses a pod subnet that a route of this host already covers (a
/// Docker network, another bosun cluster's pods, a VPN), naming both,
/// before Docker would refuse it with "Pool overlaps with other one on
/// this address space".
fn refuse_overlap(subnet: &str) -> Result<()> {
    let Ok(net) = subnet.parse::<ipnet::Ipv4Net>() else {
        return Ok(());
    };
    let routes = match bosun::hostnet::ipv4_routes() {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(error = %e, "reading the host's routes");
            return Ok(());
        }
    };
    match bosun::hostnet::routes_overlapping(&net, &routes).first() {
        None => Ok(()),
        Some(route) => Err(RuntimeError::Docker(format!(
            "pod CIDR {subnet} overlaps the host route {route}: another network on this host \
             uses those addresses (a Docker network, another bosun cluster); give this cluster \
             a range of its own (bosun up --cluster-cidr, or the agent's --pod-cidr)"
        ))),
    }
}

pub(super) fn subnets_of(ipam: Option<Ipam>) -> Vec<String> {
    ipam.and_then(|i| i.config)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.subnet)
        .collect()
}

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

/// The /16 that holds an IPv4 CIDR: `10.244.1.0/24` → `10.244.0.0/16`.
pub fn supernet16(subnet: &str) -> Option<String> {
    let (addr, _) = subnet.split_once('/').unwrap_or((subnet, "32"));
    let ip: std::net::Ipv4Addr = addr.parse().ok()?;
    let [a, b, _, _] = ip.octets();
    Some(format!("{a}.{b}.0.0/16"))
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
