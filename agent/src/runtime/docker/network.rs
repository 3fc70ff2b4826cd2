//! The node's pod network: a Docker bridge network with the node's pod
//! CIDR. The host's firewall rules for it (bosun's chain `BOSUN-FORWARD`)
//! are `network::firewall`'s; the runtime asks for them once when it
//! finds or makes the network, so a node's first pod can reach pods of
//! nodes sharing the engine before the network sync's first pass.

use std::collections::HashMap;

use bollard::models::{Ipam, IpamConfig, NetworkCreateRequest};
use bollard::query_parameters::InspectNetworkOptions;

use super::errors::{docker_err, message, status};
use super::DockerRuntime;
use crate::network::firewall::{ensure_forward_chain, supernet16};
use crate::runtime::{labels, Result, RuntimeError};

impl DockerRuntime {
    /// Removes a network; a missing one is not an error.
    pub async fn remove_network(&self, name: &str) -> Result<()> {
        match self.client().await?.remove_network(name).await {
            Ok(()) => {
                self.networks_ok
                    .lock()
                    .expect("poisoned")
                    .retain(|(n, _)| n != name);
                Ok(())
            }
            Err(e) if status(&e) == Some(404) => {
                self.networks_ok
                    .lock()
                    .expect("poisoned")
                    .retain(|(n, _)| n != name);
                Ok(())
            }
            Err(e) => Err(docker_err(e)),
        }
    }

    pub(super) async fn ensure_bridge_network(
        &self,
        name: &str,
        subnet: &str,
        node: &str,
    ) -> Result<()> {
        let key = (name.to_string(), subnet.to_string());
        if self.networks_ok.lock().expect("poisoned").contains(&key) {
            return Ok(());
        }
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
                    self.networks_ok.lock().expect("poisoned").insert(key);
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

    /// Forgets which networks were found, so the next `ensure_network`
    /// inspects them again (a sandbox could not be made: its network may
    /// be gone).
    pub(super) fn forget_networks(&self) {
        self.networks_ok.lock().expect("poisoned").clear();
    }

    /// Makes sure pods of the /16 holding `subnet` may reach each other
    /// across bridges (see `network::firewall::ensure_forward_chain`); checked once per
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

/// The subnets of a network's IPAM configuration.
pub(super) fn subnets_of(ipam: Option<Ipam>) -> Vec<String> {
    ipam.and_then(|i| i.config)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.subnet)
        .collect()
}
