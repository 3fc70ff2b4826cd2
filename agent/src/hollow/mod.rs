//! Hollow nodes, as kubemark's hollow kubelet: one process runs many Nodes
//! with the real agent (registration, Lease heartbeats, pod workers, the
//! status manager, events) over the fake runtime, so a control plane can
//! be loaded with many nodes on one machine.
//!
//! `bosun-agent hollow --nodes N --kubeconfig KC --token ID.SECRET`:
//!
//! - every node gets its own certificate (`system:node:<prefix><i>`, group
//!   `system:nodes`), asked for with the bootstrap token (or, without one,
//!   by the kubeconfig's user, which must be the admin), so the Node
//!   authorizer and NodeRestriction judge it as a real node;
//! - its pod CIDR comes from the control plane's node IPAM, and its pods'
//!   addresses from that CIDR; every image is present and containers
//!   start at once (`FakeRuntime::hollow`);
//! - no Docker, DNS server, service proxy, routes or stream API: a node
//!   publishes `--node-ip` and port 0; volumes' files are written under
//!   `--data-dir` but nothing is mounted;
//! - all nodes share one tokio runtime; each has its own client (its own
//!   connection pool, as its own identity needs);
//! - at most `--startup-concurrency` nodes start (certificate, Node, pod
//!   CIDR) at once, so a thousand do not storm the control plane;
//! - SIGTERM or SIGINT stops every node and the process exits 0.

pub mod credential;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bosun::serving::LogFormat;
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::sync::{watch, Semaphore};

use crate::config::AgentConfig;
use crate::runtime::fake::FakeRuntime;
use crate::sync_loop::Agent;

/// `bosun-agent hollow`: many fake-runtime nodes in one process.
#[derive(Parser, Debug)]
#[command(name = "bosun-agent hollow")]
pub struct HollowArgs {
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// How many nodes to run.
    #[arg(long)]
    nodes: u32,
    /// Node names are this prefix and a number from 0.
    #[arg(long, default_value = "hollow-")]
    name_prefix: String,
    /// Kubeconfig naming the control plane (its server and CA); its user
    /// asks for the nodes' certificates when there is no --token.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// A bootstrap token (`bosun token create`) the nodes get their
    /// certificates with.
    #[arg(long, env = "BOSUN_HOLLOW_TOKEN")]
    token: Option<String>,
    /// The address every node publishes as its InternalIP.
    #[arg(long, default_value = "127.0.0.1")]
    node_ip: String,
    /// Where the nodes' pod volumes live (a directory per node).
    #[arg(long)]
    data_dir: PathBuf,
    /// Each node's allocatable `pods`.
    #[arg(long, default_value_t = 110)]
    max_pods: u32,
    /// Seconds between a node's heartbeats.
    #[arg(long, default_value_t = 10.0)]
    heartbeat_period: f64,
    #[arg(long, default_value_t = 40)]
    node_lease_duration_seconds: i32,
    /// Seconds after which an unchanged node status is written again.
    #[arg(long, default_value_t = 300.0)]
    node_status_report_frequency: f64,
    /// Seconds between a node's relists of its (fake) containers.
    #[arg(long, default_value_t = 1.0)]
    relist_period: f64,
    /// How many nodes start at once.
    #[arg(long, default_value_t = 16)]
    startup_concurrency: usize,
    /// How long a node waits for its pod CIDR.
    #[arg(long, default_value_t = 120.0)]
    pod_cidr_timeout: f64,
}

/// How long SIGTERM may take before the process exits regardless.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(5);

/// Runs `bosun-agent hollow ARGS...` (`args` without the program name's
/// `hollow`) until SIGTERM or SIGINT.
pub async fn main(args: impl IntoIterator<Item = String>) -> anyhow::Result<()> {
    let args = HollowArgs::parse_from(args);
    bosun::serving::init_logging(args.log_format);
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        tracing::info!("shutting down the hollow nodes");
        let _ = stop_tx.send(true);
        bosun::serving::exit_after(SHUTDOWN_DEADLINE);
    });
    run(args, stop_rx).await
}

/// Starts every node and runs them until `stop` flips to true.
pub async fn run(args: HollowArgs, stop: watch::Receiver<bool>) -> anyhow::Result<()> {
    let kubeconfig = Kubeconfig::read_from(&args.kubeconfig)
        .with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    let mut base = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading {}", args.kubeconfig.display()))?;
    // What the nodes write is recorded under the field manager `kubelet`.
    base.headers.push((
        http::header::USER_AGENT,
        bosun::fieldmanager::user_agent(bosun::fieldmanager::KUBELET).parse()?,
    ));
    let requester_config = match &args.token {
        Some(t) => {
            let token = bosun::bootstrap::BootstrapToken::parse(t)
                .map_err(|e| anyhow::anyhow!("--token: {e}"))?;
            credential::bootstrap_config(&base, &token.to_string())
        }
        None => base.clone(),
    };
    let requester = kube::Client::try_from(requester_config)?;
    crate::volumes::without_mounts();
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    tracing::info!(nodes = args.nodes, prefix = %args.name_prefix, "starting hollow nodes");
    let args = Arc::new(args);
    let base = Arc::new(base);
    let starting = Arc::new(Semaphore::new(args.startup_concurrency.max(1)));
    let mut nodes = tokio::task::JoinSet::new();
    for i in 0..args.nodes {
        let name = format!("{}{i}", args.name_prefix);
        let (args, base, requester, starting, stop) = (
            args.clone(),
            base.clone(),
            requester.clone(),
            starting.clone(),
            stop.clone(),
        );
        nodes.spawn(async move {
            if let Err(e) = run_node(&name, &args, &base, &requester, &starting, stop).await {
                tracing::error!(node = %name, error = %format!("{e:#}"), "hollow node stopped");
            }
        });
    }
    while nodes.join_next().await.is_some() {}
    tracing::info!("hollow nodes stopped");
    Ok(())
}

/// Retries `what` with back-off (0.5 s doubling to 10 s) until it works;
/// None if `stop` came first.
async fn retrying<T, F, Fut>(
    what: &str,
    node: &str,
    stop: &mut watch::Receiver<bool>,
    mut attempt: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let mut delay = Duration::from_millis(500);
    loop {
        if *stop.borrow() {
            return None;
        }
        match attempt().await {
            Ok(v) => return Some(v),
            Err(e) => {
                tracing::warn!(node, error = %format!("{e:#}"), "{what}; retrying in {delay:?}");
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = stop.changed() => return None,
                }
                delay = (delay * 2).min(Duration::from_secs(10));
            }
        }
    }
}

/// One hollow node: its certificate, its pod CIDR, then the real agent
/// over a fake runtime until `stop`.
async fn run_node(
    name: &str,
    args: &HollowArgs,
    base: &kube::Config,
    requester: &kube::Client,
    starting: &Semaphore,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let permit = tokio::select! {
        p = starting.acquire() => p?,
        _ = stop.changed() => return Ok(()),
    };
    let Some(credential) = retrying("getting the node's certificate", name, &mut stop, || {
        credential::request(requester, name)
    })
    .await
    else {
        return Ok(());
    };
    let client = kube::Client::try_from(credential::config_for(base, &credential))?;
    let timeout = Duration::from_secs_f64(args.pod_cidr_timeout);
    let Some(pod_cidr) = retrying("waiting for the node's pod CIDR", name, &mut stop, || {
        crate::node::await_pod_cidr(&client, name, timeout)
    })
    .await
    else {
        return Ok(());
    };
    drop(permit);
    let cidr: ipnet::Ipv4Net = pod_cidr
        .parse()
        .with_context(|| format!("pod CIDR {pod_cidr} is not an IPv4 CIDR"))?;
    let data_dir = args.data_dir.join(name);
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let secs = Duration::from_secs_f64;
    let cfg = AgentConfig {
        node_name: name.to_string(),
        node_ip: args.node_ip.clone(),
        // Pods' nameserver: the gateway, as the real agent's DNS server.
        cluster_dns: crate::dns::gateway_of(&pod_cidr)
            .map(|gw| vec![gw.to_string()])
            .unwrap_or_default(),
        pod_cidr,
        data_dir,
        host_root: PathBuf::from("/"),
        cluster_domain: "cluster.local".into(),
        host_search: Vec::new(),
        dns: None,
        backoff_base: secs(10.0),
        backoff_max: secs(300.0),
        backoff_reset: secs(600.0),
        sync_period: secs(10.0),
        relist_period: secs(args.relist_period),
        heartbeat_period: secs(args.heartbeat_period),
        lease_duration_seconds: args.node_lease_duration_seconds,
        status_report_period: secs(args.node_status_report_frequency),
        daemon_port: 0,
        serving_cert: None,
        max_pods: args.max_pods,
    };
    Agent {
        client,
        rt: Arc::new(FakeRuntime::hollow(cidr)),
        cfg: Arc::new(cfg),
    }
    .run(stop)
    .await
}
