//! Resource metrics as they travel from an agent to the control plane:
//! the agent's `/stats/summary` (a subset of the kubelet's stats
//! Summary, same field names) and the `metrics.k8s.io/v1beta1`
//! NodeMetrics and PodMetrics the control plane builds from it, as
//! metrics-server does.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// An agent's latest readings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// None until the agent has two readings of the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeStats>,
    #[serde(default)]
    pub pods: Vec<PodStats>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStats {
    pub node_name: String,
    pub cpu: CpuStats,
    pub memory: MemoryStats,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReference {
    pub name: String,
    pub namespace: String,
    pub uid: String,
}

/// A pod whose every running app container has a CPU rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    pub pod_ref: PodReference,
    pub containers: Vec<ContainerStats>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    pub name: String,
    pub cpu: CpuStats,
    pub memory: MemoryStats,
}

/// CPU use: the rate between two readings `window_seconds` apart, the
/// later taken at `time`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    pub time: DateTime<Utc>,
    pub usage_nano_cores: u64,
    pub usage_core_nano_seconds: u64,
    /// bosun's addition: the time between the two readings.
    pub window_seconds: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    pub time: DateTime<Utc>,
    pub working_set_bytes: u64,
}

/// CPU as a Kubernetes quantity in nanocores (`12345678n`), as
/// metrics-server writes it.
pub fn cpu_quantity(nano_cores: u64) -> String {
    format!("{nano_cores}n")
}

/// Memory as a Kubernetes quantity in KiB (`5120Ki`), as metrics-server
/// writes it (rounded up).
pub fn memory_quantity(bytes: u64) -> String {
    format!("{}Ki", bytes.div_ceil(1024))
}

/// A window as metav1.Duration's JSON (Go's `time.Duration` string).
pub fn window(seconds: f64) -> String {
    let ms = (seconds * 1000.0).round() as u64;
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        let fraction = format!("{:03}", ms % 1000);
        format!("{}.{}s", ms / 1000, fraction.trim_end_matches('0'))
    }
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The NodeMetrics of a node's summary.
pub fn node_metrics(node: &NodeStats, labels: &Value) -> Value {
    json!({
        "kind": "NodeMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {
            "name": node.node_name,
            "creationTimestamp": time(Utc::now()),
            "labels": labels,
        },
        "timestamp": time(node.cpu.time),
        "window": window(node.cpu.window_seconds),
        "usage": {
            "cpu": cpu_quantity(node.cpu.usage_nano_cores),
            "memory": memory_quantity(node.memory.working_set_bytes),
        },
    })
}

/// The PodMetrics of a pod's summary.
pub fn pod_metrics(pod: &PodStats, labels: &Value) -> Value {
    let first = pod.containers.first();
    let containers: Vec<Value> = pod
        .containers
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "usage": {
                    "cpu": cpu_quantity(c.cpu.usage_nano_cores),
                    "memory": memory_quantity(c.memory.working_set_bytes),
                },
            })
        })
        .collect();
    json!({
        "kind": "PodMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {
            "name": pod.pod_ref.name,
            "namespace": pod.pod_ref.namespace,
            "creationTimestamp": time(Utc::now()),
            "labels": labels,
        },
        "timestamp": time(first.map(|c| c.cpu.time).unwrap_or_else(Utc::now)),
        "window": window(first.map(|c| c.cpu.window_seconds).unwrap_or(0.0)),
        "containers": containers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_as_metrics_server_writes_them() {
        assert_eq!(cpu_quantity(45_000_000), "45000000n");
        assert_eq!(memory_quantity(5 * 1024 * 1024), "5120Ki");
        assert_eq!(memory_quantity(1025), "2Ki");
        assert_eq!(window(10.0), "10s");
        assert_eq!(window(15.0034), "15.003s");
        assert_eq!(window(2.5), "2.5s");
    }
}
