//! `configMap`, `secret`, `downwardAPI` and `projected` volumes: the
//! files of a ConfigMap's or Secret's keys (all of them, or `items`
//! key→path), of the pod's own fields, of a service account token, or of
//! several of those at once (projected), with `defaultMode` / per-item
//! `mode`. [`crate::volumes::atomic_writer`] writes them.
//!
//! A Secret's or projected volume's directory is a tmpfs mount, so its
//! contents (tokens too) never reach the node's disk; a ConfigMap's or
//! downwardAPI's lives under the pod's volume dir.
//! A `subPath` mount binds the file the symlink points at when the
//! container is made, so it keeps that version (as in Kubernetes).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{KeyToPath, Pod, Volume};

use crate::config::sources::{token_key, ConfigSources};
pub use crate::volumes::atomic_writer::File;
use crate::volumes::atomic_writer::Ownership;
use crate::volumes::downward_api;

/// A mode from the API (`defaultMode`, an item's `mode`), or `default`.
fn mode_of(mode: Option<i32>, default: u32) -> u32 {
    mode.map_or(default, |m| m as u32 & 0o777)
}

/// The files volume `v` of `pod` holds (relative path → file), or the
/// kubelet's error for a missing object or key; `Ok(None)` if `v` is not
/// a configMap, secret, downwardAPI or projected volume. A token is
/// `0600` when its reader is known (`owner`), as the kubelet makes it.
pub fn payload(
    v: &Volume,
    pod: &Pod,
    sources: &ConfigSources,
    owner: Ownership,
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
                    mode: if owner.known() { 0o600 } else { mode },
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

#[cfg(test)]
mod tests {
    use super::*;

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
            Ownership::default(),
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
            Ownership::default(),
        );
        assert_eq!(
            missing_key.unwrap_err(),
            "configmap references non-existent config key: b"
        );
        let missing = payload(
            &vol(serde_json::json!({"name": "v", "secret": {"secretName": "s"}})),
            &Pod::default(),
            &src,
            Ownership::default(),
        );
        assert_eq!(missing.unwrap_err(), "secret \"s\" not found");
    }
}
