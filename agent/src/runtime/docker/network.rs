//! The node's pod network: a Docker bridge network with the node's pod
//! CIDR, and the iptables rule that lets pods of nodes sharing one engine
//! reach each other.

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

    /// Adds `iptables -I DOCKER-USER -s <cidr> -d <cidr> -j ACCEPT` unless it
    /// is there, where `<cidr>` is the /16 holding `subnet`: Docker isolates
    /// bridge networks from each other, and pods of two nodes that share one
    /// engine must reach each other. Failures are logged, not returned.
    async fn ensure_pod_traffic_rule(&self, subnet: &str) {
        let Some(cidr) = supernet16(subnet) else {
            tracing::warn!(subnet, "not an IPv4 CIDR; no iptables rule for pod traffic");
            return;
        };
        if self.iptables_done.lock().expect("poisoned").contains(&cidr) {
            return;
        }
        match pod_traffic_rule("-C", &cidr).await {
            Ok(out) if out.status.success() => {}
            Ok(_) => match pod_traffic_rule("-I", &cidr).await {
                Ok(out) if out.status.success() => {
                    tracing::info!(%cidr, "added iptables DOCKER-USER rule accepting pod-to-pod traffic");
                }
                Ok(out) => {
                    tracing::warn!(
                        %cidr,
                        "iptables -I DOCKER-USER failed: {}; pods of other nodes on this engine may be unreachable",
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                    return;
                }
                Err(e) => {
                    tracing::warn!(%cidr, "running iptables: {e}; pods of other nodes on this engine may be unreachable");
                    return;
                }
            },
            Err(e) => {
                tracing::warn!(%cidr, "running iptables: {e}; pods of other nodes on this engine may be unreachable");
                return;
            }
        }
        self.iptables_done.lock().expect("poisoned").insert(cidr);
    }
}

/// The subnets of a network's IPAM configuration.
pub(super) fn subnets_of(ipam: Option<Ipam>) -> Vec<String> {
    ipam.and_then(|i| i.config)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.subnet)
        .collect()
}

/// Runs `iptables -w <op> DOCKER-USER -s <cidr> -d <cidr> -j ACCEPT`
/// (`-C` checks, `-I` inserts, `-D` deletes).
pub(super) async fn pod_traffic_rule(
    op: &str,
    cidr: &str,
) -> std::io::Result<std::process::Output> {
    tokio::process::Command::new("iptables")
        .args([
            "-w",
            op,
            "DOCKER-USER",
            "-s",
            cidr,
            "-d",
            cidr,
            "-j",
            "ACCEPT",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .await
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
