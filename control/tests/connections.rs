//! The API server against peers that would exhaust it, on a real
//! `bosun-control` with short limits: connections that never start TLS,
//! idle TLS connections, more connections than the cap, a YAML alias bomb,
//! a watch asking to last for a day. In each case the server lets go of
//! what the peer holds within its limit and keeps answering everyone else.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::ControlPlane;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// Half of this process's descriptor limit (the server, started from here,
/// has the same), at most `max`.
fn connections_to_open(max: usize) -> usize {
    let limits = std::fs::read_to_string("/proc/self/limits").expect("limits");
    let soft: usize = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024);
    (soft / 2).min(max)
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("VmRSS");
    kib / 1024
}

/// Polls `check` every 50 ms until it holds, for at most `deadline`.
async fn until(what: &str, deadline: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Resolves when the peer has closed (EOF or reset); what it sent is
/// skipped.
async fn closed(mut stream: impl AsyncRead + Unpin) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            return;
        }
    }
}

fn connector(cp: &ControlPlane) -> tokio_rustls::TlsConnector {
    let pem = std::fs::read(cp.data_dir().join("ca.crt")).expect("ca.crt");
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.expect("CA")).expect("CA");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

async fn tls(cp: &ControlPlane, connector: &tokio_rustls::TlsConnector) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(&cp.addr).await.expect("connect");
    let name = ServerName::try_from("127.0.0.1").unwrap();
    connector.connect(name, tcp).await.expect("TLS handshake")
}

/// Sends one HTTP/1.1 request as the admin.
async fn send(
    stream: &mut (impl AsyncWrite + Unpin),
    cp: &ControlPlane,
    head: &str,
    extra: &str,
    body: &[u8],
) {
    let request = format!(
        "{head} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n{extra}Content-Length: {}\r\n\r\n",
        cp.token(),
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    stream.write_all(body).await.expect("send");
}

/// Reads until what was read contains `needle`; what was read.
async fn read_until(stream: &mut (impl AsyncRead + Unpin), needle: &str) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(needle) {
        let n = stream.read(&mut buf).await.expect("read");
        assert!(
            n > 0,
            "closed before {needle:?}: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// The response to one request on a connection of its own.
async fn request_once(cp: &ControlPlane, head: &str, extra: &str, body: &[u8]) -> String {
    let mut stream = tls(cp, &connector(cp)).await;
    send(
        &mut stream,
        cp,
        head,
        &format!("Connection: close\r\n{extra}"),
        body,
    )
    .await;
    let mut response = Vec::new();
    // The server closes without close_notify; what came before counts.
    let _ = stream.read_to_end(&mut response).await;
    String::from_utf8_lossy(&response).into_owned()
}

async fn api_answers(cp: &ControlPlane) -> Result<(), kube::Error> {
    Api::<Namespace>::all(cp.client().await)
        .list(&Default::default())
        .await
        .map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_start_tls_are_closed_after_the_handshake_timeout() {
    let cp = ControlPlane::start_with(&["--tls-handshake-timeout", "3s"]);
    let pid = cp.pid();
    let before = open_descriptors(pid);
    let n = connections_to_open(3000);
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        let tcp = TcpStream::connect(&cp.addr).await.expect("connect");
        held.push((Instant::now(), tcp));
    }
    // While they are held, the API answers.
    api_answers(&cp)
        .await
        .expect("the API answers while idle connections are held");
    let waits: Vec<_> = held
        .into_iter()
        .map(|(opened, tcp)| {
            tokio::spawn(async move {
                closed(tcp).await;
                opened.elapsed()
            })
        })
        .collect();
    let all = tokio::time::timeout(Duration::from_secs(90), futures::future::join_all(waits))
        .await
        .unwrap_or_else(|_| panic!("{n} connections without TLS still open after 90 s"));
    let held_for: Vec<Duration> = all.into_iter().map(|r| r.unwrap()).collect();
    let shortest = held_for.iter().min().unwrap();
    assert!(
        *shortest >= Duration::from_millis(2900),
        "a connection was closed after {shortest:?}, before the 3 s handshake timeout"
    );
    until(
        "the server to let go of their descriptors",
        Duration::from_secs(30),
        || open_descriptors(pid) <= before + 20,
    )
    .await;
    api_answers(&cp).await.expect("the API answers afterwards");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connections_with_no_request_in_flight_are_closed_and_watches_are_not() {
    let cp = ControlPlane::start_with(&[
        "--header-read-timeout",
        "2s",
        "--idle-connection-timeout",
        "4s",
    ]);
    let connector = connector(&cp);
    // A watch: a request in flight for as long as it lasts.
    let mut watch = tls(&cp, &connector).await;
    send(
        &mut watch,
        &cp,
        "GET /api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=600",
        "",
        b"",
    )
    .await;
    read_until(&mut watch, "\r\n\r\n").await;
    // Connections that never send a request.
    let silent = Instant::now();
    let mut quiet = Vec::new();
    for _ in 0..50 {
        quiet.push(tokio::spawn(closed(tls(&cp, &connector).await)));
    }
    // Connections that sent one request and keep the connection alive.
    let mut idle = Vec::new();
    for _ in 0..300 {
        let mut conn = tls(&cp, &connector).await;
        send(&mut conn, &cp, "GET /healthz", "", b"").await;
        read_until(&mut conn, "\r\n\r\nok").await;
        let answered = Instant::now();
        idle.push(tokio::spawn(async move {
            closed(conn).await;
            answered.elapsed()
        }));
    }
    api_answers(&cp).await.expect("the API answers meanwhile");
    let deadline = Duration::from_secs(60);
    for q in quiet {
        tokio::time::timeout(deadline, q)
            .await
            .expect("a connection without a request is closed")
            .unwrap();
    }
    assert!(silent.elapsed() >= Duration::from_millis(1900));
    for i in idle {
        let after = tokio::time::timeout(deadline, i)
            .await
            .expect("an idle connection is closed")
            .unwrap();
        // The server's clock starts a moment before the answer is read
        // here; closed well after the 2 s header timeout in any case.
        assert!(
            after >= Duration::from_secs(3),
            "closed {after:?} after its last request, before the 4 s idle timeout"
        );
    }
    // Every idle connection is gone, so the idle timeout has passed for
    // the watch too, and it still streams.
    let cms: Api<ConfigMap> = Api::namespaced(cp.client().await, "default");
    let cm: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "after-idle"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    tokio::time::timeout(deadline, read_until(&mut watch, "after-idle"))
        .await
        .expect("the watch still streams after the idle timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_are_closed_at_once() {
    let cp = ControlPlane::start_with(&[
        "--max-connections",
        "100",
        "--tls-handshake-timeout",
        "120s",
    ]);
    // A client that has its connection before the cap is reached.
    let existing = Api::<Namespace>::all(cp.client().await);
    existing.list(&Default::default()).await.unwrap();
    let mut held = Vec::new();
    for _ in 0..99 {
        held.push(TcpStream::connect(&cp.addr).await.expect("connect"));
    }
    // Every slot is taken: more are closed at once, long before the
    // handshake timeout would.
    let started = Instant::now();
    let mut excess = Vec::new();
    for _ in 0..200 {
        match TcpStream::connect(&cp.addr).await {
            Ok(tcp) => excess.push(tokio::spawn(closed(tcp))),
            Err(e) => panic!("the listen queue refused a connection: {e}"),
        }
    }
    for e in excess {
        tokio::time::timeout(Duration::from_secs(60), e)
            .await
            .expect("a connection beyond the cap is closed")
            .unwrap();
    }
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(
        api_answers(&cp).await.is_err(),
        "a new client got a connection beyond the cap"
    );
    existing
        .list(&Default::default())
        .await
        .expect("a client with a connection is still answered");
    // Once others let go, new clients get in again.
    held.truncate(80);
    let start = Instant::now();
    while let Err(e) = api_answers(&cp).await {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "new clients still refused after others closed: {e}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(cp.log().contains("connection limit reached"));
}

/// One anchor of `items` strings referenced `refs` times, in a ConfigMap.
fn alias_bomb(items: usize, refs: usize) -> String {
    let mut y = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\nx: &a [");
    y.push_str(&vec!["xxxxxxxx"; items].join(","));
    y.push_str("]\ny:\n");
    for _ in 0..refs {
        y.push_str("- *a\n");
    }
    y
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yaml_alias_bomb_is_refused_before_it_expands() {
    let cp = ControlPlane::start();
    let pid = cp.pid();
    api_answers(&cp).await.unwrap();
    let rss_before = rss_mib(pid);
    let bomb = alias_bomb(5000, 500);
    assert!(bomb.len() < 60_000);
    let started = Instant::now();
    let response = request_once(
        &cp,
        "POST /api/v1/namespaces/default/configmaps",
        "Content-Type: application/yaml\r\n",
        bomb.as_bytes(),
    )
    .await;
    let took = started.elapsed();
    assert!(
        response.starts_with("HTTP/1.1 413"),
        "not refused as too large: {response}"
    );
    assert!(
        response.contains("RequestEntityTooLarge") && response.contains("aliases"),
        "{response}"
    );
    let grew = rss_mib(pid).saturating_sub(rss_before);
    assert!(grew < 64, "RSS grew by {grew} MiB");
    assert!(took < Duration::from_secs(20), "refusing took {took:?}");
    // The same through server-side apply.
    let response = request_once(
        &cp,
        "PATCH /api/v1/namespaces/default/configmaps/bomb?fieldManager=t",
        "Content-Type: application/apply-patch+yaml\r\n",
        bomb.as_bytes(),
    )
    .await;
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    // Small YAML with aliases is fine.
    let ok = request_once(
        &cp,
        "POST /api/v1/namespaces/default/configmaps",
        "Content-Type: application/yaml\r\n",
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: small\ndata:\n  a: &v hello\n  b: *v\n",
    )
    .await;
    assert!(ok.starts_with("HTTP/1.1 201"), "{ok}");
    let cms: Api<ConfigMap> = Api::namespaced(cp.client().await, "default");
    let small = cms.get("small").await.unwrap();
    assert_eq!(small.data.unwrap()["b"], "hello");
}

/// How long a watch on its own connection lasts.
async fn watch_lasts(cp: &ControlPlane, query: &str) -> Duration {
    let started = Instant::now();
    let response = tokio::time::timeout(
        Duration::from_secs(60),
        request_once(
            cp,
            &format!("GET /api/v1/namespaces/default/configmaps?watch=true{query}"),
            "",
            b"",
        ),
    )
    .await
    .unwrap_or_else(|_| panic!("the watch ({query}) still runs after 60 s"));
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_end_within_twice_the_minimum_request_timeout() {
    let cp = ControlPlane::start_with(&["--min-request-timeout", "2"]);
    let (asked_a_day, asked_nothing, asked_one) = tokio::join!(
        watch_lasts(&cp, "&timeoutSeconds=86400"),
        watch_lasts(&cp, ""),
        watch_lasts(&cp, "&timeoutSeconds=1"),
    );
    // Cut to twice the minimum, 4 s.
    assert!(
        asked_a_day >= Duration::from_secs(4) && asked_a_day < Duration::from_secs(30),
        "{asked_a_day:?}"
    );
    assert!(asked_nothing >= Duration::from_secs(2), "{asked_nothing:?}");
    assert!(asked_one >= Duration::from_secs(1), "{asked_one:?}");
    assert!(asked_one < asked_a_day);
}
