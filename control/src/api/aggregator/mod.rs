//! The aggregation layer, as kube-aggregator in front of kube-apiserver:
//! `apiregistration.k8s.io/v1` APIServices name group versions; bosun's
//! own are Local ([`autoregister`]), the others are served by an
//! extension API server behind a Service, to which requests for their
//! group version are proxied ([`proxy`]) with the caller's identity in
//! request headers and the aggregator's front-proxy client certificate
//! ([`frontproxy`]). Their discovery documents are fetched and merged into
//! bosun's ([`discovery`]), and their `Available` condition kept
//! ([`available`]).
//!
//! [`Aggregator`] keeps every APIService in memory, reloaded from the
//! store on each change (they are few and change rarely), so routing a
//! request costs a map lookup.

pub mod autoregister;
pub mod available;
pub mod discovery;
pub mod frontproxy;
pub mod proxy;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use serde_json::Value;

use crate::store::{Store, StoreError};

/// The store prefix of APIServices.
pub const PREFIX: &str = "/registry/apiservices.apiregistration.k8s.io/";

/// An APIService served by an extension server, as the proxy needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Remote {
    /// `VERSION.GROUP`.
    pub name: String,
    pub group: String,
    pub version: String,
    pub namespace: String,
    pub service: String,
    pub port: u16,
    /// PEM of the CAs the server's certificate must chain to.
    pub ca_bundle: Vec<u8>,
    pub insecure_skip_tls_verify: bool,
    pub group_priority_minimum: i64,
    pub version_priority: i64,
}

impl Remote {
    /// The APIService `obj` if it names a service, else None (Local).
    pub fn from_object(obj: &Value) -> Option<Remote> {
        let spec = &obj["spec"];
        let service = spec.get("service").filter(|s| s.is_object())?;
        use base64::Engine;
        let ca_bundle = spec["caBundle"]
            .as_str()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .unwrap_or_default();
        Some(Remote {
            name: obj["metadata"]["name"].as_str()?.to_string(),
            group: spec["group"].as_str().unwrap_or_default().to_string(),
            version: spec["version"].as_str().unwrap_or_default().to_string(),
            namespace: service["namespace"].as_str()?.to_string(),
            service: service["name"].as_str()?.to_string(),
            port: service["port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(443),
            ca_bundle,
            insecure_skip_tls_verify: spec["insecureSkipTLSVerify"].as_bool().unwrap_or(false),
            group_priority_minimum: spec["groupPriorityMinimum"].as_i64().unwrap_or(0),
            version_priority: spec["versionPriority"].as_i64().unwrap_or(0),
        })
    }

    /// The name the server's certificate must carry: `SERVICE.NAMESPACE.svc`.
    pub fn server_name(&self) -> String {
        format!("{}.{}.svc", self.service, self.namespace)
    }
}

/// Every APIService, by name, and what was learnt of the remote ones.
pub struct Aggregator {
    store: Arc<dyn Store>,
    services: RwLock<Arc<BTreeMap<String, Value>>>,
    /// The aggregator's client identity (none in unit tests: nothing is
    /// proxied there).
    pub front_proxy: Option<Arc<frontproxy::FrontProxy>>,
    /// Each remote APIService's last fetched `APIResourceList`, by name.
    discovery: RwLock<HashMap<String, Value>>,
}

impl Aggregator {
    /// An aggregator that knows the APIServices stored now;
    /// [`Aggregator::follow`] keeps it current.
    pub async fn new(
        store: Arc<dyn Store>,
        front_proxy: Option<Arc<frontproxy::FrontProxy>>,
    ) -> Arc<Aggregator> {
        let aggregator = Aggregator::empty(store, front_proxy);
        if let Err(e) = aggregator.reload().await {
            tracing::warn!(error = %e, "aggregator: reading APIServices");
        }
        Arc::new(aggregator)
    }

    /// An aggregator that knows no APIService yet.
    pub fn empty(
        store: Arc<dyn Store>,
        front_proxy: Option<Arc<frontproxy::FrontProxy>>,
    ) -> Aggregator {
        Aggregator {
            store,
            services: RwLock::new(Arc::new(BTreeMap::new())),
            front_proxy,
            discovery: RwLock::new(HashMap::new()),
        }
    }

    async fn reload(&self) -> Result<u64, StoreError> {
        let (items, rev) = self.store.list(PREFIX).await?;
        let mut services = BTreeMap::new();
        for kv in items {
            if let Ok(obj) = serde_json::from_slice::<Value>(&kv.value[..]) {
                if let Some(name) = obj["metadata"]["name"].as_str() {
                    services.insert(name.to_string(), obj);
                }
            }
        }
        *self.services.write().expect("apiservices lock") = Arc::new(services);
        Ok(rev)
    }

    /// Every APIService now, by name.
    pub fn services(&self) -> Arc<BTreeMap<String, Value>> {
        self.services.read().expect("apiservices lock").clone()
    }

    /// The remote APIService serving `group`/`version`, if one is registered.
    pub fn remote(&self, group: &str, version: &str) -> Option<Remote> {
        let services = self.services();
        let obj = services.get(&format!("{version}.{group}"))?;
        Remote::from_object(obj)
    }

    /// Every remote APIService.
    pub fn remotes(&self) -> Vec<Remote> {
        self.services()
            .values()
            .filter_map(Remote::from_object)
            .collect()
    }

    /// The `APIResourceList` last fetched from `name`'s server.
    pub fn discovered(&self, name: &str) -> Option<Value> {
        self.discovery
            .read()
            .expect("discovery lock")
            .get(name)
            .cloned()
    }

    /// Keeps (`Some`) or forgets (`None`) what `name`'s server serves.
    pub fn set_discovered(&self, name: &str, list: Option<Value>) {
        let mut cache = self.discovery.write().expect("discovery lock");
        match list {
            Some(l) => cache.insert(name.to_string(), l),
            None => cache.remove(name),
        };
    }

    /// Follows the store's APIServices until it closes: each change
    /// reloads them all.
    pub async fn follow(self: Arc<Self>) {
        let prefixes = [PREFIX.to_string()];
        crate::store::reload_on_change(self.store.as_ref(), &prefixes, "aggregator", || {
            self.reload()
        })
        .await
    }
}
