//! Node credentials: the cluster CA signs a joining node's certificate
//! request, as kube-controller-manager's csrapprover and
//! `kubernetes.io/kube-apiserver-client-kubelet` signer do for requests a
//! bootstrap token made. The request must be a node's own: CN
//! `system:node:<name>` with a valid node name, O `system:nodes` and
//! nothing else; the certificate is for client authentication only and
//! carries none of the request's other wishes (names, CA rights).

use std::path::Path;

use anyhow::Context;
use bosun::bootstrap::{NODES_GROUP, NODE_USER_PREFIX};
use rcgen::{
    CertificateSigningRequestParams, DnType, DnValue, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose,
};

/// How long a node certificate is valid (kube-controller-manager's
/// `--cluster-signing-duration` default), and the most a request may ask.
const VALIDITY_DAYS: i64 = 365;
/// The least lifetime a request may ask for. Kubernetes' CSR
/// `expirationSeconds` takes 600 at least; bosun takes 10 so that tests
/// can watch a node outlive its first certificate.
pub const MIN_EXPIRATION_SECONDS: i64 = 10;

/// Who may ask for a certificate of `node`: a bootstrap token's user or
/// the admin for any node (joining), a node for itself only (renewing its
/// certificate, as the kubelet's certificate manager does with
/// `selfnodeclient` CSRs); anyone else is refused.
pub fn may_request(who: &super::Identity, node: &str) -> Result<(), String> {
    use super::Identity;
    match who {
        Identity::Bootstrap(_) | Identity::Admin => Ok(()),
        Identity::Node(name) if name == node => Ok(()),
        Identity::Node(name) => Err(format!(
            "node \"{name}\" may only renew its own certificate, not node \"{node}\"'s"
        )),
        other => Err(format!(
            "User \"{}\" cannot request node credentials: only a bootstrap token or the node itself can",
            other.user()
        )),
    }
}

/// The node a PEM certificate request is for (its CN without
/// `system:node:`), or why it is no node's.
pub fn requested_node(csr_pem: &str) -> Result<String, String> {
    let csr = CertificateSigningRequestParams::from_pem(csr_pem)
        .map_err(|e| format!("the certificate request does not parse: {e}"))?;
    let cn = csr
        .params
        .distinguished_name
        .get(&DnType::CommonName)
        .and_then(dn_text)
        .ok_or("the certificate request has no common name")?;
    cn.strip_prefix(NODE_USER_PREFIX)
        .map(String::from)
        .ok_or_else(|| format!("the common name {cn:?} must be \"{NODE_USER_PREFIX}<node name>\""))
}

/// Signs node certificates with the cluster CA, and holds the control
/// plane's own client certificate toward the agents, which the same CA
/// signed ([`super::kubelet_client`]).
pub struct NodeSigner {
    issuer: Issuer<'static, KeyPair>,
    kubelet_client: std::sync::Arc<super::kubelet_client::KubeletClient>,
}

impl std::fmt::Debug for NodeSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeSigner")
    }
}

fn dn_text(v: &DnValue) -> Option<&str> {
    match v {
        DnValue::Utf8String(s) => Some(s.as_str()),
        DnValue::PrintableString(s) => Some(s.as_str()),
        _ => None,
    }
}

impl NodeSigner {
    /// The signer of the CA in `dir` (`ca.crt`, `ca.key`).
    pub fn load(dir: &Path) -> anyhow::Result<NodeSigner> {
        let ca_pem = std::fs::read_to_string(dir.join("ca.crt")).context("reading ca.crt")?;
        let key_pem = std::fs::read_to_string(dir.join("ca.key")).context("reading ca.key")?;
        let key = KeyPair::from_pem(&key_pem).context("parsing ca.key")?;
        let issuer = Issuer::from_ca_cert_pem(&ca_pem, key).context("parsing ca.crt")?;
        let kubelet_client =
            std::sync::Arc::new(super::kubelet_client::KubeletClient::new(&issuer)?);
        Ok(NodeSigner {
            issuer,
            kubelet_client,
        })
    }

    /// The control plane's client certificate toward the agents.
    pub fn kubelet_client(&self) -> std::sync::Arc<super::kubelet_client::KubeletClient> {
        self.kubelet_client.clone()
    }

    /// The node name and its signed certificate (PEM) for the PEM
    /// certificate request `csr_pem`, valid for `expiration_seconds` (as a
    /// CSR's `spec.expirationSeconds`; default and at most a year), or why
    /// it is refused.
    pub fn sign(
        &self,
        csr_pem: &str,
        expiration_seconds: Option<i64>,
    ) -> Result<(String, String), String> {
        let lifetime = match expiration_seconds {
            None => time::Duration::days(VALIDITY_DAYS),
            Some(s) if s < MIN_EXPIRATION_SECONDS => {
                return Err(format!(
                    "expirationSeconds: {s} is less than the minimum of {MIN_EXPIRATION_SECONDS}"
                ))
            }
            Some(s) => time::Duration::seconds(s).min(time::Duration::days(VALIDITY_DAYS)),
        };
        let mut csr = CertificateSigningRequestParams::from_pem(csr_pem)
            .map_err(|e| format!("the certificate request does not parse: {e}"))?;
        let dn = &csr.params.distinguished_name;
        let cn = dn
            .get(&DnType::CommonName)
            .and_then(dn_text)
            .ok_or("the certificate request has no common name")?
            .to_string();
        let node = cn
            .strip_prefix(NODE_USER_PREFIX)
            .ok_or_else(|| {
                format!("the common name {cn:?} must be \"{NODE_USER_PREFIX}<node name>\"")
            })?
            .to_string();
        let problems = bosun::names::is_dns1123_subdomain(&node);
        if !problems.is_empty() {
            return Err(format!(
                "the node name {node:?} in the common name is invalid: {}",
                problems.join("; ")
            ));
        }
        let orgs: Vec<&DnValue> = dn
            .iter()
            .filter(|(t, _)| **t == DnType::OrganizationName)
            .map(|(_, v)| v)
            .collect();
        if orgs.len() != 1 || dn_text(orgs[0]) != Some(NODES_GROUP) {
            return Err(format!(
                "the organization must be exactly \"{NODES_GROUP}\""
            ));
        }
        let now = time::OffsetDateTime::now_utc();
        let p = &mut csr.params;
        let mut subject = rcgen::DistinguishedName::new();
        subject.push(DnType::OrganizationName, NODES_GROUP);
        subject.push(DnType::CommonName, cn.as_str());
        p.distinguished_name = subject;
        p.subject_alt_names.clear();
        p.is_ca = IsCa::ExplicitNoCa;
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        // Backdated for clocks a little behind, as Kubernetes' signer
        // does (5 minutes), but by no more than a tenth of the lifetime, so
        // that a short-lived certificate is not due for renewal at once.
        let backdate: time::Duration = (lifetime / 10_i32).min(time::Duration::minutes(5));
        p.not_before = now - backdate;
        p.not_after = now + lifetime;
        p.serial_number = Some(rcgen::SerialNumber::from_slice(
            uuid::Uuid::new_v4().as_bytes(),
        ));
        let cert = csr
            .signed_by(&self.issuer)
            .map_err(|e| format!("signing: {e}"))?;
        Ok((node, cert.pem()))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `cert` is for client authentication only and signed by the
    /// cluster CA in `dir`.
    pub(crate) fn assert_client_auth_signed_by_ca(
        cert: &x509_parser::certificate::X509Certificate,
        dir: &std::path::Path,
    ) {
        let eku = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
        let ca_pem = std::fs::read(dir.join("ca.crt")).unwrap();
        let (_, ca) = x509_parser::pem::parse_x509_pem(&ca_pem).unwrap();
        let ca = ca.parse_x509().unwrap();
        assert!(cert.verify_signature(Some(ca.public_key())).is_ok());
    }
    use crate::auth::Identity;

    #[test]
    fn a_node_may_renew_its_own_certificate_only() {
        assert!(may_request(&Identity::Bootstrap("abcdef".into()), "w1").is_ok());
        assert!(may_request(&Identity::Admin, "w1").is_ok());
        assert!(may_request(&Identity::Node("w1".into()), "w1").is_ok());
        let err = may_request(&Identity::Node("w2".into()), "w1").unwrap_err();
        assert!(err.contains("may only renew its own"), "{err}");
        assert!(may_request(&Identity::ServiceAccount(Default::default()), "w1").is_err());
        assert!(may_request(&Identity::CertificateUser(Default::default()), "w1").is_err());
        let req = csr("system:node:w1", &[NODES_GROUP], vec![]);
        assert_eq!(requested_node(&req).unwrap(), "w1");
    }

    #[test]
    fn a_request_may_ask_for_a_shorter_lifetime() {
        let (_dir, signer) = signer();
        let req = csr("system:node:w1", &[NODES_GROUP], vec![]);
        let validity = |pem: &str| {
            use rustls_pki_types::pem::PemObject;
            let der = rustls_pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
            let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
            let v = cert.validity();
            v.not_after.timestamp() - v.not_before.timestamp()
        };
        let (_, short) = signer.sign(&req, Some(60)).unwrap();
        assert_eq!(validity(&short), 60 + 6);
        let (_, long) = signer.sign(&req, Some(10 * 365 * 86400)).unwrap();
        assert_eq!(validity(&long), 365 * 86400 + 300);
        let err = signer.sign(&req, Some(5)).unwrap_err();
        assert!(err.contains("expirationSeconds"), "{err}");
    }

    fn csr(cn: &str, orgs: &[&str], sans: Vec<String>) -> String {
        let key = KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(sans).unwrap();
        for o in orgs {
            p.distinguished_name.push(DnType::OrganizationName, *o);
        }
        p.distinguished_name.push(DnType::CommonName, cn);
        p.serialize_request(&key).unwrap().pem().unwrap()
    }

    fn signer() -> (tempfile::TempDir, NodeSigner) {
        let dir = tempfile::tempdir().unwrap();
        crate::tls::load_or_create(dir.path(), &["localhost".into()]).unwrap();
        let s = NodeSigner::load(dir.path()).unwrap();
        (dir, s)
    }

    #[test]
    fn a_nodes_request_gets_a_client_certificate_of_the_ca() {
        let (dir, signer) = signer();
        let (node, pem) = signer
            .sign(
                &csr(
                    "system:node:worker-1",
                    &[NODES_GROUP],
                    vec!["evil.example".into()],
                ),
                None,
            )
            .unwrap();
        assert_eq!(node, "worker-1");
        use rustls_pki_types::pem::PemObject;
        let der = rustls_pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        let peer = crate::auth::PeerCert::from_der(&der).unwrap();
        assert_eq!(
            Identity::of_certificate(&peer),
            crate::auth::Identity::Node("worker-1".into())
        );
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        // The requested names are dropped; it is a client certificate only.
        assert!(cert.subject_alternative_name().unwrap().is_none());
        assert_client_auth_signed_by_ca(&cert, dir.path());
    }

    #[test]
    fn requests_for_anything_but_a_node_are_refused() {
        let (_dir, signer) = signer();
        let err = signer
            .sign(&csr("admin", &[NODES_GROUP], vec![]), None)
            .unwrap_err();
        assert!(err.contains("system:node:<node name>"), "{err}");
        let err = signer
            .sign(&csr("system:node:w", &["system:masters"], vec![]), None)
            .unwrap_err();
        assert!(err.contains("exactly \"system:nodes\""), "{err}");
        let err = signer
            .sign(
                &csr("system:node:w", &[NODES_GROUP, "system:masters"], vec![]),
                None,
            )
            .unwrap_err();
        assert!(err.contains("exactly"), "{err}");
        let err = signer
            .sign(&csr("system:node:Bad_Name", &[NODES_GROUP], vec![]), None)
            .unwrap_err();
        assert!(err.contains("node name"), "{err}");
        assert!(signer
            .sign("garbage", None)
            .unwrap_err()
            .contains("does not parse"));
    }
}
