//! Bootstrap tokens on the control plane, as kube-apiserver's bootstrap
//! token authenticator and kube-controller-manager's token cleaner do: a
//! token is good while its `bootstrap-token-<id>` Secret in kube-system
//! exists, holds the same secret, allows authentication and has not
//! expired; expired Secrets are deleted. And kubeadm's cluster-info
//! ConfigMap, which a joining host reads before it trusts the CA.

use std::time::Duration;

use anyhow::Context;
use base64::Engine;
use bosun::bootstrap::{self as bt, BootstrapToken};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::store::{Store, StoreError};

fn secret_key(id: &str) -> String {
    bosun::resources::by_kind("v1", "Secret")
        .expect("served")
        .storage_key(Some(bt::NAMESPACE), &bt::secret_name(id))
}

/// The token's id if `token` authenticates at `now`; why not otherwise
/// (for the log; the client only sees 401). An expired token's Secret
/// is deleted on the spot.
pub async fn authenticate(
    store: &dyn Store,
    token: &BootstrapToken,
    now: DateTime<Utc>,
) -> Result<String, String> {
    let key = secret_key(&token.id);
    let kv = store
        .get(&key)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no bootstrap token with id {:?}", token.id))?;
    let secret: Value = serde_json::from_slice(&kv.value).map_err(|e| e.to_string())?;
    if secret["type"] != bt::SECRET_TYPE {
        return Err(format!("{key} is not of type {}", bt::SECRET_TYPE));
    }
    if secret["metadata"]["deletionTimestamp"].is_string() {
        return Err(format!("bootstrap token {:?} is being deleted", token.id));
    }
    let stored = bt::secret_field(&secret, "token-secret").unwrap_or_default();
    // Compared whole so the time taken reveals no prefix.
    let same = stored.len() == token.secret.len()
        && stored
            .bytes()
            .zip(token.secret.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if !same {
        return Err(format!("bootstrap token {:?}: wrong secret", token.id));
    }
    if bt::secret_field(&secret, "usage-bootstrap-authentication").as_deref() != Some("true") {
        return Err(format!(
            "bootstrap token {:?} is not usable for authentication",
            token.id
        ));
    }
    if bt::is_expired(&secret, now) {
        let _ = store.delete(&key, kv.mod_revision).await;
        return Err(format!("bootstrap token {:?} has expired", token.id));
    }
    Ok(token.id.clone())
}

/// Deletes every expired bootstrap token Secret; returns their ids.
pub async fn clean_expired(store: &dyn Store, now: DateTime<Utc>) -> Vec<String> {
    let prefix = bosun::resources::by_kind("v1", "Secret")
        .expect("served")
        .storage_key(Some(bt::NAMESPACE), bt::SECRET_PREFIX);
    let Ok((kvs, _)) = store.list(&prefix).await else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for kv in kvs {
        let Ok(secret) = serde_json::from_slice::<Value>(&kv.value) else {
            continue;
        };
        if secret["type"] == bt::SECRET_TYPE && bt::is_expired(&secret, now) {
            match store.delete(&kv.key, kv.mod_revision).await {
                Ok(_) | Err(StoreError::NotFound(_)) => {
                    removed.push(bt::secret_field(&secret, "token-id").unwrap_or_default())
                }
                Err(e) => {
                    tracing::warn!(key = %kv.key, error = %e, "deleting an expired bootstrap token")
                }
            }
        }
    }
    removed
}

/// Runs [`clean_expired`] every `period`, for ever.
pub async fn run_cleaner(store: std::sync::Arc<dyn Store>, period: Duration) {
    loop {
        for id in clean_expired(store.as_ref(), Utc::now()).await {
            tracing::info!(%id, "deleted an expired bootstrap token");
        }
        tokio::time::sleep(period).await;
    }
}

/// Writes kube-public's cluster-info ConfigMap: a kubeconfig with the
/// server's address and the CA, which anyone may read (the joining host
/// checks the CA against the hash it was given before trusting it).
pub async fn publish_cluster_info(
    store: &dyn Store,
    server: &str,
    ca_pem: &str,
    service_range: &str,
    cluster_cidr: &str,
) -> anyhow::Result<()> {
    let kubeconfig = serde_yaml::to_string(&json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "", "cluster": {
            "server": server,
            "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(ca_pem),
        }}],
        "users": [],
        "contexts": [],
    }))?;
    let res = bosun::resources::by_kind("v1", "ConfigMap").expect("served");
    let key = res.storage_key(Some(bt::CLUSTER_INFO_NAMESPACE), bt::CLUSTER_INFO);
    // Several control planes starting together (`bosun up --ha`) write it
    // at once: one that loses the compare-and-swap reads it again.
    let mut attempts = 0;
    loop {
        attempts += 1;
        match write_cluster_info(store, &key, &kubeconfig, service_range, cluster_cidr).await {
            Err(e @ (StoreError::Conflict { .. } | StoreError::AlreadyExists(_)))
                if attempts < 10 =>
            {
                tracing::debug!(error = %e, "cluster-info changed meanwhile; writing it again");
            }
            result => return result.context("writing cluster-info"),
        }
    }
}

/// One read and compare-and-swap write of cluster-info.
async fn write_cluster_info(
    store: &dyn Store,
    key: &str,
    kubeconfig: &str,
    service_range: &str,
    cluster_cidr: &str,
) -> Result<(), StoreError> {
    let existing = store.get(key).await?;
    let mut obj = existing
        .as_ref()
        .and_then(|kv| serde_json::from_slice::<Value>(&kv.value).ok())
        .unwrap_or_else(|| {
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": bt::CLUSTER_INFO,
                    "namespace": bt::CLUSTER_INFO_NAMESPACE,
                    "uid": uuid::Uuid::new_v4().to_string(),
                    "creationTimestamp": bt::rfc3339(Utc::now()),
                },
            })
        });
    // Beside kubeadm's kubeconfig, the service range and the pod network:
    // a joining agent's service proxy and routes need them, and
    // cluster-info is what it reads before it has a credential.
    let data = json!({
        "kubeconfig": kubeconfig,
        bt::CLUSTER_INFO_SERVICE_RANGE: service_range,
        bt::CLUSTER_INFO_CLUSTER_CIDR: cluster_cidr,
    });
    if obj["data"] == data {
        return Ok(());
    }
    obj["data"] = data;
    if let Some(m) = obj["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    let value = serde_json::to_vec(&obj).map_err(|e| StoreError::Backend(e.to_string()))?;
    match existing {
        Some(kv) => store.update(key, kv.mod_revision, value).await,
        None => store.create(key, value).await,
    }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EmbeddedStore, StoreOptions};

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    async fn store_with(token: &BootstrapToken, expires: Option<DateTime<Utc>>) -> EmbeddedStore {
        let store = EmbeddedStore::in_memory(StoreOptions::default()).unwrap();
        let secret = token.secret(None, expires);
        store
            .create(&secret_key(&token.id), serde_json::to_vec(&secret).unwrap())
            .await
            .unwrap();
        store
    }

    /// A store on which another control plane writes cluster-info just
    /// before this one's first update of it.
    struct Interloper {
        inner: EmbeddedStore,
        interfered: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl Store for Interloper {
        async fn get(&self, key: &str) -> crate::store::Result<Option<crate::store::KeyValue>> {
            self.inner.get(key).await
        }
        async fn list(
            &self,
            prefix: &str,
        ) -> crate::store::Result<(Vec<crate::store::KeyValue>, crate::store::Revision)> {
            self.inner.list(prefix).await
        }
        async fn create(&self, key: &str, value: Vec<u8>) -> crate::store::Result<u64> {
            self.inner.create(key, value).await
        }
        async fn update(
            &self,
            key: &str,
            expected: u64,
            value: Vec<u8>,
        ) -> crate::store::Result<u64> {
            if !self
                .interfered
                .swap(true, std::sync::atomic::Ordering::SeqCst)
            {
                let other = self.inner.get(key).await?.expect("cluster-info exists");
                let mut theirs: Value = serde_json::from_slice(&other.value).unwrap();
                theirs["data"]["kubeconfig"] = json!("another server's");
                let theirs = serde_json::to_vec(&theirs).unwrap();
                self.inner.update(key, other.mod_revision, theirs).await?;
            }
            self.inner.update(key, expected, value).await
        }
        async fn delete(&self, key: &str, expected: u64) -> crate::store::Result<u64> {
            self.inner.delete(key, expected).await
        }
        async fn watch(
            &self,
            prefix: &str,
            after: u64,
        ) -> crate::store::Result<crate::store::EventStream> {
            self.inner.watch(prefix, after).await
        }
        fn current_revision(&self) -> u64 {
            self.inner.current_revision()
        }
    }

    #[tokio::test]
    async fn cluster_info_written_by_another_server_meanwhile_is_read_again_and_written() {
        let store = Interloper {
            inner: EmbeddedStore::in_memory(StoreOptions::default()).unwrap(),
            interfered: Default::default(),
        };
        let publish = |server: &'static str| {
            publish_cluster_info(&store, server, "CA", "10.96.0.0/12", "10.244.0.0/16")
        };
        publish("https://10.0.0.1:6443").await.unwrap();
        // The second server's write loses its compare-and-swap once.
        publish("https://10.0.0.2:6443").await.unwrap();
        let res = bosun::resources::by_kind("v1", "ConfigMap").unwrap();
        let key = res.storage_key(Some(bt::CLUSTER_INFO_NAMESPACE), bt::CLUSTER_INFO);
        let kv = store.get(&key).await.unwrap().unwrap();
        let obj: Value = serde_json::from_slice(&kv.value).unwrap();
        assert!(store.interfered.load(std::sync::atomic::Ordering::SeqCst));
        assert!(
            obj["data"]["kubeconfig"]
                .as_str()
                .unwrap()
                .contains("https://10.0.0.2:6443"),
            "{obj}"
        );
    }

    #[tokio::test]
    async fn good_tokens_authenticate_until_they_expire_then_are_deleted() {
        let t = BootstrapToken::generate();
        let store = store_with(&t, Some(at("2026-01-02T00:00:00Z"))).await;
        assert_eq!(
            authenticate(&store, &t, at("2026-01-01T00:00:00Z")).await,
            Ok(t.id.clone())
        );
        let wrong = BootstrapToken {
            id: t.id.clone(),
            secret: "0000000000000000".into(),
        };
        assert!(authenticate(&store, &wrong, at("2026-01-01T00:00:00Z"))
            .await
            .unwrap_err()
            .contains("wrong secret"));
        let unknown = BootstrapToken::generate();
        assert!(authenticate(&store, &unknown, at("2026-01-01T00:00:00Z"))
            .await
            .is_err());
        let err = authenticate(&store, &t, at("2026-01-02T00:00:00Z"))
            .await
            .unwrap_err();
        assert!(err.contains("expired"), "{err}");
        assert!(store.get(&secret_key(&t.id)).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn the_cleaner_deletes_only_expired_tokens() {
        let old = BootstrapToken::generate();
        let store = store_with(&old, Some(at("2026-01-01T00:00:00Z"))).await;
        let forever = BootstrapToken::generate();
        store
            .create(
                &secret_key(&forever.id),
                serde_json::to_vec(&forever.secret(None, None)).unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(
            clean_expired(&store, at("2026-06-01T00:00:00Z")).await,
            vec![old.id.clone()]
        );
        assert!(store.get(&secret_key(&forever.id)).await.unwrap().is_some());
    }
}
