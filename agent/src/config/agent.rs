//! The agent's settings.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub node_name: String,
    /// The address pods and the control plane reach this node at.
    pub node_ip: String,
    /// The node's pod subnet; the pod network's subnet on Docker.
    pub pod_cidr: String,
    /// Where pod volumes (emptyDir) live.
    pub data_dir: PathBuf,
    /// Where this agent sees the Docker engine's filesystem: `/` when both
    /// share one, the engine's `/` mounted elsewhere when the agent runs
    /// in a container (Docker-in-Docker). hostPath volumes are paths on
    /// the engine; their `type` is checked under this root.
    pub host_root: PathBuf,
    /// Nameservers pods with dnsPolicy ClusterFirst get: the node-local
    /// DNS server's address unless `--cluster-dns` says otherwise.
    pub cluster_dns: Vec<String>,
    pub cluster_domain: String,
    /// The host's search domains, appended to a ClusterFirst pod's
    /// search path after the cluster's.
    pub host_search: Vec<String>,
    /// The node-local DNS server to run, if any.
    pub dns: Option<crate::dns::DnsSettings>,
    /// First crash-loop back-off delay; it doubles up to `backoff_max`.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// A container that ran this long has its back-off reset.
    pub backoff_reset: Duration,
    /// How often every pod is synced even if nothing changed.
    pub sync_period: Duration,
    /// How often the agent lists its containers to notice changes made
    /// behind its back.
    pub relist_period: Duration,
    /// How often the agent renews its Lease and checks whether the
    /// Node's status changed (kubelet's node status update frequency).
    pub heartbeat_period: Duration,
    /// The Lease's duration, as kubelet's `--node-lease-duration-seconds`.
    pub lease_duration_seconds: i32,
    /// How often an unchanged Node status is written all the same
    /// (kubelet's `--node-status-report-frequency`).
    pub status_report_period: Duration,
    /// The port of the agent's stream API (logs, exec, attach), published
    /// as the Node's `daemonEndpoints.kubeletEndpoint.Port`; 0 when it
    /// does not serve one.
    pub daemon_port: u16,
    /// The stream API's certificate (PEM), published on the Node so the
    /// control plane trusts exactly it.
    pub serving_cert: Option<String>,
    /// How many pods the node takes (its allocatable `pods`), as
    /// kubelet's `--max-pods`.
    pub max_pods: u32,
}

impl AgentConfig {
    /// The Docker network this node's pods live on.
    pub fn network_name(&self) -> String {
        format!("bosun-{}", self.node_name)
    }

    /// Settings for unit tests.
    pub fn for_tests(node: &str, data_dir: PathBuf) -> Self {
        AgentConfig {
            node_name: node.into(),
            node_ip: "192.168.1.10".into(),
            pod_cidr: "10.244.0.0/24".into(),
            data_dir,
            host_root: PathBuf::from("/"),
            // The node-local DNS server on the pod bridge's gateway.
            cluster_dns: vec!["10.244.0.1".into()],
            cluster_domain: "cluster.local".into(),
            host_search: Vec::new(),
            dns: None,
            backoff_base: Duration::from_secs(10),
            backoff_max: Duration::from_secs(300),
            backoff_reset: Duration::from_secs(600),
            sync_period: Duration::from_secs(10),
            relist_period: Duration::from_secs(1),
            heartbeat_period: Duration::from_secs(10),
            lease_duration_seconds: 40,
            status_report_period: Duration::from_secs(300),
            daemon_port: 0,
            serving_cert: None,
            max_pods: 110,
        }
    }
}
