//! From a pod's spec to what the runtime is asked for: the sandbox's
//! config and each container's (command, env, mounts, limits, security).

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use bosun::quantity::parse_quantity;
use k8s_openapi::api::core::v1::{Container, Pod};

use crate::config::sources::ConfigSources;
use crate::config::AgentConfig;
use crate::runtime::{ContainerConfig, DnsConfig, Mount, PodRef, PortMapping, SandboxConfig};
use crate::volumes::{self, subpath};

/// A problem with the spec that stops a container from being made
/// (Kubernetes' CreateContainerConfigError).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

pub fn pod_ref(pod: &Pod) -> PodRef {
    PodRef {
        namespace: pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    }
}

/// The pod's hostname: spec.hostname, else its name (cut to 63 chars).
pub fn hostname(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    let name = spec
        .and_then(|s| s.hostname.clone())
        .unwrap_or_else(|| pod.metadata.name.clone().unwrap_or_default());
    name.chars()
        .take(63)
        .collect::<String>()
        .trim_end_matches(['-', '.'])
        .to_string()
}

/// How many search domains a pod's resolv.conf gets at most (glibc
/// before 2.26 and musl read six).
const MAX_SEARCH: usize = 6;

pub fn sandbox_config(pod: &Pod, cfg: &AgentConfig) -> SandboxConfig {
    let spec = pod.spec.clone().unwrap_or_default();
    let host_network = spec.host_network.unwrap_or(false);
    let hostname = hostname(pod);
    let pod = pod_ref(pod);
    let fqdn = spec
        .subdomain
        .as_ref()
        .filter(|s| !s.is_empty())
        .map(|sub| {
            format!(
                "{hostname}.{sub}.{}.svc.{}",
                pod.namespace, cfg.cluster_domain
            )
        });
    let dns_policy = spec.dns_policy.as_deref().unwrap_or("ClusterFirst");
    let cluster_first =
        dns_policy == "ClusterFirst" || (dns_policy == "ClusterFirstWithHostNet" && host_network);
    let mut dns = DnsConfig::default();
    if cluster_first && !cfg.cluster_dns.is_empty() {
        dns.servers = cfg.cluster_dns.clone();
        dns.searches = vec![
            format!("{}.svc.{}", pod.namespace, cfg.cluster_domain),
            format!("svc.{}", cfg.cluster_domain),
            cfg.cluster_domain.clone(),
        ];
        // Then the host's, as the kubelet does, within the six domains
        // older resolvers read.
        for s in &cfg.host_search {
            if dns.searches.len() < MAX_SEARCH && !dns.searches.contains(s) {
                dns.searches.push(s.clone());
            }
        }
        dns.options = vec!["ndots:5".into()];
    }
    if let Some(custom) = &spec.dns_config {
        dns.servers
            .extend(custom.nameservers.clone().unwrap_or_default());
        dns.searches
            .extend(custom.searches.clone().unwrap_or_default());
        for o in custom.options.clone().unwrap_or_default() {
            if let Some(name) = o.name {
                dns.options.push(match o.value {
                    Some(v) => format!("{name}:{v}"),
                    None => name,
                });
            }
        }
    }
    let ports = spec
        .containers
        .iter()
        .flat_map(|c| c.ports.clone().unwrap_or_default())
        .filter_map(|p| {
            let host_port = p.host_port.filter(|h| *h > 0)?;
            Some(PortMapping {
                container_port: p.container_port as u16,
                host_port: host_port as u16,
                protocol: p.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase(),
                host_ip: p.host_ip.clone().filter(|h| !h.is_empty()),
            })
        })
        .collect();
    let extra_hosts = spec
        .host_aliases
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.ip, a.hostnames.unwrap_or_default()))
        .collect();
    SandboxConfig {
        pod,
        hostname,
        fqdn,
        network: cfg.network_name(),
        host_network,
        host_ipc: spec.host_ipc.unwrap_or(false),
        host_pid: spec.host_pid.unwrap_or(false),
        dns,
        ports,
        extra_hosts,
        // The worker fills in the RuntimeClass's handler.
        runtime: None,
    }
}

/// A stable hash of a container's spec: a changed spec means a new container.
/// The pod's ephemeral containers as containers (their fields are a
/// container's, `EphemeralContainerCommon`), each with its
/// `targetContainerName`.
pub fn ephemeral_containers(pod: &Pod) -> Vec<(Container, Option<String>)> {
    let list = pod
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.clone())
        .unwrap_or_default();
    list.into_iter()
        .filter_map(|ec| {
            let target = ec.target_container_name.clone().filter(|t| !t.is_empty());
            let mut v = serde_json::to_value(ec).ok()?;
            v.as_object_mut()?.remove("targetContainerName");
            Some((serde_json::from_value(v).ok()?, target))
        })
        .collect()
}

pub fn spec_hash(c: &Container) -> String {
    let mut h = DefaultHasher::new();
    serde_json::to_string(c).unwrap_or_default().hash(&mut h);
    format!("{:016x}", h.finish())
}

/// The value of an env var's fieldRef.
fn field_ref(pod: &Pod, path: &str, pod_ip: Option<&str>, cfg: &AgentConfig) -> Option<String> {
    let md = &pod.metadata;
    match path {
        "metadata.name" => md.name.clone(),
        "metadata.namespace" => md.namespace.clone(),
        "metadata.uid" => md.uid.clone(),
        "spec.nodeName" => Some(cfg.node_name.clone()),
        "spec.serviceAccountName" => pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone()),
        "status.podIP" => pod_ip.map(str::to_string),
        "status.hostIP" => Some(cfg.node_ip.clone()),
        _ => {
            let (map, key) = path.split_once("['")?;
            let key = key.trim_end_matches("']");
            match map {
                "metadata.labels" => md.labels.as_ref()?.get(key).cloned(),
                "metadata.annotations" => md.annotations.as_ref()?.get(key).cloned(),
                _ => None,
            }
        }
    }
}

/// Expands `$(VAR)` references to earlier variables, as Kubernetes does;
/// `$$(VAR)` escapes.
pub fn expand(s: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(stripped) = after.strip_prefix("$(") {
            out.push_str("$(");
            rest = stripped;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) if vars.contains_key(&inner[..end]) => {
                    out.push_str(&vars[&inner[..end]]);
                    rest = &inner[end + 1..];
                }
                _ => {
                    out.push('$');
                    rest = after;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

fn millis(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> Option<i64> {
    parse_quantity(&q.0).ok().map(|q| q.millis() as i64)
}

fn bytes(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> Option<i64> {
    parse_quantity(&q.0).ok().map(|q| q.value() as i64)
}

/// What container `c` of `pod` is created with.
pub fn container_config(
    pod: &Pod,
    c: &Container,
    pod_ip: Option<&str>,
    restart_count: u32,
    cfg: &AgentConfig,
    sources: &ConfigSources,
    service_env: &[(String, String)],
) -> Result<ContainerConfig, ConfigError> {
    let spec = pod.spec.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    // envFrom first, then env, a later name replacing an earlier one, then
    // the Services' variables the container does not set itself (the
    // kubelet's makeEnvironmentVariables); `$(VAR)` sees all of them.
    let from_sources = sources.env_for(ns, c).map_err(ConfigError)?;
    let mut env: Vec<(String, String)> = from_sources.from.clone();
    let mut vars: BTreeMap<String, String> = service_env.iter().cloned().collect();
    vars.extend(env.iter().cloned());
    for e in c.env.clone().unwrap_or_default() {
        let value = match (&e.value, &e.value_from) {
            (Some(v), _) => expand(v, &vars),
            (None, Some(from)) => {
                if let Some(f) = &from.field_ref {
                    field_ref(pod, &f.field_path, pod_ip, cfg).unwrap_or_default()
                } else if let Some(r) = &from.resource_field_ref {
                    let limits = c
                        .resources
                        .as_ref()
                        .and_then(|r| r.limits.clone())
                        .unwrap_or_default();
                    limits
                        .get(&r.resource.replace("limits.", ""))
                        .map(|q| q.0.clone())
                        .unwrap_or_default()
                } else if from.config_map_key_ref.is_some() || from.secret_key_ref.is_some() {
                    match from_sources.keys.get(&e.name).cloned().flatten() {
                        Some(v) => v,
                        // An optional key that is missing: no variable.
                        None => continue,
                    }
                } else {
                    return Err(ConfigError(format!(
                        "env {}: valueFrom has no source",
                        e.name
                    )));
                }
            }
            (None, None) => String::new(),
        };
        vars.insert(e.name.clone(), value.clone());
        env.retain(|(n, _)| *n != e.name);
        env.push((e.name, value));
    }
    for (name, value) in service_env {
        if !env.iter().any(|(n, _)| n == name) {
            env.push((name.clone(), value.clone()));
        }
    }
    let mut mounts = Vec::new();
    let pod_dir = volumes::pod_dir(cfg, &pod_ref(pod).uid);
    for (index, m) in c.volume_mounts.iter().flatten().enumerate() {
        let base = volumes::host_path_of(pod, &m.name, cfg)
            .map_err(|e| ConfigError(format!("volume {:?}: {e}", m.name)))?;
        let nonempty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        let sub_path = match (nonempty(&m.sub_path), nonempty(&m.sub_path_expr)) {
            (Some(sub), _) => Some(sub),
            (None, Some(expr)) => Some(subpath::expand(&expr, &vars).map_err(ConfigError)?),
            (None, None) => None,
        };
        // The subPath is opened below the volume and what was opened is
        // bound for Docker (see `subpath`): a link a container planted in
        // the volume leads nowhere.
        let host_path = match sub_path {
            Some(sub_path) => {
                let volume_root = volumes::agent_path_of(pod, &m.name, cfg).map_err(ConfigError)?;
                subpath::prepare(&subpath::SubpathMount {
                    pod_dir: &pod_dir,
                    volume_root: &volume_root,
                    volume: &m.name,
                    container: &c.name,
                    index,
                    sub_path: &sub_path,
                })
                .map_err(ConfigError)?
                .to_string_lossy()
                .into_owned()
            }
            None => base,
        };
        mounts.push(Mount {
            host_path,
            container_path: m.mount_path.clone(),
            read_only: m.read_only.unwrap_or(false) || volumes::is_api_data(pod, &m.name),
        });
    }
    let resources = c.resources.clone().unwrap_or_default();
    let limits = resources.limits.unwrap_or_default();
    let requests = resources.requests.unwrap_or_default();
    let sc = c.security_context.clone().unwrap_or_default();
    let psc = spec.security_context.clone().unwrap_or_default();
    let caps = sc.capabilities.clone().unwrap_or_default();
    Ok(ContainerConfig {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        entrypoint: c
            .command
            .clone()
            .unwrap_or_default()
            .iter()
            .map(|a| expand(a, &vars))
            .collect(),
        args: c
            .args
            .clone()
            .unwrap_or_default()
            .iter()
            .map(|a| expand(a, &vars))
            .collect(),
        env,
        working_dir: c.working_dir.clone().filter(|w| !w.is_empty()),
        mounts,
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        memory_limit: limits.get("memory").and_then(bytes),
        cpu_limit_millis: limits.get("cpu").and_then(millis),
        cpu_request_millis: requests.get("cpu").and_then(millis),
        privileged: sc.privileged.unwrap_or(false),
        run_as_user: sc.run_as_user.or(psc.run_as_user),
        run_as_group: sc.run_as_group.or(psc.run_as_group),
        supplemental_groups: psc
            .supplemental_groups
            .iter()
            .flatten()
            .copied()
            .chain(psc.fs_group)
            .collect(),
        read_only_root_fs: sc.read_only_root_filesystem.unwrap_or(false),
        cap_add: caps.add.unwrap_or_default(),
        cap_drop: caps.drop.unwrap_or_default(),
        share_pid: spec.share_process_namespace.unwrap_or(false),
        host_pid: spec.host_pid.unwrap_or(false),
        pid_target: None,
        host_network: spec.host_network.unwrap_or(false),
        host_ipc: spec.host_ipc.unwrap_or(false),
        restart_count,
        spec_hash: spec_hash(c),
        labels: BTreeMap::new(),
        runtime: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg() -> AgentConfig {
        AgentConfig::for_tests("n1", std::env::temp_dir().join("bosun-spec-test"))
    }

    #[test]
    fn env_from_fields_and_expansion() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "labels": {"app": "w"}},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                "command": ["echo", "$(GREETING) from $(POD)"],
                "env": [
                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                    {"name": "GREETING", "value": "hi $(NS) $$(NS)"},
                    {"name": "API", "value": "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"}
                ],
                "resources": {"limits": {"memory": "200Mi", "cpu": "500m"}}}]}
        })).unwrap();
        let c = &pod.spec.as_ref().unwrap().containers[0];
        let cc = container_config(
            &pod,
            c,
            Some("10.244.0.5"),
            2,
            &cfg(),
            &ConfigSources::default(),
            &[
                ("KUBERNETES_SERVICE_HOST".into(), "10.96.0.1".into()),
                ("KUBERNETES_SERVICE_PORT".into(), "443".into()),
                ("NS".into(), "a service's".into()),
            ],
        )
        .unwrap();
        // The container's own variables win over the Services'.
        assert_eq!(cc.env.iter().filter(|(n, _)| n == "NS").count(), 1);
        let env: BTreeMap<_, _> = cc.env.iter().cloned().collect();
        assert_eq!(env["API"], "https://10.96.0.1:443");
        assert_eq!(env["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
        assert_eq!(env["POD"], "web");
        assert_eq!(env["NS"], "shop");
        assert_eq!(env["IP"], "10.244.0.5");
        assert_eq!(env["NODE"], "n1");
        assert_eq!(env["APP"], "w");
        assert_eq!(env["GREETING"], "hi shop $(NS)");
        assert_eq!(cc.entrypoint, ["echo", "hi shop $(NS) from web"]);
        assert_eq!(cc.memory_limit, Some(200 * 1024 * 1024));
        assert_eq!(cc.cpu_limit_millis, Some(500));
        assert_eq!(cc.restart_count, 2);
    }

    #[test]
    fn sandbox_gets_cluster_dns_and_host_ports() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-0", "namespace": "default", "uid": "u1"},
            "spec": {"hostname": "web-0", "subdomain": "nginx",
                "containers": [{"name": "c", "image": "busybox",
                    "ports": [{"containerPort": 8080, "hostPort": 8001}]}]}
        }))
        .unwrap();
        let s = sandbox_config(&pod, &cfg());
        assert_eq!(s.hostname, "web-0");
        assert_eq!(
            s.fqdn.as_deref(),
            Some("web-0.nginx.default.svc.cluster.local")
        );
        assert_eq!(s.dns.options, ["ndots:5"]);
        assert_eq!(s.dns.searches[0], "default.svc.cluster.local");
        assert_eq!(s.ports[0].host_port, 8001);
    }

    #[test]
    fn cluster_first_pods_get_the_node_dns_and_the_hosts_search_domains() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "shop", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}
        }))
        .unwrap();
        let mut cfg = cfg();
        cfg.host_search = [
            "corp.example",
            "a.example",
            "b.example",
            "c.example",
            "d.example",
        ]
        .map(String::from)
        .to_vec();
        let s = sandbox_config(&pod, &cfg);
        assert_eq!(s.dns.servers, ["10.244.0.1"]);
        assert_eq!(
            s.dns.searches,
            [
                "shop.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "corp.example",
                "a.example",
                "b.example"
            ]
        );
        assert_eq!(s.dns.options, ["ndots:5"]);
        // dnsPolicy Default: the host's resolver, none of the cluster's.
        let mut pod = pod;
        pod.spec.as_mut().unwrap().dns_policy = Some("Default".into());
        let s = sandbox_config(&pod, &cfg);
        assert!(s.dns.servers.is_empty() && s.dns.searches.is_empty());
    }
}
