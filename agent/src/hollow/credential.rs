//! A hollow node's own client certificate (`system:node:<name>`, group
//! `system:nodes`), obtained as `bosun join` obtains a joining host's: a key
//! made here and a CertificateSigningRequest the control plane approves
//! and issues for whoever may ask (a bootstrap token's user, or the admin).

use anyhow::Context as _;
use base64::Engine;
use bosun::bootstrap as bt;

/// A node's certificate and key, both PEM.
pub struct NodeCredential {
    pub cert_pem: String,
    pub key_pem: String,
}

/// How long a hollow node waits for its certificate request to be
/// issued before it tries again.
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Asks the control plane, through `requester` (a client authenticated by
/// a bootstrap token, or the admin), for a certificate for `node`: a
/// CertificateSigningRequest that csrapproving approves.
pub async fn request(requester: &kube::Client, node: &str) -> anyhow::Result<NodeCredential> {
    let (key, csr) =
        bt::node_certificate_request(node).context("making the node's key and request")?;
    let cert_pem = bt::csr::request_certificate(requester, &csr, None, REQUEST_TIMEOUT)
        .await
        .with_context(|| format!("requesting node {node}'s certificate"))?;
    Ok(NodeCredential {
        cert_pem,
        key_pem: key.serialize_pem(),
    })
}

/// `base` (the cluster's address and CA) with `credential` as its user.
pub fn config_for(base: &kube::Config, credential: &NodeCredential) -> kube::Config {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut config = base.clone();
    config.auth_info = kube::config::AuthInfo {
        client_certificate_data: Some(b64(&credential.cert_pem)),
        client_key_data: Some(b64(&credential.key_pem).into()),
        ..Default::default()
    };
    config
}

/// `base` with the bootstrap token `token` as its user.
pub fn bootstrap_config(base: &kube::Config, token: &str) -> kube::Config {
    let mut config = base.clone();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.to_string().into()),
        ..Default::default()
    };
    config
}
