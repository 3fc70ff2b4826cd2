//! Starting and stopping the control plane: data dir, admin token, store,
//! the API listener, graceful shutdown.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use bosun::resources;
use rand::Rng;
use serde_json::json;

use crate::api::aggregator::{self, Aggregator};
use crate::api::{self, ApiOptions, ApiState};
use crate::auth;
use crate::controllers::kubernetesservice::{self, KubernetesServiceOptions};
use crate::leaderelection::{components, LeaderElectionOptions};
use crate::manager::{self, ControllerOptions};
use crate::observe;
use crate::store::{EmbeddedStore, EtcdOptions, EtcdStore, Store, StoreError, StoreOptions};
use crate::tls;
use crate::tokens::TokenIssuer;

#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    pub bind: SocketAddr,
    /// Extra names and addresses for the serving certificate.
    pub tls_sans: Vec<String>,
    /// Where pods reach the API: the `kubernetes` Service's endpoint
    /// (kube-apiserver's `--advertise-address`); None picks one
    /// ([`kubernetesservice::default_advertise_address`]).
    pub advertise_address: Option<IpAddr>,
    /// The cluster's DNS domain, for the certificate's
    /// `kubernetes.default.svc.<domain>`.
    pub cluster_domain: String,
    pub store: StoreOptions,
    /// Keep the objects in etcd (`--store etcd://...`) instead of the
    /// embedded store in the data dir.
    pub etcd: Option<EtcdOptions>,
    pub api: ApiOptions,
    /// Which controllers (and the scheduler) run in this process.
    pub controllers: ControllerOptions,
    /// Whether they run only while this process holds their Leases.
    pub leader_election: LeaderElectionOptions,
    /// Periodic snapshots of the store (`--snapshot-interval`), if any.
    pub snapshots: Option<crate::snapshot::PeriodicOptions>,
    /// How long a SIGTERM may take: in-flight requests get this long to
    /// finish, and the process exits one second after it at the latest.
    pub shutdown_grace_period: std::time::Duration,
    /// Timeouts and the cap on the API's connections.
    pub connections: bosun::serving::connections::Limits,
}

/// Writes `contents` to `path` so that readers see all of it or nothing.
pub fn write_atomically(path: &Path, contents: &str, mode: u32) -> anyhow::Result<()> {
    bosun::files::write_atomically(path, contents, mode)
        .with_context(|| format!("writing {}", path.display()))
}

/// The admin token: generated on first start, then read back.
pub fn admin_token(data_dir: &Path) -> anyhow::Result<String> {
    let path = data_dir.join("admin-token");
    if let Ok(existing) = std::fs::read_to_string(&path) {
        let token = existing.trim().to_string();
        if !token.is_empty() {
            return Ok(token);
        }
    }
    let mut bytes = [0u8; 24];
    rand::rng().fill(&mut bytes);
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    write_atomically(&path, &format!("{token}\n"), 0o600)?;
    Ok(token)
}

/// What exists from the start: the namespaces every Kubernetes cluster has,
/// the default StorageClass `local-path` and the system PriorityClasses.
pub async fn bootstrap(store: &dyn Store) -> anyhow::Result<()> {
    let namespaces = resources::by_name("namespaces").expect("served");
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let obj = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": ns,
                "uid": uuid::Uuid::new_v4().to_string(),
                "creationTimestamp": bosun::time::now_rfc3339(),
                "labels": {"kubernetes.io/metadata.name": ns},
            },
            "spec": {"finalizers": [bosun::well_known::NAMESPACE_FINALIZER]},
            "status": {"phase": "Active"},
        });
        match store
            .create(&namespaces.storage_key(None, ns), serde_json::to_vec(&obj)?)
            .await
        {
            Ok(_) | Err(StoreError::AlreadyExists(_)) => {}
            Err(e) => return Err(e).context("creating the initial namespaces"),
        }
    }
    let classes = resources::by_name("storageclasses").expect("served");
    match store
        .create(
            &classes.storage_key(None, LOCAL_PATH_CLASS),
            serde_json::to_vec(&local_path_class())?,
        )
        .await
    {
        Ok(_) | Err(StoreError::AlreadyExists(_)) => {}
        Err(e) => return Err(e).context("creating the default StorageClass"),
    }
    // As the apiserver's scheduling post-start hook: the system
    // PriorityClasses exist from the start (and cannot be deleted).
    let priority_classes = resources::by_name("priorityclasses").expect("served");
    for (name, value, description) in bosun::validation::scheduling::SYSTEM_PRIORITY_CLASSES {
        let mut obj =
            bosun::validation::scheduling::system_priority_class(name, value, description);
        obj["metadata"]["uid"] = json!(uuid::Uuid::new_v4().to_string());
        obj["metadata"]["creationTimestamp"] = json!(bosun::time::now_rfc3339());
        match store
            .create(
                &priority_classes.storage_key(None, name),
                serde_json::to_vec(&obj)?,
            )
            .await
        {
            Ok(_) | Err(StoreError::AlreadyExists(_)) => {}
            Err(e) => return Err(e).context("creating the system PriorityClasses"),
        }
    }
    crate::api::aggregator::autoregister::register(store)
        .await
        .context("registering the Local APIServices")?;
    Ok(())
}

/// The default StorageClass every control plane starts with.
pub const LOCAL_PATH_CLASS: &str = "local-path";

/// `local-path`, the default class: volumes are directories under the data
/// dir of the node the first pod using the claim is scheduled to
/// (WaitForFirstConsumer), made by the volume binder's provisioner and
/// removed with their claim (Delete), as rancher's local-path provisioner
/// does for k3s.
fn local_path_class() -> serde_json::Value {
    json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": LOCAL_PATH_CLASS,
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": bosun::time::now_rfc3339(),
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": crate::controllers::volumebinding::LOCAL_PATH_PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    })
}

/// Runs the control plane until SIGTERM or SIGINT.
pub async fn run(config: Config) -> anyhow::Result<()> {
    // From the very start: a SIGTERM while starting up stops the server
    // as soon as it serves, through the same orderly path.
    let stop = stop_signal()?;
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating {}", config.data_dir.display()))?;
    let token = admin_token(&config.data_dir)?;
    let (store, snapshots) = open_store(&config).await?;
    let store: Arc<dyn Store> = Arc::new(observe::ObservedStore::new(store));
    bootstrap(store.as_ref()).await?;

    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let advertise = config
        .advertise_address
        .or_else(|| kubernetesservice::default_advertise_address(config.bind.ip()));
    let pki = tls::load_or_create(&config.data_dir, &certificate_names(&config, advertise))?;
    let rbac = auth::rbac::Rbac::new(store.clone())
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    let node_graph = auth::NodeGraph::new(store.clone());
    let front_proxy = Arc::new(aggregator::frontproxy::FrontProxy::load_or_create(
        &config.data_dir,
    )?);
    let aggregator = Aggregator::new(store.clone(), Some(front_proxy.clone())).await;
    let custom = api::custom::CustomResources::new(store.clone());
    let webhooks = crate::api::admission::webhook::Webhooks::new(store.clone())
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    let policies = crate::api::admission::policy::Policies::new(store.clone())
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    // The bootstrap flow-control objects exist and are in force before
    // the first request.
    let flowcontrol =
        api::flowcontrol::FlowControl::new(store.clone(), config.api.max_requests_inflight);
    flowcontrol
        .start()
        .await
        .context("loading the flow-control configuration")?;
    let state = Arc::new(ApiState {
        store: store.clone(),
        token,
        tokens: Arc::new(TokenIssuer::load_or_create(&config.data_dir)?),
        options: config.api.clone(),
        shutdown: shutdown_rx,
        node_signer: Some(Arc::new(auth::credential::NodeSigner::load(
            &config.data_dir,
        )?)),
        snapshots: snapshots.clone(),
        rbac: rbac.clone(),
        node_graph: node_graph.clone(),
        aggregator: aggregator.clone(),
        custom: custom.clone(),
        webhooks: webhooks.clone(),
        policies: policies.clone(),
        flowcontrol: flowcontrol.clone(),
    });
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .with_context(|| format!("listening on {}", config.bind))?;
    let addr = listener.local_addr()?;
    let token = state.token.clone();
    write_atomically(
        &config.data_dir.join("admin.kubeconfig"),
        &admin_kubeconfig(addr, &pki.ca_pem, &token)?,
        0o600,
    )?;
    let router = observe::routes(api::router(state.clone()), state);
    // The kubernetes Service is there before anyone is told the address
    // (and is kept from then on by its loop below).
    let api_service = KubernetesServiceOptions {
        service_ip: config.api.service_range.kubernetes_service_ip(),
        advertise,
        port: addr.port(),
    };
    let apiserver_client = manager::in_process_client_as(router.clone(), &token, "kube-apiserver");
    auth::rbac::reconcile::bootstrap(&apiserver_client)
        .await
        .map_err(|e| anyhow::anyhow!("reconciling the bootstrap RBAC policy: {e:?}"))?;
    aggregator::frontproxy::publish(&apiserver_client, &pki.ca_pem, &front_proxy.ca_pem)
        .await
        .map_err(|e| anyhow::anyhow!("publishing extension-apiserver-authentication: {e}"))?;
    if let Err(e) = kubernetesservice::reconcile(&apiserver_client, &api_service).await {
        tracing::warn!(error = %e, "making the kubernetes Service");
    }
    let address_file = config.data_dir.join("address");
    write_atomically(&address_file, &format!("{addr}\n"), 0o644)?;
    auth::bootstrap::publish_cluster_info(
        store.as_ref(),
        &advertised_server(&config, advertise, addr),
        &pki.ca_pem,
        &config.api.service_range.to_string(),
        &config.api.cluster_cidr.to_string(),
    )
    .await?;
    tracing::info!(%addr, data_dir = %config.data_dir.display(), "bosun-control is serving");

    let controllers = ControllerOptions {
        root_ca: pki.ca_pem.clone(),
        cluster_signing_dir: Some(config.data_dir.clone()),
        ..config.controllers.clone()
    };
    // The scheduler and the controllers, elected (or not, with
    // --leader-elect=false); stopped first on shutdown, through
    // `elected_stop`, so that held Leases are released.
    let (elected_stop, elected_stop_rx) = tokio::sync::watch::channel(false);
    let mut elected = components::start(
        router.clone(),
        controllers,
        &config.leader_election,
        elected_stop_rx,
    );
    // Every other task that talks to the API in process, so that shutdown
    // can cancel them all.
    let mut tasks = tokio::task::JoinSet::new();
    if config.bind.ip().is_loopback() && advertise.is_some_and(|a| !a.is_loopback()) {
        tracing::warn!(
            bind = %config.bind.ip(),
            advertise = ?advertise,
            "listening on loopback only: pods cannot reach the API through the kubernetes \
             Service; listen on the advertise address (--bind) for in-cluster clients"
        );
    }
    // The API server's own controller, run by every API server whatever
    // `--controllers` says (see `controllers/mod.rs`).
    tasks.spawn(crate::controllers::customresourcedefinition::start(
        apiserver_client.clone(),
    ));
    tasks.spawn(kubernetesservice::start(
        apiserver_client.clone(),
        api_service.clone(),
    ));
    tasks.spawn(api::allocate::claims::repair(
        store.clone(),
        std::time::Duration::from_secs(30),
    ));
    tasks.spawn(rbac.follow());
    tasks.spawn(node_graph.follow());
    tasks.spawn(custom.follow());
    tasks.spawn(aggregator.clone().follow());
    tasks.spawn(aggregator::available::run(
        aggregator,
        apiserver_client.clone(),
    ));
    tasks.spawn(webhooks.follow());
    tasks.spawn(policies.follow());
    tasks.spawn(flowcontrol.follow());
    tasks.spawn(auth::bootstrap::run_cleaner(
        store.clone(),
        std::time::Duration::from_secs(60),
    ));
    if let (Some(periodic), Some(snapshots)) = (config.snapshots.clone(), snapshots) {
        tasks.spawn(crate::snapshot::run_periodic(snapshots, periodic));
    }

    let connections = bosun::serving::connections::serve(
        listener,
        pki.server_config,
        router,
        config.connections,
        stop,
    )
    .await;
    let grace = config.shutdown_grace_period;
    tracing::info!(grace_period = ?grace, "shutting down");
    bosun::serving::exit_after(grace + std::time::Duration::from_secs(1));
    let deadline = tokio::time::Instant::now() + grace;
    // First the controllers, the scheduler, their informers and the
    // other in-process clients, while the API still answers them: ended
    // watches would only bring them back for more.
    let stopped = tokio::time::timeout_at(deadline, async {
        let _ = elected_stop.send(true);
        while elected.join_next().await.is_some() {}
        tasks.shutdown().await;
        // Out of the kubernetes Service's endpoints at once, not after
        // its identity Lease's TTL.
        if let Err(e) = kubernetesservice::leave(&apiserver_client, &api_service).await {
            tracing::warn!(error = %e, "taking this server out of the kubernetes endpoints");
        }
    })
    .await;
    if stopped.is_err() {
        tracing::warn!(grace_period = ?grace, "controllers still stopping after the grace period");
    }
    // Then the watches of agents and other clients end, and in-flight
    // requests get what is left of the grace period.
    let _ = shutdown_tx.send(true);
    if tokio::time::timeout_at(deadline, connections.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(grace_period = ?grace, "connections still open after the grace period; closing them");
    }
    let _ = std::fs::remove_file(&address_file);
    drop(store);
    Ok(())
}

type Snapshots = Option<Arc<crate::snapshot::Snapshotter>>;

/// The store `config` names: the embedded one in the data dir (with its
/// snapshots), or etcd. What only the embedded store can do is refused on
/// etcd with what to use instead.
async fn open_store(config: &Config) -> anyhow::Result<(Arc<dyn Store>, Snapshots)> {
    let restored = config.data_dir.join(bosun::snapshot::RESTORED_MARKER);
    if let Some(etcd) = &config.etcd {
        if restored.exists() {
            anyhow::bail!(
                "{} holds a restored snapshot of the embedded store, but --store is etcd: \
                 restore etcd with `etcdutl snapshot restore` instead, or remove {}",
                config.data_dir.display(),
                restored.display()
            );
        }
        if config.snapshots.is_some() {
            anyhow::bail!(
                "--snapshot-interval snapshots the embedded store; with --store etcd://... \
                 take snapshots with `etcdctl snapshot save`"
            );
        }
        let store = EtcdStore::connect(etcd, std::time::Duration::from_secs(30))
            .await
            .context("opening the etcd store")?;
        // A watch cache for every built-in resource from the start, as
        // kube-apiserver's cachers (custom resources get theirs on first use).
        let prefixes: std::collections::BTreeSet<String> = bosun::resources::RESOURCES
            .iter()
            .filter(|r| r.is_storage_version())
            .map(|r| r.storage_prefix())
            .collect();
        store.start_caches(prefixes);
        tracing::info!(endpoints = %etcd.endpoints.join(","), prefix = %etcd.prefix, "store: etcd");
        return Ok((Arc::new(store), None));
    }
    let store_path = config.data_dir.join("store.redb");
    if restored.exists() {
        let revision =
            EmbeddedStore::bump_revision(&store_path, bosun::snapshot::RESTORE_REVISION_BUMP)
                .context("moving the restored store's revision on")?;
        tracing::info!(
            revision,
            "restored from a snapshot: revisions moved on, watches from older ones get 410"
        );
        std::fs::remove_file(&restored)
            .with_context(|| format!("removing {}", restored.display()))?;
    }
    let store =
        EmbeddedStore::open(&store_path, config.store.clone()).context("opening the store")?;
    let store = Arc::new(store);
    let snapshots = Arc::new(crate::snapshot::Snapshotter::new(
        config.data_dir.clone(),
        store.clone(),
    ));
    Ok((store, Some(snapshots)))
}

/// Resolves on the first SIGTERM or SIGINT.
fn stop_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

/// The server URL other hosts reach: the first `--tls-san` if any (the
/// advertised address), else the address listened on; when that is every
/// interface, the advertise address (loopback only if there is none).
fn advertised_server(config: &Config, advertise: Option<IpAddr>, addr: SocketAddr) -> String {
    let host = match config.tls_sans.first() {
        Some(san) => san.clone(),
        None if addr.ip().is_unspecified() => advertise
            .filter(|a| !a.is_unspecified())
            .map(|a| a.to_string())
            .unwrap_or_else(|| "127.0.0.1".into()),
        None => addr.ip().to_string(),
    };
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    format!("https://{host}:{}", addr.port())
}

/// The names the serving certificate is valid for: this host's, the
/// advertise address, and the `kubernetes` Service's ClusterIP and names.
fn certificate_names(config: &Config, advertise: Option<IpAddr>) -> Vec<String> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    if !config.bind.ip().is_unspecified() {
        names.push(config.bind.ip().to_string());
    }
    names.extend(advertise.map(|a| a.to_string()));
    names.extend(tls::kubernetes_service_names(
        config.api.service_range.kubernetes_service_ip(),
        &config.cluster_domain,
    ));
    if let Ok(host) = nix::unistd::gethostname() {
        names.push(host.to_string_lossy().into_owned());
    }
    names.extend(config.tls_sans.iter().cloned());
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    names
}

/// A kubeconfig for the admin user, as `kubectl --kubeconfig` reads it.
fn admin_kubeconfig(addr: SocketAddr, ca_pem: &str, token: &str) -> anyhow::Result<String> {
    use base64::Engine;
    let host = if addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        addr.ip().to_string()
    };
    let server = format!("https://{}", SocketAddr::new(host.parse()?, addr.port()));
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "bosun", "cluster": {
            "server": server,
            "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(ca_pem),
        }}],
        "users": [{"name": "bosun-admin", "user": {"token": token}}],
        "contexts": [{"name": "bosun", "context": {"cluster": "bosun", "user": "bosun-admin", "namespace": "default"}}],
        "current-context": "bosun",
    });
    Ok(serde_yaml::to_string(&config)?)
}
