//! TLS for the API: kubectl (client-go) sends bearer tokens only over
//! HTTPS, so the control plane makes its own CA on first start, signs a
//! serving certificate for the names it is reached by, and hands the CA
//! to clients in the kubeconfig it writes.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The names in-cluster clients reach the API by: the `kubernetes`
/// Service's ClusterIP and its DNS names (`kubernetes`,
/// `kubernetes.default`, `kubernetes.default.svc`,
/// `kubernetes.default.svc.<cluster domain>`), as kubeadm puts them in the
/// apiserver's certificate.
pub fn kubernetes_service_names(service_ip: std::net::Ipv4Addr, domain: &str) -> Vec<String> {
    let domain = domain.trim_matches('.');
    let mut names = vec![
        service_ip.to_string(),
        "kubernetes".into(),
        "kubernetes.default".into(),
        "kubernetes.default.svc".into(),
    ];
    if !domain.is_empty() {
        names.push(format!("kubernetes.default.svc.{domain}"));
    }
    names
}

/// The PEM files in the data dir.
pub struct Pki {
    pub ca_pem: String,
    pub server_config: Arc<rustls::ServerConfig>,
}

/// Writes a file of the PKI whole or not at all (`mode` its permissions).
fn write_file(path: &Path, contents: &str, mode: u32) -> anyhow::Result<()> {
    bosun::files::write_atomically(path, contents, mode)
        .with_context(|| format!("writing {}", path.display()))
}

fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    write_file(path, contents, 0o600)
}

/// Loads the CA and serving certificate from `dir`, making them on first
/// start. `names` are the DNS names and IP addresses clients connect to.
pub fn load_or_create(dir: &Path, names: &[String]) -> anyhow::Result<Pki> {
    let ca_crt = dir.join("ca.crt");
    let server_crt = dir.join("server.crt");
    let server_key = dir.join("server.key");
    let sans_file = dir.join("server.sans");
    let wanted_sans = names.join(",");
    let have_sans = std::fs::read_to_string(&sans_file).unwrap_or_default();
    if !ca_crt.exists() {
        let ca_key = KeyPair::generate().context("generating the CA key")?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name.push(DnType::CommonName, "bosun-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca.not_after = rcgen::date_time_ymd(2126, 1, 1);
        let ca_cert = ca.self_signed(&ca_key)?;
        write_private(&dir.join("ca.key"), &ca_key.serialize_pem())?;
        write_file(&ca_crt, &ca_cert.pem(), 0o644)?;
        let _ = std::fs::remove_file(&server_crt);
    }
    if !server_crt.exists() || have_sans.trim() != wanted_sans {
        let ca_key_pem = std::fs::read_to_string(dir.join("ca.key")).context("reading ca.key")?;
        let ca_key = KeyPair::from_pem(&ca_key_pem)?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name.push(DnType::CommonName, "bosun-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().context("generating the serving key")?;
        let mut params = CertificateParams::new(names.to_vec())?;
        params
            .distinguished_name
            .push(DnType::CommonName, "bosun-control");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.not_after = rcgen::date_time_ymd(2126, 1, 1);
        let cert = params.signed_by(&key, &issuer)?;
        write_private(&server_key, &key.serialize_pem())?;
        write_file(&server_crt, &cert.pem(), 0o644)?;
        write_file(&sans_file, &wanted_sans, 0o644)?;
    }
    let ca_pem = std::fs::read_to_string(&ca_crt)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&server_crt)
        .context("reading server.crt")?
        .collect::<Result<_, _>>()?;
    let key = PrivateKeyDer::from_pem_file(&server_key).context("reading server.key")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // Client certificates are optional (bearer tokens need none); one
    // that is presented must chain to the cluster CA. Node credentials
    // are such certificates.
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(&ca_crt).context("reading ca.crt")? {
        roots.add(ca?)?;
    }
    let clients = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .context("setting up client certificate checks")?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(clients)
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Pki {
        ca_pem,
        server_config: Arc::new(config),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_cluster_names_cover_the_kubernetes_service() {
        let names =
            kubernetes_service_names(std::net::Ipv4Addr::new(10, 96, 0, 1), "cluster.local");
        for want in [
            "10.96.0.1",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ] {
            assert!(
                names.iter().any(|n| n == want),
                "{want} missing from {names:?}"
            );
        }
    }
}
