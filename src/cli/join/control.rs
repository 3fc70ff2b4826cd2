//! `bosun join --control-plane SERVER --token T --ca-cert-hash H
//! --certificate-key K --store etcd://...`: makes this host a further
//! control plane of the cluster at SERVER, as `kubeadm join
//! --control-plane` does:
//!
//! 1. checks the cluster CA against `--ca-cert-hash` (as a node's join);
//! 2. with the bootstrap token, reads the certificates a control-plane
//!    host uploaded (`super::certs`) and opens them with
//!    `--certificate-key`; their CA must be the one just checked;
//! 3. writes them (private files 0600) into the data dir and starts
//!    `bosun-control` on the cluster's etcd with the cluster's ranges,
//!    supervised as `bosun up` runs it, and waits until it is ready.
//!
//! Run again, it reuses the files it has. `bosun down --data-dir DIR`
//! stops it; `--purge` removes its data (the keys with it).

use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};
use bosun::bootstrap::{self as bt, BootstrapToken};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{b64, client_of, discover_ca, JoinArgs};
use crate::cli::certs;
use crate::cli::component::CONTROL;
use crate::cli::purge::JOINED_CONTROL_PLANE as JOINED_FILE;
use crate::cli::up;
use crate::cli::up::etcd_pki;

/// What the joined control plane is started with, kept for a restart.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Joined {
    store: String,
    #[serde(rename = "clusterCIDR")]
    cluster_cidr: String,
    #[serde(rename = "serviceCIDR")]
    service_cidr: String,
}

pub async fn join_control_plane(
    args: &JoinArgs,
    server: &str,
    dir: &Path,
    timeout: Duration,
) -> Result<bool> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.canonicalize().unwrap_or(dir.to_path_buf());
    if CONTROL.is_running(&dir) {
        println!(
            "this host's control plane already runs (data dir {}).",
            dir.display()
        );
        return Ok(true);
    }
    let joined_path = dir.join(JOINED_FILE);
    let joined: Joined = match std::fs::read_to_string(&joined_path) {
        Ok(text) => serde_json::from_str(&text)
            .with_context(|| format!("parsing {}", joined_path.display()))?,
        Err(_) => fetch_certificates(args, server, &dir).await?,
    };
    let _ = std::fs::remove_file(dir.join("address"));
    let mut control_args = vec![
        "--data-dir".to_string(),
        dir.display().to_string(),
        "--port".into(),
        args.control_plane_port.to_string(),
        "--bind".into(),
        "0.0.0.0".into(),
        "--store".into(),
        joined.store.clone(),
        "--cluster-cidr".into(),
        joined.cluster_cidr.clone(),
        "--service-cluster-ip-range".into(),
        joined.service_cidr.clone(),
    ];
    // The etcd of `bosun up --ha` wants a client certificate: the bundle
    // brought its CA and one (or what `up --store` was given for the
    // user's etcd).
    control_args.extend(etcd_pki::joined_control_args(&dir));
    if let Some(addr) = args.advertise_address {
        control_args.extend([
            "--advertise-address".into(),
            addr.to_string(),
            "--tls-san".into(),
            addr.to_string(),
        ]);
    }
    let launch = args.process.launch(
        &control_args,
        crate::cli::systemd::unit_name(CONTROL.name, None),
        "bosun control plane (joined)".into(),
        vec![],
    )?;
    let mut started = CONTROL.start(&dir, &launch)?;
    let deadline = tokio::time::Instant::now() + timeout;
    if let Err(e) = up::wait_control_ready(&dir, &mut started, deadline).await {
        let _ = CONTROL.stop(&dir, Duration::from_secs(10));
        return Err(e);
    }
    // It listens on every interface: the address says 0.0.0.0:PORT.
    let address = up::read_trimmed(&dir.join("address")).unwrap_or_default();
    let port = address.rsplit_once(':').map(|(_, p)| p).unwrap_or_default();
    let host = args
        .advertise_address
        .map(|a| a.to_string())
        .unwrap_or_else(|| "127.0.0.1".into());
    println!("This host is a control plane of the cluster at {server}.");
    println!("  server: https://{host}:{port}");
    println!("  data:   {}", dir.display());
    println!("  logs:   {}", CONTROL.log_location(&dir));
    println!("  stop:   bosun down --data-dir {}", dir.display());
    Ok(true)
}

/// Steps 1 and 2: the cluster's shared files into `dir`; returns what the
/// control plane starts with (and records it).
async fn fetch_certificates(args: &JoinArgs, server: &str, dir: &Path) -> Result<Joined> {
    let key = args.certificate_key.as_deref().ok_or_else(|| {
        anyhow!(
            "--certificate-key is required to join as a control plane (bosun up --ha prints it)"
        )
    })?;
    let key = certs::parse_key(key)?;
    let store = args.store.clone().ok_or_else(|| {
        anyhow!("--store etcd://HOST:PORT[,...] is required to join as a control plane: the cluster's etcd")
    })?;
    if !store.starts_with("etcd://") {
        bail!("--store {store:?}: expected etcd://HOST:PORT[,HOST:PORT...], the cluster's etcd");
    }
    let token = args.token.as_deref().ok_or_else(|| {
        anyhow!("--token is required to join (bosun token create on a control-plane host)")
    })?;
    let token = BootstrapToken::parse(token).map_err(|e| anyhow!("--token: {e}"))?;
    let hash = args.ca_cert_hash.as_deref().ok_or_else(|| {
        anyhow!("--ca-cert-hash is required to join: it is how this host knows the server is the cluster's")
    })?;
    let hash = bt::parse_ca_cert_hash(hash).map_err(|e| anyhow!(e))?;
    let ca = discover_ca(server, &hash).await?;
    let client = client_of(json!({
        "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": b64(&ca)}}],
        "users": [{"name": "bootstrap", "user": {"token": token.to_string()}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "bootstrap"}}],
        "current-context": "c",
    }))
    .await?;
    let sealed = certs::download(&client).await?;
    let bundle = certs::open(&sealed, &key)?;
    if bundle.files.get("ca.crt").map(|c| c.trim()) != Some(ca.trim()) {
        bail!("the uploaded certificates are not of the CA --ca-cert-hash names; refusing them");
    }
    for (name, text) in &bundle.files {
        if name.contains('/') || name.starts_with('.') {
            bail!("the uploaded certificates name a file {name:?} outside the data dir");
        }
        let mode = if name.ends_with(".crt") { 0o644 } else { 0o600 };
        bosun::files::write_atomically(&dir.join(name), text, mode)
            .with_context(|| format!("writing {}", dir.join(name).display()))?;
    }
    let joined = Joined {
        store,
        cluster_cidr: bundle.cluster_cidr,
        service_cidr: bundle.service_cidr,
    };
    bosun::files::write_atomically(
        &dir.join(JOINED_FILE),
        &serde_json::to_string_pretty(&joined)?,
        0o644,
    )?;
    println!("got the cluster's certificates and keys (CA {})", hash);
    Ok(joined)
}
