//! The ConfigMaps and Secrets a pod's containers read their environment
//! from (`env[].valueFrom.configMapKeyRef|secretKeyRef`, `envFrom`) and
//! its volumes show, and the environment made from them as the kubelet's
//! `makeEnvironmentVariables` makes it.
//!
//! [`ConfigManagers::resolve`] reads every referenced object from the
//! node's watches ([`super::watch_manager`]) before each sync of the pod;
//! a container whose object or key is missing (and not `optional`) waits
//! with CreateContainerConfigError and the kubelet's message
//! (`configmap "x" not found`), and starts once it appears: the object's
//! watch wakes the pod's worker.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Container, Pod, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::Client;
use tokio::sync::Notify;

use super::watch_manager::{ConfigMapManager, SecretManager};

use bosun::names::is_env_var_name;

/// An object's data by key, or why it could not be read (the kubelet's
/// words: `configmap "x" not found`); `None` when it does not exist.
type Lookup = BTreeMap<String, Result<Option<BTreeMap<String, String>>, String>>;

/// An object's keys as file contents (a ConfigMap's `data` and
/// `binaryData`, a Secret's decoded `data`), by name.
pub type FilesLookup = BTreeMap<String, Result<Option<BTreeMap<String, Vec<u8>>>, String>>;

/// The referenced ConfigMaps' `data` and Secrets' decoded `data`, by name.
#[derive(Debug, Default, Clone)]
pub struct ConfigSources {
    pub config_maps: Lookup,
    pub secrets: Lookup,
    pub config_map_files: FilesLookup,
    pub secret_files: FilesLookup,
    /// Tokens of projected `serviceAccountToken` sources, by
    /// [`token_key`], or why none could be had.
    pub tokens: BTreeMap<String, Result<Token, String>>,
}

/// A service account token the API issued for the pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub token: String,
    /// When it was issued and when it expires (Unix seconds).
    pub issued: i64,
    pub expires: i64,
}

impl ConfigSources {
    /// How long until one of the tokens must be asked for again (a
    /// failed one: in two seconds), if the pod has any.
    pub fn refresh_after(&self, now: i64) -> Option<std::time::Duration> {
        self.tokens
            .values()
            .map(|t| match t {
                Ok(t) => {
                    let at = (t.issued + (t.expires - t.issued) * 8 / 10).min(t.issued + 24 * 3600);
                    std::time::Duration::from_secs((at - now).max(1) as u64)
                }
                Err(_) => std::time::Duration::from_secs(2),
            })
            .min()
    }
}

impl Token {
    /// Whether the kubelet would ask for a new one: past 80% of its
    /// lifetime, or older than a day.
    pub fn needs_refresh(&self, now: i64) -> bool {
        let lifetime = self.expires - self.issued;
        now >= self.issued + lifetime * 8 / 10 || now >= self.issued + 24 * 3600
    }
}

/// The key of a projected token: the volume and the source's index.
pub fn token_key(volume: &str, source: usize) -> String {
    format!("{volume}/{source}")
}

/// The names of the ConfigMaps and Secrets container `c` reads its
/// environment from.
fn env_refs(c: &Container) -> (Vec<String>, Vec<String>) {
    let (mut cms, mut secrets) = (Vec::new(), Vec::new());
    for e in c.env.iter().flatten() {
        if let Some(from) = &e.value_from {
            if let Some(r) = &from.config_map_key_ref {
                cms.push(r.name.clone());
            }
            if let Some(r) = &from.secret_key_ref {
                secrets.push(r.name.clone());
            }
        }
    }
    for f in c.env_from.iter().flatten() {
        if let Some(r) = &f.config_map_ref {
            cms.push(r.name.clone());
        }
        if let Some(r) = &f.secret_ref {
            secrets.push(r.name.clone());
        }
    }
    (cms, secrets)
}

/// The ConfigMaps and Secrets the pod's containers and volumes read.
fn pod_refs(pod: &Pod) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut cms, mut secrets) = (BTreeSet::new(), BTreeSet::new());
    for c in containers(pod) {
        let (a, b) = env_refs(c);
        cms.extend(a);
        secrets.extend(b);
    }
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        if let Some(cm) = &v.config_map {
            cms.insert(cm.name.clone());
        }
        if let Some(name) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            secrets.insert(name);
        }
        for src in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(cm) = &src.config_map {
                cms.insert(cm.name.clone());
            }
            if let Some(s) = &src.secret {
                secrets.insert(s.name.clone());
            }
        }
    }
    (cms, secrets)
}

/// The projected `serviceAccountToken` sources of the pod's volumes: key,
/// audience and lifetime.
fn token_sources(pod: &Pod) -> Vec<(String, Option<String>, i64)> {
    let mut out = Vec::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        for (i, src) in v
            .projected
            .iter()
            .flat_map(|p| p.sources.iter().flatten())
            .enumerate()
        {
            if let Some(t) = &src.service_account_token {
                out.push((
                    token_key(&v.name, i),
                    t.audience.clone().filter(|a| !a.is_empty()),
                    t.expiration_seconds.unwrap_or(3600),
                ));
            }
        }
    }
    out
}

/// Whether the pod reads any ConfigMap or Secret, or has a projected
/// service account token.
pub fn references_any(pod: &Pod) -> bool {
    let (a, b) = pod_refs(pod);
    !a.is_empty() || !b.is_empty() || !token_sources(pod).is_empty()
}

/// Whether the pod has a configMap or secret volume (kept up to date
/// with its object while the pod runs).
pub fn has_config_volumes(pod: &Pod) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|v| v.config_map.is_some() || v.secret.is_some() || v.projected.is_some())
}

fn containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    let spec = pod.spec.as_ref();
    spec.into_iter().flat_map(|s| {
        s.init_containers
            .iter()
            .flatten()
            .chain(s.containers.iter())
    })
}

/// The node's ConfigMap and Secret managers (one watch per object the
/// node's pods reference), and the client that asks for tokens.
#[derive(Clone)]
pub struct ConfigManagers {
    client: Client,
    pub config_maps: ConfigMapManager,
    pub secrets: SecretManager,
}

impl ConfigManagers {
    pub fn new(client: Client) -> Self {
        ConfigManagers {
            config_maps: ConfigMapManager::new(client.clone()),
            secrets: SecretManager::new(client.clone()),
            client,
        }
    }

    /// Registers what `pod` references with the managers (`wake` is
    /// notified when one of those objects changes).
    pub fn register_pod(&self, pod: &Pod, wake: &Arc<Notify>) {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let (cms, secrets) = pod_refs(pod);
        self.config_maps.register_pod(uid, ns, cms, wake);
        self.secrets.register_pod(uid, ns, secrets, wake);
    }

    /// Pod `uid` is gone.
    pub fn release_pod(&self, uid: &str) {
        self.config_maps.release_pod(uid);
        self.secrets.release_pod(uid);
    }

    /// Every ConfigMap and Secret the pod refers to, as watched, and the
    /// tokens of its projected service account sources (keeping those in
    /// `previous` that are still fresh).
    pub async fn resolve(&self, pod: &Pod, previous: &ConfigSources) -> ConfigSources {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let mut out = ConfigSources::default();
        let now = chrono::Utc::now().timestamp();
        for (key, audience, seconds) in token_sources(pod) {
            let token = match previous.tokens.get(&key) {
                Some(Ok(t)) if !t.needs_refresh(now) => Ok(t.clone()),
                _ => request_token(&self.client, pod, audience, seconds, now).await,
            };
            out.tokens.insert(key, token);
        }
        let (cms, secrets) = pod_refs(pod);
        for name in cms {
            let got = self.config_maps.get(ns, &name).await;
            let env = got
                .as_ref()
                .map(|cm| cm.as_ref().map(|cm| cm.data.clone().unwrap_or_default()))
                .map_err(Clone::clone);
            let files = got.map(|cm| {
                cm.map(|cm| {
                    let mut f: BTreeMap<String, Vec<u8>> = cm
                        .data
                        .iter()
                        .flatten()
                        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
                        .collect();
                    f.extend(
                        cm.binary_data
                            .iter()
                            .flatten()
                            .map(|(k, v)| (k.clone(), v.0.clone())),
                    );
                    f
                })
            });
            out.config_maps.insert(name.clone(), env);
            out.config_map_files.insert(name, files);
        }
        for name in secrets {
            let got = self.secrets.get(ns, &name).await.map(|s| {
                s.map(|s| {
                    s.data
                        .iter()
                        .flatten()
                        .map(|(k, v)| (k.clone(), v.0.clone()))
                        .collect::<BTreeMap<String, Vec<u8>>>()
                })
            });
            let env = got.as_ref().map_err(Clone::clone).map(|s| {
                s.as_ref().map(|s| {
                    s.iter()
                        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
                        .collect()
                })
            });
            out.secrets.insert(name.clone(), env);
            out.secret_files.insert(name, got);
        }
        out
    }
}

/// Asks the API for a token of the pod's service account, bound to the
/// pod (the kubelet's TokenRequest).
async fn request_token(
    client: &Client,
    pod: &Pod,
    audience: Option<String>,
    seconds: i64,
    now: i64,
) -> Result<Token, String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let account = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into());
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(audience.into_iter().collect()),
            expiration_seconds: Some(seconds),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let got = api
        .create_token_request(&account, &PostParams::default(), &request)
        .await
        .map_err(|e| format!("failed to fetch token: {e}"))?;
    let status = got.status.ok_or("failed to fetch token: no status")?;
    Ok(Token {
        token: status
            .token
            .ok_or("failed to fetch token: none in the answer")?,
        issued: now,
        expires: status
            .expiration_timestamp
            .map_or(now + seconds, |t| t.0.as_second()),
    })
}

/// What `envFrom` and the key references of `env` give container `c`.
pub struct ResolvedEnv {
    /// `envFrom`'s variables, in order (later sources win).
    pub from: Vec<(String, String)>,
    /// The value of each `env` entry with a key reference (an optional
    /// missing one has none, and the variable is left out).
    pub keys: BTreeMap<String, Option<String>>,
    /// The kubelet's InvalidEnvironmentVariableNames messages.
    pub skipped: Vec<String>,
}

impl ConfigSources {
    /// The files of a ConfigMap (or Secret, with `secret`), if it was read.
    #[allow(clippy::type_complexity)]
    pub fn files(
        &self,
        secret: bool,
        name: &str,
    ) -> Option<&Result<Option<BTreeMap<String, Vec<u8>>>, String>> {
        if secret {
            self.secret_files.get(name)
        } else {
            self.config_map_files.get(name)
        }
    }

    fn data<'a>(
        &'a self,
        secret: bool,
        ns: &str,
        name: &str,
        optional: bool,
    ) -> Result<Option<&'a BTreeMap<String, String>>, String> {
        let (lookup, kind) = if secret {
            (&self.secrets, "secret")
        } else {
            (&self.config_maps, "configmap")
        };
        match lookup.get(name) {
            Some(Ok(Some(d))) => Ok(Some(d)),
            Some(Err(e)) => Err(e.clone()),
            _ if optional => Ok(None),
            // Not read (a pod synced before resolve) or not found.
            _ => {
                let _ = ns;
                Err(format!("{kind} \"{name}\" not found"))
            }
        }
    }

    /// The environment `c` takes from ConfigMaps and Secrets, or the
    /// kubelet's error for a missing object or key.
    pub fn env_for(&self, ns: &str, c: &Container) -> Result<ResolvedEnv, String> {
        let mut out = ResolvedEnv {
            from: Vec::new(),
            keys: BTreeMap::new(),
            skipped: Vec::new(),
        };
        for f in c.env_from.iter().flatten() {
            let prefix = f.prefix.clone().unwrap_or_default();
            let (secret, name, optional) = match (&f.config_map_ref, &f.secret_ref) {
                (Some(r), _) => (false, r.name.clone(), r.optional == Some(true)),
                (None, Some(r)) => (true, r.name.clone(), r.optional == Some(true)),
                (None, None) => continue,
            };
            let Some(data) = self.data(secret, ns, &name, optional)? else {
                continue;
            };
            let mut invalid = Vec::new();
            for (k, v) in data {
                let k = format!("{prefix}{k}");
                if !is_env_var_name(&k).is_empty() {
                    invalid.push(k);
                    continue;
                }
                out.from.retain(|(n, _)| *n != k);
                out.from.push((k, v.clone()));
            }
            if !invalid.is_empty() {
                invalid.sort();
                out.skipped.push(format!(
                    "Keys [{}] from the EnvFrom {} {ns}/{name} were skipped since they are considered invalid environment variable names.",
                    invalid.join(", "),
                    if secret { "secret" } else { "configMap" },
                ));
            }
        }
        for e in c.env.iter().flatten() {
            let Some(from) = &e.value_from else { continue };
            let (secret, name, key, optional) =
                match (&from.config_map_key_ref, &from.secret_key_ref) {
                    (Some(r), _) => (false, &r.name, &r.key, r.optional == Some(true)),
                    (None, Some(r)) => (true, &r.name, &r.key, r.optional == Some(true)),
                    (None, None) => continue,
                };
            let value = match self.data(secret, ns, name, optional)? {
                None => None,
                Some(data) => match data.get(key) {
                    Some(v) => Some(v.clone()),
                    None if optional => None,
                    None => {
                        return Err(format!(
                            "couldn't find key {key} in {} {ns}/{name}",
                            if secret { "Secret" } else { "ConfigMap" }
                        ))
                    }
                },
            };
            out.keys.insert(e.name.clone(), value);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn container(v: serde_json::Value) -> Container {
        serde_json::from_value(v).unwrap()
    }

    fn sources() -> ConfigSources {
        let mut s = ConfigSources::default();
        s.config_maps.insert(
            "app".into(),
            Ok(Some(BTreeMap::from([
                ("MODE".to_string(), "fast".to_string()),
                ("bad-name!".to_string(), "x".to_string()),
                ("1st".to_string(), "x".to_string()),
            ]))),
        );
        s.config_maps.insert("gone".into(), Ok(None));
        s.secrets.insert(
            "db".into(),
            Ok(Some(BTreeMap::from([(
                "password".to_string(),
                "s3cret".to_string(),
            )]))),
        );
        s
    }

    #[test]
    fn env_from_and_key_references() {
        let c = container(json!({"name": "app", "envFrom": [
            {"configMapRef": {"name": "app"}},
            {"prefix": "DB_", "secretRef": {"name": "db"}},
            {"configMapRef": {"name": "gone", "optional": true}},
        ], "env": [
            {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
            {"name": "OPT", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "nope", "optional": true}}},
        ]}));
        let env = sources().env_for("shop", &c).unwrap();
        assert_eq!(
            env.from,
            vec![
                ("MODE".to_string(), "fast".to_string()),
                ("DB_password".to_string(), "s3cret".to_string()),
            ]
        );
        assert_eq!(env.keys["PW"].as_deref(), Some("s3cret"));
        assert_eq!(env.keys["OPT"], None);
        assert_eq!(
            env.skipped,
            vec!["Keys [1st, bad-name!] from the EnvFrom configMap shop/app were skipped since they are considered invalid environment variable names."]
        );
    }

    #[test]
    fn missing_objects_and_keys_are_the_kubelets_errors() {
        let missing =
            container(json!({"name": "a", "envFrom": [{"configMapRef": {"name": "gone"}}]}));
        assert_eq!(
            sources().env_for("shop", &missing).err().unwrap(),
            "configmap \"gone\" not found"
        );
        let secret = container(json!({"name": "a", "env": [{"name": "X",
            "valueFrom": {"secretKeyRef": {"name": "other", "key": "k"}}}]}));
        assert_eq!(
            sources().env_for("shop", &secret).err().unwrap(),
            "secret \"other\" not found"
        );
        let key = container(json!({"name": "a", "env": [{"name": "X",
            "valueFrom": {"configMapKeyRef": {"name": "app", "key": "k"}}}]}));
        assert_eq!(
            sources().env_for("shop", &key).err().unwrap(),
            "couldn't find key k in ConfigMap shop/app"
        );
    }
}
