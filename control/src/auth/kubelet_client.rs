//! The control plane's client certificate toward the agents, as
//! kube-apiserver's `--kubelet-client-certificate`: CN
//! `kube-apiserver-kubelet-client`, O `system:masters`, signed by the
//! cluster CA. Agents trust that CA (the one in their kubeconfig, which a
//! joined host pinned at join) and let `system:masters` use their stream
//! API, so logs, exec, attach and port-forward reach every node, the
//! joined ones included, and no bearer token of the control plane is sent
//! to any of them.
//!
//! The certificate and its key live in memory only: a new pair is made at
//! each start, so there is nothing to steal from the data dir and nothing
//! to renew while the control plane keeps running for less than
//! [`VALIDITY_DAYS`].

use std::sync::Arc;

use anyhow::Context;
use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair, KeyUsagePurpose};
use rustls::client::ResolvesClientCert;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;

/// The certificate's common name, kubeadm's for the same certificate.
pub const COMMON_NAME: &str = "kube-apiserver-kubelet-client";
/// The group agents let use their stream API.
pub const MASTERS_GROUP: &str = "system:masters";
/// How long the certificate is valid.
const VALIDITY_DAYS: i64 = 365;

/// Presents the control plane's client certificate on every connection
/// to an agent.
#[derive(Debug)]
pub struct KubeletClient {
    key: Arc<CertifiedKey>,
    pem: String,
}

impl KubeletClient {
    /// A fresh key and certificate signed by `issuer` (the cluster CA).
    pub fn new(issuer: &Issuer<'_, KeyPair>) -> anyhow::Result<KubeletClient> {
        let key = KeyPair::generate().context("generating the kubelet client key")?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::OrganizationName, MASTERS_GROUP);
        params
            .distinguished_name
            .push(DnType::CommonName, COMMON_NAME);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::minutes(5);
        params.not_after = now + time::Duration::days(VALIDITY_DAYS);
        params.serial_number = Some(rcgen::SerialNumber::from_slice(
            uuid::Uuid::new_v4().as_bytes(),
        ));
        let cert = params
            .signed_by(&key, issuer)
            .context("signing the kubelet client certificate")?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = rustls::crypto::ring::default_provider();
        let certified = CertifiedKey::from_der(
            vec![CertificateDer::from(cert.der().to_vec())],
            der,
            &provider,
        )
        .context("loading the kubelet client key")?;
        Ok(KubeletClient {
            key: Arc::new(certified),
            pem: cert.pem(),
        })
    }

    /// The certificate in PEM.
    pub fn certificate_pem(&self) -> &str {
        &self.pem
    }
}

impl ResolvesClientCert for KubeletClient {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.key.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_certificate_is_a_masters_client_certificate_of_the_ca() {
        let dir = tempfile::tempdir().unwrap();
        crate::tls::load_or_create(dir.path(), &["localhost".into()]).unwrap();
        let signer = crate::auth::credential::NodeSigner::load(dir.path()).unwrap();
        let client = signer.kubelet_client();
        let (_, pem) =
            x509_parser::pem::parse_x509_pem(client.certificate_pem().as_bytes()).unwrap();
        let cert = pem.parse_x509().unwrap();
        let peer = crate::auth::PeerCert::from_der(&pem.contents).unwrap();
        assert_eq!(peer.common_name, COMMON_NAME);
        assert_eq!(peer.organizations, [MASTERS_GROUP]);
        crate::auth::credential::tests::assert_client_auth_signed_by_ca(&cert, dir.path());
        assert!(client.has_certs());
        assert!(client.resolve(&[], &[]).is_some());
    }
}
