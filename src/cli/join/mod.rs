//! `bosun join https://HOST:PORT --token ID.SECRET --ca-cert-hash sha256:HEX`:
//! makes this host a node of the cluster at HOST:PORT with nothing but a
//! bootstrap token, as `kubeadm join` does:
//!
//! 1. reads kube-public's cluster-info without trusting the server (the
//!    one request made before the CA is known) and checks the CA in it
//!    against `--ca-cert-hash`; from then on only that CA is trusted;
//! 2. makes the node's key here and, with the bootstrap token, a
//!    CertificateSigningRequest for `system:node:<name>` (kubelet TLS
//!    bootstrapping: the control plane's csrapproving approves it, its
//!    csrsigning issues it from the cluster CA), and waits for the
//!    certificate (the key never leaves the host);
//! 3. writes the node's kubeconfig (0600) to the data dir and starts
//!    `bosun-agent` with it, as `bosun up` starts the local agent.
//!
//! Run again, it reuses the credential it has (the token is not needed
//! twice). The agent renews the certificate at 80% of its lifetime
//! (`bosun_agent::node::certificate`). `bosun down --data-dir DIR` stops the
//! agent; `bosun leave` takes the node out of the cluster.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};
use base64::Engine;
use bosun::bootstrap::{self as bt, BootstrapToken};
use clap::Args;
use serde_json::{json, Value};

use super::client::home_dir;
use super::component::AGENT;
use super::delete::parse_duration;
use super::up;

mod control;

#[derive(Debug, Args)]
pub struct JoinArgs {
    /// The control plane's address, `https://HOST:PORT`.
    #[arg(value_name = "SERVER")]
    pub(super) server: String,
    /// A bootstrap token (`bosun token create` on the first host).
    #[arg(long)]
    pub(super) token: Option<String>,
    /// The hash of the cluster CA's public key, `sha256:<hex>`, as `bosun
    /// up` and `bosun token create --print-join-command` print it.
    #[arg(long)]
    pub(super) ca_cert_hash: Option<String>,
    /// Where the node's credential, the agent's data, pid and log live.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    #[command(flatten)]
    node: up::NodeArgs,
    /// Port of the agent's stream API (0 picks a free one).
    #[arg(long, default_value_t = 10250)]
    port: u16,
    /// How long to wait for each step.
    #[arg(long, default_value = "60s")]
    timeout: String,
    #[command(flatten)]
    pub(super) process: up::ProcessArgs,
    /// Join as a further control plane (an API server, scheduler and
    /// controller manager on the cluster's etcd) instead of as a node.
    #[arg(long)]
    pub(super) control_plane: bool,
    /// With --control-plane: the key the uploaded cluster certificates are
    /// encrypted with (64 hex digits, printed by `bosun up --ha`).
    #[arg(long, requires = "control_plane", value_name = "HEX")]
    pub(super) certificate_key: Option<String>,
    /// With --control-plane: the cluster's etcd, `etcd://HOST:PORT[,...]`.
    #[arg(long, requires = "control_plane", value_name = "URL")]
    pub(super) store: Option<String>,
    /// With --control-plane: the port the API server listens on.
    #[arg(long, default_value_t = 6443)]
    pub(super) control_plane_port: u16,
    /// The cluster's other control planes (`https://HOST:PORT`,
    /// comma-separated): the agent fails over between them and SERVER.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "URL",
        conflicts_with = "control_plane"
    )]
    pub(super) api_servers: Vec<String>,
    /// With --control-plane: the address other hosts reach this API
    /// server at (added to its certificate).
    #[arg(long, value_name = "ADDR")]
    pub(super) advertise_address: Option<std::net::IpAddr>,
}

fn default_data_dir() -> PathBuf {
    home_dir().join(".bosun").join("join")
}

pub async fn join(args: &JoinArgs) -> Result<bool> {
    if let Some(cidr) = &args.node.pod_cidr {
        // NodeRestriction: a node's credential may not set its pod CIDR.
        bail!(
            "--pod-cidr {cidr}: a joined node's pod CIDR is assigned by the control plane's node IPAM \
             (from its --cluster-cidr); a node's own credential may not choose it"
        );
    }
    let dir = match (&args.data_dir, args.control_plane) {
        (Some(d), _) => d.clone(),
        (None, true) => home_dir().join(".bosun").join("join-control-plane"),
        (None, false) => default_data_dir(),
    };
    let timeout = parse_duration(&args.timeout)?;
    args.process.check()?;
    let server = url::Url::parse(&args.server)
        .ok()
        .filter(|u| u.scheme() == "https" && u.host_str().is_some())
        .ok_or_else(|| anyhow!("SERVER {:?}: expected https://HOST:PORT", args.server))?
        .to_string()
        .trim_end_matches('/')
        .to_string();
    if args.control_plane {
        return control::join_control_plane(args, &server, &dir, timeout).await;
    }
    let node = args.node.name()?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.canonicalize().unwrap_or(dir);
    if AGENT.is_running(&dir) {
        println!(
            "this host's agent already runs (data dir {}).",
            dir.display()
        );
        return Ok(true);
    }
    let kubeconfig = dir.join(super::purge::NODE_KUBECONFIG);
    if kubeconfig.exists() {
        // The credential stays; the server is the one named this time.
        let text = std::fs::read_to_string(&kubeconfig)
            .with_context(|| format!("reading {}", kubeconfig.display()))?;
        let mut kc: serde_yaml::Value = serde_yaml::from_str(&text)
            .with_context(|| format!("parsing {}", kubeconfig.display()))?;
        kc["clusters"][0]["cluster"]["server"] = server.clone().into();
        bosun::files::write_atomically(&kubeconfig, &serde_yaml::to_string(&kc)?, 0o600)?;
        println!("using the node credential in {}", kubeconfig.display());
    } else {
        let token = args.token.as_deref().ok_or_else(|| {
            anyhow!("--token is required to join (bosun token create on the first host)")
        })?;
        let token = BootstrapToken::parse(token).map_err(|e| anyhow!("--token: {e}"))?;
        let hash = args
            .ca_cert_hash
            .as_deref()
            .ok_or_else(|| anyhow!("--ca-cert-hash is required to join: it is how this host knows the server is the cluster's"))?;
        let hash = bt::parse_ca_cert_hash(hash).map_err(|e| anyhow!(e))?;
        let ca = discover_ca(&server, &hash).await?;
        let (key_pem, cert_pem) = request_credential(&server, &ca, &token, &node, timeout).await?;
        bosun::files::write_atomically(
            &kubeconfig,
            &node_kubeconfig(&server, &ca, &node, &cert_pem, &key_pem)?,
            0o600,
        )
        .with_context(|| format!("writing {}", kubeconfig.display()))?;
        println!("node {node}: got a client certificate of the cluster CA");
    }
    start_agent(args, &dir, &kubeconfig, &node, timeout).await?;
    println!("This host joined the cluster at {server} as node {node}.");
    println!("  data: {}", dir.display());
    println!("  logs: {}", AGENT.log_location(&dir));
    println!("  stop: bosun down --data-dir {}", dir.display());
    Ok(true)
}

/// A kube client for `server` from a kubeconfig document.
pub(super) async fn client_of(kubeconfig: Value) -> Result<kube::Client> {
    let kc: kube::config::Kubeconfig = serde_json::from_value(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

pub(super) fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Reads cluster-info from `server` without trusting it yet and returns
/// its CA if the CA's hash is `hash`.
pub(super) async fn discover_ca(server: &str, hash: &str) -> Result<String> {
    let client = client_of(json!({
        "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": true}}],
        "users": [{"name": "anonymous", "user": {}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "anonymous"}}],
        "current-context": "c",
    }))
    .await?;
    let path = format!(
        "/api/v1/namespaces/{}/configmaps/{}",
        bt::CLUSTER_INFO_NAMESPACE,
        bt::CLUSTER_INFO
    );
    let req = http::Request::get(&path).body(Vec::new())?;
    let text = client
        .request_text(req)
        .await
        .with_context(|| format!("reading cluster-info from {server}"))?;
    let info: Value = serde_json::from_str(&text).context("cluster-info is not JSON")?;
    let (_, ca) = super::token::cluster_info(&info)?;
    let actual = bt::ca_cert_hash(&ca).map_err(|e| anyhow!(e))?;
    if actual != hash {
        bail!(
            "the cluster CA of {server} does not match --ca-cert-hash: it hashes to {actual}, not {hash}; refusing to trust it"
        );
    }
    Ok(ca)
}

/// The environment variable asking for the node certificate's lifetime
/// in seconds (the request's `expirationSeconds`: 600 at least).
pub const CERTIFICATE_LIFETIME_ENV: &str = "BOSUN_NODE_CERTIFICATE_SECONDS";

/// Makes the node's key and has the cluster CA sign its certificate
/// through a CertificateSigningRequest made with the bootstrap token (the
/// control plane's csrapproving approves it), over TLS checked against
/// `ca`; waits up to `timeout` for it.
async fn request_credential(
    server: &str,
    ca: &str,
    token: &BootstrapToken,
    node: &str,
    timeout: Duration,
) -> Result<(String, String)> {
    let (key, csr) =
        bt::node_certificate_request(node).context("making the node's key and request")?;
    let client = client_of(json!({
        "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": b64(ca)}}],
        "users": [{"name": "bootstrap", "user": {"token": token.to_string()}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "bootstrap"}}],
        "current-context": "c",
    }))
    .await?;
    // The certificate's lifetime (default: the control plane's
    // --cluster-signing-duration, a year); the agent renews it at 80% of it.
    let expiration = match std::env::var(CERTIFICATE_LIFETIME_ENV) {
        Ok(seconds) => Some(seconds.trim().parse::<i32>().map_err(|_| {
            anyhow!("{CERTIFICATE_LIFETIME_ENV}={seconds:?}: expected a number of seconds")
        })?),
        Err(_) => None,
    };
    let cert = match bt::csr::request_certificate(&client, &csr, expiration, timeout).await {
        Ok(cert) => cert,
        Err(e) => {
            let refused = match e.downcast_ref::<kube::Error>() {
                Some(kube::Error::Api(s)) => Some((s.code, s.message.clone())),
                _ => None,
            };
            return Err(match refused {
                Some((401, _)) => anyhow!(
                    "the control plane refused bootstrap token {}.<secret>: it is unknown, expired or revoked (bosun token list on the first host)",
                    token.id
                ),
                Some((403 | 422, message)) => {
                    anyhow!("the control plane refused the node's certificate request: {message}")
                }
                _ => e.context(format!("requesting node {node}'s certificate")),
            });
        }
    };
    Ok((key.serialize_pem(), cert))
}

/// The node's kubeconfig: the pinned CA and its client certificate.
fn node_kubeconfig(server: &str, ca: &str, node: &str, cert: &str, key: &str) -> Result<String> {
    let user = format!("{}{node}", bt::NODE_USER_PREFIX);
    Ok(serde_yaml::to_string(&json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "bosun", "cluster": {"server": server, "certificate-authority-data": b64(ca)}}],
        "users": [{"name": user, "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)}}],
        "contexts": [{"name": "bosun", "context": {"cluster": "bosun", "user": user}}],
        "current-context": "bosun",
    }))?)
}

/// Starts the agent with the node's credential and waits until its Node
/// is registered.
async fn start_agent(
    args: &JoinArgs,
    dir: &Path,
    kubeconfig: &Path,
    node: &str,
    timeout: Duration,
) -> Result<()> {
    // The stream API takes the control plane's client certificate of the
    // CA pinned above (the kubeconfig's), and no bearer token.
    let mut agent_args = vec![
        "--kubeconfig".to_string(),
        kubeconfig.display().to_string(),
        "--node-name".into(),
        node.to_string(),
        "--data-dir".into(),
        up::agent_data_dir(dir).display().to_string(),
        "--port".into(),
        args.port.to_string(),
    ];
    agent_args.extend(args.node.agent_args());
    if !args.api_servers.is_empty() {
        agent_args.extend(["--api-servers".to_string(), args.api_servers.join(",")]);
    }
    std::fs::write(dir.join(super::purge::NODE_FILE), node)?;
    let launch = args.process.launch(
        &agent_args,
        super::systemd::unit_name(AGENT.name, None),
        format!("bosun agent of node {node}"),
        vec!["docker.service".to_string()],
    )?;
    let started = AGENT.start(dir, &launch)?;
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?,
    )?;
    up::wait_for_node(started, dir, client, node, timeout).await
}
