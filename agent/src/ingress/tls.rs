//! TLS termination: each Ingress's `spec.tls` entry names a Secret of type
//! `kubernetes.io/tls` (`tls.crt`, `tls.key`) in its namespace, presented
//! for its `hosts` (exact names and `*.` wildcards) chosen by SNI. A
//! client naming no known host gets the controller's own self-signed
//! certificate, as ingress-nginx's "Fake Certificate".

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::Api;
use kube::Client;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Certificates by host name: `a.example.com`, or `*.example.com`.
#[derive(Debug, Default)]
pub struct CertMap {
    by_host: HashMap<String, Arc<CertifiedKey>>,
}

impl CertMap {
    /// The certificate for SNI name `host`: exact, else its wildcard.
    pub fn find(&self, host: &str) -> Option<Arc<CertifiedKey>> {
        let host = host.to_ascii_lowercase();
        self.by_host.get(&host).cloned().or_else(|| {
            let (_, suffix) = host.split_once('.')?;
            self.by_host.get(&format!("*.{suffix}")).cloned()
        })
    }

    pub fn len(&self) -> usize {
        self.by_host.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_host.is_empty()
    }
}

/// A certificate and key in PEM made into what rustls presents.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("tls.crt: {e}"))?;
    if chain.is_empty() {
        return Err("tls.crt: no certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| format!("tls.key: {e}"))?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(chain, key, &provider).map_err(|e| format!("tls.key: {e}"))
}

/// The controller's own certificate, for clients naming no known host.
pub fn default_certificate() -> Result<Arc<CertifiedKey>, String> {
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let mut params = rcgen::CertificateParams::new(vec!["ingress.local".to_string()])
        .map_err(|e| e.to_string())?;
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        "bosun Ingress Controller Default Certificate",
    );
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    certified_key(cert.pem().as_bytes(), key.serialize_pem().as_bytes()).map(Arc::new)
}

/// Reads the TLS Secrets `ingresses` name and maps their hosts to them
/// (the first Ingress naming a host wins, oldest first as the caller
/// sorted them). A Secret that is missing or unreadable is logged and
/// skipped: its hosts get the default certificate.
pub async fn load(client: &Client, ingresses: &[Ingress]) -> CertMap {
    let mut map = CertMap::default();
    let mut read: HashMap<(String, String), Option<Arc<CertifiedKey>>> = HashMap::new();
    for ing in ingresses {
        let ns = ing.metadata.namespace.clone().unwrap_or_default();
        for tls in ing.spec.iter().flat_map(|s| s.tls.iter().flatten()) {
            let Some(secret) = tls.secret_name.clone().filter(|s| !s.is_empty()) else {
                continue;
            };
            let key = (ns.clone(), secret.clone());
            if !read.contains_key(&key) {
                let got = read_secret(client, &ns, &secret).await;
                read.insert(key.clone(), got);
            }
            let Some(cert) = read.get(&key).cloned().flatten() else {
                continue;
            };
            for host in tls.hosts.iter().flatten() {
                map.by_host
                    .entry(host.to_ascii_lowercase())
                    .or_insert_with(|| cert.clone());
            }
        }
    }
    map
}

async fn read_secret(client: &Client, ns: &str, name: &str) -> Option<Arc<CertifiedKey>> {
    let secret = match Api::<Secret>::namespaced(client.clone(), ns)
        .get(name)
        .await
    {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(namespace = ns, secret = name, error = %e, "ingress: reading a TLS secret");
            return None;
        }
    };
    let data = secret.data.unwrap_or_default();
    let (Some(crt), Some(key)) = (data.get("tls.crt"), data.get("tls.key")) else {
        tracing::warn!(
            namespace = ns,
            secret = name,
            "ingress: TLS secret without tls.crt and tls.key"
        );
        return None;
    };
    match certified_key(&crt.0, &key.0) {
        Ok(c) => Some(Arc::new(c)),
        Err(e) => {
            tracing::warn!(namespace = ns, secret = name, error = %e, "ingress: TLS secret unusable");
            None
        }
    }
}

/// Picks the certificate by SNI from the current map.
#[derive(Debug)]
pub struct SniResolver {
    pub shared: Arc<super::Shared>,
    pub fallback: Arc<CertifiedKey>,
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let certs = self.shared.certs.read().expect("certificates").clone();
        hello
            .server_name()
            .and_then(|n| certs.find(n))
            .or_else(|| Some(self.fallback.clone()))
    }
}

impl std::fmt::Debug for super::Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_for(names: &[&str]) -> Arc<CertifiedKey> {
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        let cert = params.self_signed(&key).unwrap();
        Arc::new(certified_key(cert.pem().as_bytes(), key.serialize_pem().as_bytes()).unwrap())
    }

    #[test]
    fn exact_host_then_wildcard() {
        let a = cert_for(&["a.example.com"]);
        let w = cert_for(&["*.example.com"]);
        let mut map = CertMap::default();
        map.by_host.insert("a.example.com".into(), a.clone());
        map.by_host.insert("*.example.com".into(), w.clone());
        assert!(Arc::ptr_eq(&map.find("A.example.com").unwrap(), &a));
        assert!(Arc::ptr_eq(&map.find("b.example.com").unwrap(), &w));
        assert!(map.find("c.b.example.com").is_none());
        assert!(map.find("example.com").is_none());
    }

    #[test]
    fn bad_pem_is_an_error_naming_the_key() {
        assert!(certified_key(b"junk", b"junk")
            .unwrap_err()
            .starts_with("tls.crt"));
        assert!(default_certificate().is_ok());
    }
}
