//! Calling one webhook: an HTTPS POST of the AdmissionReview to its URL,
//! or to one ready endpoint of its Service with the certificate checked
//! for `NAME.NAMESPACE.svc` (as kube-apiserver's service resolver names
//! it), against its `caBundle`; `?timeout=` and the whole call bounded by
//! `timeoutSeconds`. Errors read as upstream's:
//! `failed to call webhook: Post "URL": WHY`.

use std::sync::Arc;

use axum::body::Body;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde_json::Value;

use super::configs::{Endpoint, Hook};
use crate::api::ApiState;

/// The most of a webhook's answer read (upstream reads a few MB).
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Posts `review` to `hook`; its decoded answer, or why the call failed.
pub async fn call(state: &ApiState, hook: &Hook, review: &Value) -> Result<Value, String> {
    let secs = hook.timeout.as_secs();
    let (url, server_name) = match &hook.endpoint {
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
    let failed =
        |why: &dyn std::fmt::Display| format!("failed to call webhook: Post \"{url}\": {why}");
    match tokio::time::timeout(hook.timeout, post(state, hook, &url, &server_name, review)).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(why)) => Err(failed(&why)),
        Err(_) => Err(failed(&"context deadline exceeded")),
    }
}

async fn post(
    state: &ApiState,
    hook: &Hook,
    url: &str,
    server_name: &str,
    review: &Value,
) -> Result<Value, String> {
    let tls = hook.tls.clone()?;
    let (host, port) = match &hook.endpoint {
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
