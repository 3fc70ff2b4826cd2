//! Pod volumes on the node: emptyDir (`empty_dir`: a directory under the
//! agent's data dir, tmpfs with `medium: Memory`, removed with the pod),
//! hostPath (`host_path`: with Kubernetes' `type` checks), claims
//! ([`persistent_claim`], found by the [`volume_manager`]), and configMap,
//! secret, downwardAPI and projected volumes
//! (made by [`crate::volumes::config_volumes`], written by
//! [`crate::volumes::atomic_writer`]; a secret's directory is a tmpfs).
//!
//! The pods directory and each pod's are `0750` and root's: volumes hold
//! secrets and tokens, and no other user of the host may reach them
//! (containers get their volumes by bind mounts, which do not pass
//! through these directories).

pub mod atomic_writer;
pub mod config_volumes;
pub mod downward_api;
mod empty_dir;
mod host_path;
pub mod persistent_claim;
pub mod safe_path;
pub mod subpath;
pub mod volume_manager;

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Pod, Volume};

use crate::config::sources::ConfigSources;
use crate::config::AgentConfig;
use atomic_writer::Ownership;

/// False in a hollow-node process (`crate::hollow`): its pods are fake, and
/// thousands of tmpfs mounts and subPath binds would only load the host
/// (kubemark's hollow kubelet has a fake mounter too). Volumes' files are
/// still written.
static MOUNTS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Makes this process write volumes without mounting anything.
pub fn without_mounts() {
    MOUNTS.store(false, std::sync::atomic::Ordering::Relaxed);
}

pub(crate) fn mounts() -> bool {
    MOUNTS.load(std::sync::atomic::Ordering::Relaxed)
}

/// The mode of the pods directory and of each pod's.
const POD_DIR_MODE: u32 = 0o750;

pub fn pod_dir(cfg: &AgentConfig, uid: &str) -> PathBuf {
    cfg.data_dir.join("pods").join(uid)
}

/// Where a configMap (`configmap`) or secret (`secret`) volume lives.
fn config_volume_path(cfg: &AgentConfig, uid: &str, kind: &str, name: &str) -> PathBuf {
    pod_dir(cfg, uid).join("volumes").join(kind).join(name)
}

fn volume<'a>(pod: &'a Pod, name: &str) -> Option<&'a Volume> {
    pod.spec
        .as_ref()?
        .volumes
        .as_ref()?
        .iter()
        .find(|v| v.name == name)
}

/// The host path a volume is mounted from.
pub fn host_path_of(pod: &Pod, name: &str, cfg: &AgentConfig) -> Result<String, String> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let v = volume(pod, name).ok_or_else(|| format!("no volume named {name:?} in the pod"))?;
    if v.empty_dir.is_some() {
        return Ok(empty_dir::path(cfg, uid, name)
            .to_string_lossy()
            .into_owned());
    }
    if let Some(hp) = &v.host_path {
        return Ok(hp.path.clone());
    }
    if let Some(kind) = file_volume_kind(v) {
        return Ok(config_volume_path(cfg, uid, kind, name)
            .to_string_lossy()
            .into_owned());
    }
    Err(
        "only emptyDir, hostPath, configMap, secret, downwardAPI, projected and claim volumes are supported by this agent"
            .into(),
    )
}

/// The directory of volume `name` as this agent sees it, for resolving
/// a subPath below it: a hostPath is the engine's path under the host
/// root; every other volume is in the agent's data dir.
pub fn agent_path_of(pod: &Pod, name: &str, cfg: &AgentConfig) -> Result<PathBuf, String> {
    let path = host_path_of(pod, name, cfg)?;
    Ok(match volume(pod, name).and_then(|v| v.host_path.as_ref()) {
        Some(_) => cfg.host_root.join(path.trim_start_matches('/')),
        None => PathBuf::from(path),
    })
}

/// Whether volume `name` holds API data the agent writes (configMap,
/// secret, downwardAPI, projected): containers get it read-only, as the
/// kubelet mounts it, so none can rewrite what the agent reads back.
pub fn is_api_data(pod: &Pod, name: &str) -> bool {
    volume(pod, name).is_some_and(|v| file_volume_kind(v).is_some())
}

pub(super) fn is_mounted(path: &Path) -> bool {
    let target = path.to_string_lossy();
    std::fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(1) == Some(&*target))
        })
        .unwrap_or(false)
}

/// Mounts a tmpfs with `opts` on `dir`: the mount(2) call itself, not
/// mount(8), whose fork and exec blocked the runtime's worker thread for
/// every secret and token volume of a burst of pods.
pub(super) fn mount_tmpfs(dir: &Path, opts: &str) -> Result<(), String> {
    use nix::mount::{mount, MsFlags};
    mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        MsFlags::empty(),
        Some(opts),
    )
    .map_err(|e| format!("mount tmpfs on {}: {e}", dir.display()))
}

/// The folder kind of a volume made of files the agent writes: the
/// kubelet's plugin names, and whether it lives on tmpfs (secrets and
/// tokens never touch the node's disk).
fn file_volume_kind(v: &Volume) -> Option<&'static str> {
    if v.config_map.is_some() {
        Some("configmap")
    } else if v.secret.is_some() {
        Some("secret")
    } else if v.downward_api.is_some() {
        Some("downward-api")
    } else if v.projected.is_some() {
        Some("projected")
    } else {
        None
    }
}

/// Kinds of [`file_volume_kind`] kept on tmpfs.
const TMPFS_KINDS: [&str; 2] = ["secret", "projected"];

/// Writes a configMap, secret, downwardAPI or projected volume's files
/// (when they changed). A volume already written keeps its files when its
/// object cannot be read any more, as the kubelet's do.
fn setup_config_volume(
    v: &Volume,
    pod: &Pod,
    cfg: &AgentConfig,
    sources: &ConfigSources,
) -> Result<(), String> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let Some(kind) = file_volume_kind(v) else {
        return Ok(());
    };
    let dir = config_volume_path(cfg, uid, kind, &v.name);
    let owner = Ownership::of_pod(pod);
    let files = match config_volumes::payload(v, pod, sources, owner) {
        Ok(Some(files)) => files,
        Ok(None) => return Ok(()),
        Err(e) if dir.join("..data").exists() => {
            tracing::warn!(volume = %v.name, error = %e, "keeping the volume's last contents");
            return Ok(());
        }
        Err(e) => {
            return Err(format!(
                "MountVolume.SetUp failed for volume {:?} : {e}",
                v.name
            ))
        }
    };
    let failed = |e: &dyn std::fmt::Display| {
        format!("MountVolume.SetUp failed for volume {:?} : {e}", v.name)
    };
    std::fs::create_dir_all(&dir).map_err(|e| failed(&e))?;
    if TMPFS_KINDS.contains(&kind) && mounts() && !is_mounted(&dir) {
        // Secrets and tokens never touch the node's disk; the writer
        // gives the mount's root to the pod's user.
        mount_tmpfs(&dir, "mode=0700").map_err(|e| failed(&format!("tmpfs: {e}")))?;
    }
    atomic_writer::write(&dir, &files, owner).map_err(|e| failed(&e))?;
    Ok(())
}

/// Makes `dir` (and its parents) with `mode`, and sets `mode` on it if it
/// was there already (a pods dir an older agent made `0755`).
fn private_dir(dir: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
}

/// Makes every volume of the pod ready to mount.
pub fn setup(pod: &Pod, cfg: &AgentConfig, sources: &ConfigSources) -> Result<(), String> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let pods = cfg.data_dir.join("pods");
    for dir in [pods.as_path(), &pod_dir(cfg, uid)] {
        private_dir(dir, POD_DIR_MODE).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap_or_default();
    for v in volumes {
        if let Some(ed) = &v.empty_dir {
            empty_dir::set_up(cfg, uid, &v.name, ed)?;
        }
        setup_config_volume(&v, pod, cfg, sources)?;
        if let Some(hp) = &v.host_path {
            host_path::check_host_path(&cfg.host_root, &hp.path, hp.type_.as_deref().unwrap_or(""))
                .map_err(|e| format!("hostPath {}: {e}", v.name))?;
        }
    }
    Ok(())
}

/// Removes the pod's volumes dir (unmounting its subPath binds and tmpfs
/// volumes first).
pub fn teardown(cfg: &AgentConfig, uid: &str) {
    let dir = pod_dir(cfg, uid);
    if !subpath::unmount_all(&dir) {
        // Removing the dir would reach into the volume still bound there.
        tracing::warn!(dir = %dir.display(), "keeping the pod's dir: a subPath bind is still mounted");
        return;
    }
    for kind in ["empty-dir", "secret", "projected"] {
        let Ok(entries) = std::fs::read_dir(dir.join("volumes").join(kind)) else {
            continue;
        };
        for e in entries.flatten() {
            if mounts() && is_mounted(&e.path()) {
                let _ = nix::mount::umount(&e.path());
            }
        }
    }
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(dir = %dir.display(), error = %e, "removing pod volumes");
        }
    }
}
