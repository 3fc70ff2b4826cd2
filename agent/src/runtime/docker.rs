//! The Docker implementation of [`super::ContainerRuntime`], through bollard.
//!
//! A pod is a pause container (the *sandbox*, image
//! `bosun.local/pause:<version>`, built from `pause/pause.c` and carried
//! inside the agent) on the node's bridge network, plus app and init
//! containers that join its network, IPC and UTS namespaces
//! (`container:<sandbox>` modes) and, with `shareProcessNamespace`, its PID
//! namespace. Docker gives the sandbox its IP from the network's subnet; the
//! joined containers share it, its `/etc/hosts` and its `/etc/resolv.conf`.
//!
//! Container names are `bosun_<ns>_<pod>_<uid8>_POD` for sandboxes and
//! `bosun_<ns>_<pod>_<uid8>_<container>_<restartCount>` for the others; the
//! labels in [`super::labels`] are what bosun reads back, never the names.
//!
//! Docker's HTTP status codes are matched the way bollard's own tests do:
//! 404 (no such thing), 304 (already started / stopped) and 409 (conflict)
//! keep create, stop and remove idempotent.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use bollard::container::LogOutput;
use bollard::errors::Error as BollardError;
use bollard::exec::{CreateExecOptions, ResizeExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, ContainerStateStatusEnum, HostConfig, Ipam,
    IpamConfig, NetworkCreateRequest, PortBinding,
};
use bollard::query_parameters::{
    AttachContainerOptions, CreateContainerOptions, CreateImageOptions, InspectContainerOptions,
    InspectNetworkOptions, ListContainersOptions, LogsOptions, RemoveContainerOptions,
    RemoveImageOptions, ResizeContainerTTYOptions, StopContainerOptions,
};
use bollard::{body_full, Docker};
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use tokio::sync::OnceCell;

use super::{
    labels, ByteStream, ContainerConfig, ContainerInfo, ContainerRuntime, ContainerState,
    ExecOutput, LogOptions, Output, PodRef, Result, Role, RuntimeError, SandboxConfig, Session,
    SessionId, StreamFlags, SANDBOX_CONTAINER,
};

/// The pause program, compiled from `pause/pause.c` by `build.rs`.
static PAUSE_BINARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/pause"));

/// The repository the pause image is imported as; the tag is the agent's
/// version.
pub const PAUSE_REPOSITORY: &str = "bosun.local/pause";

/// Label on the pause image holding a hash of the embedded binary, so an
/// agent whose pause differs from the imported one (same version, new
/// build) imports its own again.
const PAUSE_HASH_LABEL: &str = "io.bosun.pause.hash";

/// Label on app and init containers naming their sandbox's id.
pub const SANDBOX_ID_LABEL: &str = "io.bosun.sandbox-id";

const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// Requests time out after this long unless they say otherwise (stop with a
/// long grace period, pulls).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs pods on a Docker Engine.
pub struct DockerRuntime {
    docker: Docker,
    host: String,
    /// The API version is agreed on with the engine at the first request
    /// (Debian's 20.10 speaks 1.41; bollard would ask for a newer one).
    negotiated: OnceCell<()>,
    /// Pod CIDRs whose iptables rule this runtime has already checked.
    iptables_done: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for DockerRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerRuntime")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl DockerRuntime {
    /// Connects to the engine at `docker_host` (`unix:///path`, a bare socket
    /// path, or `tcp://` / `http://`), else at `$DOCKER_HOST`, else at
    /// `/var/run/docker.sock`. Nothing is sent until the first call.
    pub fn connect(docker_host: Option<&str>) -> Result<Self> {
        let host = match docker_host {
            Some(h) if !h.is_empty() => h.to_string(),
            _ => std::env::var("DOCKER_HOST")
                .ok()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| DEFAULT_HOST.to_string()),
        };
        let timeout = REQUEST_TIMEOUT.as_secs();
        let version = bollard::API_DEFAULT_VERSION;
        let docker = if host.starts_with("unix://") || host.starts_with('/') {
            Docker::connect_with_unix(&host, timeout, version)
        } else if host.starts_with("tcp://") || host.starts_with("http://") {
            Docker::connect_with_http(&host, timeout, version)
        } else {
            return Err(RuntimeError::Docker(format!(
                "unsupported Docker host {host:?}: use unix:///path/to/docker.sock or tcp://host:port"
            )));
        }
        .map_err(|e| RuntimeError::Docker(format!("connecting to Docker at {host}: {e}")))?;
        Ok(DockerRuntime {
            docker,
            host,
            negotiated: OnceCell::new(),
            iptables_done: Mutex::new(HashSet::new()),
        })
    }

    /// The engine address this runtime talks to.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The bollard client, after the API version was agreed on.
    pub async fn client(&self) -> Result<&Docker> {
        self.negotiated
            .get_or_try_init(|| async {
                self.docker
                    .clone()
                    .negotiate_version()
                    .await
                    .map(|_| ())
                    .map_err(|e| {
                        RuntimeError::Docker(format!("talking to Docker at {}: {e}", self.host))
                    })
            })
            .await?;
        Ok(&self.docker)
    }

    /// Removes a network; a missing one is not an error.
    pub async fn remove_network(&self, name: &str) -> Result<()> {
        match self.client().await?.remove_network(name).await {
            Ok(()) => Ok(()),
            Err(e) if status(&e) == Some(404) => Ok(()),
            Err(e) => Err(docker_err(e)),
        }
    }

    async fn inspect_raw(&self, id: &str) -> Result<ContainerInspectResponse> {
        self.client()
            .await?
            .inspect_container(id, None::<InspectContainerOptions>)
            .await
            .map_err(|e| not_found_or(e, id))
    }

    /// Creates a container named `name`. A leftover container of that name
    /// that is not running (an earlier attempt the agent lost track of) is
    /// removed and the create retried once; a running one is an error.
    async fn create_named(&self, name: &str, body: ContainerCreateBody) -> Result<String> {
        let docker = self.client().await?;
        for attempt in 0..2 {
            let options = CreateContainerOptions {
                name: Some(name.to_string()),
                ..Default::default()
            };
            match docker.create_container(Some(options), body.clone()).await {
                Ok(resp) => {
                    for warning in resp.warnings.iter().filter(|w| !w.is_empty()) {
                        tracing::warn!(container = name, "Docker: {warning}");
                    }
                    return Ok(resp.id);
                }
                Err(e) if status(&e) == Some(409) && attempt == 0 => {
                    let old = self.inspect_raw(name).await?;
                    let running = old.state.as_ref().and_then(|s| s.running).unwrap_or(false);
                    let old_id = old.id.unwrap_or_default();
                    if running {
                        return Err(RuntimeError::Docker(format!(
                            "a running container named {name} exists already ({old_id})"
                        )));
                    }
                    tracing::info!(container = name, id = %old_id, "removing a stale container of the same name");
                    self.remove_container(&old_id).await?;
                }
                Err(e) if status(&e) == Some(404) => {
                    let message = message(&e);
                    let image = body.image.clone().unwrap_or_default();
                    return Err(if message.contains("No such image") {
                        RuntimeError::ImageNotFound(image)
                    } else {
                        RuntimeError::NotFound(message)
                    });
                }
                Err(e) => return Err(docker_err(e)),
            }
        }
        Err(RuntimeError::Docker(format!(
            "could not create container {name}: the name stays taken"
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
        let rule = [
            "DOCKER-USER",
            "-s",
            cidr.as_str(),
            "-d",
            cidr.as_str(),
            "-j",
            "ACCEPT",
        ];
        let run = |op: &'static str| async move {
            tokio::process::Command::new("iptables")
                .arg("-w")
                .arg(op)
                .args(rule)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .output()
                .await
        };
        match run("-C").await {
            Ok(out) if out.status.success() => {}
            Ok(_) => match run("-I").await {
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

    async fn import_pause(&self, reference: &str, hash: &str) -> Result<()> {
        let docker = self.client().await?;
        let options = CreateImageOptions {
            from_src: Some("-".to_string()),
            repo: Some(PAUSE_REPOSITORY.to_string()),
            tag: Some(env!("CARGO_PKG_VERSION").to_string()),
            message: Some("bosun pause, imported by bosun-agent".to_string()),
            changes: vec![
                r#"CMD ["/pause"]"#.to_string(),
                format!("LABEL {PAUSE_HASH_LABEL}={hash}"),
            ],
            ..Default::default()
        };
        let tar = single_file_tar("pause", 0o755, PAUSE_BINARY);
        let mut stream = docker.create_image(Some(options), Some(body_full(tar.into())), None);
        while let Some(item) = stream.next().await {
            item.map_err(|e| {
                RuntimeError::Docker(format!("importing the pause image {reference}: {e}"))
            })?;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl ContainerRuntime for DockerRuntime {
    async fn version(&self) -> Result<String> {
        let v = self.client().await?.version().await.map_err(docker_err)?;
        Ok(format!("docker://{}", v.version.unwrap_or_default()))
    }

    async fn ensure_network(&self, name: &str, subnet: &str, node: &str) -> Result<()> {
        let docker = self.client().await?;
        for _ in 0..2 {
            match docker
                .inspect_network(name, None::<InspectNetworkOptions>)
                .await
            {
                Ok(net) => {
                    let subnets: Vec<String> = net
                        .ipam
                        .and_then(|i| i.config)
                        .unwrap_or_default()
                        .into_iter()
                        .filter_map(|c| c.subnet)
                        .collect();
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

    async fn image_id(&self, image: &str) -> Result<Option<String>> {
        match self.client().await?.inspect_image(image).await {
            Ok(img) => Ok(img.id),
            Err(e) if status(&e) == Some(404) => Ok(None),
            Err(e) => Err(docker_err(e)),
        }
    }

    async fn pull_image(
        &self,
        image: &str,
        progress: &(dyn for<'a> Fn(&'a str) + Send + Sync),
    ) -> Result<String> {
        let docker = self.client().await?;
        let (repo, tag) = split_reference(image);
        let options = CreateImageOptions {
            from_image: Some(repo.to_string()),
            tag: Some(tag.to_string()),
            ..Default::default()
        };
        let failed = |message: String| RuntimeError::PullFailed {
            image: image.to_string(),
            message,
        };
        let mut stream = docker.create_image(Some(options), None, None);
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    let mut line = String::new();
                    if let Some(id) = info.id.as_deref().filter(|s| !s.is_empty()) {
                        line.push_str(id);
                        line.push_str(": ");
                    }
                    line.push_str(info.status.as_deref().unwrap_or(""));
                    if let Some(detail) = &info.progress_detail {
                        if let (Some(cur), Some(total)) = (detail.current, detail.total) {
                            if total > 0 {
                                line.push_str(&format!(" {cur}/{total}"));
                            }
                        }
                    }
                    if !line.is_empty() {
                        progress(&line);
                    }
                }
                Err(e) => return Err(failed(message(&e))),
            }
        }
        self.image_id(image)
            .await?
            .ok_or_else(|| failed("the pull ended but the image is not there".to_string()))
    }

    async fn ensure_pause_image(&self) -> Result<String> {
        // One import at a time in this process, so runtimes racing on an
        // engine without the image do not leave dangling copies.
        static IMPORTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let _one_at_a_time = IMPORTING.lock().await;
        let reference = format!("{PAUSE_REPOSITORY}:{}", env!("CARGO_PKG_VERSION"));
        let hash = format!("{:016x}", fnv1a64(PAUSE_BINARY));
        let docker = self.client().await?;
        let stale = match docker.inspect_image(&reference).await {
            Ok(img) => {
                let have = img
                    .config
                    .and_then(|c| c.labels)
                    .and_then(|l| l.get(PAUSE_HASH_LABEL).cloned());
                if have.as_deref() == Some(hash.as_str()) {
                    return Ok(reference);
                }
                tracing::info!(image = %reference, "the pause image differs from this agent's; importing it again");
                img.id
            }
            Err(e) if status(&e) == Some(404) => None,
            Err(e) => return Err(docker_err(e)),
        };
        self.import_pause(&reference, &hash).await?;
        if let Some(old) = stale {
            // Untagged now; sandboxes still using it keep it alive.
            let _ = docker
                .remove_image(&old, None::<RemoveImageOptions>, None)
                .await;
        }
        Ok(reference)
    }

    async fn run_sandbox(&self, node: &str, config: &SandboxConfig) -> Result<String> {
        let image = self.ensure_pause_image().await?;
        let pod = &config.pod;
        let name = format!(
            "bosun_{}_{}_{}_{}",
            pod.namespace,
            pod.name,
            uid8(&pod.uid),
            SANDBOX_CONTAINER
        );
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

        let id = self.create_named(&name, body).await?;
        if let Err(e) = self.start_container(&id).await {
            // Nothing half-made: a sandbox that cannot start is removed.
            let _ = self.remove_container(&id).await;
            return Err(e);
        }
        Ok(id)
    }

    async fn create_container(
        &self,
        node: &str,
        pod: &PodRef,
        role: Role,
        sandbox_id: &str,
        config: &ContainerConfig,
    ) -> Result<String> {
        let name = format!(
            "bosun_{}_{}_{}_{}_{}",
            pod.namespace,
            pod.name,
            uid8(&pod.uid),
            config.name,
            config.restart_count
        );
        let mut label_map: HashMap<String, String> = config
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        label_map.extend(identity_labels(node, pod, &config.name, role));
        label_map.insert(
            labels::RESTART_COUNT.to_string(),
            config.restart_count.to_string(),
        );
        label_map.insert(labels::SPEC_HASH.to_string(), config.spec_hash.clone());
        label_map.insert(SANDBOX_ID_LABEL.to_string(), sandbox_id.to_string());

        let joined = format!("container:{sandbox_id}");
        let host_config = HostConfig {
            network_mode: Some(if config.host_network {
                "host".to_string()
            } else {
                joined.clone()
            }),
            ipc_mode: Some(if config.host_ipc {
                "host".to_string()
            } else {
                joined.clone()
            }),
            pid_mode: if config.host_pid {
                Some("host".to_string())
            } else if config.share_pid {
                Some(joined)
            } else {
                None
            },
            binds: (!config.mounts.is_empty()).then(|| {
                config
                    .mounts
                    .iter()
                    .map(|m| {
                        let mut b = format!("{}:{}", m.host_path, m.container_path);
                        if m.read_only {
                            b.push_str(":ro");
                        }
                        b
                    })
                    .collect()
            }),
            memory: config.memory_limit,
            // No swap beyond the limit, as the kubelet does.
            memory_swap: config.memory_limit,
            nano_cpus: config.cpu_limit_millis.map(|m| m * 1_000_000),
            cpu_shares: config.cpu_request_millis.map(cpu_shares),
            privileged: config.privileged.then_some(true),
            readonly_rootfs: config.read_only_root_fs.then_some(true),
            cap_add: (!config.cap_add.is_empty()).then(|| config.cap_add.clone()),
            cap_drop: (!config.cap_drop.is_empty()).then(|| config.cap_drop.clone()),
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(config.image.clone()),
            entrypoint: (!config.entrypoint.is_empty()).then(|| config.entrypoint.clone()),
            cmd: (!config.args.is_empty()).then(|| config.args.clone()),
            env: (!config.env.is_empty())
                .then(|| config.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            working_dir: config.working_dir.clone().filter(|w| !w.is_empty()),
            user: config.run_as_user.map(|uid| match config.run_as_group {
                Some(gid) => format!("{uid}:{gid}"),
                None => uid.to_string(),
            }),
            open_stdin: Some(config.stdin),
            stdin_once: Some(config.stdin_once),
            attach_stdin: Some(config.stdin),
            tty: Some(config.tty),
            labels: Some(label_map),
            host_config: Some(host_config),
            ..Default::default()
        };
        self.create_named(&name, body).await
    }

    async fn start_container(&self, id: &str) -> Result<()> {
        match self.client().await?.start_container(id, None).await {
            Ok(()) => Ok(()),
            Err(e) if status(&e) == Some(304) => Ok(()),
            Err(e) => Err(not_found_or(e, id)),
        }
    }

    async fn stop_container(&self, id: &str, grace: Duration) -> Result<()> {
        let secs = grace.as_secs() + u64::from(grace.subsec_nanos() > 0);
        let secs = i32::try_from(secs).unwrap_or(i32::MAX);
        // The request lasts as long as the grace period; give it that long.
        let docker = self
            .client()
            .await?
            .clone()
            .with_timeout(REQUEST_TIMEOUT.max(grace + Duration::from_secs(30)));
        let options = StopContainerOptions {
            t: Some(secs),
            ..Default::default()
        };
        match docker.stop_container(id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(e) if matches!(status(&e), Some(304) | Some(404)) => Ok(()),
            Err(e) => Err(docker_err(e)),
        }
    }

    async fn remove_container(&self, id: &str) -> Result<()> {
        let options = RemoveContainerOptions {
            force: true,
            v: true,
            ..Default::default()
        };
        match self
            .client()
            .await?
            .remove_container(id, Some(options))
            .await
        {
            Ok(()) => Ok(()),
            // 409: a removal of it is already in progress.
            Err(e) if matches!(status(&e), Some(404) | Some(409)) => Ok(()),
            Err(e) => Err(docker_err(e)),
        }
    }

    async fn list_containers(&self, node: &str) -> Result<Vec<ContainerInfo>> {
        let docker = self.client().await?;
        let options = ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![format!("{}={node}", labels::NODE)],
            )])),
            ..Default::default()
        };
        let summaries = docker
            .list_containers(Some(options))
            .await
            .map_err(docker_err)?;
        let ids: Vec<String> = summaries.into_iter().filter_map(|s| s.id).collect();
        let inspected: Vec<Option<ContainerInspectResponse>> = futures::stream::iter(ids)
            .map(|id| async move {
                match self.inspect_raw(&id).await {
                    Ok(c) => Ok(Some(c)),
                    // Removed between the list and the inspect.
                    Err(RuntimeError::NotFound(_)) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .buffered(8)
            .try_collect()
            .await?;
        let mut infos: Vec<ContainerInfo> = inspected
            .into_iter()
            .flatten()
            .filter_map(|c| match to_info(c) {
                Ok(info) => Some(info),
                Err(e) => {
                    tracing::warn!(node, "skipping a container: {e}");
                    None
                }
            })
            .collect();
        infos.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(infos)
    }

    async fn inspect_container(&self, id: &str) -> Result<ContainerInfo> {
        to_info(self.inspect_raw(id).await?)
    }

    async fn exec(&self, id: &str, cmd: &[String], timeout: Duration) -> Result<ExecOutput> {
        let docker = self.client().await?;
        let created = docker
            .create_exec(
                id,
                CreateExecOptions {
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    cmd: Some(cmd.to_vec()),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| match status(&e) {
                Some(404) => RuntimeError::NotFound(id.to_string()),
                Some(409) => RuntimeError::Docker(format!("container {id} is not running")),
                _ => docker_err(e),
            })?;
        let run = async {
            let mut stdout = Vec::new();
            let mut stderr = Vec::new();
            match docker
                .start_exec(&created.id, None::<StartExecOptions>)
                .await
                .map_err(docker_err)?
            {
                StartExecResults::Attached { mut output, .. } => {
                    while let Some(chunk) = output.next().await {
                        match chunk.map_err(docker_err)? {
                            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                                stdout.extend_from_slice(&message)
                            }
                            LogOutput::StdErr { message } => stderr.extend_from_slice(&message),
                            LogOutput::StdIn { .. } => {}
                        }
                    }
                }
                StartExecResults::Detached => {}
            }
            // The output ends when the process does; its exit code shows up
            // in the exec's inspect a moment later at most.
            loop {
                let inspect = docker.inspect_exec(&created.id).await.map_err(docker_err)?;
                if inspect.running != Some(true) {
                    if let Some(code) = inspect.exit_code {
                        return Ok(ExecOutput {
                            exit_code: code,
                            stdout,
                            stderr,
                        });
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(timeout, run)
            .await
            .map_err(|_| RuntimeError::Timeout(timeout))?
    }

    async fn logs_tail(&self, id: &str, tail: usize) -> Result<String> {
        let options = LogsOptions {
            stdout: true,
            stderr: true,
            tail: tail.to_string(),
            ..Default::default()
        };
        let chunks: Vec<LogOutput> = self
            .client()
            .await?
            .logs(id, Some(options))
            .try_collect()
            .await
            .map_err(|e| not_found_or(e, id))?;
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend_from_slice(&chunk.into_bytes());
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    async fn logs_stream(&self, id: &str, options: &LogOptions) -> Result<ByteStream> {
        let docker = self.client().await?;
        // Fail now, with a 404, rather than inside the stream.
        self.inspect_raw(id).await?;
        let docker_options = LogsOptions {
            follow: options.follow,
            stdout: true,
            stderr: true,
            timestamps: options.timestamps,
            tail: options
                .tail_lines
                .map_or_else(|| "all".to_string(), |n| n.to_string()),
            since: options
                .since_unix
                .map_or(0, |t| i32::try_from(t.max(0)).unwrap_or(i32::MAX)),
            ..Default::default()
        };
        let stream = docker
            .logs(id, Some(docker_options))
            .map(|chunk| chunk.map(LogOutput::into_bytes).map_err(docker_err));
        Ok(Box::pin(stream))
    }

    async fn exec_session(&self, id: &str, cmd: &[String], flags: StreamFlags) -> Result<Session> {
        let docker = self.client().await?;
        let created = docker
            .create_exec(
                id,
                CreateExecOptions {
                    attach_stdin: Some(flags.stdin),
                    attach_stdout: Some(flags.stdout),
                    attach_stderr: Some(flags.stderr),
                    tty: Some(flags.tty),
                    cmd: Some(cmd.to_vec()),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| match status(&e) {
                Some(404) => RuntimeError::NotFound(id.to_string()),
                Some(409) => RuntimeError::Docker(format!("container {id} is not running")),
                _ => docker_err(e),
            })?;
        let started = docker
            .start_exec(
                &created.id,
                Some(StartExecOptions {
                    detach: false,
                    tty: flags.tty,
                    output_capacity: Some(64 * 1024),
                }),
            )
            .await
            .map_err(docker_err)?;
        match started {
            StartExecResults::Attached { output, input } => Ok(Session {
                id: SessionId::Exec(created.id),
                output: Box::pin(output.filter_map(|c| async move { session_output(c) })),
                input,
            }),
            StartExecResults::Detached => Err(RuntimeError::Docker(
                "Docker started the exec detached".into(),
            )),
        }
    }

    async fn attach_session(&self, id: &str, flags: StreamFlags) -> Result<Session> {
        let docker = self.client().await?;
        let attached = docker
            .attach_container(
                id,
                Some(AttachContainerOptions {
                    stdin: flags.stdin,
                    stdout: flags.stdout,
                    stderr: flags.stderr,
                    stream: true,
                    logs: false,
                    detach_keys: None,
                }),
            )
            .await
            .map_err(|e| not_found_or(e, id))?;
        Ok(Session {
            id: SessionId::Attach(id.to_string()),
            output: Box::pin(
                attached
                    .output
                    .filter_map(|c| async move { session_output(c) }),
            ),
            input: attached.input,
        })
    }

    async fn resize_session(&self, session: &SessionId, width: u16, height: u16) -> Result<()> {
        let docker = self.client().await?;
        match session {
            SessionId::Exec(exec) => docker
                .resize_exec(exec, ResizeExecOptions { height, width })
                .await
                .map_err(docker_err),
            SessionId::Attach(id) => docker
                .resize_container_tty(
                    id,
                    ResizeContainerTTYOptions {
                        h: i32::from(height),
                        w: i32::from(width),
                    },
                )
                .await
                .map_err(|e| not_found_or(e, id)),
        }
    }

    async fn session_exit_code(&self, session: &SessionId) -> Result<Option<i64>> {
        let SessionId::Exec(exec) = session else {
            return Ok(None);
        };
        let docker = self.client().await?;
        // The output ends when the process does; its exit code shows up in
        // the exec's inspect a moment later at most.
        for _ in 0..250 {
            let inspect = match docker.inspect_exec(exec).await {
                Ok(i) => i,
                Err(e) if status(&e) == Some(404) => return Ok(None),
                Err(e) => return Err(docker_err(e)),
            };
            if inspect.running != Some(true) && inspect.exit_code.is_some() {
                return Ok(inspect.exit_code);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(None)
    }
}

/// A chunk of exec or attach output; a TTY's (`Console`) counts as stdout.
fn session_output(chunk: std::result::Result<LogOutput, BollardError>) -> Option<Result<Output>> {
    match chunk {
        Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => {
            Some(Ok(Output::Stdout(message)))
        }
        Ok(LogOutput::StdErr { message }) => Some(Ok(Output::Stderr(message))),
        Ok(LogOutput::StdIn { .. }) => None,
        Err(e) => Some(Err(docker_err(e))),
    }
}

/// The labels naming a container's node, pod, name and role.
fn identity_labels(
    node: &str,
    pod: &PodRef,
    container: &str,
    role: Role,
) -> HashMap<String, String> {
    HashMap::from([
        (labels::NODE.to_string(), node.to_string()),
        (labels::POD_NAMESPACE.to_string(), pod.namespace.clone()),
        (labels::POD_NAME.to_string(), pod.name.clone()),
        (labels::POD_UID.to_string(), pod.uid.clone()),
        (labels::CONTAINER.to_string(), container.to_string()),
        (labels::ROLE.to_string(), role.as_str().to_string()),
    ])
}

/// Reads a container back from Docker's inspect and bosun's labels.
fn to_info(c: ContainerInspectResponse) -> Result<ContainerInfo> {
    let id = c.id.clone().unwrap_or_default();
    let config = c.config.unwrap_or_default();
    let label_map = config.labels.unwrap_or_default();
    let label = |key: &str| -> Result<String> {
        label_map.get(key).cloned().ok_or_else(|| {
            RuntimeError::Docker(format!("container {id} has no {key} label: not bosun's"))
        })
    };
    let role_name = label(labels::ROLE)?;
    let role = Role::parse(&role_name).ok_or_else(|| {
        RuntimeError::Docker(format!("container {id} has an unknown role {role_name:?}"))
    })?;
    let pod = PodRef {
        namespace: label(labels::POD_NAMESPACE)?,
        name: label(labels::POD_NAME)?,
        uid: label(labels::POD_UID)?,
    };
    let state = c.state.unwrap_or_default();
    let phase = match state.status {
        Some(ContainerStateStatusEnum::CREATED) => ContainerState::Created,
        Some(ContainerStateStatusEnum::RUNNING) => ContainerState::Running,
        Some(ContainerStateStatusEnum::EXITED) => ContainerState::Exited,
        _ => ContainerState::Unknown,
    };
    let reason = if state.oom_killed == Some(true) {
        Some("OOMKilled".to_string())
    } else {
        state.error.filter(|e| !e.is_empty())
    };
    let exit_code = match phase {
        ContainerState::Exited => state.exit_code,
        // A container whose process could not be started stays `created`,
        // with Docker's error and exit code 127 (or 126).
        ContainerState::Created if reason.is_some() => state.exit_code,
        _ => None,
    };
    let ip = if role == Role::Sandbox {
        let mode = c
            .host_config
            .as_ref()
            .and_then(|h| h.network_mode.clone())
            .unwrap_or_default();
        let networks = c
            .network_settings
            .and_then(|n| n.networks)
            .unwrap_or_default();
        networks
            .get(&mode)
            .and_then(|e| e.ip_address.clone())
            .filter(|ip| !ip.is_empty())
            .or_else(|| {
                // Named by id rather than name, or a network bosun did not
                // pick: any address will do.
                let mut ips: Vec<(String, String)> = networks
                    .into_iter()
                    .filter_map(|(n, e)| e.ip_address.map(|ip| (n, ip)))
                    .filter(|(_, ip)| !ip.is_empty())
                    .collect();
                ips.sort();
                ips.into_iter().next().map(|(_, ip)| ip)
            })
    } else {
        None
    };
    Ok(ContainerInfo {
        id: id.clone(),
        role,
        name: label(labels::CONTAINER)?,
        state: phase,
        exit_code,
        reason,
        created_at: c.created.as_deref().and_then(parse_time),
        started_at: state.started_at.as_deref().and_then(parse_time),
        finished_at: state.finished_at.as_deref().and_then(parse_time),
        image: config.image.unwrap_or_default(),
        image_id: c.image.unwrap_or_default(),
        restart_count: label_map
            .get(labels::RESTART_COUNT)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        spec_hash: label_map
            .get(labels::SPEC_HASH)
            .cloned()
            .unwrap_or_default(),
        pod,
        ip,
    })
}

/// Docker's timestamps; its zero time (`0001-01-01T00:00:00Z`) means never.
fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    let t = DateTime::parse_from_rfc3339(s).ok()?.with_timezone(&Utc);
    (t.timestamp() > 0).then_some(t)
}

/// The first 8 characters of a pod UID that may go into a container name.
fn uid8(uid: &str) -> String {
    uid.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(8)
        .collect()
}

/// CPU shares from a request in millicores, as the kubelet computes them
/// (1024 per CPU, at least 2).
fn cpu_shares(millis: i64) -> i64 {
    (millis * 1024 / 1000).max(2)
}

/// `repo[:tag]` or `repo@digest` → (repo, tag or digest); `latest` when
/// there is neither (Docker would pull every tag otherwise).
fn split_reference(image: &str) -> (&str, &str) {
    if let Some((repo, digest)) = image.split_once('@') {
        return (repo, digest);
    }
    let last_slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[last_slash..].rfind(':') {
        Some(i) => (&image[..last_slash + i], &image[last_slash + i + 1..]),
        None => (image, "latest"),
    }
}

/// The /16 that holds an IPv4 CIDR: `10.244.1.0/24` → `10.244.0.0/16`.
fn supernet16(subnet: &str) -> Option<String> {
    let (addr, _) = subnet.split_once('/').unwrap_or((subnet, "32"));
    let ip: std::net::Ipv4Addr = addr.parse().ok()?;
    let [a, b, _, _] = ip.octets();
    Some(format!("{a}.{b}.0.0/16"))
}

/// A tar archive holding one regular file at its root.
fn single_file_tar(name: &str, mode: u32, data: &[u8]) -> Vec<u8> {
    let mut header = [0u8; 512];
    let put = |h: &mut [u8; 512], at: usize, bytes: &[u8]| {
        h[at..at + bytes.len()].copy_from_slice(bytes);
    };
    put(&mut header, 0, name.as_bytes());
    put(&mut header, 100, format!("{mode:07o}\0").as_bytes());
    put(&mut header, 108, b"0000000\0"); // uid
    put(&mut header, 116, b"0000000\0"); // gid
    put(
        &mut header,
        124,
        format!("{:011o}\0", data.len()).as_bytes(),
    );
    put(&mut header, 136, b"00000000000\0"); // mtime
    put(&mut header, 148, b"        "); // checksum, counted as spaces
    header[156] = b'0'; // regular file
    put(&mut header, 257, b"ustar\0");
    put(&mut header, 263, b"00");
    let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
    put(&mut header, 148, format!("{sum:06o}\0 ").as_bytes());

    let padded = data.len().div_ceil(512) * 512;
    let mut tar = Vec::with_capacity(512 + padded + 1024);
    tar.extend_from_slice(&header);
    tar.extend_from_slice(data);
    tar.resize(512 + padded + 1024, 0);
    tar
}

/// FNV-1a, to tell one pause binary from another.
fn fnv1a64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn status(e: &BollardError) -> Option<u16> {
    match e {
        BollardError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// Docker's own words for an error, without bollard's wrapping.
fn message(e: &BollardError) -> String {
    match e {
        BollardError::DockerResponseServerError { message, .. } => message.clone(),
        BollardError::DockerStreamError { error } => error.clone(),
        other => other.to_string(),
    }
}

fn docker_err(e: BollardError) -> RuntimeError {
    match e {
        BollardError::RequestTimeoutError => RuntimeError::Timeout(REQUEST_TIMEOUT),
        e => RuntimeError::Docker(message(&e)),
    }
}

fn not_found_or(e: BollardError, id: &str) -> RuntimeError {
    if status(&e) == Some(404) {
        RuntimeError::NotFound(id.to_string())
    } else {
        docker_err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_split_into_repo_and_tag() {
        assert_eq!(split_reference("busybox"), ("busybox", "latest"));
        assert_eq!(split_reference("busybox:1.35"), ("busybox", "1.35"));
        assert_eq!(
            split_reference("bosun.local/web:2"),
            ("bosun.local/web", "2")
        );
        assert_eq!(
            split_reference("localhost:5000/web"),
            ("localhost:5000/web", "latest")
        );
        assert_eq!(
            split_reference("localhost:5000/web:3"),
            ("localhost:5000/web", "3")
        );
        assert_eq!(
            split_reference("nginx@sha256:abcd"),
            ("nginx", "sha256:abcd")
        );
    }

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

    #[test]
    fn cpu_shares_follow_the_kubelet() {
        assert_eq!(cpu_shares(1000), 1024);
        assert_eq!(cpu_shares(250), 256);
        assert_eq!(cpu_shares(1), 2);
    }

    #[test]
    fn uid8_keeps_name_safe_characters() {
        assert_eq!(uid8("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"), "0f1e2d3c");
        assert_eq!(uid8("ab-cd"), "abcd");
    }

    #[test]
    fn docker_zero_time_is_none() {
        assert_eq!(parse_time("0001-01-01T00:00:00Z"), None);
        let t = parse_time("2024-05-06T07:08:09.123456789Z").unwrap();
        assert_eq!(t.timestamp(), 1_714_979_289);
    }

    #[test]
    fn tar_header_is_valid_ustar() {
        let tar = single_file_tar("pause", 0o755, b"hello");
        assert_eq!(tar.len(), 512 + 512 + 1024);
        assert_eq!(&tar[0..5], b"pause");
        assert_eq!(&tar[257..263], b"ustar\0");
        assert_eq!(&tar[512..517], b"hello");
        // The checksum is the sum of the header with its own field as spaces.
        let mut h = tar[..512].to_vec();
        let stored = u32::from_str_radix(std::str::from_utf8(&h[148..154]).unwrap(), 8).unwrap();
        h[148..156].copy_from_slice(b"        ");
        assert_eq!(stored, h.iter().map(|&b| u32::from(b)).sum::<u32>());
    }

    #[test]
    fn the_pause_binary_is_embedded() {
        assert!(PAUSE_BINARY.len() > 1000);
        assert_eq!(&PAUSE_BINARY[..4], b"\x7fELF");
    }
}
