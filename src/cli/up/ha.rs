//! `bosun up --ha`: a cluster of three control planes on one host, for
//! trying what a highly available cluster does (one API server killed,
//! the others serve on): a three-member etcd (Debian's `etcd` from the
//! `etcd-server` package) and three `bosun-control` on loopback ports,
//! all on the same PKI, each under its supervisor (or systemd unit) as
//! `bosun up` runs a single one.
//!
//! Layout inside the cluster's data dir `DIR` (kept in `DIR/ha.json`, so a
//! later `bosun up` brings the same members back on the same ports):
//!
//! - `DIR/etcd-1`, `DIR/etcd-2`, `DIR/etcd-3`: a member each (its pid, log
//!   and `data/`), on free loopback client and peer ports, over TLS with
//!   client certificates required on both (`super::etcd_pki`, in
//!   `DIR/etcd-pki`): other users of this host reach the ports but not
//!   the data.
//! - `DIR` itself: the first control plane (the cluster's recorded port;
//!   the kubeconfig and `bosun list` name it); `DIR/control-2`,
//!   `DIR/control-3`: the others, each started with a copy of the first
//!   one's CA, service-account key, front-proxy CA and admin token
//!   ([`SHARED_PKI`]) so that any of them accepts what another issued.
//! - The local agent is given all three (`--api-servers`) and fails over
//!   between them through its loopback load balancer.
//!
//! `bosun down` stops the agent, the control planes and then the members;
//! `--purge` removes `DIR` with all of it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use serde::{Deserialize, Serialize};

use super::etcd_pki::EtcdPki;
use super::{read_trimmed, ProcessArgs};
use crate::cli::component::{find_executable, Started, CONTROL, ETCD};
use crate::cli::{certs, clusters, failover};

/// The files every control plane of one cluster must share: the cluster
/// CA (it signs node and serving certificates), the service-account
/// signing key, the front-proxy CA and the admin token.
pub const SHARED_PKI: &[&str] = &[
    "ca.crt",
    "ca.key",
    "sa.key",
    "front-proxy-ca.crt",
    "front-proxy-ca.key",
    "admin-token",
];

const LAYOUT_FILE: &str = "ha.json";
const STORE_FILE: &str = "store";
const MEMBERS: usize = 3;

/// The ports of an HA cluster's members, chosen once.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Layout {
    pub members: Vec<Member>,
    /// The members speak TLS and require client certificates of the
    /// cluster's etcd CA. Every cluster made now; false only for one
    /// recorded before (its members' peer URLs are plain http in etcd's
    /// own membership, so they stay so until it is made again).
    #[serde(default)]
    pub tls: bool,
}

/// An etcd member and the control plane beside it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    pub etcd_client_port: u16,
    pub etcd_peer_port: u16,
    /// The API port of this member's control plane.
    pub control_port: u16,
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0)).context("finding a free port")?;
    Ok(l.local_addr()?.port())
}

/// The etcd member `i`'s folder (0-based).
pub fn etcd_dir(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("etcd-{}", i + 1))
}

/// The control plane `i`'s data dir: `dir` itself for the first.
pub fn control_dir(dir: &Path, i: usize) -> PathBuf {
    if i == 0 {
        dir.to_path_buf()
    } else {
        dir.join(format!("control-{}", i + 1))
    }
}

impl Layout {
    /// The layout recorded in `dir`, if the cluster there is an HA one.
    pub fn read(dir: &Path) -> Result<Option<Layout>> {
        let path = dir.join(LAYOUT_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(
                serde_json::from_str(&text)
                    .with_context(|| format!("parsing {}", path.display()))?,
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// The cluster in `dir`'s layout: as recorded, else (with `ha`) made
    /// now with free ports and recorded; None for a single control plane.
    /// A cluster made one way cannot be brought up the other way.
    pub fn plan(dir: &Path, ha: bool, first_port: u16) -> Result<Option<Layout>> {
        if let Some(had) = Layout::read(dir)? {
            return Ok(Some(had));
        }
        if !ha {
            return Ok(None);
        }
        if dir.join("store.redb").exists() {
            bail!(
                "--ha: the cluster in {} was made with one control plane and its objects are in \
                 its embedded store; an HA cluster starts new (`bosun down --purge` removes it, \
                 or give --name for another)",
                dir.display()
            );
        }
        etcd_binary()?;
        let mut members = Vec::new();
        for i in 0..MEMBERS {
            members.push(Member {
                etcd_client_port: free_port()?,
                etcd_peer_port: free_port()?,
                control_port: if i == 0 { first_port } else { free_port()? },
            });
        }
        let layout = Layout { members, tls: true };
        bosun::files::write_atomically(
            &dir.join(LAYOUT_FILE),
            &serde_json::to_string_pretty(&layout)?,
            0o644,
        )?;
        Ok(Some(layout))
    }

    /// `--store` for every control plane.
    pub fn store_url(&self) -> String {
        let endpoints: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.etcd_client_port))
            .collect();
        format!("etcd://{}", endpoints.join(","))
    }

    /// Every control plane's URL, the first one first.
    pub fn servers(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("https://127.0.0.1:{}", m.control_port))
            .collect()
    }

    /// The kubeconfig's cluster entry: `cluster` (the first control plane
    /// and the CA) with the others in the extension the bosun CLI fails
    /// over with (kubectl uses the first only).
    pub fn kubeconfig_cluster(&self, cluster: &serde_yaml::Value) -> serde_yaml::Value {
        let mut body = cluster.clone();
        let others = &self.servers()[1..];
        let extension = serde_yaml::to_value(failover::servers_extension(others))
            .expect("an extension serializes");
        body["extensions"] = serde_yaml::Value::Sequence(vec![extension]);
        body
    }

    /// The agent's flags: the control planes beside the first one.
    pub fn agent_args(&self) -> Vec<String> {
        vec!["--api-servers".into(), self.servers()[1..].join(",")]
    }

    fn scheme(&self) -> &'static str {
        if self.tls {
            "https"
        } else {
            "http"
        }
    }

    fn initial_cluster(&self) -> String {
        let peers: Vec<String> = self
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                format!(
                    "m{}={}://127.0.0.1:{}",
                    i + 1,
                    self.scheme(),
                    m.etcd_peer_port
                )
            })
            .collect();
        peers.join(",")
    }

    /// `bosun-control`'s flags to reach the members (their CA and the
    /// client certificate), on top of [`Layout::store_url`].
    pub fn control_args(&self, dir: &Path) -> Vec<String> {
        match self.tls {
            true => EtcdPki::of(dir).control_args(),
            false => vec![],
        }
    }

    /// Whether member `i` says it is healthy (over TLS with the client
    /// certificate when the members require one).
    async fn member_healthy(&self, dir: &Path, i: usize) -> bool {
        let port = self.members[i].etcd_client_port;
        match self.tls {
            true => EtcdPki::of(dir).healthy(port).await,
            false => plain_etcd_healthy(port).await,
        }
    }

    /// How many control planes run now.
    pub fn running_controls(&self, dir: &Path) -> usize {
        (0..self.members.len())
            .filter(|&i| CONTROL.is_running(&control_dir(dir, i)))
            .count()
    }

    /// Starts the etcd members that do not run and waits until each is
    /// healthy (a member answers healthy only once it has a quorum).
    pub async fn start_etcd(
        &self,
        dir: &Path,
        cluster: &str,
        process: &ProcessArgs,
        timeout: Duration,
    ) -> Result<()> {
        let initial = self.initial_cluster();
        let pki = EtcdPki::of(dir);
        match self.tls {
            true => pki.ensure()?,
            false => eprintln!(
                "warning: the etcd members of cluster {cluster} were made without TLS: any user \
                 of this host can read and write its objects through their ports; `bosun down \
                 --name {cluster} --purge` and `bosun up --ha` again makes it with TLS"
            ),
        }
        let mut started = Vec::new();
        for (i, m) in self.members.iter().enumerate() {
            let member_dir = etcd_dir(dir, i);
            std::fs::create_dir_all(&member_dir)
                .with_context(|| format!("creating {}", member_dir.display()))?;
            if ETCD.is_running(&member_dir) {
                continue;
            }
            let client = format!("{}://127.0.0.1:{}", self.scheme(), m.etcd_client_port);
            let peer = format!("{}://127.0.0.1:{}", self.scheme(), m.etcd_peer_port);
            let mut args = vec![
                format!("--name=m{}", i + 1),
                format!("--data-dir={}", member_dir.join("data").display()),
                format!("--listen-client-urls={client}"),
                format!("--advertise-client-urls={client}"),
                format!("--listen-peer-urls={peer}"),
                format!("--initial-advertise-peer-urls={peer}"),
                format!("--initial-cluster={initial}"),
                format!("--initial-cluster-token=bosun-{cluster}"),
                "--initial-cluster-state=new".into(),
                "--logger=zap".into(),
                "--log-level=warn".into(),
                // Periodic progress notifications, in order with events on
                // every etcd (requested ones are not before 3.4.31, and
                // bosun-control then does not ask): what moves an idle
                // watch's bookmarks on such an etcd (its default: 10 min).
                "--experimental-watch-progress-notify-interval=5s".into(),
            ];
            if self.tls {
                args.extend(pki.member_args());
            }
            let launch = process.launch(
                &args,
                super::super::systemd::unit_name(&format!("etcd-{}", i + 1), named(cluster)),
                format!("etcd member {} of bosun cluster {cluster}", i + 1),
                vec![],
            )?;
            started.push((i, ETCD.start(&member_dir, &launch)?));
        }
        let deadline = tokio::time::Instant::now() + timeout;
        for i in 0..self.members.len() {
            let member_dir = etcd_dir(dir, i);
            loop {
                if let Some((_, s)) = started.iter_mut().find(|(at, _)| *at == i) {
                    if let Some(failure) = ETCD.failure(&member_dir, s)? {
                        bail!(
                            "{failure}; last lines of {}:\n{}",
                            ETCD.log_location(&member_dir),
                            ETCD.log_tail(&member_dir, 20)
                        );
                    }
                }
                if self.member_healthy(dir, i).await {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    bail!(
                        "etcd member {} was not healthy within {timeout:?}; last lines of {}:\n{}",
                        i + 1,
                        ETCD.log_location(&member_dir),
                        ETCD.log_tail(&member_dir, 20)
                    );
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Ok(())
    }

    /// Starts the control planes beside the first (which must be ready:
    /// its PKI is copied to them) and waits until each is ready.
    pub async fn start_other_controls(
        &self,
        dir: &Path,
        cluster: &str,
        control_args: &[String],
        process: &ProcessArgs,
        timeout: Duration,
    ) -> Result<()> {
        let mut waiting: Vec<(PathBuf, Started)> = Vec::new();
        for (i, m) in self.members.iter().enumerate().skip(1) {
            let own = control_dir(dir, i);
            if CONTROL.is_running(&own) {
                continue;
            }
            std::fs::create_dir_all(&own).with_context(|| format!("creating {}", own.display()))?;
            copy_pki(dir, &own)?;
            let _ = std::fs::remove_file(own.join("address"));
            let mut args = vec![
                "--data-dir".to_string(),
                own.display().to_string(),
                "--port".into(),
                m.control_port.to_string(),
            ];
            args.extend(control_args.iter().cloned());
            let launch = process.launch(
                &args,
                super::super::systemd::unit_name(&format!("control-{}", i + 1), named(cluster)),
                format!("bosun control plane {} (cluster {cluster})", i + 1),
                vec![],
            )?;
            waiting.push((own.clone(), CONTROL.start(&own, &launch)?));
        }
        let deadline = tokio::time::Instant::now() + timeout;
        for (own, started) in &mut waiting {
            super::wait_control_ready(own, started, deadline).await?;
        }
        Ok(())
    }

    /// Stops the control planes beside the first, then every etcd
    /// member (the first control plane and the agent are stopped before).
    pub fn stop(&self, dir: &Path, timeout: Duration) -> Result<()> {
        for i in (1..self.members.len()).rev() {
            let own = control_dir(dir, i);
            if let Some(pid) = CONTROL.stop(&own, timeout)? {
                let _ = std::fs::remove_file(own.join("address"));
                println!("bosun control plane {} stopped (pid {pid}).", i + 1);
            }
        }
        for i in (0..self.members.len()).rev() {
            if let Some(pid) = ETCD.stop(&etcd_dir(dir, i), timeout)? {
                println!("etcd member {} stopped (pid {pid}).", i + 1);
            }
        }
        Ok(())
    }
}

/// Uploads the shared PKI encrypted (`crate::cli::certs`) and prints the
/// command a further control plane joins with, as `kubeadm init
/// --upload-certs` does.
pub async fn print_control_plane_join(
    admin_kubeconfig: &Path,
    dir: &Path,
    cluster: &clusters::ClusterRecord,
    store: &str,
    local: bool,
) -> Result<()> {
    let ctx = crate::cli::client::Ctx::connect(&crate::cli::client::ConnectOptions {
        kubeconfig: Some(admin_kubeconfig.to_path_buf()),
        context: None,
        namespace: None,
    })
    .await?;
    let mut bundle = certs::Bundle::read(
        dir,
        SHARED_PKI,
        cluster.cluster_cidr.to_string(),
        cluster.service_cidr.to_string(),
    )?;
    // The members of `up --ha` want a client certificate: the joining
    // control plane gets the etcd CA and the client certificate (not the
    // etcd CA's key: it runs no member).
    // An etcd of the user's given with `--etcd-*` files: the same files.
    bundle.files.extend(EtcdPki::of(dir).client_files()?);
    let (key, token) = certs::upload(&ctx, &bundle).await?;
    let join = crate::cli::token::join_command(&ctx, &token).await?;
    let hours = certs::UPLOAD_TTL.as_secs() / 3600;
    println!();
    match local {
        true => println!(
            "Further control planes on this host join with (token and certificates good for \
             {hours}h; the etcd members listen on loopback only):"
        ),
        false => {
            println!("Further control planes join with (token and certificates good for {hours}h):")
        }
    }
    println!("  {join} --control-plane --certificate-key {key} --store {store}");
    Ok(())
}

/// The etcd a cluster made with `bosun up --store` keeps (`DIR/store`):
/// given the first time, then the same each time (a cluster's objects do
/// not move between stores by a flag).
///
/// The etcd client files given with it are read and checked before
/// anything is written, then kept in `DIR/etcd-pki/` ([`EtcdPki::keep`]).
pub fn external_store(
    dir: &Path,
    given: Option<&str>,
    files: &super::etcd_pki::EtcdClientFiles,
) -> Result<Option<String>> {
    let files = files.read()?;
    let store = store_of(dir, given)?;
    if store.is_some() {
        EtcdPki::of(dir).keep(files)?;
    }
    Ok(store)
}

fn store_of(dir: &Path, given: Option<&str>) -> Result<Option<String>> {
    let path = dir.join(STORE_FILE);
    let had = read_trimmed(&path);
    match (had, given) {
        (Some(had), Some(given)) if had != given => bail!(
            "--store {given}: the cluster in {} was made on {had}, which cannot change",
            dir.display()
        ),
        (Some(had), _) => Ok(Some(had)),
        (None, None) => Ok(None),
        (None, Some(given)) => {
            if !given.starts_with("etcd://") {
                bail!("--store {given:?}: expected etcd://HOST:PORT[,HOST:PORT...]");
            }
            if dir.join("store.redb").exists() {
                bail!(
                    "--store: the cluster in {} keeps its objects in its embedded store; a \
                     cluster on etcd starts new (`bosun down --purge`, or give --name)",
                    dir.display()
                );
            }
            bosun::files::write_atomically(&path, &format!("{given}\n"), 0o644)?;
            Ok(Some(given.to_string()))
        }
    }
}

/// The cluster's name in unit names (none for the default cluster).
fn named(cluster: &str) -> Option<&str> {
    (cluster != clusters::DEFAULT_NAME).then_some(cluster)
}

/// The etcd binary, or an error naming the package that has it.
fn etcd_binary() -> Result<PathBuf> {
    find_executable("etcd").map_err(|_| {
        anyhow::anyhow!(
            "--ha runs a three-member etcd and cannot find `etcd` on PATH; install Debian's \
             etcd-server package (apt-get install etcd-server)"
        )
    })
}

/// Copies the shared PKI of the first control plane (`from`) into `to`,
/// private files private; files `to` has already are kept (a restart).
fn copy_pki(from: &Path, to: &Path) -> Result<()> {
    for name in SHARED_PKI {
        let target = to.join(name);
        if target.exists() {
            continue;
        }
        let source = from.join(name);
        let text = std::fs::read_to_string(&source)
            .with_context(|| format!("reading {}", source.display()))?;
        let mode = if name.ends_with(".crt") { 0o644 } else { 0o600 };
        bosun::files::write_atomically(&target, &text, mode)
            .with_context(|| format!("writing {}", target.display()))?;
    }
    Ok(())
}

/// etcd's `/health` says so, asked in plain HTTP (a cluster made before
/// its members had TLS).
async fn plain_etcd_healthy(port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        conn.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .ok()?;
        let mut out = String::new();
        conn.read_to_string(&mut out).await.ok()?;
        Some(out.contains("\"health\":\"true\""))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(3), attempt).await,
        Ok(Some(true))
    )
}
