//! Requests for a remote APIService's group version, as kube-aggregator's
//! proxy handler serves them: authenticated and authorized here (RBAC on
//! the group and resource the URL names, as for any resource), then sent
//! to a ready endpoint of the APIService's Service over TLS checked
//! against its `caBundle` for the name `SERVICE.NAMESPACE.svc` (or not at
//! all with `insecureSkipTLSVerify`), presenting the front-proxy client
//! certificate, with the caller's identity in `X-Remote-*` headers and
//! their credentials removed. Answers, watches and upgrades stream back.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use rand::Rng;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;

use super::frontproxy::{set_identity_headers, FrontProxy};
use super::Remote;
use crate::api::error::{ApiError, ApiResult};
use crate::api::proxy::backend::{forwarded_headers, relay_upgrade};
use crate::api::{authn, ApiState};
use crate::auth::{self, Attributes, Identity};
use crate::store::Store;

/// Why a remote APIService cannot be reached: the `Available`
/// condition's reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub reason: &'static str,
    pub message: String,
}

/// What a URL under `/apis/GROUP/VERSION/` asks for, as upstream's
/// RequestInfo reads it: `[namespaces/NS/]RESOURCE[/NAME[/SUBRESOURCE]]`.
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceRequest<'a> {
    pub namespace: Option<&'a str>,
    pub resource: &'a str,
    pub name: Option<&'a str>,
    pub subresource: Option<&'a str>,
}

/// The resource request of the path segments after the group version;
/// None for the group version itself (its discovery document).
pub fn resource_request<'a>(rest: &[&'a str]) -> Option<ResourceRequest<'a>> {
    let (namespace, parts) = match rest {
        ["namespaces", ns, more @ ..] if !more.is_empty() => (Some(*ns), more),
        // `namespaces/NS` itself is the namespace object.
        _ => (None, rest),
    };
    let (resource, name, subresource) = match parts {
        [] => return None,
        [r] => (*r, None, None),
        [r, n] => (*r, Some(*n), None),
        [r, n, s, ..] => (*r, Some(*n), Some(*s)),
    };
    Some(ResourceRequest {
        namespace,
        resource,
        name,
        subresource,
    })
}

/// The Service's address to send a request to: a ready endpoint of the
/// Service port the APIService names, at random, as upstream's endpoint
/// resolver picks one.
pub async fn resolve(store: &dyn Store, remote: &Remote) -> Result<(String, u16), Unavailable> {
    let (ns, name) = (remote.namespace.as_str(), remote.service.as_str());
    let load = |plural: &'static str| async move {
        let res = bosun::resources::by_name(plural).expect("served");
        let kv = store
            .get(&res.storage_key(Some(ns), name))
            .await
            .ok()
            .flatten()?;
        serde_json::from_slice::<Value>(&kv.value[..]).ok()
    };
    let Some(service) = load("services").await else {
        return Err(Unavailable {
            reason: "ServiceNotFound",
            message: format!("service/{name} in \"{ns}\" is not present"),
        });
    };
    let port = service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_u64() == Some(u64::from(remote.port)));
    let Some(port) = port else {
        return Err(Unavailable {
            reason: "ServicePortError",
            message: format!(
                "service/{name} in \"{ns}\" is not listening on port {}",
                remote.port
            ),
        });
    };
    let port_name = port["name"].as_str().unwrap_or_default();
    let missing = |message: String| Unavailable {
        reason: "MissingEndpoints",
        message,
    };
    let Some(endpoints) = load("endpoints").await else {
        return Err(missing(format!(
            "endpoints for service/{name} in \"{ns}\" have not yet been found"
        )));
    };
    let mut candidates = Vec::new();
    for subset in endpoints["subsets"].as_array().into_iter().flatten() {
        let target = subset["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str().unwrap_or_default() == port_name)
            .and_then(|p| p["port"].as_u64())
            .and_then(|p| u16::try_from(p).ok());
        let Some(target) = target else { continue };
        for address in subset["addresses"].as_array().into_iter().flatten() {
            if let Some(ip) = address["ip"].as_str().filter(|ip| !ip.is_empty()) {
                candidates.push((ip.to_string(), target));
            }
        }
    }
    if candidates.is_empty() {
        return Err(missing(format!(
            "endpoints for service/{name} in \"{ns}\" have no addresses with port name \"{port_name}\""
        )));
    }
    Ok(candidates.swap_remove(rand::rng().random_range(0..candidates.len())))
}

/// The TLS client toward `remote`'s server: its `caBundle` (or any
/// certificate with `insecureSkipTLSVerify`), the front-proxy client
/// certificate, HTTP/1.1.
fn tls_config(remote: &Remote, front_proxy: &FrontProxy) -> Result<rustls::ClientConfig, String> {
    let mut config = if remote.insecure_skip_tls_verify {
        bosun::serving::any_certificate_client_config().map_err(|e| e.to_string())?
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&remote.ca_bundle) {
            let cert = cert.map_err(|e| format!("reading caBundle: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("reading caBundle: {e}"))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth()
    };
    config.client_auth_cert_resolver = front_proxy.client_resolver();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// An HTTP/1.1 connection to `remote`'s server at `host:port`.
pub async fn connect(
    remote: &Remote,
    front_proxy: &FrontProxy,
    host: &str,
    port: u16,
) -> Result<hyper::client::conn::http1::SendRequest<Body>, String> {
    let config = tls_config(remote, front_proxy)?;
    let tcp = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::net::TcpStream::connect((host, port)),
    )
    .await
    .map_err(|_| format!("dial tcp {host}:{port}: timed out"))?
    .map_err(|e| format!("dial tcp {host}:{port}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let server_name =
        ServerName::try_from(remote.server_name()).map_err(|e| format!("server name: {e}"))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(server_name, tcp)
        .await
        .map_err(|e| format!("tls handshake with {host}:{port}: {e}"))?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "aggregated API connection ended with an error");
        }
    });
    Ok(sender)
}

/// Authorizes a request for `remote`'s group version (`rest`: the path
/// segments after it) and sends it on.
pub async fn serve(
    state: &Arc<ApiState>,
    who: &Identity,
    remote: Remote,
    rest: &[&str],
    parts: Parts,
    body: Body,
) -> ApiResult<Response> {
    if let Some(r) = resource_request(rest) {
        let watch = bosun::serving::query_pairs(&parts.uri)
            .iter()
            .any(|(k, v)| k == "watch" && (v == "true" || v == "1"));
        let attrs = Attributes {
            user: who.user(),
            verb: auth::verb(&parts.method, r.name.is_some(), watch),
            group: &remote.group,
            resource: r.resource,
            subresource: r.subresource,
            namespace: r.namespace,
            name: r.name,
            created_name: None,
        };
        authn::authorize_attributes(state, who, &attrs).await?;
    }
    let front_proxy = state
        .aggregator
        .front_proxy
        .clone()
        .ok_or_else(|| ApiError::service_unavailable("service unavailable"))?;
    let (host, port) = resolve(state.store.as_ref(), &remote)
        .await
        .map_err(|why| {
            tracing::info!(apiservice = %remote.name, reason = why.reason, message = %why.message, "aggregated API unavailable");
            ApiError::service_unavailable("service unavailable")
        })?;
    let mut sender = connect(&remote, &front_proxy, &host, port)
        .await
        .map_err(|e| {
            ApiError::service_unavailable(format!("error trying to reach service: {e}"))
        })?;
    let upgrade = parts.headers.contains_key(header::UPGRADE);
    let uri = match parts.uri.query() {
        Some(q) => format!("{}?{q}", parts.uri.path()),
        None => parts.uri.path().to_string(),
    };
    let mut out = http::Request::builder()
        .method(parts.method.clone())
        .uri(uri)
        .body(body)
        .map_err(|e| ApiError::bad_request(format!("proxy request: {e}")))?;
    *out.headers_mut() = forwarded_headers(&parts.headers, upgrade);
    set_identity_headers(out.headers_mut(), &who.user_info());
    let authority = remote.server_name();
    if let Ok(host) = HeaderValue::from_str(&authority) {
        out.headers_mut().insert(header::HOST, host);
    }
    let resp = sender.send_request(out).await.map_err(|e| {
        ApiError::service_unavailable(format!("error trying to reach service: {e}"))
    })?;
    if upgrade && resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        return relay_upgrade(parts, resp);
    }
    let (mut head, body) = resp.into_parts();
    head.headers = forwarded_headers(&head.headers, false);
    Ok(Response::from_parts(head, Body::new(body)))
}

/// GETs `path` of `remote`'s server as the aggregator itself (discovery
/// and availability checks), at most `timeout` long; the body on a 200.
pub async fn fetch(
    store: &dyn Store,
    front_proxy: &FrontProxy,
    remote: &Remote,
    path: &str,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let work = async {
        let (host, port) = resolve(store, remote).await.map_err(|u| u.message)?;
        let mut sender = connect(remote, front_proxy, &host, port).await?;
        let mut req = http::Request::builder()
            .method(Method::GET)
            .uri(path)
            .header(header::HOST, remote.server_name())
            .header(header::ACCEPT, "application/json")
            .body(Body::empty())
            .map_err(|e| e.to_string())?;
        set_identity_headers(
            req.headers_mut(),
            &crate::auth::UserInfo::authenticated("system:kube-aggregator", &[]),
        );
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = axum::body::to_bytes(Body::new(resp.into_body()), 16 * 1024 * 1024)
            .await
            .map_err(|e| e.to_string())?;
        if status != StatusCode::OK {
            return Err(format!("bad status from {path}: {}", status.as_u16()));
        }
        Ok(body.to_vec())
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| format!("timed out after {timeout:?}"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_resources_as_upstream_reads_them() {
        assert_eq!(resource_request(&[]), None);
        assert_eq!(
            resource_request(&["namespaces", "default", "widgets", "w1", "status"]),
            Some(ResourceRequest {
                namespace: Some("default"),
                resource: "widgets",
                name: Some("w1"),
                subresource: Some("status"),
            })
        );
        assert_eq!(
            resource_request(&["nodes"]),
            Some(ResourceRequest {
                namespace: None,
                resource: "nodes",
                name: None,
                subresource: None,
            })
        );
        let ns = resource_request(&["namespaces", "default"]).unwrap();
        assert_eq!((ns.resource, ns.name), ("namespaces", Some("default")));
    }
}
