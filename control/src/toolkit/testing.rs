//! Unit-test support for controllers: the real API handlers on an
//! in-memory store, reached through an in-process client, and a fake clock.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use kube::api::{Api, PostParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::{FakeClock, Shared};
use crate::api::{ApiOptions, ApiState};
use crate::store::{EmbeddedStore, Store, StoreOptions};

pub const TOKEN: &str = "test-token";

/// An API server in memory.
pub struct TestApi {
    pub client: Client,
    pub store: Arc<dyn Store>,
    pub clock: Arc<FakeClock>,
    shutdown: tokio::sync::watch::Sender<bool>,
    /// How many watch requests the API has been sent.
    watches: Arc<std::sync::atomic::AtomicUsize>,
}

impl TestApi {
    pub async fn start() -> TestApi {
        let store: Arc<dyn Store> =
            Arc::new(EmbeddedStore::in_memory(StoreOptions::default()).expect("in-memory store"));
        crate::server::bootstrap(store.as_ref())
            .await
            .expect("bootstrap");
        let (shutdown, rx) = tokio::sync::watch::channel(false);
        let rbac = crate::auth::rbac::Rbac::new(store.clone())
            .await
            .expect("rbac index");
        let node_graph = crate::auth::NodeGraph::new(store.clone());
        tokio::spawn(node_graph.clone().follow());
        let state = Arc::new(ApiState {
            store: store.clone(),
            token: TOKEN.into(),
            tokens: Arc::new(crate::tokens::TokenIssuer::ephemeral()),
            options: ApiOptions {
                bookmark_interval: Duration::from_secs(5),
                ..Default::default()
            },
            shutdown: rx,
            node_signer: None,
            snapshots: None,
            rbac,
            node_graph,
            aggregator: crate::api::aggregator::Aggregator::new(store.clone(), None).await,
            custom: {
                let custom = crate::api::custom::CustomResources::new(store.clone());
                tokio::spawn(custom.clone().follow());
                custom
            },
            webhooks: crate::api::admission::webhook::Webhooks::new(store.clone())
                .await
                .expect("webhooks"),
            policies: {
                let policies = crate::api::admission::policy::Policies::new(store.clone())
                    .await
                    .expect("policies");
                tokio::spawn(policies.clone().follow());
                policies
            },
            // No configuration: requests are not held to any level.
            flowcontrol: crate::api::flowcontrol::FlowControl::new(store.clone(), 600),
        });
        let watches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = watches.clone();
        let router = crate::api::router(state).layer(tower::util::MapRequestLayer::new(
            move |req: axum::extract::Request| {
                if req.uri().query().is_some_and(|q| q.contains("watch=true")) {
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                req
            },
        ));
        let client = crate::manager::in_process_client(router, TOKEN);
        TestApi {
            client,
            store,
            clock: Arc::new(FakeClock::new(
                Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
            )),
            shutdown,
            watches,
        }
    }

    /// What SIGTERM does to the API: open watches end, new ones are refused.
    pub fn shut_down(&self) {
        let _ = self.shutdown.send(true);
    }

    /// How many watch requests the API has been sent so far.
    pub fn watch_requests(&self) -> usize {
        self.watches.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Binds pod `name` (namespace default) to node `node` through
    /// `pods/binding`, as the scheduler does; a bound pod, once deleted,
    /// stays terminating until its node removes it.
    pub async fn bind(&self, name: &str, node: &str) {
        let binding = serde_json::json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
        self.client
            .request::<Value>(
                http::Request::post(format!("/api/v1/namespaces/default/pods/{name}/binding"))
                    .header("content-type", "application/json")
                    .body(serde_json::to_vec(&binding).unwrap())
                    .unwrap(),
            )
            .await
            .unwrap();
    }

    /// Controllers' shared state on this API with the fake clock.
    pub fn shared(&self) -> Arc<Shared> {
        Shared::new(self.client.clone(), self.clock.clone())
    }

    /// Creates an object from JSON in its namespace (or cluster-wide).
    pub async fn create<K>(&self, value: Value) -> K
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
        K::Scope: ApiScope,
    {
        let obj: K = serde_json::from_value(value).expect("a valid object");
        let api: Api<K> = K::Scope::api(self.client.clone(), obj.meta().namespace.as_deref());
        api.create(&PostParams::default(), &obj)
            .await
            .expect("create")
    }

    /// Marks a pod in `default` Running and Ready since `since`, as its
    /// node would.
    pub async fn make_ready(&self, name: &str, since: chrono::DateTime<Utc>) {
        let since = since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        self.api::<k8s_openapi::api::core::v1::Pod>(Some("default"))
            .patch_status(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(
                    serde_json::json!({"status": {"phase": "Running", "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": since}]}}),
                ),
            )
            .await
            .unwrap();
    }

    pub fn api<K>(&self, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<DynamicType = ()>,
        K::Scope: ApiScope,
    {
        K::Scope::api(self.client.clone(), namespace)
    }
}

/// Picks `Api::namespaced` or `Api::all` by the resource's scope.
pub trait ApiScope {
    fn api<K: Resource<DynamicType = (), Scope = Self>>(client: Client, ns: Option<&str>)
        -> Api<K>;
}

impl ApiScope for k8s_openapi::NamespaceResourceScope {
    fn api<K: Resource<DynamicType = (), Scope = Self>>(
        client: Client,
        ns: Option<&str>,
    ) -> Api<K> {
        Api::namespaced(client, ns.unwrap_or("default"))
    }
}

impl ApiScope for k8s_openapi::ClusterResourceScope {
    fn api<K: Resource<DynamicType = (), Scope = Self>>(client: Client, _: Option<&str>) -> Api<K> {
        Api::all(client)
    }
}

/// Polls `check` until it returns Some, for at most `deadline`.
pub async fn eventually<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let until = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > until {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
