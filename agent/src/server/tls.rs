//! The agent's serving certificate: self-signed, made on first start and
//! kept in the data dir. Nobody signs it; the agent publishes it on its
//! Node (annotation [`SERVING_CERT_ANNOTATION`]) through the authenticated
//! API, and the control plane accepts exactly that certificate, so a
//! client token never goes to an impostor.

use std::path::Path;
use std::sync::Arc;

use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The Node annotation holding the agent's serving certificate (PEM).
pub const SERVING_CERT_ANNOTATION: &str = "bosun.io/serving-certificate";

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("making the serving certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("reading the serving certificate: {0}")]
    Pem(#[from] rustls::pki_types::pem::Error),
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("the client CA: {0}")]
    ClientCa(String),
}

/// The certificate in PEM and the server config that presents it.
pub struct ServingTls {
    pub cert_pem: String,
    pub config: Arc<rustls::ServerConfig>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TlsError + '_ {
    move |source| TlsError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn write(path: &Path, contents: &str, mode: u32) -> Result<(), TlsError> {
    bosun::files::write_atomically(path, contents, mode).map_err(io(path))
}

/// Loads the serving certificate from `dir`, making it when it is missing
/// or was made for other `names`. A client certificate is optional (bearer
/// tokens need none); one that is presented must chain to one of
/// `client_cas` (DER), and with none given none is asked for.
pub fn load_or_create(
    dir: &Path,
    names: &[String],
    client_cas: &[CertificateDer<'static>],
) -> Result<ServingTls, TlsError> {
    let crt = dir.join("serving.crt");
    let key = dir.join("serving.key");
    let sans = dir.join("serving.sans");
    let wanted = names.join(",");
    let have = std::fs::read_to_string(&sans).unwrap_or_default();
    if !crt.exists() || !key.exists() || have.trim() != wanted {
        let key_pair = KeyPair::generate()?;
        let mut params = CertificateParams::new(names.to_vec())?;
        params
            .distinguished_name
            .push(DnType::CommonName, "bosun-agent");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.not_after = rcgen::date_time_ymd(2126, 1, 1);
        let cert = params.self_signed(&key_pair)?;
        write(&key, &key_pair.serialize_pem(), 0o600)?;
        write(&crt, &cert.pem(), 0o644)?;
        write(&sans, &wanted, 0o644)?;
    }
    let cert_pem = std::fs::read_to_string(&crt).map_err(io(&crt))?;
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(cert_pem.as_bytes()).collect::<Result<_, _>>()?;
    let key = PrivateKeyDer::from_pem_file(&key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = if client_cas.is_empty() {
        builder.with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for ca in client_cas {
            roots.add(ca.clone())?;
        }
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::ClientCa(e.to_string()))?;
        builder.with_client_cert_verifier(verifier)
    };
    let mut config = builder.with_single_cert(certs, key)?;
    // WebSocket upgrades (exec, attach) are HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(ServingTls {
        cert_pem,
        config: Arc::new(config),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_certificate_is_kept_until_the_names_change() {
        let dir = tempfile::tempdir().unwrap();
        let names = vec!["127.0.0.1".to_string(), "node-a".to_string()];
        let first = load_or_create(dir.path(), &names, &[]).unwrap();
        let again = load_or_create(dir.path(), &names, &[]).unwrap();
        assert_eq!(first.cert_pem, again.cert_pem);
        assert!(first.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let renamed = load_or_create(dir.path(), &["10.0.0.5".to_string()], &[]).unwrap();
        assert_ne!(first.cert_pem, renamed.cert_pem);
    }
}
