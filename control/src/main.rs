use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use bosun::serving::connections::{ConnectionFlags, Limits};
use bosun::serving::LogFormat;
use bosun_control::api::admission::pod_security::Policy as PodSecurityPolicy;
use bosun_control::api::ApiOptions;
use bosun_control::controllers::nodeipam::NodeIpamOptions;
use bosun_control::controllers::nodelifecycle::NodeLifecycleOptions;
use bosun_control::controllers::podautoscaler::PodAutoscalerOptions;
use bosun_control::controllers::podgc::PodGcOptions;
use bosun_control::leaderelection::LeaderElectionOptions;
use bosun_control::manager::ControllerOptions;
use bosun_control::server::{self, Config};
use bosun_control::snapshot::PeriodicOptions;
use bosun_control::store::{EtcdOptions, StoreOptions};
use clap::Parser;

/// bosun's control plane: the Kubernetes API on an embedded store.
#[derive(Parser, Debug)]
#[command(name = "bosun-control", version)]
struct Args {
    /// Where the store, the admin token and the address file live.
    #[arg(long, env = "BOSUN_DATA_DIR", default_value = "/var/lib/bosun/control")]
    data_dir: PathBuf,
    /// Log line format on stderr: `text` (coloured only on a terminal) or
    /// `json` (one object per line).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Port to listen on; 0 picks a free one (written to DATA_DIR/address).
    #[arg(long, default_value_t = 6443)]
    port: u16,
    /// Where the objects live: `embedded` (a file in the data dir) or
    /// `etcd://HOST:PORT[,HOST:PORT...]`, an etcd v3 cluster.
    #[arg(long, default_value = "embedded")]
    store: String,
    /// etcd: the CA file that signed the members' serving certificates
    /// (the members are then reached over https).
    #[arg(long)]
    etcd_cafile: Option<PathBuf>,
    /// etcd: the client certificate, for members that require one.
    #[arg(long, requires = "etcd_keyfile")]
    etcd_certfile: Option<PathBuf>,
    /// etcd: the client certificate's key.
    #[arg(long, requires = "etcd_certfile")]
    etcd_keyfile: Option<PathBuf>,
    /// etcd: where this cluster's keys live, so that several clusters can
    /// share one etcd (kube-apiserver's default).
    #[arg(long, default_value = "/registry")]
    etcd_prefix: String,
    /// etcd: how often the history is compacted (e.g. 5m; 0: never).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    etcd_compaction_interval: Duration,
    /// etcd: keep a watch cache per resource (kube-apiserver's
    /// `--watch-cache`): lists and watches are served from it.
    /// `--watch-cache=false` sends each of them to etcd.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    watch_cache: bool,
    /// How many past changes the embedded store keeps for watches to
    /// resume from.
    #[arg(long, default_value_t = 20_000)]
    watch_history: u64,
    /// Seconds between bookmarks on idle watches that ask for them.
    #[arg(long, default_value_t = 30)]
    bookmark_interval: u64,
    /// The address pods reach the API at, published as the `kubernetes`
    /// Service's endpoint (kube-apiserver's flag). Default: --bind if it is
    /// a specific non-loopback address, else the address of the interface
    /// of this host's default route.
    #[arg(long)]
    advertise_address: Option<IpAddr>,
    /// The cluster's DNS domain (the agents' --cluster-domain), for the
    /// serving certificate's kubernetes.default.svc.<domain>.
    #[arg(long, default_value = "cluster.local")]
    cluster_domain: String,
    /// Extra DNS names or IP addresses for the serving certificate.
    #[arg(long = "tls-san")]
    tls_sans: Vec<String>,
    /// Seconds a watch lasts at least when it asks for no timeoutSeconds
    /// (it gets between this and twice this), as kube-apiserver's flag; no
    /// watch lasts longer than twice this.
    #[arg(long, default_value_t = 1800, value_parser = clap::value_parser!(u64).range(1..))]
    min_request_timeout: u64,
    /// Serve the web view at /ui/ (`--ui=false` turns it off).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    ui: bool,
    /// With --max-mutating-requests-inflight: the seats API Priority and
    /// Fairness shares out among the priority levels (their sum, as
    /// kube-apiserver's flags).
    #[arg(long, default_value_t = bosun_control::api::flowcontrol::DEFAULT_MAX_REQUESTS_INFLIGHT)]
    max_requests_inflight: usize,
    #[arg(long, default_value_t = bosun_control::api::flowcontrol::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT)]
    max_mutating_requests_inflight: usize,
    /// Largest accepted request body, in bytes.
    #[arg(long, default_value_t = 3 * 1024 * 1024)]
    max_body_bytes: usize,
    /// Controllers to run, as kube-controller-manager's flag: `*` for all,
    /// `name` to enable one, `-name` to disable one (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    controllers: Vec<String>,
    /// How long an Event is kept after it last happened (e.g. 1h, 30m, 90s).
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    event_ttl: Duration,
    /// The longest lifetime of a certificate the cluster CA issues for a
    /// CertificateSigningRequest (kube-controller-manager's flag); a
    /// request's expirationSeconds may only shorten it.
    #[arg(long, env = "BOSUN_CLUSTER_SIGNING_DURATION", default_value = "8760h",
          value_parser = parse_positive_duration)]
    cluster_signing_duration: Duration,
    /// How long a node may go without a heartbeat before it is marked
    /// Unknown and tainted unreachable.
    #[arg(long, default_value = "40s", value_parser = parse_duration)]
    node_monitor_grace_period: Duration,
    /// How often the node lifecycle controller looks at the nodes.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    node_monitor_period: Duration,
    /// The pod network of the whole cluster, from which every Node gets a
    /// subnet of its own (spec.podCIDR).
    #[arg(long, default_value = "10.244.0.0/16")]
    cluster_cidr: String,
    /// The range Services' cluster IPs are allocated from; its first
    /// address is the `kubernetes` Service's (kube-apiserver's flag).
    #[arg(long, default_value = bosun_control::api::allocate::DEFAULT_SERVICE_RANGE,
          value_parser = bosun_control::api::allocate::ServiceRange::parse)]
    service_cluster_ip_range: bosun_control::api::allocate::ServiceRange,
    /// The prefix length of each Node's pod subnet.
    #[arg(long, default_value_t = 24)]
    node_cidr_mask_size: u8,
    /// How many finished pods are kept before pod GC deletes the oldest
    /// (0: no limit).
    #[arg(long, default_value_t = 12500)]
    terminated_pod_gc_threshold: usize,
    /// The tolerationSeconds of the `node.kubernetes.io/not-ready:NoExecute`
    /// toleration every pod gets unless it has its own.
    #[arg(long, default_value_t = 300)]
    default_not_ready_toleration_seconds: i64,
    /// The same for `node.kubernetes.io/unreachable:NoExecute`.
    #[arg(long, default_value_t = 300)]
    default_unreachable_toleration_seconds: i64,
    /// How long a SIGTERM may take: the controllers stop, open watches end
    /// and in-flight requests get this long to finish; one second later
    /// the process exits whatever still runs.
    #[arg(long, default_value = "4s", value_parser = parse_duration)]
    shutdown_grace_period: Duration,
    /// How often each HorizontalPodAutoscaler is synced.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    horizontal_pod_autoscaler_sync_period: Duration,
    /// How long an HPA without its own scale-down window looks back for
    /// a higher recommendation before scaling down.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    horizontal_pod_autoscaler_downscale_stabilization: Duration,
    /// How far from 1 the ratio of current to target must be before an
    /// HPA scales.
    #[arg(long, default_value_t = 0.1)]
    horizontal_pod_autoscaler_tolerance: f64,
    /// How long after a pod starts its CPU samples are trusted only once
    /// it has been ready for a whole metrics window.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    horizontal_pod_autoscaler_cpu_initialization_period: Duration,
    /// How long after a pod starts an unready pod is taken as still
    /// starting rather than broken.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    horizontal_pod_autoscaler_initial_readiness_delay: Duration,
    /// The longest lifetime of a service account token from TokenRequest
    /// (`kubectl create token`); longer requests are shortened to it with
    /// a warning, as kube-apiserver does. 0: no maximum (upstream's
    /// default); else between 1h and 2^32 seconds.
    #[arg(long, default_value = "24h", value_parser = parse_duration)]
    service_account_max_token_expiration: Duration,
    /// How often to write a snapshot of the store and keys (e.g. 1h; 0:
    /// never), as `bosun snapshot save` does, into --snapshot-dir.
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    snapshot_interval: Duration,
    /// Where periodic snapshots go (default: DATA_DIR/snapshots).
    #[arg(long)]
    snapshot_dir: Option<PathBuf>,
    /// How many periodic snapshots are kept; the oldest beyond are removed.
    #[arg(long, default_value_t = 5)]
    snapshot_retention: usize,
    /// The Pod Security Admission levels of namespaces without
    /// `pod-security.kubernetes.io/*` labels of their own: comma-separated
    /// MODE=LEVEL[:VERSION], MODE one of enforce, audit, warn, LEVEL one of
    /// privileged, baseline, restricted, VERSION `latest` (the default) or
    /// v1.X; e.g. `enforce=baseline,warn=restricted`. Modes not named stay
    /// privileged, as upstream's default.
    #[arg(long, value_name = "MODE=LEVEL[:VERSION],...", default_value = "",
          value_parser = PodSecurityPolicy::parse_defaults)]
    pod_security_default: PodSecurityPolicy,
    /// Run the scheduler and the controllers only while this process
    /// holds their Leases in kube-system (`kube-scheduler`,
    /// `kube-controller-manager`), as upstream's `--leader-elect`, so that
    /// several control planes can share one etcd; `--leader-elect=false`
    /// runs them unconditionally.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    leader_elect: bool,
    /// How long a candidate waits after the holder's last renewal it saw
    /// before taking the Lease over.
    #[arg(long, default_value = "15s", value_parser = parse_positive_duration)]
    leader_elect_lease_duration: Duration,
    /// How long the holder keeps trying to renew before it stops leading.
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration)]
    leader_elect_renew_deadline: Duration,
    /// How long candidates wait between tries to acquire or renew.
    #[arg(long, default_value = "2s", value_parser = parse_positive_duration)]
    leader_elect_retry_period: Duration,
    #[command(flatten)]
    connections: ConnectionFlags,
}

/// `90s`, `30m`, `1h` or plain seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 90s, 30m or 1h"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("{s:?} is not a duration like 90s, 30m or 1h")),
    };
    Ok(Duration::from_secs(secs))
}

/// The etcd store's options, if `--store` names etcd; the `--etcd-*`
/// flags are refused without it.
fn etcd_options(args: &Args) -> Result<Option<EtcdOptions>, String> {
    if args.store == "embedded" {
        if args.etcd_cafile.is_some() || args.etcd_certfile.is_some() {
            return Err("--etcd-cafile and --etcd-certfile need --store etcd://...".into());
        }
        return Ok(None);
    }
    if !args.snapshot_interval.is_zero() {
        return Err(
            "--snapshot-interval snapshots the embedded store; with --store etcd://... \
                    take snapshots with `etcdctl snapshot save`"
                .into(),
        );
    }
    Ok(Some(EtcdOptions {
        endpoints: EtcdOptions::parse_endpoints(&args.store)?,
        ca_file: args.etcd_cafile.clone(),
        cert_file: args.etcd_certfile.clone(),
        key_file: args.etcd_keyfile.clone(),
        prefix: EtcdOptions::parse_prefix(&args.etcd_prefix)?,
        compaction_interval: args.etcd_compaction_interval,
        watch_cache: args.watch_cache,
        progress_interval: Duration::from_secs(args.bookmark_interval.max(1)),
    }))
}

fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err(format!("{s:?}: must be more than 0")),
        d => Ok(d),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    bosun::serving::init_logging(args.log_format);
    let etcd = match etcd_options(&args) {
        Ok(etcd) => etcd,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let node_ipam = match NodeIpamOptions::parse(&args.cluster_cidr, args.node_cidr_mask_size) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let controllers = ControllerOptions {
        node_ipam,
        controllers: args.controllers,
        event_ttl: args.event_ttl,
        node_lifecycle: NodeLifecycleOptions {
            grace_period: args.node_monitor_grace_period,
            monitor_period: args.node_monitor_period.max(Duration::from_secs(1)),
        },
        pod_gc: PodGcOptions {
            terminated_threshold: args.terminated_pod_gc_threshold,
            ..Default::default()
        },
        pod_autoscaler: PodAutoscalerOptions {
            sync_period: args
                .horizontal_pod_autoscaler_sync_period
                .max(Duration::from_secs(1)),
            downscale_stabilization: args.horizontal_pod_autoscaler_downscale_stabilization,
            tolerance: args.horizontal_pod_autoscaler_tolerance,
            cpu_initialization_period: args.horizontal_pod_autoscaler_cpu_initialization_period,
            initial_readiness_delay: args.horizontal_pod_autoscaler_initial_readiness_delay,
        },
        // Filled in from the PKI when the server starts.
        root_ca: String::new(),
        cluster_signing_dir: None,
        cluster_signing_duration: args.cluster_signing_duration,
    };
    if let Err(e) = controllers.validate() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
    let leader_election = LeaderElectionOptions {
        enabled: args.leader_elect,
        lease_duration: args.leader_elect_lease_duration,
        renew_deadline: args.leader_elect_renew_deadline,
        retry_period: args.leader_elect_retry_period,
    };
    if let Err(e) = leader_election.validate() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
    let max_token = args.service_account_max_token_expiration.as_secs();
    if max_token != 0 && !(3600..=1 << 32).contains(&max_token) {
        eprintln!("error: --service-account-max-token-expiration must be between 1 hour and 2^32 seconds (0: no maximum)");
        std::process::exit(2);
    }
    let cluster_cidr: ipnet::Ipv4Net = controllers
        .node_ipam
        .cluster_cidr
        .to_string()
        .parse()
        .expect("the node IPAM's CIDR is one");
    if args.snapshot_retention == 0 {
        eprintln!("error: --snapshot-retention must be at least 1 (--snapshot-interval 0 turns snapshots off)");
        std::process::exit(2);
    }
    let snapshots = (!args.snapshot_interval.is_zero()).then(|| PeriodicOptions {
        interval: args.snapshot_interval,
        dir: args
            .snapshot_dir
            .clone()
            .unwrap_or_else(|| args.data_dir.join("snapshots")),
        retention: args.snapshot_retention,
    });
    server::run(Config {
        data_dir: args.data_dir,
        bind: SocketAddr::new(args.bind, args.port),
        tls_sans: args.tls_sans,
        advertise_address: args.advertise_address,
        cluster_domain: args.cluster_domain,
        store: StoreOptions {
            history: args.watch_history,
        },
        etcd,
        api: ApiOptions {
            body_limit: args.max_body_bytes,
            bookmark_interval: Duration::from_secs(args.bookmark_interval.max(1)),
            default_not_ready_toleration_seconds: args.default_not_ready_toleration_seconds,
            default_unreachable_toleration_seconds: args.default_unreachable_toleration_seconds,
            service_range: args.service_cluster_ip_range,
            pod_security: args.pod_security_default,
            cluster_cidr,
            max_token_expiration_seconds: max_token as i64,
            min_request_timeout: Duration::from_secs(args.min_request_timeout),
            ui: args.ui,
            max_requests_inflight: args.max_requests_inflight + args.max_mutating_requests_inflight,
        },
        controllers,
        leader_election,
        snapshots,
        shutdown_grace_period: args.shutdown_grace_period,
        connections: args.connections.limits(Limits::API_SERVER),
    })
    .await
}
