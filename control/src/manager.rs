//! kube-scheduler and kube-controller-manager in one: which loops run
//! (`--controllers`, kube-controller-manager's syntax: `*` for all, `name`
//! to enable, `-name` to disable), their options, and starting them. The
//! scheduler and the controllers are equal siblings here; they talk to the
//! API in process ([`in_process_client`]): every write goes through the
//! same handlers, validation and watch fan-out as kubectl's.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::Client;

use crate::controllers::{
    certificates, clusterroleaggregation, cronjob, daemonset, deployment, disruption, endpoints,
    endpointslice, eventttl, garbagecollector, job, namespace, nodeipam, nodelifecycle,
    podautoscaler, podgc, replicaset, replicationcontroller, resourcequota, rootcacertpublisher,
    serviceaccount, statefulset, tainteviction, volumebinding,
};
use crate::toolkit::{retry_after, Shared};
use tower::Layer;

/// One loop `--controllers` can name: its name and how to start it, as
/// kube-controller-manager's `NewControllerDescriptors`.
pub struct ControllerDescriptor {
    /// The name `--controllers` uses.
    pub name: &'static str,
    /// Sets the loop up (registering the informers it needs) and returns it.
    pub start: fn(&Arc<Shared>, &ControllerOptions) -> BoxFuture<'static, ()>,
}

impl ControllerDescriptor {
    const fn new(
        name: &'static str,
        start: fn(&Arc<Shared>, &ControllerOptions) -> BoxFuture<'static, ()>,
    ) -> Self {
        ControllerDescriptor { name, start }
    }
}

/// Every controller `--controllers` can name, in start order: the one
/// registry [`start`] and [`ControllerOptions::validate`] read.
pub const CONTROLLERS: &[ControllerDescriptor] = &[
    ControllerDescriptor::new("scheduler", |shared, _| crate::scheduler::start(shared)),
    ControllerDescriptor::new("replicaset", |shared, _| replicaset::start(shared)),
    ControllerDescriptor::new("replicationcontroller", |shared, _| {
        replicationcontroller::start(shared)
    }),
    ControllerDescriptor::new("deployment", |shared, _| deployment::start(shared)),
    ControllerDescriptor::new("statefulset", |shared, _| statefulset::start(shared)),
    ControllerDescriptor::new("daemonset", |shared, _| daemonset::start(shared)),
    ControllerDescriptor::new("job", |shared, _| job::start(shared)),
    ControllerDescriptor::new("cronjob", |shared, _| cronjob::start(shared)),
    ControllerDescriptor::new("horizontalpodautoscaling", |shared, o| {
        podautoscaler::start(shared, o.pod_autoscaler.clone())
    }),
    ControllerDescriptor::new("volumebinding", |shared, _| volumebinding::start(shared)),
    ControllerDescriptor::new("endpoints", |shared, _| endpoints::start(shared)),
    ControllerDescriptor::new("endpointslice", |shared, _| endpointslice::start(shared)),
    ControllerDescriptor::new("nodeipam", |shared, o| {
        nodeipam::start(shared, o.node_ipam.clone())
    }),
    ControllerDescriptor::new("nodelifecycle", |shared, o| {
        nodelifecycle::start(shared, o.node_lifecycle.clone())
    }),
    ControllerDescriptor::new("tainteviction", |shared, _| tainteviction::start(shared)),
    ControllerDescriptor::new("podgc", |shared, o| podgc::start(shared, o.pod_gc.clone())),
    ControllerDescriptor::new("namespace", |shared, _| namespace::start(shared)),
    ControllerDescriptor::new("serviceaccount", |shared, _| serviceaccount::start(shared)),
    ControllerDescriptor::new("root-ca-cert-publisher", |shared, o| {
        rootcacertpublisher::start(shared, o.root_ca.clone())
    }),
    ControllerDescriptor::new("garbagecollector", |shared, _| {
        garbagecollector::start(shared)
    }),
    ControllerDescriptor::new("eventttl", |shared, o| eventttl::start(shared, o.event_ttl)),
    ControllerDescriptor::new("clusterrole-aggregation", |shared, _| {
        clusterroleaggregation::start(shared)
    }),
    ControllerDescriptor::new("resourcequota", |shared, _| resourcequota::start(shared)),
    ControllerDescriptor::new("disruption", |shared, _| disruption::start(shared)),
    ControllerDescriptor::new("csrapproving", |shared, _| {
        certificates::approver::start(shared)
    }),
    ControllerDescriptor::new("csrsigning", |shared, o| {
        certificates::signer::start(
            shared,
            o.cluster_signing_dir.clone(),
            o.cluster_signing_duration,
        )
    }),
    ControllerDescriptor::new("csrcleaner", |shared, _| {
        certificates::cleaner::start(shared)
    }),
];

/// Tunables of the controllers.
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    /// kube-controller-manager's `--controllers` list.
    pub controllers: Vec<String>,
    /// How long an Event is kept after its last occurrence.
    pub event_ttl: Duration,
    pub node_lifecycle: nodelifecycle::NodeLifecycleOptions,
    pub node_ipam: nodeipam::NodeIpamOptions,
    pub pod_gc: podgc::PodGcOptions,
    pub pod_autoscaler: podautoscaler::PodAutoscalerOptions,
    /// The CA certificate (PEM) the root CA publisher puts in every
    /// namespace; set by the server from its PKI.
    pub root_ca: String,
    /// Where the CA csrsigning issues from is (`ca.crt`, `ca.key`), as
    /// `--cluster-signing-cert-file`/`--cluster-signing-key-file`; set by
    /// the server to its PKI's directory. None: nothing is signed.
    pub cluster_signing_dir: Option<std::path::PathBuf>,
    /// The longest lifetime of a certificate csrsigning issues
    /// (kube-controller-manager's `--cluster-signing-duration`).
    pub cluster_signing_duration: Duration,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            controllers: vec!["*".into()],
            event_ttl: Duration::from_secs(3600),
            node_lifecycle: Default::default(),
            node_ipam: Default::default(),
            pod_gc: Default::default(),
            pod_autoscaler: Default::default(),
            root_ca: String::new(),
            cluster_signing_dir: None,
            cluster_signing_duration: certificates::signer::MAX_DURATION,
        }
    }
}

impl ControllerOptions {
    /// Checks the `--controllers` list names only known controllers.
    pub fn validate(&self) -> Result<(), String> {
        for entry in &self.controllers {
            let name = entry.strip_prefix('-').unwrap_or(entry);
            if name != "*" && !CONTROLLERS.iter().any(|c| c.name == name) {
                let known: Vec<&str> = CONTROLLERS.iter().map(|c| c.name).collect();
                return Err(format!(
                    "--controllers: unknown controller {name:?}; known: {}",
                    known.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// Whether `name` runs: named or `*`, and not `-name`.
    pub fn enabled(&self, name: &str) -> bool {
        let mut on = false;
        for entry in &self.controllers {
            if entry == "*" || entry == name {
                on = true;
            }
        }
        on && !self
            .controllers
            .iter()
            .any(|e| e.strip_prefix('-') == Some(name))
    }
}

/// A kube client that calls `router` in process, authenticated with the
/// admin token: no socket, no TLS, the same handlers as any client. Its
/// User-Agent names kube-controller-manager, so the API records the
/// controllers' writes under that manager, as Kubernetes does. Like every
/// in-process client here, it sends a request again when the API answers
/// 429 (or 5xx) with `Retry-After` ([`retry_after`]), as client-go does.
pub fn in_process_client(router: axum::Router, token: &str) -> Client {
    in_process_client_as(router, token, bosun::fieldmanager::KUBE_CONTROLLER_MANAGER)
}

/// [`in_process_client`] for `component` (`kube-scheduler`, ...): its
/// User-Agent, and so the field manager of its writes, name it.
pub fn in_process_client_as(router: axum::Router, token: &str, component: &str) -> Client {
    use tower::ServiceExt;
    let bearer = http::HeaderValue::from_str(&format!("Bearer {token}")).expect("token is ASCII");
    let agent = http::HeaderValue::from_str(&bosun::fieldmanager::user_agent(component))
        .expect("user agent is ASCII");
    let service = router.map_request(move |mut req: http::Request<kube::client::Body>| {
        req.headers_mut()
            .insert(http::header::AUTHORIZATION, bearer.clone());
        req.headers_mut()
            .entry(http::header::USER_AGENT)
            .or_insert_with(|| agent.clone());
        req.map(axum::body::Body::new)
    });
    Client::new(retry_after::layer().layer(service), "default")
}

/// A kube client that calls `router` in process as `user`, a request
/// extension no request from the network can carry (see
/// [`crate::api::authn::InProcessUser`]); its User-Agent names `component`.
pub fn in_process_client_for(
    router: axum::Router,
    user: crate::auth::UserInfo,
    component: &str,
) -> Client {
    use tower::ServiceExt;
    let agent = http::HeaderValue::from_str(&bosun::fieldmanager::user_agent(component))
        .expect("user agent is ASCII");
    let who = crate::api::authn::InProcessUser(user);
    let service = router.map_request(move |mut req: http::Request<kube::client::Body>| {
        req.extensions_mut().insert(who.clone());
        req.headers_mut()
            .entry(http::header::USER_AGENT)
            .or_insert_with(|| agent.clone());
        req.map(axum::body::Body::new)
    });
    Client::new(retry_after::layer().layer(service), "default")
}

/// Who the shared informers (and kube-controller-manager's own requests,
/// its leader election among them) are to the API: upstream's
/// `system:kube-controller-manager`.
pub fn controller_manager_user() -> crate::auth::UserInfo {
    crate::auth::UserInfo::authenticated(crate::auth::user::KUBE_CONTROLLER_MANAGER, &[])
}

/// Who the scheduler is to the API: `system:kube-scheduler`.
pub fn scheduler_user() -> crate::auth::UserInfo {
    crate::auth::UserInfo::authenticated(crate::auth::user::KUBE_SCHEDULER, &[])
}

/// Who a controller is to the API: its service account `account` in
/// kube-system (kube-controller-manager's
/// `--use-service-account-credentials`).
pub fn controller_user(account: &str) -> crate::auth::UserInfo {
    crate::auth::UserInfo::service_account("kube-system", account, "")
}

/// What the controllers and the scheduler share when they run in
/// process with `router`'s API, each as its upstream user: the shared
/// informers as system:kube-controller-manager, the scheduler as
/// system:kube-scheduler, each controller as its service account in
/// kube-system (kube-controller-manager's `--use-service-account-credentials`),
/// held to the bootstrap policy's roles, and so classified by flow control
/// as upstream's are (`workload-high`, apart from the nodes' `system`).
pub fn shared_in_process(
    router: axum::Router,
    clock: Arc<dyn crate::toolkit::Clock>,
) -> Arc<Shared> {
    let kcm = bosun::fieldmanager::KUBE_CONTROLLER_MANAGER;
    let informers = in_process_client_for(router.clone(), controller_manager_user(), kcm);
    let scheduler = in_process_client_for(
        router.clone(),
        scheduler_user(),
        bosun::fieldmanager::KUBE_SCHEDULER,
    );
    let controllers =
        move |account: &str| in_process_client_for(router.clone(), controller_user(account), kcm);
    Shared::with_clients(informers, scheduler, Some(Arc::new(controllers)), clock)
}

/// Sets up every enabled controller, starts the shared caches and returns
/// the controllers' loops (spawn them; abort them to stop).
pub fn start(shared: &Arc<Shared>, options: &ControllerOptions) -> Vec<BoxFuture<'static, ()>> {
    start_matching(shared, options, |_| true)
}

/// [`start`] for the enabled controllers `which` picks by name (the
/// scheduler alone, or every controller but it, when each runs under its
/// own elected Lease).
pub fn start_matching(
    shared: &Arc<Shared>,
    options: &ControllerOptions,
    which: impl Fn(&str) -> bool,
) -> Vec<BoxFuture<'static, ()>> {
    let mut loops = Vec::new();
    for controller in CONTROLLERS {
        if !options.enabled(controller.name) || !which(controller.name) {
            continue;
        }
        let fut = (controller.start)(shared, options);
        tracing::info!(controller = controller.name, "starting");
        loops.push(fut);
    }
    shared.informers.start();
    loops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(list: &[&str]) -> ControllerOptions {
        ControllerOptions {
            controllers: list.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn controllers_flag_works_like_kube_controller_manager() {
        assert!(opts(&["*"]).enabled("eventttl"));
        assert!(!opts(&["*", "-eventttl"]).enabled("eventttl"));
        assert!(opts(&["*", "-scheduler"]).enabled("eventttl"));
        assert!(opts(&["eventttl"]).enabled("eventttl"));
        assert!(!opts(&["scheduler"]).enabled("eventttl"));
        assert!(!opts(&[]).enabled("eventttl"));
        let err = opts(&["*", "-replicaset-typo"]).validate().unwrap_err();
        assert!(err.contains("replicaset-typo"), "{err}");
    }

    #[test]
    fn every_controller_is_named_once() {
        let mut names: Vec<&str> = CONTROLLERS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "a name is registered twice");
    }

    #[tokio::test]
    async fn controller_writes_are_managed_by_kube_controller_manager() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let api = crate::toolkit::testing::TestApi::start().await;
        let cm: ConfigMap = api
            .create(
                serde_json::json!({"metadata": {"name": "c", "namespace": "default"},
                "data": {"k": "v"}}),
            )
            .await;
        let managers: Vec<String> = cm
            .metadata
            .managed_fields
            .unwrap_or_default()
            .into_iter()
            .filter_map(|e| e.manager)
            .collect();
        assert_eq!(managers, ["kube-controller-manager"]);
    }
}
