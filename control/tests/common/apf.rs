//! API Priority and Fairness in tests: holding a level's seat on purpose
//! and reading its counts from `/metrics`.
//!
//! A request holds its seat deterministically by sending its body slowly:
//! a create's seat is taken when its headers arrive and kept until it is
//! answered, and its answer needs the whole body.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::ControlPlane;

/// A counter or gauge of `/metrics` summed over the series whose labels
/// include `label="value"` (0 when absent).
pub async fn metric_with(client: &kube::Client, name: &str, label: &str, value: &str) -> f64 {
    let (_, body) = super::raw(client, "GET", "/metrics", "text/plain", vec![]).await;
    let text = body.as_str().unwrap_or_default().to_string();
    let label = format!("{label}=\"{value}\"");
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A counter or gauge of `/metrics` for a flow schema (0 when absent).
pub async fn metric(client: &kube::Client, name: &str, schema: &str) -> f64 {
    metric_with(client, name, "flow_schema", schema).await
}

pub const DISPATCHED: &str = "apiserver_flowcontrol_dispatched_requests_total";
pub const REJECTED: &str = "apiserver_flowcontrol_rejected_requests_total";

/// A create of a ConfigMap as `user` whose body is sent only in part:
/// the request holds its seat until [`finish`] sends the rest.
pub struct HeldCreate {
    stream: tokio_rustls::client::TlsStream<TcpStream>,
    rest: Vec<u8>,
}

pub async fn hold_create(cp: &ControlPlane, user: &str, name: &str) -> HeldCreate {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(cp.data_dir().join("ca.crt")).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let addr: SocketAddr = cp.addr.trim().parse().unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::IpAddress(addr.ip().into()), tcp)
        .await
        .unwrap();
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"k":"v"}}}}"#
    )
    .into_bytes();
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nImpersonate-User: {user}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        cp.token(),
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body[..10]).await.unwrap();
    stream.flush().await.unwrap();
    HeldCreate {
        stream,
        rest: body[10..].to_vec(),
    }
}

/// Sends the rest of the body: the answer's status code.
pub async fn finish(mut held: HeldCreate) -> u16 {
    held.stream.write_all(&held.rest).await.unwrap();
    held.stream.flush().await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(30), held.stream.read(&mut buf))
        .await
        .expect("an answer")
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]).into_owned();
    head.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Sends a held create as `user` (whose flow schema is `schema`) and
/// waits until the server gave it its seat: the schema's dispatched count
/// went up. When the level refused it instead (its seat was busy with
/// another flow's request at that moment: the schema's rejected count
/// went up), it is sent again; `user` is the schema's only client, so
/// each count moves for this request alone.
pub async fn hold_seat(
    cp: &ControlPlane,
    admin: &kube::Client,
    user: &str,
    schema: &str,
    name: &str,
) -> HeldCreate {
    for _attempt in 0..20 {
        let dispatched = metric(admin, DISPATCHED, schema).await;
        let rejected = metric(admin, REJECTED, schema).await;
        let held = hold_create(cp, user, name).await;
        for _ in 0..300 {
            if metric(admin, DISPATCHED, schema).await > dispatched {
                return held;
            }
            if metric(admin, REJECTED, schema).await > rejected {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        drop(held);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the held request of {user} never got its seat");
}
