//! The listeners and the reverse proxy: each request is routed by the
//! current table ([`super::routes`]) to one ready endpoint of the Service
//! port it names (round robin), over HTTP/1.1 connections kept per
//! endpoint, with `X-Forwarded-For`, `-Proto`, `-Host` and `-Port` set.
//! No route: 404; no ready endpoint: 503; the endpoint unreachable: 502.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use http::header::{HeaderName, HeaderValue, HOST};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};

use super::routes::{PortRef, Target};
use super::{Settings, Shared};
use crate::services::{Proto, ServiceCache, ServiceState};

/// How often a port that could not be bound is tried again.
const REBIND: Duration = Duration::from_secs(30);
/// How long connecting to an endpoint may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Idle connections kept per endpoint.
const POOL_PER_ENDPOINT: usize = 64;

/// Hop-by-hop headers, which a proxy does not pass on (RFC 9110 7.6.1).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
];

/// What every request handler shares.
struct Proxy {
    shared: Arc<Shared>,
    services: ServiceCache,
    next: AtomicUsize,
    pool: Mutex<HashMap<SocketAddr, Vec<SendRequest<Body>>>>,
}

/// Starts the HTTP and HTTPS listeners (those whose port is not 0).
pub fn listen(
    settings: Settings,
    shared: Arc<Shared>,
    services: ServiceCache,
    default_cert: Arc<CertifiedKey>,
) {
    let proxy = Arc::new(Proxy {
        shared: shared.clone(),
        services,
        next: AtomicUsize::new(0),
        pool: Mutex::default(),
    });
    if settings.http_port != 0 {
        tokio::spawn(accept_loop(settings.http_port, proxy.clone(), None));
    }
    if settings.https_port != 0 {
        let resolver = super::tls::SniResolver {
            shared,
            fallback: default_cert,
        };
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        tokio::spawn(accept_loop(settings.https_port, proxy, Some(acceptor)));
    }
}

/// Binds `port` on every address (trying again every [`REBIND`] while it
/// is taken) and serves each connection.
async fn accept_loop(port: u16, proxy: Arc<Proxy>, tls: Option<tokio_rustls::TlsAcceptor>) {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let listener = loop {
        match TcpListener::bind((IpAddr::from([0u8, 0, 0, 0]), port)).await {
            Ok(l) => break l,
            Err(e) => {
                tracing::warn!(port, scheme, error = %e, "ingress: cannot listen; trying again in {}s (the node keeps running)", REBIND.as_secs());
                tokio::time::sleep(REBIND).await;
            }
        }
    };
    tracing::info!(port, scheme, "ingress: listening");
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(error = %e, "ingress: accept");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let proxy = proxy.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let https = tls.is_some();
            let service = hyper::service::service_fn(move |req| {
                let proxy = proxy.clone();
                async move { Ok::<_, Infallible>(proxy.handle(req, peer, https, port).await) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let result = match tls {
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(s) => builder.serve_connection(TokioIo::new(s), service).await,
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "ingress: TLS handshake");
                        return;
                    }
                },
                None => {
                    builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "ingress: connection");
            }
        });
    }
}

/// The ready endpoints of `target` (address and target port), from the
/// agent's Services and EndpointSlices.
pub fn endpoints(state: &ServiceState, target: &Target) -> Vec<SocketAddr> {
    let key = (target.namespace.clone(), target.service.clone());
    let Some(svc) = state.services.get(&key) else {
        return Vec::new();
    };
    let Some(port) = svc.ports.iter().find(|p| {
        p.proto == Proto::Tcp
            && match &target.port {
                PortRef::Number(n) => p.port == *n,
                PortRef::Name(n) => &p.name == n,
            }
    }) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for slice in state.slices_of(&target.namespace, &target.service) {
        let Some((_, _, target_port)) = slice
            .ports
            .iter()
            .find(|(name, proto, _)| name == &port.name && *proto == Proto::Tcp)
        else {
            continue;
        };
        for ep in slice.endpoints.iter().filter(|e| e.ready) {
            out.extend(
                ep.addresses
                    .iter()
                    .map(|a| SocketAddr::new(*a, *target_port)),
            );
        }
    }
    out.sort();
    out.dedup();
    out
}

fn plain(status: StatusCode, body: &'static str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Body::from(body))
        .expect("a response")
}

impl Proxy {
    async fn handle(
        &self,
        req: Request<Incoming>,
        peer: SocketAddr,
        https: bool,
        port: u16,
    ) -> Response<Body> {
        // HTTP/2 carries the host in :authority, HTTP/1.1 in Host.
        let host = req
            .headers()
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_string)
            .or_else(|| req.uri().authority().map(|a| a.to_string()))
            .unwrap_or_default();
        let table = self.shared.table.read().expect("route table").clone();
        let Some(target) = table.route(&host, req.uri().path()) else {
            return plain(StatusCode::NOT_FOUND, "404 page not found\n");
        };
        let addrs = endpoints(&self.services.read(), target);
        if addrs.is_empty() {
            return plain(StatusCode::SERVICE_UNAVAILABLE, "503 no ready endpoints\n");
        }
        let addr = addrs[self.next.fetch_add(1, Ordering::Relaxed) % addrs.len()];
        let req = forwarded(req, &host, peer, https, port);
        match self.send(addr, req).await {
            Ok(resp) => resp.map(Body::new),
            Err(e) => {
                tracing::debug!(%addr, error = %e, "ingress: forwarding");
                plain(StatusCode::BAD_GATEWAY, "502 bad gateway\n")
            }
        }
    }

    /// Sends over an idle kept connection to `addr`, else a new one.
    async fn send(
        &self,
        addr: SocketAddr,
        req: Request<Body>,
    ) -> Result<Response<Incoming>, String> {
        let kept = {
            let mut pool = self.pool.lock().expect("pool");
            let list = pool.entry(addr).or_default();
            list.retain(|s| !s.is_closed());
            list.iter()
                .position(SendRequest::is_ready)
                .map(|i| list.swap_remove(i))
        };
        let mut sender = match kept {
            Some(s) => s,
            None => {
                let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
                    .await
                    .map_err(|_| "connect timed out".to_string())?
                    .map_err(|e| e.to_string())?;
                let _ = stream.set_nodelay(true);
                let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(|e| e.to_string())?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                sender
            }
        };
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let mut pool = self.pool.lock().expect("pool");
        let list = pool.entry(addr).or_default();
        if list.len() < POOL_PER_ENDPOINT {
            list.push(sender);
        }
        Ok(resp)
    }
}

/// The request as the backend gets it: origin-form URI, hop-by-hop
/// headers dropped, Host kept (from :authority for HTTP/2) and the
/// `X-Forwarded-*` headers set.
fn forwarded(
    req: Request<Incoming>,
    host: &str,
    peer: SocketAddr,
    https: bool,
    port: u16,
) -> Request<Body> {
    let (mut parts, body) = req.into_parts();
    parts.version = http::Version::HTTP_11;
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".to_string());
    parts.uri = path.parse().unwrap_or_else(|_| http::Uri::from_static("/"));
    let h = &mut parts.headers;
    for name in HOP_BY_HOP {
        h.remove(name);
    }
    if let Ok(v) = HeaderValue::from_str(host) {
        h.insert(HOST, v);
    }
    let client = peer.ip().to_string();
    let xff = match h.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        Some(prev) => format!("{prev}, {client}"),
        None => client,
    };
    let set = |h: &mut http::HeaderMap, name: &'static str, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(HeaderName::from_static(name), v);
        }
    };
    set(h, "x-forwarded-for", &xff);
    set(h, "x-forwarded-proto", if https { "https" } else { "http" });
    set(h, "x-forwarded-host", host);
    set(h, "x-forwarded-port", &port.to_string());
    Request::from_parts(parts, Body::new(body))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::services::model::EpInfo;
    use crate::services::{SliceInfo, SvcInfo, SvcPort};

    fn state() -> ServiceState {
        let mut services = BTreeMap::new();
        services.insert(
            ("ns".to_string(), "web".to_string()),
            SvcInfo {
                cluster_ips: vec!["10.96.0.9".parse().unwrap()],
                headless: false,
                external_name: None,
                ports: vec![SvcPort {
                    name: "http".into(),
                    proto: Proto::Tcp,
                    port: 80,
                    node_port: None,
                }],
                external_local: false,
                affinity: None,
            },
        );
        let ep = |ip: &str, ready| EpInfo {
            addresses: vec![ip.parse().unwrap()],
            hostname: None,
            node: None,
            ready,
        };
        let mut slices = BTreeMap::new();
        slices.insert(
            ("ns".to_string(), "web-abc".to_string()),
            SliceInfo {
                service: "web".into(),
                ipv4: true,
                endpoints: vec![ep("10.244.0.5", true), ep("10.244.0.6", false)],
                ports: vec![("http".into(), Proto::Tcp, 8080)],
            },
        );
        ServiceState { services, slices }
    }

    #[test]
    fn ready_endpoints_on_the_target_port() {
        let t = |port| Target {
            namespace: "ns".into(),
            service: "web".into(),
            port,
        };
        let want: Vec<SocketAddr> = vec!["10.244.0.5:8080".parse().unwrap()];
        assert_eq!(endpoints(&state(), &t(PortRef::Number(80))), want);
        assert_eq!(endpoints(&state(), &t(PortRef::Name("http".into()))), want);
        assert!(endpoints(&state(), &t(PortRef::Number(81))).is_empty());
        assert!(endpoints(&state(), &t(PortRef::Name("grpc".into()))).is_empty());
    }
}
