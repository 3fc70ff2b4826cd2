//! App and init containers: made to join their sandbox's namespaces,
//! started, stopped, removed, and read back from Docker's inspect and
//! bosun's labels.

use std::collections::HashMap;
use std::time::Duration;

use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, ContainerStateStatusEnum,
    ContainerSummaryStateEnum, HostConfig,
};
use bollard::query_parameters::{
    CreateContainerOptions, InspectContainerOptions, ListContainersOptions, RemoveContainerOptions,
    StopContainerOptions,
};
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};

use super::errors::{docker_err, message, not_found_or, status};
use super::DockerRuntime;
use super::{REQUEST_TIMEOUT, SANDBOX_ID_LABEL};
use crate::runtime::{
    labels, ContainerConfig, ContainerInfo, ContainerRuntime, ContainerState, PodRef, Result, Role,
    RuntimeError,
};

impl DockerRuntime {
    pub(super) async fn inspect_raw(&self, id: &str) -> Result<ContainerInspectResponse> {
        self.client()
            .await?
            .inspect_container(id, None::<InspectContainerOptions>)
            .await
            .map_err(|e| not_found_or(e, id))
    }

    /// Creates a container named `name`. A leftover container of that name
    /// that is not running (an earlier attempt the agent lost track of) is
    /// removed and the create retried once; a running one is an error.
    pub(super) async fn create_named(
        &self,
        name: &str,
        body: ContainerCreateBody,
    ) -> Result<String> {
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

    pub(super) async fn start(&self, id: &str) -> Result<()> {
        match self.client().await?.start_container(id, None).await {
            Ok(()) => Ok(()),
            Err(e) if status(&e) == Some(304) => Ok(()),
            Err(e) => Err(not_found_or(e, id)),
        }
    }

    pub(super) async fn stop(&self, id: &str, grace: Duration) -> Result<()> {
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

    pub(super) async fn remove(&self, id: &str) -> Result<()> {
        self.inspected.forget(id);
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

    /// Every container of the node, or with `pod_uid` only that pod's.
    /// Docker's list is cheap; only containers not yet inspected in the
    /// state the list shows are inspected (see [`super::inspected`]).
    pub(super) async fn list(
        &self,
        node: &str,
        pod_uid: Option<&str>,
    ) -> Result<Vec<ContainerInfo>> {
        let docker = self.client().await?;
        let mut wanted = vec![format!("{}={node}", labels::NODE)];
        if let Some(uid) = pod_uid {
            wanted.push(format!("{}={uid}", labels::POD_UID));
        }
        let options = ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([("label".to_string(), wanted)])),
            ..Default::default()
        };
        let summaries = docker
            .list_containers(Some(options))
            .await
            .map_err(docker_err)?;
        if pod_uid.is_none() {
            let listed = summaries.iter().filter_map(|s| s.id.as_deref()).collect();
            self.inspected.keep_only(&listed);
        }
        let listed: Vec<(String, Option<ContainerSummaryStateEnum>)> = summaries
            .into_iter()
            .filter_map(|s| Some((s.id?, s.state)))
            .collect();
        let found: Vec<Option<ContainerInfo>> = futures::stream::iter(listed)
            .map(|(id, state)| async move {
                if let Some(info) = self.inspected.get(&id, state) {
                    return Ok(Some(info));
                }
                let inspected = match self.inspect_raw(&id).await {
                    Ok(c) => c,
                    // Removed between the list and the inspect.
                    Err(RuntimeError::NotFound(_)) => return Ok(None),
                    Err(e) => return Err(e),
                };
                match to_info(inspected) {
                    Ok(info) => {
                        self.inspected.put(state, &info);
                        Ok(Some(info))
                    }
                    Err(e) => {
                        tracing::warn!(node, "skipping a container: {e}");
                        Ok(None)
                    }
                }
            })
            .buffered(8)
            .try_collect()
            .await?;
        let mut infos: Vec<ContainerInfo> = found.into_iter().flatten().collect();
        infos.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(infos)
    }
}

/// `bosun_<ns>_<pod>_<uid8>_<container>`: how bosun names the containers
/// of a pod (app and init containers add `_<restartCount>`).
pub(super) fn container_name(pod: &PodRef, container: &str) -> String {
    format!(
        "bosun_{}_{}_{}_{}",
        pod.namespace,
        pod.name,
        uid8(&pod.uid),
        container
    )
}

/// What an app or init container is made with: `config`, joined to the
/// namespaces of sandbox `sandbox_id` (or the host's), labelled with its
/// `identity` (see [`identity_labels`]) and bosun's other labels.
pub(super) fn joined_container_body(
    identity: HashMap<String, String>,
    sandbox_id: &str,
    config: &ContainerConfig,
) -> ContainerCreateBody {
    let mut label_map: HashMap<String, String> = config
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    label_map.extend(identity);
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
            config
                .pid_target
                .as_ref()
                .map(|target| format!("container:{target}"))
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
        runtime: config.runtime.clone(),
        memory: config.memory_limit,
        // No swap beyond the limit, as the kubelet does.
        memory_swap: config.memory_limit,
        nano_cpus: config.cpu_limit_millis.map(|m| m * 1_000_000),
        cpu_shares: config.cpu_request_millis.map(cpu_shares),
        privileged: config.privileged.then_some(true),
        readonly_rootfs: config.read_only_root_fs.then_some(true),
        cap_add: (!config.cap_add.is_empty()).then(|| config.cap_add.clone()),
        cap_drop: (!config.cap_drop.is_empty()).then(|| config.cap_drop.clone()),
        group_add: (!config.supplemental_groups.is_empty()).then(|| {
            config
                .supplemental_groups
                .iter()
                .map(i64::to_string)
                .collect()
        }),
        ..Default::default()
    };
    ContainerCreateBody {
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
    }
}

/// The labels naming a container's node, pod, name and role.
pub(super) fn identity_labels(
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
pub(super) fn to_info(c: ContainerInspectResponse) -> Result<ContainerInfo> {
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
pub(super) fn uid8(uid: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
