//! `configMap`, `secret`, `downwardAPI` and `projected` volumes: the
//! files of a ConfigMap's or Secret's keys (all of them, or `items`
//! key→path), of the pod's own fields, of a service account token, or of
//! several of those at once (projected), with `defaultMode` / per-item
//! `mode`, written with the kubelet's atomic writer layout so a running
//! container sees an edit (or a refreshed token) as one change:
//!
//! ```text
//! <dir>/..2026_12_03_19_40_00.123456789/<files>   the current payload
//! <dir>/..data -> ..2026_12_03_19_40_00.123456789  swapped by rename(2)
//! <dir>/<key> -> ..data/<key>                     what the user sees
//! ```
//!
//! A Secret's or projected volume's directory is a tmpfs mount, so its
//! contents (tokens too) never reach the node's disk; a ConfigMap's or
//! downwardAPI's lives under the pod's volume dir.
//! A `subPath` mount binds the file the symlink points at when the
//! container is made, so it keeps that version (as in Kubernetes).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{KeyToPath, Pod, Volume};

use crate::config_sources::{token_key, ConfigSources};
use crate::downward_api;

/// One file of a volume's payload: its bytes and mode.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub data: Vec<u8>,
    pub mode: u32,
}

/// A mode from the API (`defaultMode`, an item's `mode`), or `default`.
fn mode_of(mode: Option<i32>, default: u32) -> u32 {
    mode.map_or(default, |m| m as u32 & 0o777)
}

/// The files volume `v` of `pod` holds (relative path → file), or the
/// kubelet's error for a missing object or key; `Ok(None)` if `v` is not
/// a configMap, secret, downwardAPI or projected volume.
pub fn payload(
    v: &Volume,
    pod: &Pod,
    sources: &ConfigSources,
) -> Result<Option<BTreeMap<String, File>>, String> {
    if let Some(cm) = &v.config_map {
        let mode = mode_of(cm.default_mode, 0o644);
        let o = Object::config_map(&cm.name, cm.items.as_deref(), cm.optional);
        return object_files(o, mode, sources).map(Some);
    }
    if let Some(s) = &v.secret {
        let mode = mode_of(s.default_mode, 0o644);
        let name = s.secret_name.clone().unwrap_or_default();
        let o = Object::secret(&name, s.items.as_deref(), s.optional);
        return object_files(o, mode, sources).map(Some);
    }
    if let Some(d) = &v.downward_api {
        let mode = mode_of(d.default_mode, 0o644);
        let items = d.items.as_deref().unwrap_or_default();
        return downward_files(pod, items, mode).map(Some);
    }
    let Some(p) = &v.projected else {
        return Ok(None);
    };
    let mode = mode_of(p.default_mode, 0o644);
    let mut out = BTreeMap::new();
    for (i, src) in p.sources.iter().flatten().enumerate() {
        if let Some(cm) = &src.config_map {
            let o = Object::config_map(&cm.name, cm.items.as_deref(), cm.optional);
            out.extend(object_files(o, mode, sources)?);
        }
        if let Some(s) = &src.secret {
            let o = Object::secret(&s.name, s.items.as_deref(), s.optional);
            out.extend(object_files(o, mode, sources)?);
        }
        if let Some(d) = &src.downward_api {
            let items = d.items.as_deref().unwrap_or_default();
            out.extend(downward_files(pod, items, mode)?);
        }
        if let Some(t) = &src.service_account_token {
            let token = match sources.tokens.get(&token_key(&v.name, i)) {
                Some(Ok(t)) => t.token.clone(),
                Some(Err(e)) => return Err(e.clone()),
                None => return Err("failed to fetch token: not requested yet".into()),
            };
            out.insert(
                t.path.clone(),
                File {
                    data: token.into_bytes(),
                    mode,
                },
            );
        }
    }
    Ok(Some(out))
}

/// The downward API's files of `pod`.
fn downward_files(
    pod: &Pod,
    items: &[k8s_openapi::api::core::v1::DownwardAPIVolumeFile],
    mode: u32,
) -> Result<BTreeMap<String, File>, String> {
    Ok(downward_api::files(pod, items, mode)?
        .into_iter()
        .map(|(path, (data, mode))| (path, File { data, mode }))
        .collect())
}

/// A ConfigMap or Secret a volume (or a projected source) shows.
struct Object<'a> {
    secret: bool,
    name: &'a str,
    items: Option<&'a [KeyToPath]>,
    optional: bool,
}

impl<'a> Object<'a> {
    fn config_map(name: &'a str, items: Option<&'a [KeyToPath]>, optional: Option<bool>) -> Self {
        Object {
            secret: false,
            name,
            items,
            optional: optional == Some(true),
        }
    }

    fn secret(name: &'a str, items: Option<&'a [KeyToPath]>, optional: Option<bool>) -> Self {
        Object {
            secret: true,
            name,
            items,
            optional: optional == Some(true),
        }
    }
}

/// The files of one ConfigMap or Secret: every key, or the `items`.
fn object_files(
    o: Object,
    default_mode: u32,
    sources: &ConfigSources,
) -> Result<BTreeMap<String, File>, String> {
    let kind = if o.secret { "secret" } else { "configmap" };
    let files = match sources.files(o.secret, o.name) {
        Some(Ok(Some(files))) => files,
        Some(Err(e)) => return Err(e.clone()),
        _ if o.optional => return Ok(BTreeMap::new()),
        _ => return Err(format!("{kind} \"{}\" not found", o.name)),
    };
    let mut out = BTreeMap::new();
    match o.items.filter(|i| !i.is_empty()) {
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
                let Some(data) = files.get(key) else {
                    if o.optional {
                        continue;
                    }
                    return Err(if o.secret {
                        format!("references non-existent secret key: {key}")
                    } else {
                        format!("configmap references non-existent config key: {key}")
                    });
                };
                out.insert(
                    path.clone(),
                    File {
                        data: data.clone(),
                        mode: mode_of(*mode, default_mode),
                    },
                );
            }
        }
    }
    Ok(out)
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
            &Pod::default(),
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
            &Pod::default(),
            &src,
        );
        assert_eq!(
            missing_key.unwrap_err(),
            "configmap references non-existent config key: b"
        );
        let missing = payload(
            &vol(serde_json::json!({"name": "v", "secret": {"secretName": "s"}})),
            &Pod::default(),
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
