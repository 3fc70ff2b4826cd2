//! `emptyDir` volumes: a directory under the pod's dir in the agent's
//! data dir, open to every user of the pod (`0777`), a tmpfs with
//! `medium: Memory` (of `sizeLimit`), removed with the pod.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::EmptyDirVolumeSource;

use super::{is_mounted, mount_tmpfs, pod_dir};
use crate::config::AgentConfig;

/// Where emptyDir volume `name` of pod `uid` lives.
pub(super) fn path(cfg: &AgentConfig, uid: &str, name: &str) -> PathBuf {
    pod_dir(cfg, uid)
        .join("volumes")
        .join("empty-dir")
        .join(name)
}

/// Makes emptyDir volume `name` of pod `uid` (mounting its tmpfs).
pub(super) fn set_up(
    cfg: &AgentConfig,
    uid: &str,
    name: &str,
    ed: &EmptyDirVolumeSource,
) -> Result<(), String> {
    let dir = path(cfg, uid, name);
    std::fs::create_dir_all(&dir).map_err(|e| format!("emptyDir {name}: {e}"))?;
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777));
    if ed.medium.as_deref() == Some("Memory") && super::mounts() && !is_mounted(&dir) {
        let mut opts = String::from("mode=0777");
        if let Some(limit) = &ed.size_limit {
            if let Ok(q) = bosun::quantity::parse_quantity(&limit.0) {
                opts.push_str(&format!(",size={}", q.value()));
            }
        }
        mount_tmpfs(&dir, &opts).map_err(|e| format!("emptyDir {name} (Memory): {e}"))?;
    }
    Ok(())
}
