//! The kubeconfigs `bosun up` reads and writes: the control plane's own
//! admin kubeconfig, and the user's, where it upserts the cluster's entry.

use std::path::Path;

use anyhow::{anyhow, Context as _, Result};

use crate::cli::clusters::KubeconfigNames;

/// The server's own admin kubeconfig: `https://ADDR`, its CA and the admin token.
pub(super) struct AdminConfig {
    /// The `cluster` body (server, certificate-authority-data).
    pub cluster: serde_yaml::Value,
    pub server: String,
    pub token: String,
}

pub(super) fn read_admin_config(path: &Path) -> Result<AdminConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let doc: serde_yaml::Value =
        serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let cluster = doc["clusters"][0]["cluster"].clone();
    let server = cluster["server"]
        .as_str()
        .ok_or_else(|| anyhow!("{} names no server", path.display()))?
        .to_string();
    let token = doc["users"][0]["user"]["token"]
        .as_str()
        .ok_or_else(|| anyhow!("{} holds no token", path.display()))?
        .to_string();
    Ok(AdminConfig {
        cluster,
        server,
        token,
    })
}

/// Writes (or updates, keeping other entries) a kubeconfig whose context
/// `names.context` points at `cluster` (server and CA) with `token`, and
/// makes it the current one.
pub fn write_kubeconfig(
    path: &Path,
    names: &KubeconfigNames,
    cluster: &serde_yaml::Value,
    token: &str,
) -> Result<()> {
    use serde_yaml::{Mapping, Value};
    let mut doc: Value = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_yaml::from_str(&t).ok())
        .filter(Value::is_mapping)
        .unwrap_or_else(|| Value::Mapping(Mapping::new()));
    let entry = |name: &str, key: &str, body: Value| {
        let mut m = Mapping::new();
        m.insert("name".into(), name.into());
        m.insert(key.into(), body);
        Value::Mapping(m)
    };
    let mut user = Mapping::new();
    user.insert("token".into(), token.into());
    let mut context = Mapping::new();
    context.insert("cluster".into(), names.cluster.as_str().into());
    context.insert("user".into(), names.user.as_str().into());
    context.insert("namespace".into(), "default".into());
    let upserts = [
        (
            "clusters",
            entry(&names.cluster, "cluster", cluster.clone()),
        ),
        ("users", entry(&names.user, "user", Value::Mapping(user))),
        (
            "contexts",
            entry(&names.context, "context", Value::Mapping(context)),
        ),
    ];
    let map = doc.as_mapping_mut().expect("checked to be a mapping");
    map.insert("apiVersion".into(), "v1".into());
    map.insert("kind".into(), "Config".into());
    for (list, item) in upserts {
        let seq = map
            .entry(list.into())
            .or_insert_with(|| Value::Sequence(Vec::new()));
        if !seq.is_sequence() {
            *seq = Value::Sequence(Vec::new());
        }
        let seq = seq.as_sequence_mut().expect("just made a sequence");
        seq.retain(|e| e.get("name") != item.get("name"));
        seq.push(item);
    }
    map.insert("current-context".into(), names.context.as_str().into());
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let text = serde_yaml::to_string(&doc)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}
