//! The pod's sandbox: the pause container, on the node's bridge network
//! (or the host's), owning the pod's network, IPC and UTS namespaces,
//! its hostname, DNS settings, `/etc/hosts` entries and host ports.

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, HostConfig, PortBinding};

use super::containers::{container_name, identity_labels};
use super::DockerRuntime;
use crate::runtime::{
    labels, ContainerRuntime, Result, Role, RuntimeError, SandboxConfig, SANDBOX_CONTAINER,
};

impl DockerRuntime {
    pub(super) async fn run_pause_container(
        &self,
        node: &str,
        config: &SandboxConfig,
    ) -> Result<String> {
        let image = self.ensure_pause_image().await?;
        let pod = &config.pod;
        let name = container_name(pod, SANDBOX_CONTAINER);
        let mut label_map = identity_labels(node, pod, SANDBOX_CONTAINER, Role::Sandbox);
        label_map.insert(labels::RESTART_COUNT.to_string(), "0".to_string());

        let non_empty = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        let mut host_config = HostConfig {
            network_mode: Some(if config.host_network {
                "host".to_string()
            } else {
                config.network.clone()
            }),
            ipc_mode: Some(if config.host_ipc { "host" } else { "shareable" }.to_string()),
            pid_mode: config.host_pid.then(|| "host".to_string()),
            dns: non_empty(&config.dns.servers),
            dns_search: non_empty(&config.dns.searches),
            dns_options: non_empty(&config.dns.options),
            extra_hosts: {
                let hosts: Vec<String> = config
                    .extra_hosts
                    .iter()
                    .flat_map(|(ip, names)| names.iter().map(move |n| format!("{n}:{ip}")))
                    .collect();
                (!hosts.is_empty()).then_some(hosts)
            },
            runtime: config.runtime.clone(),
            ..Default::default()
        };
        let mut body = ContainerCreateBody {
            image: Some(image),
            labels: Some(label_map),
            ..Default::default()
        };
        if !config.host_network {
            body.hostname = Some(config.hostname.clone());
            // With a domain name Docker writes `<ip> <fqdn> <hostname>` into
            // the pod's /etc/hosts itself, once it knows the IP.
            if let Some(domain) = config
                .fqdn
                .as_deref()
                .and_then(|f| f.strip_prefix(&format!("{}.", config.hostname)))
                .filter(|d| !d.is_empty())
            {
                body.domainname = Some(domain.to_string());
            }
            if !config.ports.is_empty() {
                let mut bindings: HashMap<String, Option<Vec<PortBinding>>> = HashMap::new();
                for p in &config.ports {
                    let key = format!("{}/{}", p.container_port, p.protocol.to_lowercase());
                    bindings
                        .entry(key)
                        .or_insert_with(|| Some(Vec::new()))
                        .get_or_insert_with(Vec::new)
                        .push(PortBinding {
                            host_ip: p.host_ip.clone(),
                            host_port: Some(p.host_port.to_string()),
                        });
                }
                body.exposed_ports = Some(bindings.keys().cloned().collect());
                host_config.port_bindings = Some(bindings);
            }
        }
        body.host_config = Some(host_config);

        let created = match self.create_named(&name, body.clone()).await {
            Err(RuntimeError::ImageNotFound(_)) => {
                // Removed since it was last found: import it again.
                self.forget_pause();
                body.image = Some(self.ensure_pause_image().await?);
                self.create_named(&name, body).await
            }
            other => other,
        };
        let id = match created {
            Ok(id) => id,
            Err(e) => {
                // Its network may be gone: the next sync looks again.
                self.forget_networks();
                return Err(e);
            }
        };
        if let Err(e) = self.start_container(&id).await {
            // Nothing half-made: a sandbox that cannot start is removed.
            let _ = self.remove_container(&id).await;
            self.forget_networks();
            return Err(e);
        }
        Ok(id)
    }
}
