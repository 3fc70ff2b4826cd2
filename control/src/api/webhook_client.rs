//! Calling a webhook, as kube-apiserver's `webhook.ClientManager` does for
//! admission and CRD conversion webhooks alike: an HTTPS POST of a JSON
//! review to `clientConfig.url`, or to one ready endpoint of
//! `clientConfig.service` with the certificate checked for
//! `NAME.NAMESPACE.svc` (as kube-apiserver's service resolver names it),
//! against `caBundle` (or the system's roots); `?timeout=` and the whole
//! call bounded by the caller's timeout. A failure reads as upstream's
//! rest client words it, `Post "URL": WHY`; each caller puts its own words
//! in front.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;

use crate::api::ApiState;

/// The most of a webhook's answer read (upstream reads a few MB).
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Where a webhook is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum Endpoint {
    /// `clientConfig.url`.
    Url(url::Url),
    /// `clientConfig.service`: dialed at one ready endpoint of the
    /// Service, its certificate checked for `NAME.NAMESPACE.svc`.
    Service {
        namespace: String,
        name: String,
        port: u16,
        path: String,
    },
}

impl Endpoint {
    /// The endpoint a `clientConfig` (JSON, either webhook kind's or a
    /// CRD conversion's) names; a URL that does not parse (validation
    /// refuses it on write) is an endpoint no call reaches.
    pub fn of_client_config(cc: &Value) -> Endpoint {
        let unreachable = || Endpoint::Url(url::Url::parse("https://invalid.").expect("url"));
        if let Some(u) = cc.get("url").and_then(Value::as_str) {
            return url::Url::parse(u)
                .map(Endpoint::Url)
                .unwrap_or_else(|_| unreachable());
        }
        match cc.get("service").filter(|s| s.is_object()) {
            Some(s) => Endpoint::Service {
                namespace: s["namespace"].as_str().unwrap_or_default().to_string(),
                name: s["name"].as_str().unwrap_or_default().to_string(),
                port: s["port"]
                    .as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .unwrap_or(443),
                path: s["path"].as_str().unwrap_or_default().to_string(),
            },
            None => unreachable(),
        }
    }
}

/// A webhook as a caller holds it: where, with what TLS, for how long.
pub struct Destination<'a> {
    pub endpoint: &'a Endpoint,
    /// TLS trusting `caBundle`; `Err` keeps why it could not be built,
    /// reported on each call.
    pub tls: &'a Result<Arc<rustls::ClientConfig>, String>,
    pub timeout: Duration,
}

/// A TLS client trusting the PEM `ca_bundle`, or the system's roots.
pub fn tls_config(ca_bundle: Option<&[u8]>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_bundle.filter(|b| !b.is_empty()) {
        Some(pem) => {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
                roots.add(cert).map_err(|e| format!("caBundle: {e}"))?;
            }
            if roots.is_empty() {
                return Err("caBundle: no certificate found".into());
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = roots.add(cert);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Posts `review` to `to`; its decoded answer, or why the call failed
/// (`Post "URL": WHY`).
pub async fn call(state: &ApiState, to: &Destination<'_>, review: &Value) -> Result<Value, String> {
    let secs = to.timeout.as_secs();
    let (url, server_name) = match to.endpoint {
        Endpoint::Url(u) => {
            let mut u = u.clone();
            u.set_query(Some(&format!("timeout={secs}s")));
            let host = u.host_str().unwrap_or_default().to_string();
            (u.to_string(), host)
        }
        Endpoint::Service {
            namespace,
            name,
            port,
            path,
        } => {
            let host = format!("{name}.{namespace}.svc");
            let path = if path.is_empty() { "/" } else { path.as_str() };
            (format!("https://{host}:{port}{path}?timeout={secs}s"), host)
        }
    };
    let failed = |why: &dyn std::fmt::Display| format!("Post \"{url}\": {why}");
    match tokio::time::timeout(to.timeout, post(state, to, &url, &server_name, review)).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(why)) => Err(failed(&why)),
        Err(_) => Err(failed(&"context deadline exceeded")),
    }
}

async fn post(
    state: &ApiState,
    to: &Destination<'_>,
    url: &str,
    server_name: &str,
    review: &Value,
) -> Result<Value, String> {
    let tls = to.tls.clone()?;
    let (host, port) = match to.endpoint {
        Endpoint::Url(u) => (
            u.host_str()
                .unwrap_or_default()
                .trim_matches(['[', ']'])
                .to_string(),
            u.port().unwrap_or(443),
        ),
        Endpoint::Service {
            namespace,
            name,
            port,
            ..
        } => crate::api::proxy::backend::service_endpoint(state, namespace, name, *port)
            .await
            .map_err(|e| e.message)?,
    };
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("dial tcp {host}:{port}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let name = ServerName::try_from(server_name.to_string()).map_err(|e| e.to_string())?;
    let stream = tokio_rustls::TlsConnector::from(Arc::clone(&tls))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "webhook connection ended with an error");
        }
    });
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| e.to_string())?;
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let body = serde_json::to_vec(review).map_err(|e| e.to_string())?;
    let request = http::Request::post(path)
        .header(
            http::header::HOST,
            uri.authority().map(|a| a.as_str()).unwrap_or(server_name),
        )
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(Body::from(body))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let bytes = axum::body::to_bytes(Body::new(response.into_body()), MAX_RESPONSE_BYTES)
        .await
        .map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!(
            "the server responded with the status code {}: {}",
            status.as_u16(),
            String::from_utf8_lossy(&bytes).trim()
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("decoding the response: {e}"))
}
