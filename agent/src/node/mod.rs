//! The Node this agent stands for: registered on start with capacity,
//! addresses and system info. As the kubelet does, the agent heartbeats
//! cheaply by renewing its Lease in `kube-node-lease`, and writes the
//! Node's status only when it changed (Ready, capacity, addresses ...) or
//! when the last report is older than the report period.

pub mod certificate;

use bosun::well_known::{ARCH_LABEL, HOSTNAME_LABEL, OS_LABEL};
use chrono::{SecondsFormat, Utc};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::config::AgentConfig;

fn read(path: &str) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Total memory in KiB, from /proc/meminfo.
fn memory_kib() -> u64 {
    read("/proc/meminfo")
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn os_image() -> String {
    read("/etc/os-release")
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "Linux".into())
}

fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

use bosun::well_known::NODE_LEASE_NAMESPACE as LEASE_NAMESPACE;

/// What the agent reports about its own health: Ready unless the
/// container runtime does not answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    /// The runtime's version (`docker://29.0.1`), the last one known.
    pub runtime_version: String,
    /// Why the node is not ready, if it is not.
    pub not_ready: Option<String>,
}

impl Health {
    pub fn ready(runtime_version: &str) -> Health {
        Health {
            runtime_version: runtime_version.to_string(),
            not_ready: None,
        }
    }
}

/// The Ready condition the agent posts (the kubelet's wording).
fn ready_condition(health: &Health, now: &str) -> Value {
    let (status, reason, message) = match &health.not_ready {
        None => (
            "True",
            "KubeletReady",
            "bosun-agent is posting ready status".to_string(),
        ),
        Some(why) => ("False", "KubeletNotReady", why.clone()),
    };
    json!({
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    })
}

/// The node's status: capacity, addresses, Ready, system info.
pub fn node_status(cfg: &AgentConfig, health: &Health) -> Value {
    let runtime_version = health.runtime_version.as_str();
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let capacity = json!({
        "cpu": cpus.to_string(),
        "memory": format!("{}Ki", memory_kib()),
        "pods": cfg.max_pods.to_string(),
        "ephemeral-storage": "0",
    });
    let now = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
    let uts = nix::sys::utsname::uname().ok();
    json!({
        "capacity": capacity,
        "allocatable": capacity,
        "addresses": [
            {"type": "InternalIP", "address": cfg.node_ip},
            {"type": "Hostname", "address": cfg.node_name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": cfg.daemon_port}},
        "conditions": [ready_condition(health, &now)],
        "nodeInfo": {
            "machineID": read("/etc/machine-id"),
            "systemUUID": "",
            "bootID": read("/proc/sys/kernel/random/boot_id"),
            "kernelVersion": uts.as_ref().map(|u| u.release().to_string_lossy().into_owned()).unwrap_or_default(),
            "osImage": os_image(),
            "containerRuntimeVersion": runtime_version,
            "kubeletVersion": bosun::version::git_version(),
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": arch(),
        },
    })
}

/// Creates the Node if it is missing, refreshes its labels and pod CIDR,
/// and writes its status.
pub async fn register(client: &Client, cfg: &AgentConfig, health: &Health) -> kube::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let labels = json!({
        HOSTNAME_LABEL: cfg.node_name,
        OS_LABEL: "linux",
        ARCH_LABEL: arch(),
    });
    let spec = json!({"podCIDR": cfg.pod_cidr, "podCIDRs": [cfg.pod_cidr]});
    // The stream API's certificate, for the control plane to pin (null
    // removes a stale one).
    let annotations = json!({
        crate::server::tls::SERVING_CERT_ANNOTATION: cfg.serving_cert,
        crate::volumes::persistent_claim::DATA_DIR_ANNOTATION: crate::volumes::persistent_claim::data_dir(cfg),
    });
    let existing = nodes.get_opt(&cfg.node_name).await?;
    if existing.is_none() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {
                "name": cfg.node_name,
                "labels": labels,
                // A null annotation is no value on create: only what is set.
                "annotations": annotations
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<serde_json::Map<_, _>>(),
            },
            "spec": spec,
        }))
        .expect("a valid Node");
        match nodes.create(&PostParams::default(), &node).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e),
        }
    } else {
        // The pod CIDR is set once and never changed (the control plane's
        // node IPAM sets it; a node's own credential may not): only a Node
        // without one gets this agent's --pod-cidr.
        let mut patch = json!({"metadata": {"labels": labels, "annotations": annotations}});
        let stored = existing
            .and_then(|n| n.spec)
            .and_then(|s| s.pod_cidr)
            .filter(|c| !c.is_empty());
        match stored {
            None => patch["spec"] = spec,
            Some(c) if c != cfg.pod_cidr => tracing::warn!(
                node = %cfg.node_name, stored = %c, pod_cidr = %cfg.pod_cidr,
                "the Node's pod CIDR is not this agent's --pod-cidr and cannot change: \
                 restart the agent without --pod-cidr to use the Node's"
            ),
            Some(_) => {}
        }
        nodes
            .patch(
                &cfg.node_name,
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await?;
    }
    report_status(client, cfg, health, None).await?;
    renew_lease(client, cfg).await
}

/// The parts of a status that say something: everything but heartbeat
/// times (a report that would only move those is not sent).
fn meaningful(status: &Value) -> Value {
    let mut s = status.clone();
    if let Some(conds) = s.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conds {
            if let Some(c) = c.as_object_mut() {
                c.remove("lastHeartbeatTime");
            }
        }
    }
    json!({
        "conditions": s.get("conditions"),
        "addresses": s.get("addresses"),
        "capacity": s.get("capacity"),
        "allocatable": s.get("allocatable"),
        "nodeInfo": s.get("nodeInfo"),
        "daemonEndpoints": s.get("daemonEndpoints"),
    })
}

/// Writes the node's status if it differs from what the API holds (say
/// the node lifecycle controller marked it Unknown while the agent was
/// away), or if the last report is older than `report_period`
/// (`last_report` None: always). Returns whether it wrote.
pub async fn report_status(
    client: &Client,
    cfg: &AgentConfig,
    health: &Health,
    last_report: Option<(std::time::Instant, std::time::Duration)>,
) -> kube::Result<bool> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut status = node_status(cfg, health);
    let current = nodes
        .get_opt(&cfg.node_name)
        .await?
        .and_then(|n| n.status)
        .map(|s| serde_json::to_value(s).unwrap_or_default())
        .unwrap_or_default();
    // A condition keeps its transition time while its status stays.
    if let Some(conds) = status["conditions"].as_array_mut() {
        for c in conds {
            let old = current["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|o| o["type"] == c["type"] && o["status"] == c["status"]);
            if let Some(t) = old.and_then(|o| o.get("lastTransitionTime")) {
                c["lastTransitionTime"] = t.clone();
            }
        }
    }
    let due = last_report.is_none_or(|(at, period)| at.elapsed() >= period);
    if !due && meaningful(&status) == meaningful(&current) {
        return Ok(false);
    }
    nodes
        .patch_status(
            &cfg.node_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await?;
    Ok(true)
}

/// Renews the node's Lease, creating it (owned by the Node, so it goes
/// with it) when it is missing.
pub async fn renew_lease(client: &Client, cfg: &AgentConfig) -> kube::Result<()> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let now = Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true);
    let spec = json!({
        "holderIdentity": cfg.node_name,
        "leaseDurationSeconds": cfg.lease_duration_seconds,
        "renewTime": now,
    });
    match leases
        .patch(
            &cfg.node_name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": spec })),
        )
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        other => return other.map(|_| ()),
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let owner = nodes.get_opt(&cfg.node_name).await?.map(|n| {
        json!([{
            "apiVersion": "v1",
            "kind": "Node",
            "name": cfg.node_name,
            "uid": n.metadata.uid,
        }])
    });
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": cfg.node_name, "namespace": LEASE_NAMESPACE, "ownerReferences": owner},
        "spec": spec,
    }))
    .expect("a valid Lease");
    match leases.create(&PostParams::default(), &lease).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// The pod CIDR the control plane gave this node (`spec.podCIDR`, written
/// by its node IPAM controller): registers a bare Node if there is none
/// yet, then waits for the CIDR, at most `timeout`, saying every 10 s
/// what it waits for.
pub async fn await_pod_cidr(
    client: &Client,
    node_name: &str,
    timeout: std::time::Duration,
) -> anyhow::Result<String> {
    use std::time::Duration;
    let nodes: Api<Node> = Api::all(client.clone());
    let pod_cidr = |n: &Node| n.spec.as_ref().and_then(|s| s.pod_cidr.clone());
    use crate::startup::until_answered;
    match until_answered("reading the Node", || nodes.get_opt(node_name)).await? {
        Some(n) if pod_cidr(&n).is_some() => return Ok(pod_cidr(&n).unwrap_or_default()),
        Some(_) => {}
        None => {
            let node: Node = serde_json::from_value(json!({
                "metadata": {"name": node_name, "labels": {
                    "kubernetes.io/hostname": node_name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": arch(),
                }},
            }))
            .expect("a valid Node");
            let params = PostParams::default();
            let create = || nodes.create(&params, &node);
            match until_answered("registering the Node", create).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    let start = tokio::time::Instant::now();
    let mut said = start;
    tracing::info!(
        node = node_name,
        "waiting for the control plane to assign this node a pod CIDR"
    );
    loop {
        let node = until_answered("reading the Node", || nodes.get_opt(node_name)).await?;
        if let Some(cidr) = node.as_ref().and_then(pod_cidr) {
            tracing::info!(node = node_name, pod_cidr = %cidr, "the control plane assigned this node's pod CIDR");
            return Ok(cidr);
        }
        if start.elapsed() >= timeout {
            anyhow::bail!(
                "node {node_name} got no pod CIDR (spec.podCIDR) from the control plane in {timeout:?}: \
                 is its nodeipam controller running (bosun-control --controllers) and is its \
                 --cluster-cidr not exhausted (kubectl get events)? Or give one with --pod-cidr"
            );
        }
        if said.elapsed() >= Duration::from_secs(10) {
            tracing::info!(
                node = node_name,
                waited = ?start.elapsed(),
                "still waiting for a pod CIDR from the control plane's nodeipam controller"
            );
            said = tokio::time::Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocatable_names_cpus_memory_and_max_pods() {
        let mut cfg = AgentConfig::for_tests("n1", std::env::temp_dir());
        cfg.max_pods = 7;
        let status = node_status(&cfg, &Health::ready("docker://test"));
        let alloc = &status["allocatable"];
        assert_eq!(alloc["pods"], "7");
        let cpus: usize = alloc["cpu"].as_str().unwrap().parse().unwrap();
        assert!(cpus >= 1);
        let memory = alloc["memory"].as_str().unwrap();
        assert!(memory.ends_with("Ki") && memory != "0Ki", "{memory}");
    }
}
