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

/// How recently a Node's Lease must have been renewed (or the Node made,
/// before it has one) for its name to be held by a live node: the node
/// lifecycle controller's default `--node-monitor-grace-period`.
pub const LIVE_GRACE_SECONDS: i64 = 40;

/// Why the Node `node` (its stored object and Lease) counts as held by a
/// live credential at `now`, or None. A Lease renewed within
/// [`LIVE_GRACE_SECONDS`] is the proof a credential of that name is in
/// use (bosun keeps no record of the certificates it signed, and an agent
/// renews its Lease every few seconds); a Node just made without a Lease
/// yet is an agent still starting.
pub fn live_node(
    node: &serde_json::Value,
    lease: Option<&serde_json::Value>,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<String> {
    let at = |v: &serde_json::Value| {
        v.as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| (now - t.with_timezone(&chrono::Utc)).num_seconds())
    };
    if let Some(ago) = lease.and_then(|l| at(&l["spec"]["renewTime"])) {
        return (ago < LIVE_GRACE_SECONDS)
            .then(|| format!("its Lease was renewed {}s ago", ago.max(0)));
    }
    let made = at(&node["metadata"]["creationTimestamp"])?;
    (made < LIVE_GRACE_SECONDS).then(|| format!("it was registered {}s ago", made.max(0)))
}

/// A bootstrap token may not take the name of a live node (see
/// [`live_node`]): whoever holds the token would get that node's pods,
/// Secrets and routes. Re-joining a host whose Node is gone (`bosun
/// leave` deletes it) or has been silent longer than the grace period
/// works; a node renewing its own certificate and the admin are not
/// asked.
pub async fn name_is_free(
    store: &dyn crate::store::Store,
    who: &super::Identity,
    node: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), String> {
    if !matches!(who, super::Identity::Bootstrap(_)) {
        return Ok(());
    }
    let read = |kind: &str, ns: Option<&str>| {
        let key = bosun::resources::by_kind(
            if kind == "Lease" {
                "coordination.k8s.io/v1"
            } else {
                "v1"
            },
            kind,
        )
        .expect("served")
        .storage_key(ns, node);
        async move {
            store
                .get(&key)
                .await
                .map_err(|e| format!("reading {key}: {e}"))
                .map(|kv| {
                    kv.and_then(|kv| serde_json::from_slice::<serde_json::Value>(&kv.value).ok())
                })
        }
    };
    let Some(existing) = read("Node", None).await? else {
        return Ok(());
    };
    let lease = read("Lease", Some("kube-node-lease")).await?;
    match live_node(&existing, lease.as_ref(), now) {
        None => Ok(()),
        Some(why) => Err(format!(
            "node \"{node}\" already exists and is live ({why}): a bootstrap token cannot take the name of a live node; \
             join with another --node-name, or remove the node first (bosun leave on its host, or kubectl delete node {node})"
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
    fn a_live_nodes_name_is_held() {
        use serde_json::json;
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:01:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let node = |made: &str| json!({"metadata": {"name": "w1", "creationTimestamp": made}});
        let lease = |renewed: &str| json!({"spec": {"renewTime": renewed}});
        let old = node("2025-12-01T00:00:00Z");
        assert_eq!(
            live_node(&old, Some(&lease("2026-01-01T00:00:55.123456Z")), now).as_deref(),
            Some("its Lease was renewed 4s ago")
        );
        // Silent past the grace period: a host coming back may re-join.
        assert_eq!(
            live_node(&old, Some(&lease("2026-01-01T00:00:10Z")), now),
            None
        );
        assert_eq!(live_node(&old, None, now), None);
        // Registered a moment ago, its Lease not written yet.
        assert_eq!(
            live_node(&node("2026-01-01T00:00:50Z"), None, now).as_deref(),
            Some("it was registered 10s ago")
        );
    }

    #[tokio::test]
    async fn a_bootstrap_token_cannot_take_a_live_nodes_name() {
        use crate::store::{EmbeddedStore, Store, StoreOptions};
        let store = EmbeddedStore::in_memory(StoreOptions::default()).unwrap();
        let now = chrono::Utc::now();
        let stamp = bosun::bootstrap::rfc3339(now);
        let key = |kind: &str, v: &str, ns: Option<&str>| {
            bosun::resources::by_kind(v, kind)
                .unwrap()
                .storage_key(ns, "w1")
        };
        let token = Identity::Bootstrap("abcdef".into());
        assert_eq!(name_is_free(&store, &token, "w1", now).await, Ok(()));
        let node = serde_json::json!({"metadata": {"name": "w1", "creationTimestamp": "2025-01-01T00:00:00Z"}});
        store
            .create(&key("Node", "v1", None), serde_json::to_vec(&node).unwrap())
            .await
            .unwrap();
        assert_eq!(name_is_free(&store, &token, "w1", now).await, Ok(()));
        let lease = serde_json::json!({"metadata": {"name": "w1", "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": "w1", "renewTime": stamp}});
        store
            .create(
                &key("Lease", "coordination.k8s.io/v1", Some("kube-node-lease")),
                serde_json::to_vec(&lease).unwrap(),
            )
            .await
            .unwrap();
        let err = name_is_free(&store, &token, "w1", now).await.unwrap_err();
        assert!(
            err.starts_with(
                "node \"w1\" already exists and is live (its Lease was renewed 0s ago)"
            ),
            "{err}"
        );
        // The node itself renewing, and the admin, are not refused.
        assert_eq!(
            name_is_free(&store, &Identity::Node("w1".into()), "w1", now).await,
            Ok(())
        );
        assert_eq!(
            name_is_free(&store, &Identity::Admin, "w1", now).await,
            Ok(())
        );
    }

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
