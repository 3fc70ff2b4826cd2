//! Claim-backed volumes on the node (the kubelet's volume manager for
//! `persistentVolumeClaim` volumes), and the removal of local-path
//! volumes' directories.
//!
//! - [`resolve`]: a pod's `persistentVolumeClaim` volumes become the
//!   hostPath of the volume their claim is bound to (a PV's `hostPath`, or
//!   its `local.path`), so they mount as hostPath volumes do. A claim that
//!   is missing or not bound yet is left as it is, and the pod waits in
//!   ContainerCreating with a `FailedMount` event until it is bound.
//! - [`run_cleanup`]: a local-path volume (made by the control plane's
//!   provisioner, pinned to this node, in this agent's data dir) that is
//!   being deleted has its directory removed here, and then its
//!   [`CLEANUP_FINALIZER`], so the API server lets it go. Only this agent
//!   touches its node's filesystem; the control plane never does.

use std::path::{Path, PathBuf};

use bosun::well_known::HOSTNAME_LABEL;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, PersistentVolume, PersistentVolumeClaim, Pod,
};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::config::AgentConfig;

/// The finalizer local-path volumes carry until their directory is gone
/// (the control plane's `volumebinding::CLEANUP_FINALIZER`).
pub const CLEANUP_FINALIZER: &str = "bosun.io/local-path-cleanup";

/// The Node annotation that tells the provisioner where this agent keeps
/// local-path volumes (the control plane's `volumebinding::DATA_DIR_ANNOTATION`).
pub const DATA_DIR_ANNOTATION: &str = "bosun.io/data-dir";

/// The agent's data dir as an absolute path, as published on its Node.
pub fn data_dir(cfg: &AgentConfig) -> PathBuf {
    std::path::absolute(&cfg.data_dir).unwrap_or_else(|_| cfg.data_dir.clone())
}

/// Where local-path volumes live on this node.
pub fn local_path_root(cfg: &AgentConfig) -> PathBuf {
    data_dir(cfg).join("local-path")
}

/// The host path of the volume `claim` (in `ns`) is bound to, or why it
/// has none yet.
async fn claim_path(client: &Client, ns: &str, claim: &str) -> Result<(String, String), String> {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let pvc = claims
        .get_opt(claim)
        .await
        .map_err(|e| format!("reading persistentvolumeclaim \"{claim}\": {e}"))?
        .ok_or_else(|| format!("persistentvolumeclaim \"{claim}\" not found"))?;
    if pvc.metadata.deletion_timestamp.is_some() {
        return Err(format!(
            "persistentvolumeclaim \"{claim}\" is being deleted"
        ));
    }
    let bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    let volume = pvc
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .filter(|v| !v.is_empty());
    let Some(volume) = volume.filter(|_| bound) else {
        return Err(format!(
            "persistentvolumeclaim \"{claim}\" is not bound yet"
        ));
    };
    let pv = Api::<PersistentVolume>::all(client.clone())
        .get_opt(&volume)
        .await
        .map_err(|e| format!("reading persistentvolume \"{volume}\": {e}"))?
        .ok_or_else(|| format!("persistentvolume \"{volume}\" not found"))?;
    let spec = pv.spec.unwrap_or_default();
    if let Some(hp) = spec.host_path {
        return Ok((hp.path, hp.type_.unwrap_or_default()));
    }
    if let Some(local) = spec.local {
        return Ok((local.path, "Directory".into()));
    }
    Err(format!(
        "persistentvolume \"{volume}\" is neither hostPath nor local: this agent mounts only those"
    ))
}

/// The pod with each `persistentVolumeClaim` volume whose claim is bound
/// turned into the hostPath of its volume (read-only mounts where the
/// claim volume says `readOnly`), and what keeps the others from mounting.
pub async fn resolve(client: &Client, pod: &Pod) -> (Pod, Vec<String>) {
    let mut out = pod.clone();
    let mut problems = Vec::new();
    let ns = pod.namespace().unwrap_or_else(|| "default".into());
    let Some(spec) = out.spec.as_mut() else {
        return (out, problems);
    };
    let mut read_only = Vec::new();
    for v in spec.volumes.iter_mut().flatten() {
        let Some(c) = v.persistent_volume_claim.clone() else {
            continue;
        };
        match claim_path(client, &ns, &c.claim_name).await {
            Ok((path, type_)) => {
                v.persistent_volume_claim = None;
                v.host_path = Some(HostPathVolumeSource {
                    path,
                    type_: Some(type_).filter(|t| !t.is_empty()),
                });
                if c.read_only == Some(true) {
                    read_only.push(v.name.clone());
                }
            }
            Err(e) => problems.push(format!("volume \"{}\": {e}", v.name)),
        }
    }
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        for m in c.volume_mounts.iter_mut().flatten() {
            if read_only.contains(&m.name) {
                m.read_only = Some(true);
            }
        }
    }
    (out, problems)
}

/// Whether `pv` is a local-path volume of this node whose directory is
/// for this agent to remove: pinned to this node, and in this agent's
/// local-path dir (nothing else is ever removed).
pub fn cleanup_path(pv: &PersistentVolume, cfg: &AgentConfig) -> Option<PathBuf> {
    if !pv.finalizers().iter().any(|f| f == CLEANUP_FINALIZER) {
        return None;
    }
    let spec = pv.spec.as_ref()?;
    let pinned_here = spec
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.as_ref())
        .is_some_and(|r| {
            r.node_selector_terms.iter().any(|t| {
                t.match_expressions.iter().flatten().any(|e| {
                    e.key == HOSTNAME_LABEL
                        && e.operator == "In"
                        && e.values.iter().flatten().any(|v| *v == cfg.node_name)
                })
            })
        });
    let path = PathBuf::from(&spec.host_path.as_ref()?.path);
    let root = local_path_root(cfg);
    let inside = path.parent() == Some(root.as_path())
        && path
            .file_name()
            .is_some_and(|n| !n.is_empty() && n != "." && n != "..");
    (pinned_here && inside).then_some(path)
}

/// Removes `path` (gone already is fine).
fn remove_dir(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Removes the directory of a local-path volume being deleted, then its
/// finalizer.
async fn clean_up(client: &Client, pv: &PersistentVolume, cfg: &AgentConfig) {
    if pv.metadata.deletion_timestamp.is_none() {
        return;
    }
    let Some(path) = cleanup_path(pv, cfg) else {
        return;
    };
    if let Err(e) = remove_dir(&path) {
        tracing::warn!(volume = %pv.name_any(), path = %path.display(), error = %e, "removing a local-path volume's directory");
        return;
    }
    tracing::info!(volume = %pv.name_any(), path = %path.display(), "removed a deleted local-path volume's directory");
    let kept: Vec<&String> = pv
        .finalizers()
        .iter()
        .filter(|f| *f != CLEANUP_FINALIZER)
        .collect();
    let patch = json!({"metadata": {
        "resourceVersion": pv.metadata.resource_version,
        "finalizers": kept,
    }});
    match Api::<PersistentVolume>::all(client.clone())
        .patch(
            &pv.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        Ok(_) => {}
        // Gone, or changed since: the watch brings it again.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
        Err(e) => {
            tracing::warn!(volume = %pv.name_any(), error = %e, "removing {CLEANUP_FINALIZER}")
        }
    }
}

/// Watches the volumes and cleans up this node's deleted local-path ones.
pub async fn run_cleanup(client: Client, cfg: std::sync::Arc<AgentConfig>) {
    let api: Api<PersistentVolume> = Api::all(client.clone());
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Apply(pv)) | Ok(Event::InitApply(pv)) => clean_up(&client, &pv, &cfg).await,
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "watching volumes"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pv(node: &str, path: &str, finalizer: bool) -> PersistentVolume {
        serde_json::from_value(json!({
            "metadata": {"name": "pvc-1", "finalizers": if finalizer { vec![CLEANUP_FINALIZER] } else { vec![] }},
            "spec": {"hostPath": {"path": path},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}
        }))
        .unwrap()
    }

    #[test]
    fn only_this_nodes_local_path_directories_are_removed() {
        let cfg = AgentConfig::for_tests("n1", PathBuf::from("/var/lib/bosun"));
        let ours = "/var/lib/bosun/local-path/pvc-1_default_www";
        assert_eq!(
            cleanup_path(&pv("n1", ours, true), &cfg),
            Some(PathBuf::from(ours))
        );
        // Another node's, one without the finalizer, and paths outside
        // the local-path dir are left alone.
        assert_eq!(cleanup_path(&pv("n2", ours, true), &cfg), None);
        assert_eq!(cleanup_path(&pv("n1", ours, false), &cfg), None);
        for path in [
            "/tmp/pv1",
            "/var/lib/bosun/local-path",
            "/var/lib/bosun/local-path/..",
            "/var/lib/bosun/local-path/a/b",
            "/var/lib/bosun/pods/x",
        ] {
            assert_eq!(cleanup_path(&pv("n1", path, true), &cfg), None, "{path}");
        }
    }
}
