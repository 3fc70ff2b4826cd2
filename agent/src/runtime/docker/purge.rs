//! Removing everything a node's agent made on Docker, for `bosun down
//! --purge`: its pods' containers, its pod network, and its rule in the
//! iptables chain `BOSUN-FORWARD` (the chain and its jump too once empty)
//! when no other node's network on this engine needs it.

use std::collections::{BTreeSet, HashMap};

use bollard::query_parameters::{ListContainersOptions, ListNetworksOptions};

use super::errors::docker_err;
use super::network::subnets_of;
use super::DockerRuntime;
use crate::network::firewall::{remove_forward_rule, supernet16};
use crate::runtime::{labels, Result};

/// What a purge removed.
#[derive(Debug, Default)]
pub struct Purged {
    pub containers: usize,
    pub networks: Vec<String>,
    pub rules: Vec<String>,
}

impl DockerRuntime {
    /// Removes every container and network labelled with `node`, then the
    /// iptables rules of their /16s that no remaining bosun network uses.
    pub async fn purge_node(&self, node: &str) -> Result<Purged> {
        let docker = self.client().await?;
        let of_node = HashMap::from([(
            "label".to_string(),
            vec![format!("{}={node}", labels::NODE)],
        )]);
        let mut purged = Purged::default();
        let containers = docker
            .list_containers(Some(ListContainersOptions {
                all: true,
                filters: Some(of_node.clone()),
                ..Default::default()
            }))
            .await
            .map_err(docker_err)?;
        for id in containers.into_iter().filter_map(|c| c.id) {
            self.remove(&id).await?;
            purged.containers += 1;
        }
        let mut freed = BTreeSet::new();
        for net in self.networks(of_node).await? {
            freed.extend(net.1.iter().filter_map(|s| supernet16(s)));
            self.remove_network(&net.0).await?;
            purged.networks.push(net.0);
        }
        // Other nodes on this engine may share a /16 and its rule.
        let any_node = HashMap::from([("label".to_string(), vec![labels::NODE.to_string()])]);
        let still_used: BTreeSet<String> = self
            .networks(any_node)
            .await?
            .into_iter()
            .flat_map(|(_, subnets)| subnets)
            .filter_map(|s| supernet16(&s))
            .collect();
        for cidr in freed.difference(&still_used) {
            let removed = remove_forward_rule(cidr)
                .await
                .map_err(crate::runtime::RuntimeError::Docker)?;
            purged.rules.extend(removed);
        }
        Ok(purged)
    }

    /// The networks `filters` selects: name and subnets.
    async fn networks(
        &self,
        filters: HashMap<String, Vec<String>>,
    ) -> Result<Vec<(String, Vec<String>)>> {
        let docker = self.client().await?;
        let list = docker
            .list_networks(Some(ListNetworksOptions {
                filters: Some(filters),
            }))
            .await
            .map_err(docker_err)?;
        Ok(list
            .into_iter()
            .filter_map(|n| Some((n.name?, subnets_of(n.ipam))))
            .collect())
    }
}
