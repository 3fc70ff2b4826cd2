//! `configMap` and `secret` volumes: the files of a ConfigMap's or
//! Secret's keys (all of them, or `items` key→path), with `defaultMode` /
//! per-item `mode`, written with the kubelet's atomic writer layout so a
//! running container sees an edit as one change:
//!
//! ```text
//! <dir>/..2026_12_03_19_40_00.123456789/<files>   the current payload
//! <dir>/..data -> ..2026_12_03_19_40_00.123456789  swapped by rename(2)
//! <dir>/<key> -> ..data/<key>                     what the user sees
//! ```
//!
//! A Secret volume's directory is a tmpfs mount, so its contents never
//! reach the node's disk; a ConfigMap's lives under the pod's volume dir.
//! A `subPath` mount binds the file the symlink points at when the
//! container is made, so it keeps that version (as in Kubernetes).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{KeyToPath, Volume};

use crate::config_sources::ConfigSources;

/// One file of a volume's payload: its bytes and mode.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub data: Vec<u8>,
    pub mode: u32,
}

/// The files volume `v` holds (relative path → file), or the kubelet's
/// error for a missing object or key; `Ok(None)` if `v` is not a
/// configMap or secret volume.
pub fn payload(
    v: &Volume,
    sources: &ConfigSources,
) -> Result<Option<BTreeMap<String, File>>, String> {
    let (secret, name, items, default_mode, optional) = match (&v.config_map, &v.secret) {
        (Some(cm), _) => (
            false,
            cm.name.clone(),
            cm.items.clone(),
            cm.default_mode,
            cm.optional == Some(true),
        ),
        (None, Some(s)) => (
            true,
            s.secret_name.clone().unwrap_or_default(),
            s.items.clone(),
            s.default_mode,
            s.optional == Some(true),
        ),
        _ => return Ok(None),
    };
    let kind = if secret { "secret" } else { "configmap" };
    let default_mode = default_mode.map_or(0o644, |m| m as u32 & 0o777);
    let files = match sources.files(secret, &name) {
        Some(Ok(Some(files))) => files,
        Some(Err(e)) => return Err(e.clone()),
        _ if optional => return Ok(Some(BTreeMap::new())),
        _ => return Err(format!("{kind} \"{name}\" not found")),
    };
    let mut out = BTreeMap::new();
    match items.filter(|i| !i.is_empty()) {
        None => {
            for (k, data) in files {
                out.insert(
                    k.clone(),
                    File {
                        data: data.clone(),
                        mode: default_mode,
                    },
                );
            }
        }
        Some(items) => {
            for KeyToPath {
                key, path, mode, ..
            } in items
            {
                let Some(data) = files.get(&key) else {
                    if optional {
                        continue;
                    }
                    return Err(if secret {
                        format!("references non-existent secret key: {key}")
                    } else {
                        format!("configmap references non-existent config key: {key}")
                    });
                };
                out.insert(
                    path,
                    File {
                        data: data.clone(),
                        mode: mode.map_or(default_mode, |m| m as u32 & 0o777),
                    },
                );
            }
        }
    }
    Ok(Some(out))
}

/// The payload now behind `dir/..data`, as [`write`] left it.
fn current(dir: &Path) -> Option<BTreeMap<String, File>> {
    let data = dir.join("..data");
    let target = std::fs::read_link(&data).ok()?;
    let mut out = BTreeMap::new();
    fn walk(root: &Path, rel: &Path, out: &mut BTreeMap<String, File>) -> Option<()> {
        for e in std::fs::read_dir(root.join(rel)).ok()? {
            let e = e.ok()?;
            let rel = rel.join(e.file_name());
            let meta = e.metadata().ok()?;
            if meta.is_dir() {
                walk(root, &rel, out)?;
            } else {
                out.insert(
                    rel.to_string_lossy().into_owned(),
                    File {
                        data: std::fs::read(root.join(&rel)).ok()?,
                        mode: meta.permissions().mode() & 0o777,
                    },
                );
            }
        }
        Some(())
    }
    walk(&dir.join(target), Path::new(""), &mut out)?;
    Some(out)
}

/// Writes `files` into `dir` with the atomic writer layout; nothing is
/// touched when they are already what `..data` holds. Returns whether
/// anything changed.
pub fn write(dir: &Path, files: &BTreeMap<String, File>) -> std::io::Result<bool> {
    std::fs::create_dir_all(dir)?;
    if current(dir).as_ref() == Some(files) {
        return Ok(false);
    }
    let old_target = std::fs::read_link(dir.join("..data")).ok();
    let now = chrono::Utc::now();
    let stamp = format!("..{}", now.format("%Y_%m_%d_%H_%M_%S%.9f"));
    let ts_dir = dir.join(&stamp);
    std::fs::create_dir(&ts_dir)?;
    std::fs::set_permissions(&ts_dir, std::fs::Permissions::from_mode(0o755))?;
    for (rel, f) in files {
        let p = ts_dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, &f.data)?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(f.mode))?;
    }
    // Swap ..data in one rename.
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&stamp, &tmp)?;
    std::fs::rename(&tmp, dir.join("..data"))?;
    // The user-visible names: one symlink per top-level entry.
    let tops: std::collections::BTreeSet<String> = files
        .keys()
        .filter_map(|k| k.split('/').next().map(str::to_string))
        .collect();
    for top in &tops {
        let link = dir.join(top);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(PathBuf::from("..data").join(top), &link)?;
        }
    }
    for e in std::fs::read_dir(dir)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("..") && !tops.contains(&name) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    if let Some(old) = old_target {
        let _ = std::fs::remove_dir_all(dir.join(old));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str, u32)]) -> BTreeMap<String, File> {
        pairs
            .iter()
            .map(|(k, v, m)| {
                (
                    k.to_string(),
                    File {
                        data: v.as_bytes().to_vec(),
                        mode: *m,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn items_modes_and_missing_keys() {
        let mut src = ConfigSources::default();
        src.config_map_files.insert(
            "web".into(),
            Ok(Some(BTreeMap::from([("a".to_string(), b"1".to_vec())]))),
        );
        let vol = |v: serde_json::Value| -> Volume { serde_json::from_value(v).unwrap() };
        let got = payload(
            &vol(serde_json::json!({"name": "v", "configMap": {"name": "web",
                "defaultMode": 0o600, "items": [{"key": "a", "path": "x/y"}]}})),
            &src,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            got["x/y"],
            File {
                data: b"1".to_vec(),
                mode: 0o600
            }
        );
        let missing_key = payload(
            &vol(serde_json::json!({"name": "v", "configMap": {"name": "web",
                "items": [{"key": "b", "path": "b"}]}})),
            &src,
        );
        assert_eq!(
            missing_key.unwrap_err(),
            "configmap references non-existent config key: b"
        );
        let missing = payload(
            &vol(serde_json::json!({"name": "v", "secret": {"secretName": "s"}})),
            &src,
        );
        assert_eq!(missing.unwrap_err(), "secret \"s\" not found");
    }

    #[test]
    fn the_atomic_writer_swaps_data_and_keeps_the_user_visible_links() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vol");
        let first = files(&[("a", "1", 0o644), ("sub/b", "2", 0o400)]);
        assert!(write(&dir, &first).unwrap());
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "1");
        assert_eq!(std::fs::read_to_string(dir.join("sub/b")).unwrap(), "2");
        assert_eq!(
            std::fs::read_link(dir.join("a")).unwrap(),
            PathBuf::from("..data/a")
        );
        let mode = std::fs::metadata(dir.join("sub/b"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o400);
        let before = std::fs::read_link(dir.join("..data")).unwrap();
        assert!(!write(&dir, &first).unwrap(), "unchanged: nothing written");

        let second = files(&[("a", "changed", 0o644), ("c", "3", 0o644)]);
        assert!(write(&dir, &second).unwrap());
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "changed");
        assert!(std::fs::symlink_metadata(dir.join("sub")).is_err(), "gone");
        assert!(!dir.join(&before).exists(), "the old payload is removed");
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with(".."))
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
}
