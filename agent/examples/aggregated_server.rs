//! A tiny extension API server, as metrics-server and friends are behind
//! an APIService: HTTPS with a certificate and key from files, and only
//! for clients presenting a certificate signed by the request-header CA
//! (the `requestheader-client-ca-file` of the
//! `kube-system/extension-apiserver-authentication` ConfigMap) whose
//! common name is `front-proxy-client`, i.e. the aggregator. It serves
//! the group version `demo.bosun.dev/v1`:
//!
//! - `GET /apis/demo.bosun.dev/v1`: an APIResourceList with one
//!   namespaced resource, `widgets`;
//! - `GET /apis/demo.bosun.dev/v1/namespaces/NS/widgets`: a WidgetList of
//!   one Widget named `for-USER` whose `spec` echoes the `X-Remote-User`
//!   and `X-Remote-Group` headers the aggregator sent.
//!
//! Usage: `aggregated-server CERT KEY REQUESTHEADER_CA [PORT]` (port
//! 8443). `scripts/build-images.sh --aggregated-server` puts it into the
//! image `bosun.local/aggregated-server:1`, which the agent's aggregated
//! API test runs.

use std::sync::Arc;

use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use tower::ServiceExt;

const GROUP_VERSION: &str = "demo.bosun.dev/v1";
const ALLOWED_NAME: &str = "front-proxy-client";

fn resource_list() -> Value {
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": [{
            "name": "widgets",
            "singularName": "widget",
            "namespaced": true,
            "kind": "Widget",
            "verbs": ["get", "list"],
            "shortNames": ["wdg"],
        }],
    })
}

fn header_values(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok().map(String::from))
        .collect()
}

async fn widgets(Path(namespace): Path<String>, headers: HeaderMap) -> Json<Value> {
    let user = header_values(&headers, "x-remote-user")
        .pop()
        .unwrap_or_default();
    let groups = header_values(&headers, "x-remote-group");
    Json(json!({
        "kind": "WidgetList",
        "apiVersion": GROUP_VERSION,
        "metadata": {"resourceVersion": "1"},
        "items": [{
            "kind": "Widget",
            "apiVersion": GROUP_VERSION,
            "metadata": {"name": format!("for-{}", user.replace(':', "-")),
                "namespace": namespace, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"user": user, "groups": groups},
        }],
    }))
}

fn router() -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/apis/demo.bosun.dev/v1",
            get(|| async { Json(resource_list()) }),
        )
        .route(
            "/apis/demo.bosun.dev/v1/namespaces/{namespace}/widgets",
            get(widgets),
        )
        .fallback(|| async { (StatusCode::NOT_FOUND, "404 page not found\n").into_response() })
}

/// The common name of the client's certificate.
fn peer_common_name(conn: &rustls::ServerConnection) -> Option<String> {
    let der = conn.peer_certificates()?.first()?.clone();
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(String::from)
}

fn tls_config(cert: &str, key: &str, ca: &str) -> Result<rustls::ServerConfig, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("{cert}: {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{cert}: {e}"))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{key}: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).map_err(|e| format!("{ca}: {e}"))? {
        roots
            .add(c.map_err(|e| format!("{ca}: {e}"))?)
            .map_err(|e| format!("{ca}: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // No certificate, or one of another CA: the handshake fails.
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| e.to_string())?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

async fn serve_connection(acceptor: tokio_rustls::TlsAcceptor, tcp: tokio::net::TcpStream) {
    let Ok(tls) = acceptor.accept(tcp).await else {
        return;
    };
    let allowed = peer_common_name(tls.get_ref().1).as_deref() == Some(ALLOWED_NAME);
    let app = router();
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let app = app.clone();
        async move {
            if !allowed {
                let refused: Response = (
                    StatusCode::FORBIDDEN,
                    "client certificate is not an allowed request-header client\n",
                )
                    .into_response();
                return Ok::<_, std::convert::Infallible>(refused);
            }
            app.oneshot(req.map(axum::body::Body::new)).await
        }
    });
    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(tls), service)
        .await;
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [cert, key, ca, rest @ ..] = args.as_slice() else {
        eprintln!("usage: aggregated-server CERT KEY REQUESTHEADER_CA [PORT]");
        std::process::exit(2);
    };
    let port: u16 = rest.first().and_then(|p| p.parse().ok()).unwrap_or(8443);
    let config = match tls_config(cert, key, ca) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("aggregated-server: {e}");
            std::process::exit(1);
        }
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", port))
        .await
        .expect("listening");
    eprintln!("aggregated-server: serving {GROUP_VERSION} on :{port}");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((tcp, _)) = accepted {
                    tokio::spawn(serve_connection(acceptor.clone(), tcp));
                }
            }
            _ = term.recv() => return,
        }
    }
}
