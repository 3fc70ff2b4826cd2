//! The etcd PKI of `bosun up --ha`, as kubeadm's stacked etcd has one
//! (`pki/etcd/ca.crt`, `server`, `peer`, `pki/apiserver-etcd-client`) and
//! k3s's embedded etcd: a CA of etcd's own, a serving and a peer
//! certificate for the members (on this host's loopback addresses), and
//! the client certificate the control planes present. The members require
//! a certificate of this CA from every client and peer
//! (`--client-cert-auth`, `--peer-client-cert-auth`), so another local
//! user cannot read or write the cluster's objects past the API's
//! authentication and authorization.
//!
//! Everything is in `DIR/etcd-pki/` (0700, keys 0600), made on the
//! cluster's first `up`; `bosun down --purge` removes it with `DIR`. A
//! further control plane joining the cluster (`bosun join
//! --control-plane`) is handed [`CLIENT_FILES`] in the uploaded bundle,
//! never the CA's key.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The folder inside the cluster's data dir.
pub const FOLDER: &str = "etcd-pki";

/// The names the members' certificates carry: the addresses they are
/// reached at (loopback only) and `localhost`.
pub const MEMBER_SANS: &[&str] = &["127.0.0.1", "::1", "localhost"];

/// The client's files as a joining control plane gets them (in its data
/// dir, beside the cluster CA): the etcd CA, the client certificate and
/// its key.
pub const CLIENT_FILES: [&str; 3] = [
    "etcd-ca.crt",
    "apiserver-etcd-client.crt",
    "apiserver-etcd-client.key",
];

/// The same files in this PKI's folder.
const CLIENT_SOURCES: [&str; 3] = [
    "ca.crt",
    "apiserver-etcd-client.crt",
    "apiserver-etcd-client.key",
];

/// The client files of an etcd the user runs, as given to `bosun up
/// --store` (kube-apiserver's `--etcd-cafile`, `--etcd-certfile`,
/// `--etcd-keyfile`).
#[derive(Debug, Default, Clone)]
pub struct EtcdClientFiles {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// One of [`EtcdClientFiles`], read and checked: its name in the PKI's
/// folder, its text and mode.
#[derive(Debug)]
pub struct GivenFile {
    name: &'static str,
    text: String,
    mode: u32,
}

impl EtcdClientFiles {
    /// Reads the files, each checked to be PEM of its kind, the flags
    /// checked to be given together: errors name the flag, and nothing is
    /// written yet ([`EtcdPki::keep`] does).
    pub fn read(&self) -> Result<Vec<GivenFile>> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let read = |flag: &str, path: &Path| {
            std::fs::read_to_string(path).with_context(|| format!("{flag} {}", path.display()))
        };
        let certificate = |flag: &str, path: &Path| -> Result<String> {
            let text = read(flag, path)?;
            let parsed = CertificateDer::pem_slice_iter(text.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .is_ok_and(|c| !c.is_empty());
            anyhow::ensure!(parsed, "{flag} {}: not a PEM certificate", path.display());
            Ok(text)
        };
        let mut files = Vec::new();
        match (&self.ca, &self.cert, &self.key) {
            (None, Some(_), _) | (None, _, Some(_)) => anyhow::bail!(
                "--etcd-certfile/--etcd-keyfile need --etcd-cafile: the CA of the etcd \
                 members' serving certificates"
            ),
            (_, Some(_), None) => anyhow::bail!("--etcd-certfile needs --etcd-keyfile"),
            (_, None, Some(_)) => anyhow::bail!("--etcd-keyfile needs --etcd-certfile"),
            _ => {}
        }
        if let Some(ca) = &self.ca {
            let text = certificate("--etcd-cafile", ca)?;
            files.push(GivenFile {
                name: "ca.crt",
                text,
                mode: 0o644,
            });
        }
        if let (Some(cert), Some(key)) = (&self.cert, &self.key) {
            let text = certificate("--etcd-certfile", cert)?;
            files.push(GivenFile {
                name: "apiserver-etcd-client.crt",
                text,
                mode: 0o644,
            });
            let text = read("--etcd-keyfile", key)?;
            anyhow::ensure!(
                PrivateKeyDer::from_pem_slice(text.as_bytes()).is_ok(),
                "--etcd-keyfile {}: not a PEM private key",
                key.display()
            );
            files.push(GivenFile {
                name: "apiserver-etcd-client.key",
                text,
                mode: 0o600,
            });
        }
        Ok(files)
    }
}

/// The client certificate's subject, as kubeadm names it.
const CLIENT_NAME: &str = "kube-apiserver-etcd-client";

/// The etcd PKI in a cluster's data dir.
#[derive(Debug, Clone)]
pub struct EtcdPki {
    dir: PathBuf,
}

impl EtcdPki {
    /// The PKI of the cluster in `data_dir` (made or not).
    pub fn of(data_dir: &Path) -> EtcdPki {
        EtcdPki {
            dir: data_dir.join(FOLDER),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Makes what is missing: the CA, then each certificate (all of them
    /// again when the CA is new, as they would not chain to it).
    pub fn ensure(&self) -> Result<()> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        std::fs::set_permissions(
            &self.dir,
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .with_context(|| format!("making {} private", self.dir.display()))?;
        let new_ca = !self.path("ca.crt").exists() || !self.path("ca.key").exists();
        if new_ca {
            let key = KeyPair::generate().context("generating the etcd CA key")?;
            let cert = ca_params()?.self_signed(&key)?;
            write(&self.path("ca.key"), &key.serialize_pem(), 0o600)?;
            write(&self.path("ca.crt"), &cert.pem(), 0o644)?;
        }
        let ca_key = std::fs::read_to_string(self.path("ca.key"))
            .with_context(|| format!("reading {}", self.path("ca.key").display()))?;
        let issuer = Issuer::new(ca_params()?, KeyPair::from_pem(&ca_key)?);
        let both = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        // The server certificate is also a client one (etcd's gateway
        // dials its own gRPC port with it), and so is the peer one (a
        // member dials the others with it), as kubeadm makes them.
        let leaves: [(&str, &str, Vec<&str>, Vec<ExtendedKeyUsagePurpose>); 3] = [
            (
                "server",
                "bosun-etcd-server",
                MEMBER_SANS.to_vec(),
                both.clone(),
            ),
            ("peer", "bosun-etcd-peer", MEMBER_SANS.to_vec(), both),
            (
                "apiserver-etcd-client",
                CLIENT_NAME,
                vec![],
                vec![ExtendedKeyUsagePurpose::ClientAuth],
            ),
        ];
        for (file, name, sans, usages) in leaves {
            let crt = self.path(&format!("{file}.crt"));
            let key_path = self.path(&format!("{file}.key"));
            if !new_ca && crt.exists() && key_path.exists() {
                continue;
            }
            let key = KeyPair::generate().with_context(|| format!("generating {file}.key"))?;
            let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
            let mut params = CertificateParams::new(sans)?;
            params.distinguished_name.push(DnType::CommonName, name);
            params.key_usages = vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyEncipherment,
            ];
            params.extended_key_usages = usages;
            params.not_after = rcgen::date_time_ymd(2126, 1, 1);
            let cert = params.signed_by(&key, &issuer)?;
            write(&key_path, &key.serialize_pem(), 0o600)?;
            write(&crt, &cert.pem(), 0o644)?;
        }
        Ok(())
    }

    /// The TLS flags of a member: https on both ports, a certificate of
    /// this CA required of clients and peers.
    pub fn member_args(&self) -> Vec<String> {
        let p = |name: &str| self.path(name).display().to_string();
        vec![
            "--client-cert-auth".into(),
            format!("--trusted-ca-file={}", p("ca.crt")),
            format!("--cert-file={}", p("server.crt")),
            format!("--key-file={}", p("server.key")),
            "--peer-client-cert-auth".into(),
            format!("--peer-trusted-ca-file={}", p("ca.crt")),
            format!("--peer-cert-file={}", p("peer.crt")),
            format!("--peer-key-file={}", p("peer.key")),
        ]
    }

    /// `bosun-control`'s flags to reach the members.
    pub fn control_args(&self) -> Vec<String> {
        control_args(
            &self.path("ca.crt"),
            &self.path("apiserver-etcd-client.crt"),
            &self.path("apiserver-etcd-client.key"),
        )
    }

    /// The files a joining control plane is handed, by their names in
    /// [`CLIENT_FILES`], read now: those this PKI has (all three for `up
    /// --ha`; for an etcd of the user's, what `up --store` was given).
    pub fn client_files(&self) -> Result<Vec<(String, String)>> {
        CLIENT_FILES
            .iter()
            .zip(CLIENT_SOURCES)
            .filter(|(_, source)| self.path(source).exists())
            .map(|(name, source)| {
                let path = self.path(source);
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                Ok((name.to_string(), text))
            })
            .collect()
    }

    /// Keeps the client files of an etcd the user runs, read and checked
    /// by [`EtcdClientFiles::read`], under the names `up --ha` uses (the
    /// key 0600), so that later `bosun up`s and joining control planes
    /// have them; given again, they replace the copies (a rotation).
    pub fn keep(&self, files: Vec<GivenFile>) -> Result<()> {
        if files.is_empty() {
            return Ok(());
        }
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        std::fs::set_permissions(
            &self.dir,
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .with_context(|| format!("making {} private", self.dir.display()))?;
        for file in files {
            write(&self.path(file.name), &file.text, file.mode)?;
        }
        Ok(())
    }

    /// `bosun-control`'s flags for the client files this PKI has (see
    /// [`EtcdPki::adopt`]); none when it has none.
    pub fn given_control_args(&self) -> Vec<String> {
        args_for_present(CLIENT_SOURCES.map(|source| self.path(source)))
    }

    /// Whether the member at `127.0.0.1:port` answers `/health` healthy
    /// to a client with this PKI's client certificate.
    pub async fn healthy(&self, port: u16) -> bool {
        let Ok(config) = self.client_config() else {
            return false;
        };
        health_over_tls(port, config).await
    }

    fn client_config(&self) -> Result<rustls::ClientConfig> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_file_iter(self.path("ca.crt"))? {
            roots.add(ca?)?;
        }
        let certs = CertificateDer::pem_file_iter(self.path("apiserver-etcd-client.crt"))?
            .collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_file(self.path("apiserver-etcd-client.key"))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Ok(rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)?)
    }
}

/// `bosun-control`'s flags on a control plane that joined, for the
/// [`CLIENT_FILES`] its bundle brought into `dir`.
pub fn joined_control_args(dir: &Path) -> Vec<String> {
    args_for_present(CLIENT_FILES.map(|name| dir.join(name)))
}

/// `--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile` for those of the
/// CA, certificate and key (in that order) that exist.
fn args_for_present(paths: [PathBuf; 3]) -> Vec<String> {
    let flags = ["--etcd-cafile", "--etcd-certfile", "--etcd-keyfile"];
    let mut args = Vec::new();
    for (flag, path) in flags.into_iter().zip(paths) {
        if path.exists() {
            args.extend([flag.to_string(), path.display().to_string()]);
        }
    }
    args
}

/// `bosun-control`'s `--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`.
pub fn control_args(ca: &Path, cert: &Path, key: &Path) -> Vec<String> {
    vec![
        "--etcd-cafile".into(),
        ca.display().to_string(),
        "--etcd-certfile".into(),
        cert.display().to_string(),
        "--etcd-keyfile".into(),
        key.display().to_string(),
    ]
}

fn ca_params() -> Result<CertificateParams> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(DnType::CommonName, "bosun-etcd-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_after = rcgen::date_time_ymd(2126, 1, 1);
    Ok(ca)
}

fn write(path: &Path, text: &str, mode: u32) -> Result<()> {
    bosun::files::write_atomically(path, text, mode)
        .with_context(|| format!("writing {}", path.display()))
}

/// `GET /health` over TLS with `config`; true if it says healthy.
async fn health_over_tls(port: u16, config: rustls::ClientConfig) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        let name = rustls::pki_types::ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into());
        let mut conn = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .ok()?;
        conn.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .ok()?;
        let mut out = Vec::new();
        // etcd may close without a TLS close_notify: what was read counts.
        let _ = conn.read_to_end(&mut out).await;
        Some(String::from_utf8_lossy(&out).contains("\"health\":\"true\""))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(3), attempt).await,
        Ok(Some(true))
    )
}
