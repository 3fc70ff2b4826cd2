//! Node credentials: whether a node's name is held by a live node (what
//! csrapproving checks before it approves a request for a node's
//! certificate that is not the node's own), and the cluster CA's signer
//! the control plane's client certificate toward the agents comes from.

use std::path::Path;

use anyhow::Context;
use rcgen::{Issuer, KeyPair};

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

/// The cluster CA, and the control plane's own client certificate
/// toward the agents, which it signed ([`super::kubelet_client`]).
pub struct NodeSigner {
    kubelet_client: std::sync::Arc<super::kubelet_client::KubeletClient>,
}

impl std::fmt::Debug for NodeSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeSigner")
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
        Ok(NodeSigner { kubelet_client })
    }

    /// The control plane's client certificate toward the agents.
    pub fn kubelet_client(&self) -> std::sync::Arc<super::kubelet_client::KubeletClient> {
        self.kubelet_client.clone()
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
}
