//! What DNS keeps of a Pod (the Services and EndpointSlices are the
//! agent's shared model, `crate::services`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod;

use crate::services::Key;

/// What DNS needs of a Pod: its IPs (none for host-network pods, whose IP
/// is the node's, nor for finished ones, whose IP is free again).
#[derive(Debug, Clone, PartialEq)]
pub struct PodInfo {
    pub ips: Vec<IpAddr>,
}

/// Every Pod of the cluster, by (namespace, name).
pub type Pods = BTreeMap<Key, PodInfo>;

impl PodInfo {
    pub fn from_pod(pod: &Pod) -> PodInfo {
        let host_network = pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false);
        let status = pod.status.clone().unwrap_or_default();
        let mut ips: Vec<IpAddr> = status
            .pod_ips
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.ip.parse().ok())
            .collect();
        if ips.is_empty() {
            ips.extend(status.pod_ip.and_then(|ip| ip.parse::<IpAddr>().ok()));
        }
        // A finished pod's IP may already be another pod's.
        let finished = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
        if host_network || finished {
            ips.clear();
        }
        PodInfo { ips }
    }
}
