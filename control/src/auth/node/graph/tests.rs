//! Tests of the node graph: the graph alone, the graph following a store,
//! and a node's reads through the real API handlers.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::json;

use super::*;
use crate::store::{EmbeddedStore, EventStream, KeyValue, StoreOptions};

fn pod(name: &str, node: Option<&str>) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "serviceAccountName": "web",
            "imagePullSecrets": [{"name": "pull"}],
            "volumes": [
                {"name": "s", "secret": {"secretName": "mounted"}},
                {"name": "p", "projected": {"sources": [
                    {"configMap": {"name": "projected-cm"}},
                    {"secret": {"name": "projected-secret"}},
                ]}},
                {"name": "c", "configMap": {"name": "vol-cm"}},
                {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
            ],
            "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "init-secret"}}]}],
            "containers": [{
                "name": "c",
                "env": [
                    {"name": "X", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}},
                    {"name": "Y", "valueFrom": {"configMapKeyRef": {"name": "env-key-cm", "key": "k"}}},
                ],
                "envFrom": [{"configMapRef": {"name": "env-cm"}}],
            }],
        },
    })
}

const KEY: &str = "/registry/pods/default/web-1";

/// Every object the fixture pod references.
const REFERENCED: &[(&str, &str)] = &[
    ("secrets", "mounted"),
    ("secrets", "projected-secret"),
    ("secrets", "env-secret"),
    ("secrets", "init-secret"),
    ("secrets", "pull"),
    ("configmaps", "projected-cm"),
    ("configmaps", "vol-cm"),
    ("configmaps", "env-key-cm"),
    ("configmaps", "env-cm"),
    ("persistentvolumeclaims", "data"),
    ("serviceaccounts", "web"),
];

fn set(g: &mut Graph, key: &str, pod: &Value) {
    g.apply(EventType::Modified, key, &serde_json::to_vec(pod).unwrap());
}

#[test]
fn a_bound_pod_leads_what_it_references_to_its_node_only() {
    let mut g = Graph::default();
    set(&mut g, KEY, &pod("web-1", Some("a")));
    for (r, n) in REFERENCED {
        assert!(g.has_path(r, "default", n, "a"), "{r}/{n}");
        assert!(!g.has_path(r, "default", n, "b"), "{r}/{n} on b");
        assert!(!g.has_path(r, "prod", n, "a"), "{r}/{n} in prod");
    }
    assert!(!g.has_path("secrets", "default", "db-password", "a"));
    // The kinds are distinct vertices: a ConfigMap named as a Secret is not.
    assert!(!g.has_path("configmaps", "default", "mounted", "a"));
    assert!(g.has_path("pods", "default", "web-1", "a"));
    assert!(!g.has_path("pods", "default", "web-1", "b"));
}

#[test]
fn the_graph_agrees_with_reading_the_pods() {
    // Whatever the decision asks, the graph answers as the list would.
    let pods = [
        pod("web-1", Some("a")),
        json!({"metadata": {"name": "bare", "namespace": "prod"}, "spec": {"nodeName": "a"}}),
    ];
    let mut g = Graph::default();
    for p in &pods {
        let key = format!(
            "/registry/pods/{}/{}",
            p["metadata"]["namespace"].as_str().unwrap(),
            p["metadata"]["name"].as_str().unwrap()
        );
        set(&mut g, &key, p);
    }
    let names = REFERENCED
        .iter()
        .map(|(_, n)| *n)
        .chain(["default", "db-password", ""]);
    for r in super::super::READ_REFERENCED {
        for ns in ["default", "prod"] {
            for n in names.clone() {
                let listed = super::super::NodeFacts {
                    pods: pods.to_vec(),
                    ..Default::default()
                }
                .references(ns, r, n);
                assert_eq!(g.has_path(r, ns, n, "a"), listed, "{r} {ns}/{n}");
            }
        }
    }
}

#[test]
fn a_pending_pod_leads_nowhere_until_it_is_bound() {
    let mut g = Graph::default();
    set(&mut g, KEY, &pod("web-1", None));
    assert!(!g.has_path("secrets", "default", "mounted", "a"));
    assert_eq!(g.bound_pods(), 0);
    set(&mut g, KEY, &pod("web-1", Some("a")));
    assert!(g.has_path("secrets", "default", "mounted", "a"));
    // A status write changes nothing.
    let mut running = pod("web-1", Some("a"));
    running["status"] = json!({"phase": "Running"});
    set(&mut g, KEY, &running);
    assert!(g.has_path("secrets", "default", "mounted", "a"));
    assert_eq!(g.bound_pods(), 1);
}

#[test]
fn a_deleted_pod_takes_its_nodes_access_with_it() {
    let mut g = Graph::default();
    let value = serde_json::to_vec(&pod("web-1", Some("a"))).unwrap();
    g.apply(EventType::Added, KEY, &value);
    // A second pod on the same node using the same Secret, and one on b.
    let other = json!({
        "metadata": {"name": "web-2", "namespace": "default"},
        "spec": {"nodeName": "a", "volumes": [{"name": "s", "secret": {"secretName": "mounted"}}]},
    });
    set(&mut g, "/registry/pods/default/web-2", &other);
    set(
        &mut g,
        "/registry/pods/default/web-3",
        &pod("web-3", Some("b")),
    );
    g.apply(EventType::Deleted, KEY, &value);
    // web-2 still uses `mounted` on a; nothing else of web-1's remains on a.
    assert!(g.has_path("secrets", "default", "mounted", "a"));
    assert!(!g.has_path("secrets", "default", "env-secret", "a"));
    assert!(!g.has_path("pods", "default", "web-1", "a"));
    // b's pod is untouched.
    assert!(g.has_path("secrets", "default", "env-secret", "b"));
    g.apply(EventType::Deleted, "/registry/pods/default/web-2", b"{}");
    assert!(!g.has_path("secrets", "default", "mounted", "a"));
    assert!(g.destinations.values().all(|n| !n.contains_key("a")));
}

#[test]
fn a_pod_that_changes_what_it_references_changes_its_edges() {
    let mut g = Graph::default();
    set(&mut g, KEY, &pod("web-1", Some("a")));
    // An ephemeral container added later names another Secret.
    let mut debugged = pod("web-1", Some("a"));
    debugged["spec"]["ephemeralContainers"] =
        json!([{"name": "dbg", "envFrom": [{"secretRef": {"name": "debug-secret"}}]}]);
    set(&mut g, KEY, &debugged);
    assert!(g.has_path("secrets", "default", "debug-secret", "a"));
    assert!(g.has_path("secrets", "default", "mounted", "a"));
    set(&mut g, KEY, &pod("web-1", Some("a")));
    assert!(!g.has_path("secrets", "default", "debug-secret", "a"));
}

#[test]
fn a_volume_leads_to_the_node_of_the_pod_using_its_claim() {
    let mut g = Graph::default();
    let pv = |claim: Option<&str>| {
        let mut v = json!({"metadata": {"name": "pv-1"}, "spec": {}});
        if let Some(c) = claim {
            v["spec"]["claimRef"] = json!({"namespace": "default", "name": c});
        }
        serde_json::to_vec(&v).unwrap()
    };
    let key = "/registry/persistentvolumes/pv-1";
    g.apply(EventType::Added, key, &pv(Some("data")));
    // No pod uses the claim yet.
    assert!(!g.has_path("persistentvolumes", "", "pv-1", "a"));
    set(&mut g, KEY, &pod("web-1", Some("a")));
    assert!(g.has_path("persistentvolumes", "", "pv-1", "a"));
    assert!(!g.has_path("persistentvolumes", "", "pv-1", "b"));
    // Released: no claim, no path.
    g.apply(EventType::Modified, key, &pv(None));
    assert!(!g.has_path("persistentvolumes", "", "pv-1", "a"));
    g.apply(EventType::Modified, key, &pv(Some("data")));
    g.apply(EventType::Deleted, key, &pv(Some("data")));
    assert!(!g.has_path("persistentvolumes", "", "pv-1", "a"));
}

/// A store whose watches deliver every event `delay` after it happened
/// (a graph behind the store), and lose the next event in favour of an
/// error once `fail` is set (a watcher that fell behind a compaction).
struct LaggingStore {
    inner: EmbeddedStore,
    delay: Duration,
    fail: Arc<AtomicBool>,
    /// How many lists of every pod were asked of it.
    pod_lists: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl Store for LaggingStore {
    async fn get(&self, key: &str) -> crate::store::Result<Option<KeyValue>> {
        self.inner.get(key).await
    }
    async fn list(&self, prefix: &str) -> crate::store::Result<(Vec<KeyValue>, Revision)> {
        if prefix == POD_PREFIX {
            self.pod_lists.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.list(prefix).await
    }
    async fn create(&self, key: &str, value: Vec<u8>) -> crate::store::Result<Revision> {
        self.inner.create(key, value).await
    }
    async fn update(
        &self,
        key: &str,
        expected: Revision,
        value: Vec<u8>,
    ) -> crate::store::Result<Revision> {
        self.inner.update(key, expected, value).await
    }
    async fn delete(&self, key: &str, expected: Revision) -> crate::store::Result<Revision> {
        self.inner.delete(key, expected).await
    }
    async fn watch(&self, prefix: &str, after: Revision) -> crate::store::Result<EventStream> {
        let fail = self.fail.clone();
        let delay = self.delay;
        let mut inner = self.inner.watch(prefix, after).await?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(e) = inner.next().await {
                let e = if fail.swap(false, Ordering::SeqCst) {
                    Err(StoreError::Compacted {
                        requested: after,
                        oldest: after + 1,
                    })
                } else {
                    e
                };
                if tx.send((tokio::time::Instant::now() + delay, e)).is_err() {
                    return;
                }
            }
        });
        let delivered =
            tokio_stream::wrappers::UnboundedReceiverStream::new(rx).then(|(at, e)| async move {
                tokio::time::sleep_until(at).await;
                e
            });
        Ok(Box::pin(delivered))
    }
    fn current_revision(&self) -> Revision {
        self.inner.current_revision()
    }
}

/// How far behind the store the graph of a lagging store is.
const LAG: Duration = Duration::from_millis(300);

fn lagging(delay: Duration) -> (Arc<dyn Store>, Arc<AtomicBool>) {
    let (store, fail, _) = lagging_counted(delay);
    (store, fail)
}

/// [`lagging`], with the count of the lists of every pod asked of it.
fn lagging_counted(delay: Duration) -> (Arc<dyn Store>, Arc<AtomicBool>, Arc<AtomicUsize>) {
    let fail = Arc::new(AtomicBool::new(false));
    let pod_lists = Arc::new(AtomicUsize::new(0));
    let store = LaggingStore {
        inner: EmbeddedStore::in_memory(StoreOptions::default()).unwrap(),
        delay,
        fail: fail.clone(),
        pod_lists: pod_lists.clone(),
    };
    (Arc::new(store), fail, pod_lists)
}

async fn put(store: &dyn Store, key: &str, value: &Value) -> Revision {
    let bytes = serde_json::to_vec(value).unwrap();
    match store.get(key).await.unwrap() {
        Some(kv) => store.update(key, kv.mod_revision, bytes).await.unwrap(),
        None => store.create(key, bytes).await.unwrap(),
    }
}

#[tokio::test]
async fn the_graph_follows_the_store_and_answers_as_of_the_request() {
    let (store, _) = lagging(LAG);
    // Written before the graph starts: found by its list.
    put(store.as_ref(), KEY, &pod("web-1", Some("a"))).await;
    let graph = NodeGraph::new(store.clone());
    tokio::spawn(graph.clone().follow());
    let at = store.current_revision();
    assert!(
        graph
            .has_path("secrets", "default", "mounted", "a", at)
            .await
    );
    // Bound a moment ago, not yet seen by the graph (its watch lags): a
    // denial waits for the graph to catch up.
    put(
        store.as_ref(),
        "/registry/pods/default/web-2",
        &pod("web-2", Some("b")),
    )
    .await;
    let at = store.current_revision();
    assert!(
        graph
            .has_path("secrets", "default", "mounted", "b", at)
            .await
    );
    // Deleted: the node loses access as of that revision.
    let kv = store.get(KEY).await.unwrap().unwrap();
    store.delete(KEY, kv.mod_revision).await.unwrap();
    let at = store.current_revision();
    tokio::time::timeout(Duration::from_secs(10), async {
        while graph.applied() < at {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the graph catches up");
    assert!(
        !graph
            .has_path("secrets", "default", "mounted", "a", at)
            .await
    );
}

#[tokio::test]
async fn a_failed_watch_is_followed_by_a_relist() {
    let (store, fail) = lagging(Duration::ZERO);
    let graph = NodeGraph::new(store.clone());
    tokio::spawn(graph.clone().follow());
    put(store.as_ref(), "/registry/namespaces/default", &json!({})).await;
    let at = store.current_revision();
    assert!(
        !graph
            .has_path("secrets", "default", "mounted", "a", at)
            .await
    );
    // The binding's event is lost to a failed watch: only a relist finds it.
    fail.store(true, Ordering::SeqCst);
    put(store.as_ref(), KEY, &pod("web-1", Some("a"))).await;
    let at = store.current_revision();
    assert!(
        graph
            .has_path("secrets", "default", "mounted", "a", at)
            .await
    );
}

fn node_get_secret(name: &'static str) -> crate::auth::Attributes<'static> {
    crate::auth::Attributes {
        user: format!("system:node:{name}"),
        verb: "get",
        group: "",
        resource: "secrets",
        subresource: None,
        namespace: Some("default"),
        name: Some("mounted"),
        created_name: None,
    }
}

#[tokio::test]
async fn a_graph_that_cannot_catch_up_answers_as_it_stands_and_no_pod_is_listed() {
    // The graph sees every change a minute late: far more than a denial
    // waits for it.
    let (store, _, pod_lists) = lagging_counted(Duration::from_secs(60));
    put(store.as_ref(), KEY, &pod("web-1", Some("a"))).await;
    let graph = NodeGraph::with_catch_up(store.clone(), Duration::from_millis(100));
    tokio::spawn(graph.clone().follow());
    let rbac = crate::auth::rbac::Rbac::new(store.clone()).await.unwrap();
    let authorize = |node: &'static str| {
        let (store, rbac, graph) = (store.clone(), &rbac, &graph);
        async move {
            let who = crate::auth::Identity::Node(node.into());
            let attrs = node_get_secret(node);
            crate::auth::authorize(store.as_ref(), rbac, graph, &who, &attrs).await
        }
    };
    // Listed at start: node a's pod is in the graph.
    assert_eq!(authorize("a").await, Ok(()));
    // Bound now; the graph will not see it for a minute.
    put(
        store.as_ref(),
        "/registry/pods/default/web-2",
        &pod("web-2", Some("b")),
    )
    .await;
    let denied = tokio::time::timeout(Duration::from_secs(30), authorize("b"))
        .await
        .expect("a denial waits for the graph a bounded time");
    assert!(denied.unwrap_err().contains("no relationship found"));
    assert_eq!(authorize("a").await, Ok(()));
    // The graph's own list at start, and none on the requests' behalf.
    assert_eq!(pod_lists.load(Ordering::SeqCst), 1);
}

/// The real API handlers on `store`, with the node graph the server
/// starts, and the admin's in-process client.
async fn api_on(store: Arc<dyn Store>) -> kube::Client {
    crate::server::bootstrap(store.as_ref()).await.unwrap();
    let node_graph = NodeGraph::new(store.clone());
    tokio::spawn(node_graph.clone().follow());
    let state = Arc::new(crate::api::ApiState {
        store: store.clone(),
        token: "admin".into(),
        tokens: Arc::new(crate::tokens::TokenIssuer::ephemeral()),
        options: Default::default(),
        shutdown: tokio::sync::watch::channel(false).1,
        node_signer: None,
        snapshots: None,
        rbac: crate::auth::rbac::Rbac::new(store.clone()).await.unwrap(),
        node_graph,
        aggregator: Arc::new(crate::api::aggregator::Aggregator::empty(
            store.clone(),
            None,
        )),
        custom: crate::api::custom::CustomResources::new(store.clone()),
        webhooks: crate::api::admission::webhook::Webhooks::new(store.clone())
            .await
            .unwrap(),
        policies: crate::api::admission::policy::Policies::new(store.clone())
            .await
            .unwrap(),
        flowcontrol: crate::api::flowcontrol::FlowControl::new(store, 600),
    });
    crate::manager::in_process_client(crate::api::router(state), "admin")
}

/// A node's GET of a Secret through the real API handlers, as the node
/// (the admin impersonating `system:node:<node>`).
async fn node_gets_secret(client: &kube::Client, node: &str) -> u16 {
    let req = http::Request::get("/api/v1/namespaces/default/secrets/mounted")
        .header("Impersonate-User", format!("system:node:{node}"))
        .header("Impersonate-Group", "system:nodes")
        .body(Vec::new())
        .unwrap();
    match client.request_text(req).await {
        Ok(_) => 200,
        Err(kube::Error::Api(e)) => e.code,
        Err(e) => panic!("GET as node {node}: {e}"),
    }
}

#[tokio::test]
async fn a_node_reads_a_secret_of_its_pod_from_the_moment_it_is_bound() {
    use k8s_openapi::api::core::v1::{Pod, Secret};
    // The graph sees every change LAG after it is made.
    let (store, _) = lagging(LAG);
    let client = api_on(store).await;
    let secrets: kube::Api<Secret> = kube::Api::namespaced(client.clone(), "default");
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "default");
    let pp = kube::api::PostParams::default();
    secrets
        .create(
            &pp,
            &serde_json::from_value(json!({
                "metadata": {"name": "mounted", "namespace": "default"},
                "stringData": {"k": "v"},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    pods.create(
        &pp,
        &serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "default"},
            "spec": {
                "containers": [{"name": "c", "image": "busybox"}],
                "volumes": [{"name": "s", "secret": {"secretName": "mounted"}}],
            },
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(node_gets_secret(&client, "a").await, 403, "pending");
    let bind = http::Request::post("/api/v1/namespaces/default/pods/web-1/binding")
        .header("Content-Type", "application/json")
        .body(
            serde_json::to_vec(&json!({
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": "web-1", "namespace": "default"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "a"},
            }))
            .unwrap(),
        )
        .unwrap();
    client.request_text(bind).await.expect("bound");
    // At once, with no retry, though the graph has not seen the binding
    // yet: the denial waits for it.
    assert_eq!(node_gets_secret(&client, "a").await, 200, "bound to a");
    assert_eq!(node_gets_secret(&client, "b").await, 403, "asked by b");
    pods.delete("web-1", &kube::api::DeleteParams::default().grace_period(0))
        .await
        .expect("deleted");
    assert!(pods.get_opt("web-1").await.unwrap().is_none());
    // As upstream's graph, an allow is served from what the graph holds:
    // the node loses access once the graph has seen the delete.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let code = node_gets_secret(&client, "a").await;
        if code == 403 {
            break;
        }
        assert_eq!(code, 200);
        assert!(
            tokio::time::Instant::now() < deadline,
            "node a still reads the Secret of its deleted pod"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn any_node_may_get_the_tls_secrets_ingresses_name_and_no_other() {
    let (store, _) = lagging(Duration::ZERO);
    let ingress = json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"tls": [{"hosts": ["a.test"], "secretName": "web-tls"}]}
    });
    put(
        store.as_ref(),
        "/registry/ingresses.networking.k8s.io/default/web",
        &ingress,
    )
    .await;
    let graph = NodeGraph::new(store.clone());
    tokio::spawn(graph.clone().follow());
    // No RBAC policy in this store: what is allowed is the authorizer's.
    let rbac = crate::auth::rbac::Rbac::new(store.clone()).await.unwrap();
    let who = crate::auth::Identity::Node("a".into());
    let decide = |verb: &'static str, ns: &'static str, name: Option<&'static str>| {
        let attrs = crate::auth::Attributes {
            user: "system:node:a".into(),
            verb,
            group: "",
            resource: "secrets",
            subresource: None,
            namespace: Some(ns),
            name,
            created_name: None,
        };
        let (store, rbac, graph, who) = (store.clone(), &rbac, &graph, &who);
        async move { crate::auth::authorize(store.as_ref(), rbac, graph, who, &attrs).await }
    };
    assert_eq!(decide("get", "default", Some("web-tls")).await, Ok(()));
    assert!(decide("get", "default", Some("db-password")).await.is_err());
    assert!(decide("get", "prod", Some("web-tls")).await.is_err());
    assert!(decide("list", "default", None).await.is_err());
    assert!(decide("update", "default", Some("web-tls")).await.is_err());
}
