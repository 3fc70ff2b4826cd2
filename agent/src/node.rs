//! The Node this agent stands for: registered on start with capacity,
//! addresses and system info, its Ready condition refreshed every
//! heartbeat.

use chrono::{SecondsFormat, Utc};
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

/// The node's status: capacity, addresses, Ready, system info.
pub fn node_status(cfg: &AgentConfig, runtime_version: &str) -> Value {
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
        "conditions": [{
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "bosun-agent is posting ready status",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }],
        "nodeInfo": {
            "machineID": read("/etc/machine-id"),
            "systemUUID": "",
            "bootID": read("/proc/sys/kernel/random/boot_id"),
            "kernelVersion": uts.as_ref().map(|u| u.release().to_string_lossy().into_owned()).unwrap_or_default(),
            "osImage": os_image(),
            "containerRuntimeVersion": runtime_version,
            "kubeletVersion": concat!("v1.37.0-bosun.", env!("CARGO_PKG_VERSION")),
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": arch(),
        },
    })
}

/// Creates the Node if it is missing, refreshes its labels and pod CIDR,
/// and writes its status.
pub async fn register(
    client: &Client,
    cfg: &AgentConfig,
    runtime_version: &str,
) -> kube::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let labels = json!({
        "kubernetes.io/hostname": cfg.node_name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": arch(),
    });
    let spec = json!({"podCIDR": cfg.pod_cidr, "podCIDRs": [cfg.pod_cidr]});
    // The stream API's certificate, for the control plane to pin (null
    // removes a stale one).
    let annotations = json!({
        crate::streams::tls::SERVING_CERT_ANNOTATION: cfg.serving_cert,
        crate::claims::DATA_DIR_ANNOTATION: crate::claims::data_dir(cfg),
    });
    if nodes.get_opt(&cfg.node_name).await?.is_none() {
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
        nodes
            .patch(
                &cfg.node_name,
                &PatchParams::default(),
                &Patch::Merge(json!({
                    "metadata": {"labels": labels, "annotations": annotations},
                    "spec": spec,
                })),
            )
            .await?;
    }
    heartbeat(client, cfg, runtime_version).await
}

/// Refreshes the node's status (its Ready condition's heartbeat).
pub async fn heartbeat(
    client: &Client,
    cfg: &AgentConfig,
    runtime_version: &str,
) -> kube::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut status = node_status(cfg, runtime_version);
    // Keep the transition time while Ready stays True.
    if let Ok(Some(current)) = nodes.get_opt(&cfg.node_name).await {
        let since = current
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready" && c.status == "True")
            .and_then(|c| c.last_transition_time);
        if let Some(t) = since {
            status["conditions"][0]["lastTransitionTime"] =
                serde_json::to_value(t).unwrap_or_default();
        }
    }
    nodes
        .patch_status(
            &cfg.node_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocatable_names_cpus_memory_and_max_pods() {
        let mut cfg = AgentConfig::for_tests("n1", std::env::temp_dir());
        cfg.max_pods = 7;
        let status = node_status(&cfg, "docker://test");
        let alloc = &status["allocatable"];
        assert_eq!(alloc["pods"], "7");
        let cpus: usize = alloc["cpu"].as_str().unwrap().parse().unwrap();
        assert!(cpus >= 1);
        let memory = alloc["memory"].as_str().unwrap();
        assert!(memory.ends_with("Ki") && memory != "0Ki", "{memory}");
    }
}
