//! Pod volumes on the node: emptyDir (a directory under the agent's data
//! dir, tmpfs with `medium: Memory`, removed with the pod), hostPath
//! (with Kubernetes' `type` checks), and configMap and secret volumes
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
pub mod persistent_claim;
pub mod safe_path;
pub mod subpath;
pub mod volume_manager;

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Pod, Volume};

use crate::config::sources::ConfigSources;
use crate::config::AgentConfig;
use atomic_writer::Ownership;

/// The mode of the pods directory and of each pod's.
const POD_DIR_MODE: u32 = 0o750;

pub fn pod_dir(cfg: &AgentConfig, uid: &str) -> PathBuf {
    cfg.data_dir.join("pods").join(uid)
}

fn empty_dir_path(cfg: &AgentConfig, uid: &str, name: &str) -> PathBuf {
    pod_dir(cfg, uid)
        .join("volumes")
        .join("empty-dir")
        .join(name)
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
        return Ok(empty_dir_path(cfg, uid, name)
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

fn is_mounted(path: &Path) -> bool {
    let target = path.to_string_lossy();
    std::fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(1) == Some(&*target))
        })
        .unwrap_or(false)
}

/// Checks a hostPath against its `type`, creating it where the type says
/// so; `path` is the engine's, seen here under `root`.
fn check_host_path(root: &Path, path: &str, kind: &str) -> Result<(), String> {
    let seen = root.join(path.trim_start_matches('/'));
    let p = seen.as_path();
    let meta = std::fs::metadata(p);
    let must_be = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(format!("hostPath type check failed: {path} is not {what}"))
        }
    };
    let is =
        |test: fn(&std::fs::FileType) -> bool| meta.as_ref().is_ok_and(|m| test(&m.file_type()));
    match kind {
        "" => Ok(()),
        "DirectoryOrCreate" | "Directory" => {
            if kind == "DirectoryOrCreate" && !p.exists() {
                std::fs::create_dir_all(p).map_err(|e| format!("creating {path}: {e}"))?;
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755));
            }
            must_be(p.is_dir(), "a directory")
        }
        "FileOrCreate" | "File" => {
            if kind == "FileOrCreate" && !p.exists() {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| format!("creating {path}: {e}"))?;
            }
            must_be(p.is_file(), "a file")
        }
        "Socket" => must_be(is(FileTypeExt::is_socket), "a socket"),
        "CharDevice" => must_be(is(FileTypeExt::is_char_device), "a character device"),
        "BlockDevice" => must_be(is(FileTypeExt::is_block_device), "a block device"),
        other => Err(format!("unknown hostPath type {other:?}")),
    }
}

fn mount_tmpfs(dir: &Path, opts: &str) -> Result<(), String> {
    let status = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", opts, "tmpfs"])
        .arg(dir)
        .status()
        .map_err(|e| format!("mount: {e}"))?;
    if !status.success() {
        return Err("mount tmpfs failed".into());
    }
    Ok(())
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
    if TMPFS_KINDS.contains(&kind) && !is_mounted(&dir) {
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
            let dir = empty_dir_path(cfg, uid, &v.name);
            std::fs::create_dir_all(&dir).map_err(|e| format!("emptyDir {}: {e}", v.name))?;
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777));
            if ed.medium.as_deref() == Some("Memory") && !is_mounted(&dir) {
                let mut opts = String::from("mode=0777");
                if let Some(limit) = &ed.size_limit {
                    if let Ok(q) = bosun::quantity::parse_quantity(&limit.0) {
                        opts.push_str(&format!(",size={}", q.value()));
                    }
                }
                let status = std::process::Command::new("mount")
                    .args(["-t", "tmpfs", "-o", &opts, "tmpfs"])
                    .arg(&dir)
                    .status()
                    .map_err(|e| format!("emptyDir {} (Memory): mount: {e}", v.name))?;
                if !status.success() {
                    return Err(format!("emptyDir {} (Memory): mount tmpfs failed", v.name));
                }
            }
        }
        setup_config_volume(&v, pod, cfg, sources)?;
        if let Some(hp) = &v.host_path {
            check_host_path(&cfg.host_root, &hp.path, hp.type_.as_deref().unwrap_or(""))
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
            if is_mounted(&e.path()) {
                let _ = std::process::Command::new("umount").arg(e.path()).status();
            }
        }
    }
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(dir = %dir.display(), error = %e, "removing pod volumes");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_path_types() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("made");
        check_host_path(Path::new("/"), d.to_str().unwrap(), "DirectoryOrCreate").unwrap();
        assert!(d.is_dir());
        check_host_path(Path::new("/"), d.to_str().unwrap(), "Directory").unwrap();
        assert!(check_host_path(Path::new("/"), d.to_str().unwrap(), "File").is_err());
        let f = dir.path().join("f");
        check_host_path(Path::new("/"), f.to_str().unwrap(), "FileOrCreate").unwrap();
        assert!(f.is_file());
        assert!(check_host_path(
            Path::new("/"),
            dir.path().join("nope").to_str().unwrap(),
            "Directory"
        )
        .is_err());
        assert!(check_host_path(Path::new("/"), "/dev/null", "CharDevice").is_ok());
        assert!(check_host_path(Path::new("/"), "/dev/null", "Socket").is_err());
    }

    #[test]
    fn host_paths_are_the_engines_seen_under_the_host_root() {
        // An agent in a container sees the engine's / at --host-root.
        let engine = tempfile::tempdir().unwrap();
        check_host_path(engine.path(), "/srv/data", "DirectoryOrCreate").unwrap();
        assert!(engine.path().join("srv/data").is_dir());
        let err = check_host_path(engine.path(), "/srv/data", "File").unwrap_err();
        assert!(err.contains("/srv/data is not a file"), "{err}");
        assert!(!err.contains(&engine.path().display().to_string()), "{err}");
    }
}
