//! `bosun up` / `bosun down` / `bosun list`: run a local cluster (control
//! plane and this host's agent) in the background, each process under
//! its supervisor, and point a kubeconfig at it.
//!
//! Several clusters may run on one host, as kind's do: `--name NAME`
//! gives one its own data dir, kubeconfig context, node name and ports,
//! and `bosun up` picks cluster and service ranges no other cluster and
//! no route of the host overlaps (`super::clusters`). `up` returns once
//! the node is Ready, or fails with the end of the failing process's log.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use ipnet::Ipv4Net;

use super::client::{bosun_kubeconfig, home_dir};
use super::clusters::{self, ClusterRecord, KubeconfigNames};
use super::component::{self, Started, AGENT, CONTROL};
use super::delete::parse_duration;
use super::purge;

mod args;
mod down;
pub mod etcd_pki;
pub mod ha;
mod kubeconfig;
mod list;
mod plan;
pub(in crate::cli) use args::{NodeArgs, ProcessArgs};
pub use down::{down, DownArgs};
use kubeconfig::read_admin_config;
pub use kubeconfig::write_kubeconfig;
pub use list::list;
use plan::plan_cluster;

#[derive(Debug, Args)]
pub struct UpArgs {
    /// The cluster's name, for several clusters on one host: its data dir
    /// (~/.bosun/clusters/NAME), kubeconfig context (bosun-NAME), node
    /// name (NAME) and a free port come from it.
    #[arg(long)]
    name: Option<String>,
    /// Where the control plane keeps its data, token, address and log.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Port to listen on; 0 picks a free one. Default: the port the
    /// cluster had, else 6443 for the default cluster and a free one for
    /// a named one.
    #[arg(long)]
    port: Option<u16>,
    /// How long to wait for the control plane to become ready and the
    /// node to become Ready.
    #[arg(long, default_value = "60s")]
    timeout: String,
    /// Start only the control plane, no local agent.
    #[arg(long)]
    no_agent: bool,
    #[command(flatten)]
    node: NodeArgs,
    /// The address other hosts reach the control plane at: it then
    /// listens on every interface, its certificate covers the address, and
    /// the printed `bosun join` command names it.
    #[arg(long, value_name = "ADDR")]
    advertise_address: Option<String>,
    /// The pod range of the whole cluster (default: the first of
    /// 10.244.0.0/16, 10.245.0.0/16, ... that no route of this host and no
    /// other bosun cluster here overlaps). Fixed once the cluster exists.
    #[arg(long, value_name = "CIDR")]
    cluster_cidr: Option<Ipv4Net>,
    /// The range Services' cluster IPs come from (default: the first of
    /// 10.96.0.0/12, 10.112.0.0/12, ... that nothing here overlaps). Fixed
    /// once the cluster exists.
    #[arg(long, value_name = "CIDR")]
    service_cidr: Option<Ipv4Net>,
    /// Pod Security Admission levels for namespaces without labels of
    /// their own, passed to bosun-control: e.g. `enforce=baseline` refuses
    /// privileged pods, `enforce=baseline,warn=restricted` also warns
    /// (default: privileged everywhere, as Kubernetes).
    #[arg(long, value_name = "MODE=LEVEL[:VERSION],...")]
    pod_security_default: Option<String>,
    /// Three control planes on a three-member etcd on this host (Debian's
    /// etcd-server package), the agent failing over between them, for
    /// trying a highly available cluster. Chosen when the cluster is made;
    /// a later `bosun up` of it brings all of it back.
    #[arg(long, conflicts_with = "store")]
    ha: bool,
    /// The cluster's etcd, `etcd://HOST:PORT[,HOST:PORT...]`, run by you
    /// (e.g. one member per control-plane host), instead of the embedded
    /// store; further control planes then `bosun join --control-plane`.
    /// Chosen when the cluster is made.
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// With --store: the CA of the etcd members' serving certificates
    /// (kube-apiserver's flag). Copied into the cluster's data dir, and
    /// handed to control planes that join.
    #[arg(long, value_name = "FILE", requires = "store")]
    etcd_cafile: Option<PathBuf>,
    /// With --store: the client certificate bosun-control presents to the
    /// members (with --etcd-keyfile). Copied as --etcd-cafile is.
    #[arg(long, value_name = "FILE", requires = "store")]
    etcd_certfile: Option<PathBuf>,
    /// With --store: the client certificate's key (kept 0600).
    #[arg(long, value_name = "FILE", requires = "store")]
    etcd_keyfile: Option<PathBuf>,
    #[command(flatten)]
    pub process: ProcessArgs,
}

/// The unit name of a component of cluster `name`.
fn unit_of(component: &component::Component, name: &str) -> String {
    let cluster = (name != clusters::DEFAULT_NAME).then_some(name);
    super::systemd::unit_name(component.name, cluster)
}

/// GET /readyz through a client built from the admin kubeconfig (TLS with
/// the server's CA); true on a 200.
pub(super) async fn ready(admin_kubeconfig: &Path) -> bool {
    let attempt = async {
        let kc = kube::config::Kubeconfig::read_from(admin_kubeconfig).ok()?;
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .ok()?;
        let client = kube::Client::try_from(config).ok()?;
        let req = http::Request::get("/readyz").body(Vec::new()).ok()?;
        client.request_text(req).await.ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(3), attempt).await,
        Ok(Some(_))
    )
}

/// Waits until the control plane started in `dir` serves: its address
/// written and its `/readyz` answering the admin kubeconfig. Fails with
/// the last lines of its log if it exits first or `deadline` passes; the
/// caller stops what it started.
pub(super) async fn wait_control_ready(
    dir: &Path,
    started: &mut Started,
    deadline: tokio::time::Instant,
) -> Result<()> {
    loop {
        if let Some(failure) = CONTROL.failure(dir, started)? {
            bail!(
                "{failure} before becoming ready; last lines of {}:\n{}",
                CONTROL.log_location(dir),
                CONTROL.log_tail(dir, 20)
            );
        }
        if read_trimmed(&dir.join("address")).is_some()
            && ready(&dir.join("admin.kubeconfig")).await
        {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "the control plane in {} did not become ready in time; last lines of {}:\n{}",
                dir.display(),
                CONTROL.log_location(dir),
                CONTROL.log_tail(dir, 20)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(super) fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// `~/x` for paths under HOME, to print commands users can paste.
fn pretty(path: &Path) -> String {
    let home = home_dir();
    match path.strip_prefix(&home) {
        Ok(rest) if home != Path::new("/") => format!("~/{}", rest.display()),
        _ => path.display().to_string(),
    }
}

fn print_next_steps(server: &str, pid: i32, dir: &Path, kubeconfig: &Path) {
    let kc = pretty(kubeconfig);
    println!("  server:     {server} (pid {pid})");
    println!("  data:       {}", pretty(dir));
    let logs = match CONTROL.unit(dir) {
        Some(_) => CONTROL.log_location(dir),
        None => pretty(&CONTROL.log_file(dir)),
    };
    println!("  logs:       {logs}");
    println!("  kubeconfig: {kc}");
    println!();
    println!("Next:");
    println!("  bosun get nodes");
    println!("  kubectl --kubeconfig {kc} get pods");
    println!("  export KUBECONFIG={kc}");
}

/// Makes a bootstrap token good for a day and prints the command other
/// hosts join with, as `kubeadm init` does.
async fn print_join_command(admin_kubeconfig: &Path) -> Result<()> {
    let ctx = super::client::Ctx::connect(&super::client::ConnectOptions {
        kubeconfig: Some(admin_kubeconfig.to_path_buf()),
        context: None,
        namespace: None,
    })
    .await?;
    let token = super::token::create(
        &ctx,
        Duration::from_secs(24 * 3600),
        Some("made by bosun up"),
    )
    .await?;
    println!();
    println!("Other hosts join with (the token is good for 24h; `bosun token create` makes more):");
    println!("  {}", super::token::join_command(&ctx, &token).await?);
    Ok(())
}

pub async fn up(args: &UpArgs, kubeconfig: Option<&Path>) -> Result<bool> {
    if let Some(n) = &args.name {
        clusters::validate_name(n)?;
    }
    let name = args.name.as_deref().unwrap_or(clusters::DEFAULT_NAME);
    let dir = args
        .data_dir
        .clone()
        .unwrap_or_else(|| clusters::default_data_dir(Some(name)));
    let timeout = parse_duration(&args.timeout)?;
    // Before anything is made: an unusable --service-manager.
    args.process.check()?;
    // What this call creates goes again if the cluster cannot be made.
    let made = dir
        .ancestors()
        .filter(|d| !d.exists())
        .last()
        .map(Path::to_path_buf);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.canonicalize().unwrap_or(dir);
    let kubeconfig = kubeconfig
        .map(Path::to_path_buf)
        .unwrap_or_else(bosun_kubeconfig);
    // bosun-control writes admin.kubeconfig (https://ADDR, its CA, the admin
    // token) and then `address` once it is listening.
    let address_file = dir.join("address");
    let admin_kubeconfig = dir.join("admin.kubeconfig");

    if CONTROL.is_running(&dir) {
        let names = ClusterRecord::read(&dir)?
            .map(|r| r.kubeconfig_names())
            .unwrap_or_else(|| KubeconfigNames::of(name));
        if read_trimmed(&address_file).is_some() && ready(&admin_kubeconfig).await {
            let admin = read_admin_config(&admin_kubeconfig)?;
            let body = match ha::Layout::read(&dir)? {
                Some(layout) => layout.kubeconfig_cluster(&admin.cluster),
                None => admin.cluster.clone(),
            };
            write_kubeconfig(&kubeconfig, &names, &body, &admin.token)?;
            println!("bosun is already running.");
            let pid = CONTROL.running_pid(&dir).unwrap_or_default();
            print_next_steps(&admin.server, pid, &dir, &kubeconfig);
            return Ok(true);
        }
        bail!(
            "bosun-control is running but not ready; see {} or run `bosun down`",
            CONTROL.log_location(&dir)
        );
    }
    let cluster = match plan_cluster(args, name, &dir) {
        Ok(c) => c,
        Err(e) => {
            if let Some(made) = made {
                let _ = std::fs::remove_dir_all(made);
            }
            return Err(e);
        }
    };

    let ha = match ha::Layout::plan(&dir, args.ha, cluster.port) {
        Ok(layout) => layout,
        Err(e) => {
            if let Some(made) = made {
                let _ = std::fs::remove_dir_all(made);
            }
            return Err(e);
        }
    };
    let etcd_files = etcd_pki::EtcdClientFiles {
        ca: args.etcd_cafile.clone(),
        cert: args.etcd_certfile.clone(),
        key: args.etcd_keyfile.clone(),
    };
    let external = match ha::external_store(&dir, args.store.as_deref(), &etcd_files) {
        Ok(store) => store,
        Err(e) => {
            if let Some(made) = made {
                let _ = std::fs::remove_dir_all(made);
            }
            return Err(e);
        }
    };
    if let Some(layout) = &ha {
        if let Err(e) = layout.start_etcd(&dir, name, &args.process, timeout).await {
            let _ = layout.stop(&dir, Duration::from_secs(10));
            return Err(e);
        }
    }

    // A stale address from an earlier run must not be mistaken for this one's.
    let _ = std::fs::remove_file(&address_file);
    // What every control plane of the cluster is given (each its own
    // data dir and port besides).
    let mut control_args = vec![
        "--cluster-cidr".to_string(),
        cluster.cluster_cidr.to_string(),
        "--service-cluster-ip-range".into(),
        cluster.service_cidr.to_string(),
    ];
    // Every interface, so pods reach the API through the kubernetes
    // Service at the advertised address (the kubeconfig keeps 127.0.0.1).
    control_args.extend(["--bind".into(), "0.0.0.0".into()]);
    let advertise = args
        .advertise_address
        .clone()
        .filter(|a| a.parse::<std::net::IpAddr>().is_ok())
        .or_else(|| args.node.node_ip.map(|ip| ip.to_string()));
    if let Some(addr) = advertise {
        control_args.extend(["--advertise-address".into(), addr]);
    }
    if let Some(addr) = &args.advertise_address {
        control_args.extend(["--tls-san".into(), addr.clone()]);
    }
    if let Some(levels) = &args.pod_security_default {
        control_args.extend(["--pod-security-default".into(), levels.clone()]);
    }
    let store = ha.as_ref().map(ha::Layout::store_url).or(external);
    if let Some(store) = &store {
        control_args.extend(["--store".into(), store.clone()]);
    }
    match &ha {
        Some(layout) => control_args.extend(layout.control_args(&dir)),
        None if store.is_some() => {
            control_args.extend(etcd_pki::EtcdPki::of(&dir).given_control_args())
        }
        None => {}
    }
    let shared_args = control_args;
    let mut control_args = vec![
        "--data-dir".to_string(),
        dir.display().to_string(),
        "--port".to_string(),
        cluster.port.to_string(),
    ];
    control_args.extend(shared_args.iter().cloned());
    let launch = args.process.launch(
        &control_args,
        unit_of(&CONTROL, name),
        format!("bosun control plane (cluster {name})"),
        vec![],
    )?;
    let mut started = CONTROL.start(&dir, &launch)?;
    let deadline = tokio::time::Instant::now() + timeout;
    if let Err(e) = wait_control_ready(&dir, &mut started, deadline).await {
        let _ = CONTROL.stop(&dir, Duration::from_secs(10));
        if let Some(layout) = &ha {
            let _ = layout.stop(&dir, Duration::from_secs(10));
        }
        return Err(e);
    }
    if let Some(layout) = &ha {
        if let Err(e) = layout
            .start_other_controls(&dir, name, &shared_args, &args.process, timeout)
            .await
        {
            let _ = layout.stop(&dir, Duration::from_secs(10));
            let _ = CONTROL.stop(&dir, Duration::from_secs(10));
            return Err(e);
        }
    }
    let admin = read_admin_config(&admin_kubeconfig)?;
    let body = match &ha {
        Some(layout) => layout.kubeconfig_cluster(&admin.cluster),
        None => admin.cluster.clone(),
    };
    write_kubeconfig(
        &kubeconfig,
        &cluster.kubeconfig_names(),
        &body,
        &admin.token,
    )?;
    // What `bosun down --purge` removes.
    std::fs::write(
        dir.join(purge::KUBECONFIG_FILE),
        kubeconfig.display().to_string(),
    )?;
    if let Some(node) = &cluster.node {
        let more = ha.as_ref().map(ha::Layout::agent_args).unwrap_or_default();
        start_agent(
            args,
            &cluster,
            node,
            &dir,
            &admin_kubeconfig,
            &more,
            timeout,
        )
        .await?;
    }
    println!("bosun is up.");
    println!(
        "  cluster:    {} (pods in {}, services in {})",
        cluster.name, cluster.cluster_cidr, cluster.service_cidr
    );
    let pid = CONTROL.running_pid(&dir).unwrap_or_default();
    print_next_steps(&admin.server, pid, &dir, &kubeconfig);
    if let Some(layout) = &ha {
        println!(
            "  control planes: {} on etcd {}",
            layout.servers().join(" "),
            layout.store_url()
        );
    }
    print_join_command(&admin_kubeconfig).await?;
    if let Some(store) = &store {
        let local = ha.is_some();
        ha::print_control_plane_join(&admin_kubeconfig, &dir, &cluster, store, local).await?;
    }
    Ok(true)
}

/// Starts the local agent (unless it runs already) and waits until its
/// Node is Ready.
async fn start_agent(
    args: &UpArgs,
    cluster: &ClusterRecord,
    node: &str,
    dir: &Path,
    admin_kubeconfig: &Path,
    more_agent_args: &[String],
    timeout: Duration,
) -> Result<()> {
    if AGENT.is_running(dir) {
        return Ok(());
    }
    std::fs::write(dir.join(purge::NODE_FILE), node)?;
    let agent_data = agent_data_dir(dir);
    let mut agent_args = vec![
        "--kubeconfig".to_string(),
        admin_kubeconfig.display().to_string(),
        "--node-name".into(),
        node.to_string(),
        "--data-dir".into(),
        agent_data.display().to_string(),
        "--service-cluster-ip-range".into(),
        cluster.service_cidr.to_string(),
    ];
    agent_args.extend(args.node.agent_args());
    agent_args.extend(more_agent_args.iter().cloned());
    if cluster.name != clusters::DEFAULT_NAME || args.port == Some(0) {
        // One of several clusters here, or a throwaway one: the agent's
        // stream API takes a free port (it is published on the Node).
        agent_args.extend(["--port".to_string(), "0".into()]);
        // The host's ports 80 and 443 are the default cluster's ingress:
        // a second cluster (or a test's) serves no ingress on them.
        agent_args
            .extend(["--ingress-http-port", "0", "--ingress-https-port", "0"].map(String::from));
    }
    let after = match CONTROL.unit(dir) {
        Some(control) => vec!["docker.service".to_string(), control],
        None => vec!["docker.service".to_string()],
    };
    let launch = args.process.launch(
        &agent_args,
        unit_of(&AGENT, &cluster.name),
        format!("bosun agent of node {node} (cluster {})", cluster.name),
        after,
    )?;
    let started = AGENT.start(dir, &launch)?;
    let kc = kube::config::Kubeconfig::read_from(admin_kubeconfig)?;
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?,
    )?;
    wait_for_node(started, dir, client, node, timeout).await
}

/// Waits until the agent (`started` from `dir`) has made Node `node`
/// Ready. If the agent exits first it is stopped and its log's end is the
/// error; if it is only slow (waiting for Docker or the control plane), it
/// keeps trying in the background.
pub(super) async fn wait_for_node(
    mut started: Started,
    dir: &Path,
    client: kube::Client,
    node: &str,
    timeout: Duration,
) -> Result<()> {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::from("not registered");
    loop {
        if let Some(failure) = AGENT.failure(dir, &mut started)? {
            let log = AGENT.log_tail(dir, 20);
            let location = AGENT.log_location(dir);
            let _ = AGENT.stop(dir, Duration::from_secs(30));
            bail!("{failure} before node {node} was Ready; last lines of {location}:\n{log}");
        }
        if let Ok(Some(n)) = nodes.get_opt(node).await {
            let ready = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
            match ready {
                Some(c) if c.status == "True" => return Ok(()),
                Some(c) => {
                    last = format!(
                        "Ready={} ({}: {})",
                        c.status,
                        c.reason.as_deref().unwrap_or(""),
                        c.message.as_deref().unwrap_or("")
                    )
                }
                None => last = "registered, no Ready condition yet".into(),
            }
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "node {node} was not Ready in {timeout:?} (last seen: {last}); the agent keeps \
                 trying in the background (`bosun down` stops it); last lines of {}:\n{}",
                AGENT.log_location(dir),
                AGENT.log_tail(dir, 20)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The agent's data dir: beside the control plane's, or inside the data
/// dir of `bosun join` (which holds the node's kubeconfig) or of `bosun
/// join --control-plane` (never the `agent` beside it, which may be
/// another cluster's).
pub(super) fn agent_data_dir(dir: &Path) -> PathBuf {
    if dir.join(purge::NODE_KUBECONFIG).exists() || dir.join(purge::JOINED_CONTROL_PLANE).exists() {
        return dir.join("agent");
    }
    dir.parent().unwrap_or(dir).join("agent")
}

#[cfg(test)]
mod tests;
