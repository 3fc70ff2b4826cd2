//! A hollow node's own client certificate (`system:node:<name>`, group
//! `system:nodes`), obtained as `bosun join` obtains a joining host's: a key
//! made here and a certificate request the control plane signs for whoever
//! may ask (a bootstrap token's user, or the admin).

use anyhow::{anyhow, Context as _};
use base64::Engine;
use bosun::bootstrap as bt;

/// A node's certificate and key, both PEM.
pub struct NodeCredential {
    pub cert_pem: String,
    pub key_pem: String,
}

/// Asks the control plane, through `requester` (a client authenticated by
/// a bootstrap token, or the admin), to sign a certificate for `node`.
pub async fn request(requester: &kube::Client, node: &str) -> anyhow::Result<NodeCredential> {
    let (key, csr) =
        bt::node_certificate_request(node).context("making the node's key and request")?;
    let body = serde_json::json!({ "request": csr });
    let req = http::Request::post(bt::NODE_CREDENTIAL_PATH)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(&body)?)?;
    let text = requester
        .request_text(req)
        .await
        .with_context(|| format!("requesting node {node}'s certificate"))?;
    let answer: serde_json::Value =
        serde_json::from_str(&text).context("the answer is not JSON")?;
    let cert_pem = answer["certificate"]
        .as_str()
        .ok_or_else(|| anyhow!("the answer holds no certificate"))?
        .to_string();
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
