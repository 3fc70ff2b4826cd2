use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bosun::serving::connections::{ConnectionFlags, Limits};
use bosun::serving::LogFormat;
use bosun_agent::config::AgentConfig;
use bosun_agent::dns;
use bosun_agent::loadbalancer::{server_address, LoadBalancer, Options as LoadBalancerOptions};
use bosun_agent::metrics::MetricsCollector;
use bosun_agent::netpol::NetworkPolicyEnforcer;
use bosun_agent::network::{self, HostGw};
use bosun_agent::node;
use bosun_agent::node::certificate;
use bosun_agent::proxy::{self, ServiceProxy};
use bosun_agent::runtime::docker::DockerRuntime;
use bosun_agent::server::{self, NodeServer};
use bosun_agent::services::ServiceCache;
use bosun_agent::sync_loop::Agent;
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// bosun's node agent: runs the pods bound to this node on Docker.
#[derive(Parser, Debug)]
#[command(name = "bosun-agent", version)]
struct Args {
    /// Log line format on stderr: `text` (coloured only on a terminal) or
    /// `json` (one object per line).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Kubeconfig to reach the control plane with.
    #[arg(long, env = "KUBECONFIG", required_unless_present = "purge")]
    kubeconfig: Option<PathBuf>,
    /// More control planes (`https://HOST:PORT`, comma-separated or the
    /// flag repeated) serving the same cluster as the kubeconfig's server:
    /// the agent then reaches them all through a load balancer on a
    /// loopback port and fails over between them (`bosun up --ha`, a node
    /// of a cluster with several control planes).
    #[arg(long = "api-servers", value_delimiter = ',', value_name = "URL")]
    api_servers: Vec<String>,
    /// Instead of running: remove everything this node's agent made on
    /// Docker (its pods' containers, its network, its rule in the iptables
    /// chain BOSUN-FORWARD, the chain itself once no other node needs it,
    /// routes and the NAT chain) and exit (`bosun down --purge`).
    #[arg(long)]
    purge: bool,
    /// The Node's name (default: the hostname).
    #[arg(long)]
    node_name: Option<String>,
    /// The node's address (its InternalIP, which other hosts route its
    /// pods through); needed when the host has several.
    #[arg(long, conflicts_with = "node_interface")]
    node_ip: Option<IpAddr>,
    /// The interface whose IPv4 address is the node's address.
    #[arg(long)]
    node_interface: Option<String>,
    /// The node's pod subnet (default: the one the control plane assigns
    /// the Node, waited for up to --pod-cidr-timeout).
    #[arg(long)]
    pod_cidr: Option<String>,
    /// How long to wait for the control plane to assign a pod CIDR.
    #[arg(long, default_value_t = 60.0)]
    pod_cidr_timeout: f64,
    /// Where pod volumes live (default: /var/lib/bosun/agent-<node>).
    /// With a Docker engine that is not this host's, it must be the same
    /// path on the engine (a directory shared with it).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Where the Docker engine's filesystem is seen from here: hostPath
    /// volumes are the engine's paths and their `type` is checked under
    /// this root (an agent in a container on the engine mounts the
    /// engine's / there).
    #[arg(long, env = "BOSUN_HOST_ROOT", default_value = "/")]
    host_root: PathBuf,
    /// Nameserver for pods with dnsPolicy ClusterFirst (default: the
    /// node-local DNS server's address).
    #[arg(long)]
    cluster_dns: Vec<String>,
    /// The cluster's DNS domain, which the node-local DNS server answers for.
    #[arg(long, default_value = "cluster.local")]
    cluster_domain: String,
    /// Where the node-local DNS server listens (default: the pod bridge's
    /// gateway, port 53, which every pod of the node reaches).
    #[arg(long)]
    dns_bind: Option<SocketAddr>,
    /// Upstream resolvers for names outside the cluster domain, as IP or
    /// IP:PORT (default: the host's, from /etc/resolv.conf, or
    /// systemd-resolved's list when that names its stub).
    #[arg(long, env = "BOSUN_DNS_UPSTREAM", value_delimiter = ',')]
    dns_upstream: Vec<String>,
    /// Do not run the node-local DNS server (pods then need --cluster-dns).
    #[arg(long)]
    no_dns: bool,
    /// The cluster's service range, which the control plane allocates
    /// cluster IPs from: the service proxy rejects whatever is addressed
    /// to it and no service answers (default: the range the control plane
    /// publishes in kube-public's cluster-info, else 10.96.0.0/12).
    #[arg(long)]
    service_cluster_ip_range: Option<String>,
    /// The cluster's pod network: other Nodes' pod CIDRs outside it get no
    /// route (default: the range the control plane publishes in
    /// kube-public's cluster-info, else the /16 holding this node's pod
    /// CIDR).
    #[arg(long, value_name = "CIDR")]
    cluster_cidr: Option<ipnet::Ipv4Net>,
    /// Do not run the service proxy (its nftables table `ip bosun-<node>`):
    /// service IPs and node ports then do not answer on this node.
    #[arg(long)]
    no_proxy: bool,
    /// How the service proxy programs the host: one nftables table, or
    /// iptables chains as kube-proxy's iptables mode (default: nftables
    /// when `nft` works here, else iptables).
    #[arg(long, value_enum)]
    proxy_mode: Option<proxy::ProxyMode>,
    /// Do not enforce NetworkPolicies (the nftables table
    /// `ip bosun-np-<node>`): the node's pods then take any traffic.
    #[arg(long)]
    no_network_policy: bool,
    /// Do not run the built-in ingress controller (IngressClass `bosun`).
    #[arg(long)]
    no_ingress: bool,
    /// The node port the ingress controller serves HTTP on; 0: none.
    /// A port that is taken is logged and tried again; the node keeps
    /// running.
    #[arg(long, default_value_t = 80)]
    ingress_http_port: u16,
    /// The node port the ingress controller serves HTTPS on; 0: none.
    #[arg(long, default_value_t = 443)]
    ingress_https_port: u16,
    /// Docker endpoint (default: DOCKER_HOST or the local socket).
    #[arg(long, env = "DOCKER_HOST")]
    docker_host: Option<String>,
    /// First crash-loop back-off, in seconds (doubles up to --backoff-max).
    #[arg(long, default_value_t = 10.0)]
    backoff_base: f64,
    #[arg(long, default_value_t = 300.0)]
    backoff_max: f64,
    /// Seconds between container relists.
    #[arg(long, default_value_t = 1.0)]
    relist_period: f64,
    /// Seconds between node heartbeats (Lease renewals and node status
    /// checks).
    #[arg(long, default_value_t = 10.0)]
    heartbeat_period: f64,
    /// The node Lease's duration in seconds.
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(i32).range(1..))]
    node_lease_duration_seconds: i32,
    /// Seconds after which an unchanged node status is written again.
    #[arg(long, default_value_t = 300.0)]
    node_status_report_frequency: f64,
    /// Address the stream API (logs, exec, attach) listens on.
    #[arg(long, default_value = "0.0.0.0")]
    address: IpAddr,
    /// Port of the stream API; 0 picks a free one (published on the Node).
    #[arg(long, default_value_t = 10250)]
    port: u16,
    /// File holding the bearer token the stream API accepts from callers
    /// without a client certificate (default: the token of the
    /// kubeconfig's user, if it has one; else only certificates).
    #[arg(long)]
    stream_token_file: Option<PathBuf>,
    /// PEM file of the CA whose client certificates (of group
    /// system:masters) the stream API accepts, as kubelet's
    /// `--client-ca-file` (default: the kubeconfig's cluster CA).
    #[arg(long)]
    client_ca_file: Option<PathBuf>,
    /// How many pods this node takes (its allocatable `pods`), as
    /// kubelet's `--max-pods`.
    #[arg(long, default_value_t = 110)]
    max_pods: u32,
    /// Seconds between resource metrics readings (Docker's one-shot stats
    /// of every running container, and the host's /proc); 0 turns
    /// collection off.
    #[arg(long, default_value_t = 10.0)]
    metrics_interval: f64,
    /// The stream API's timeouts and connection cap.
    #[command(flatten)]
    connections: ConnectionFlags,
}

/// `HOST:PORT` of every control plane: the kubeconfig's server first, then
/// `--api-servers` (without repeats).
fn control_planes(config: &kube::Config, more: &[String]) -> anyhow::Result<Vec<String>> {
    let mut servers = vec![server_address(&config.cluster_url.to_string())
        .map_err(|e| anyhow::anyhow!("the kubeconfig's server {e}"))?];
    for url in more {
        let address = server_address(url).map_err(|e| anyhow::anyhow!("--api-servers {e}"))?;
        if !servers.contains(&address) {
            servers.push(address);
        }
    }
    Ok(servers)
}

/// The token the stream API accepts from callers without a client
/// certificate: from `--stream-token-file`, else the kubeconfig user's own;
/// none when the kubeconfig's user has none (a joined node's certificate).
fn stream_token(
    explicit: Option<&PathBuf>,
    config: &kube::Config,
) -> anyhow::Result<Option<String>> {
    use secrecy::ExposeSecret;
    let from_file = |path: &std::path::Path| -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(path)
            .with_context(|| format!("reading {}", path.display()))?
            .trim()
            .to_string())
    };
    if let Some(path) = explicit {
        let token = from_file(path)?;
        if token.is_empty() {
            bail!("--stream-token-file {}: the file is empty", path.display());
        }
        return Ok(Some(token));
    }
    let token = if let Some(t) = &config.auth_info.token {
        t.expose_secret().to_string()
    } else if let Some(path) = &config.auth_info.token_file {
        from_file(std::path::Path::new(path))?
    } else {
        String::new()
    };
    Ok(Some(token).filter(|t| !t.is_empty()))
}

/// The CAs whose client certificates the stream API accepts: from
/// `--client-ca-file`, else the kubeconfig's cluster CA.
fn client_cas(
    explicit: Option<&PathBuf>,
    config: &kube::Config,
) -> anyhow::Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    match explicit {
        Some(path) => {
            let cas = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .with_context(|| format!("--client-ca-file {}", path.display()))?;
            if cas.is_empty() {
                bail!(
                    "--client-ca-file {}: no PEM certificate in it",
                    path.display()
                );
            }
            Ok(cas)
        }
        None => Ok(config
            .root_cert
            .iter()
            .flatten()
            .map(|der| CertificateDer::from(der.clone()))
            .collect()),
    }
}

/// `IP` or `IP:PORT` (port 53 by default).
fn parse_upstream(s: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let ip: IpAddr = s
        .parse()
        .with_context(|| format!("--dns-upstream {s}: not an IP or IP:PORT"))?;
    Ok(SocketAddr::new(ip, 53))
}

/// `--purge`: removes what the node's agent made on Docker and says what.
async fn purge(node: &str, docker_host: Option<&str>) -> anyhow::Result<()> {
    let rt = DockerRuntime::connect(docker_host).context("connecting to Docker")?;
    let purged = rt
        .purge_node(node)
        .await
        .with_context(|| format!("removing node {node}'s containers and network"))?;
    // The service proxy's table or chains (SIGTERM removes them; a killed
    // agent leaves them). Without nft there is no table to remove, and
    // without iptables no chains.
    let table = proxy::table_name(node);
    let tables = match proxy::nft::delete_table(&table).await {
        Ok(true) => format!("ip {table}"),
        Ok(false) => String::new(),
        Err(e) if proxy::nft::check_installed().await.is_err() => {
            tracing::debug!(error = %e, "nft is not installed; no table to remove");
            String::new()
        }
        Err(e) => return Err(e.context(format!("removing nftables table ip {table}"))),
    };
    // The network policies' table (it stays while the agent is down).
    let policy_table = bosun_agent::netpol::table_name(node);
    let tables = match proxy::nft::delete_table(&policy_table).await {
        Ok(true) if tables.is_empty() => format!("ip {policy_table}"),
        Ok(true) => format!("{tables}, ip {policy_table}"),
        Ok(false) => tables,
        Err(e) if proxy::nft::check_installed().await.is_err() => {
            tracing::debug!(error = %e, "nft is not installed; no table to remove");
            tables
        }
        Err(e) => return Err(e.context(format!("removing nftables table ip {policy_table}"))),
    };
    let proxy_chains = proxy::render_iptables::chain_prefix(&table);
    let proxy_chains = match proxy::iptables::remove(&table).await {
        Ok(true) => vec![format!("{proxy_chains}*")],
        Ok(false) => Vec::new(),
        Err(e) if proxy::iptables::check_installed().await.is_err() => {
            tracing::debug!(error = %e, "iptables is not installed; no chains to remove");
            Vec::new()
        }
        Err(e) => return Err(e.context(format!("removing iptables chains {proxy_chains}*"))),
    };
    let (routes, chain) = network::purge()
        .await
        .map_err(anyhow::Error::msg)
        .context("removing routes to other nodes' pods")?;
    let mut rules = purged.rules;
    if chain {
        rules.push(format!("nat {}", network::masquerade::CHAIN));
    }
    rules.extend(proxy_chains);
    println!(
        "node {node}: removed {} containers, networks [{}], iptables rules [{}], routes [{}], nftables tables [{tables}]",
        purged.containers,
        purged.networks.join(", "),
        rules.join(", "),
        routes.join(", ")
    );
    Ok(())
}

/// How long a SIGTERM may take before the agent exits whatever still runs
/// (its pods keep running either way; a proxy table left behind is
/// replaced by the next agent or removed by `--purge`).
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(5);

fn main() -> anyhow::Result<()> {
    // Before any thread starts: a few malloc arenas, not eight per core
    // (`MALLOC_ARENA_MAX` overrides; tokio's `TOKIO_WORKER_THREADS` sets
    // its worker threads, one per core by default).
    bosun_agent::memory::limit_arenas();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    // hickory-server logs every query at info; keep it to warnings unless
    // BOSUN_LOG names it.
    let filter = std::env::var("BOSUN_LOG").unwrap_or_else(|_| "info".into());
    if !filter.contains("hickory") {
        std::env::set_var("BOSUN_LOG", format!("{filter},hickory_server=warn"));
    }
    // `bosun-agent hollow ...`: many fake-runtime nodes (agent/src/hollow/).
    if std::env::args().nth(1).as_deref() == Some("hollow") {
        return bosun_agent::hollow::main(std::env::args().skip(1)).await;
    }
    let args = Args::parse();
    bosun::serving::init_logging(args.log_format);
    let node_name = match args.node_name {
        Some(n) => n,
        None => nix::unistd::gethostname()?.to_string_lossy().into_owned(),
    };
    if args.purge {
        return purge(&node_name, args.docker_host.as_deref()).await;
    }
    let addresses = network::address::host_addresses().context("listing this host's addresses")?;
    let node_ip =
        network::address::choose(args.node_ip, args.node_interface.as_deref(), &addresses)
            .map_err(anyhow::Error::msg)?
            .to_string();
    let secs = Duration::from_secs_f64;
    let data_dir = args
        .data_dir
        .unwrap_or_else(|| PathBuf::from(format!("/var/lib/bosun/agent-{node_name}")));
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let stream_addr = SocketAddr::new(args.address, args.port);
    let stream_listener = tokio::net::TcpListener::bind(stream_addr)
        .await
        .with_context(|| format!("listening on {stream_addr}"))?;
    let daemon_port = stream_listener.local_addr()?.port();
    let mut cert_names = vec![
        node_ip.clone(),
        node_name.clone(),
        "localhost".into(),
        "127.0.0.1".into(),
    ];
    cert_names.dedup();
    let kubeconfig_path = args.kubeconfig.clone().expect("required unless --purge");
    let kubeconfig = Kubeconfig::read_from(&kubeconfig_path)
        .with_context(|| format!("reading {}", kubeconfig_path.display()))?;
    let mut client_config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    // The kubelet's User-Agent: the API records what the agent writes (pod
    // and node status) under the field manager `kubelet`, as Kubernetes does.
    client_config.headers.push((
        http::header::USER_AGENT,
        bosun::fieldmanager::user_agent(bosun::fieldmanager::KUBELET).parse()?,
    ));
    // Kept to the end: the agent's clients reach the control planes through it.
    // Only with --api-servers: a lone kubeconfig server is used as it is.
    let servers = match args.api_servers.is_empty() {
        true => Vec::new(),
        false => control_planes(&client_config, &args.api_servers)?,
    };
    let _balancer = match servers {
        servers if servers.len() > 1 => {
            let lb = LoadBalancer::start(servers, LoadBalancerOptions::default())
                .await
                .context("starting the control-plane load balancer")?;
            client_config.cluster_url = lb.url().parse()?;
            Some(lb)
        }
        _ => None,
    };
    let token = stream_token(args.stream_token_file.as_ref(), &client_config)?;
    let client_cas = client_cas(args.client_ca_file.as_ref(), &client_config)?;
    if token.is_none() && client_cas.is_empty() {
        bail!("the stream API would accept nobody: the kubeconfig has no cluster CA and its user no token; pass --client-ca-file");
    }
    let serving = server::tls::load_or_create(&data_dir, &cert_names, &client_cas)
        .context("making the stream API's certificate")?;
    let (client, rotation) = certificate::client(&kubeconfig_path, client_config)?;
    let pod_cidr = match args.pod_cidr {
        Some(c) => c,
        None => node::await_pod_cidr(&client, &node_name, secs(args.pod_cidr_timeout)).await?,
    };
    let dns_bind = match (args.dns_bind, dns::gateway_of(&pod_cidr)) {
        (Some(b), _) => b,
        (None, Some(gw)) => SocketAddr::new(gw.into(), 53),
        (None, None) => bail!(
            "--pod-cidr {pod_cidr} is not an IPv4 CIDR; say where DNS listens with --dns-bind"
        ),
    };
    let host = dns::upstream::host_resolvers(
        std::path::Path::new("/etc/resolv.conf"),
        std::path::Path::new("/run/systemd/resolve/resolv.conf"),
        Some(dns_bind.ip()),
    );
    let upstreams = if args.dns_upstream.is_empty() {
        dns::upstream::as_upstreams(&host.nameservers)
    } else {
        args.dns_upstream
            .iter()
            .map(|u| parse_upstream(u))
            .collect::<anyhow::Result<_>>()?
    };
    let cluster_dns = if args.cluster_dns.is_empty() {
        vec![dns_bind.ip().to_string()]
    } else {
        args.cluster_dns
    };
    // One watch of Services and one of EndpointSlices for DNS and the proxy.
    let services = ServiceCache::new(client.clone());
    let dns_settings = (!args.no_dns).then(|| dns::DnsSettings {
        bind: dns_bind,
        domain: args.cluster_domain.clone(),
        upstreams,
        ttl: dns::DEFAULT_TTL,
        forward_timeout: dns::DEFAULT_FORWARD_TIMEOUT,
        services: Some(services.clone()),
    });
    let service_range = match (&args.service_cluster_ip_range, args.no_proxy) {
        (Some(r), _) => r.clone(),
        (None, true) => proxy::DEFAULT_SERVICE_CIDR.to_string(),
        (None, false) => bosun_agent::startup::published_service_range(&client)
            .await
            .context("reading the cluster's service range from cluster-info")?
            .unwrap_or_else(|| proxy::DEFAULT_SERVICE_CIDR.to_string()),
    };
    let cluster_cidr: ipnet::Ipv4Net = match args.cluster_cidr {
        Some(c) => c,
        None => bosun_agent::startup::published_cluster_cidr(&client)
            .await
            .context("reading the cluster's pod network from cluster-info")?
            .or_else(|| network::firewall::supernet16(&pod_cidr))
            .and_then(|c| c.parse().ok())
            .with_context(|| {
                format!("no cluster CIDR for pod CIDR {pod_cidr}: give --cluster-cidr")
            })?,
    };
    let proxy_settings = (!args.no_proxy)
        .then(|| -> anyhow::Result<proxy::Settings> {
            Ok(proxy::Settings {
                table: proxy::table_name(&node_name),
                service_cidr: proxy::parse_cidr(&service_range).with_context(|| {
                    format!("--service-cluster-ip-range {service_range}: not an IPv4 CIDR")
                })?,
                pod_cidr: proxy::parse_cidr(&pod_cidr)
                    .with_context(|| format!("--pod-cidr {pod_cidr}: not an IPv4 CIDR"))?,
                bridge_netfilter: proxy::render::host_bridge_netfilter(),
            })
        })
        .transpose()?;
    let cfg = AgentConfig {
        pod_cidr,
        data_dir,
        host_root: args.host_root,
        node_name,
        node_ip,
        cluster_dns,
        cluster_domain: args.cluster_domain,
        host_search: host.search,
        dns: dns_settings,
        backoff_base: secs(args.backoff_base),
        backoff_max: secs(args.backoff_max),
        backoff_reset: secs(args.backoff_max * 2.0),
        sync_period: Duration::from_secs(10),
        relist_period: secs(args.relist_period),
        heartbeat_period: secs(args.heartbeat_period),
        lease_duration_seconds: args.node_lease_duration_seconds,
        status_report_period: secs(args.node_status_report_frequency),
        daemon_port,
        serving_cert: Some(serving.cert_pem.clone()),
        max_pods: args.max_pods,
    };
    let rt: Arc<DockerRuntime> = Arc::new(
        DockerRuntime::connect(args.docker_host.as_deref()).context("connecting to Docker")?,
    );

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        tracing::info!("shutting down; pods keep running");
        let _ = stop_tx.send(true);
        bosun::serving::exit_after(SHUTDOWN_DEADLINE);
    });
    tracing::info!(node = %cfg.node_name, ip = %cfg.node_ip, pod_cidr = %cfg.pod_cidr, port = daemon_port, "bosun-agent starting");
    let metrics = (args.metrics_interval > 0.0).then(|| {
        let collector = Arc::new(MetricsCollector::new(rt.clone(), &cfg.node_name));
        tokio::spawn(
            collector
                .clone()
                .run(secs(args.metrics_interval), stop_rx.clone()),
        );
        collector
    });
    if let Some(rotation) = rotation {
        tokio::spawn(rotation.run(stop_rx.clone()));
    }
    tokio::spawn(
        HostGw {
            client: client.clone(),
            node_name: cfg.node_name.clone(),
            pod_cidr: cfg.pod_cidr.clone(),
            cluster_cidr,
            refused: Default::default(),
        }
        .run(stop_rx.clone()),
    );
    tokio::spawn(server::serve(
        stream_listener,
        serving.config,
        Arc::new(NodeServer {
            rt: rt.clone(),
            node: cfg.node_name.clone(),
            token,
            metrics,
        }),
        args.connections.limits(Limits::AGENT),
        stop_rx.clone(),
    ));
    if !args.no_ingress && (args.ingress_http_port != 0 || args.ingress_https_port != 0) {
        tokio::spawn(bosun_agent::ingress::start(
            client.clone(),
            services.clone(),
            bosun_agent::ingress::Settings {
                http_port: args.ingress_http_port,
                https_port: args.ingress_https_port,
                node_name: cfg.node_name.clone(),
                node_ip: cfg.node_ip.clone(),
            },
        ));
    }
    // Before any pod runs: nothing may reach a service address unhandled.
    let service_proxy = match proxy_settings {
        Some(settings) => {
            let mode = match args.proxy_mode {
                Some(m) => {
                    tracing::info!(mode = m.name(), "service proxy: mode given by --proxy-mode");
                    m
                }
                None => {
                    let m = proxy::ProxyMode::detect().await;
                    tracing::info!(
                        mode = m.name(),
                        "service proxy: mode chosen ({})",
                        match m {
                            proxy::ProxyMode::Nftables => "nft works here",
                            proxy::ProxyMode::Iptables => "nft does not work here",
                        }
                    );
                    m
                }
            };
            Some(
                ServiceProxy::start(services, cfg.node_name.clone(), settings, mode)
                    .await
                    .context("starting the service proxy")?,
            )
        }
        None => None,
    };
    // Before any pod runs too: a table left by the last agent keeps
    // isolating the pods until this one has listed and replaces it.
    let policy_enforcer = if args.no_network_policy {
        None
    } else {
        match NetworkPolicyEnforcer::start(client.clone(), cfg.node_name.clone()).await {
            Ok(e) => Some(e),
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), "network policy: not enforced on this node");
                None
            }
        }
    };
    let result = Agent {
        client,
        rt,
        cfg: Arc::new(cfg),
    }
    .run(stop_rx)
    .await;
    if let Some(p) = service_proxy {
        p.shutdown().await;
    }
    if let Some(e) = policy_enforcer {
        e.shutdown().await;
    }
    result
}
