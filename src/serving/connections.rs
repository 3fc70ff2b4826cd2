//! The HTTPS listener both servers run on (the control plane's API, the
//! agent's port 10250), with the limits that keep a peer from holding its
//! descriptors and memory:
//!
//! - at most `max_connections` at once: one more is closed as soon as it is
//!   accepted, before any TLS, so the process never runs out of
//!   descriptors for the clients it has (a slot is held as long as the
//!   socket is open, an upgraded exec or port-forward stream included);
//! - the TLS handshake must end within `tls_handshake_timeout`;
//! - the first request's headers must arrive within `header_read_timeout`
//!   of the handshake (both HTTP/1.1 and HTTP/2);
//! - a connection with no request in flight is closed after
//!   `idle_timeout` (Go's `http.Server.IdleTimeout`, 90 s in
//!   kube-apiserver and the kubelet).
//!
//! A request is in flight from its headers until its response body has
//! been sent or dropped, so a watch, a followed log or any other long
//! response is never cut by these timeouts; a connection upgraded to SPDY
//! or WebSocket (exec, attach, port-forward) leaves HTTP and them behind.
//! kube-apiserver's figures: handshake and headers within 32 s (its
//! `ReadHeaderTimeout`, which Go's TLS handshake deadline follows), 90 s
//! idle; bosun waits 10 s for a handshake, which a client on any link
//! finishes in well under a second.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

use super::PeerSubject;

/// The bounds on a server's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub tls_handshake_timeout: Duration,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

impl Limits {
    /// The API server's: Go's and kube-apiserver's timeouts; 10000
    /// connections (a cluster's agents hold one or two each).
    pub const API_SERVER: Limits = Limits {
        tls_handshake_timeout: Duration::from_secs(10),
        header_read_timeout: Duration::from_secs(32),
        idle_timeout: Duration::from_secs(90),
        max_connections: 10_000,
    };
    /// The agent's: the same timeouts, and 1000 connections (the control
    /// plane's log, exec and port-forward streams, and scrapers).
    pub const AGENT: Limits = Limits {
        max_connections: 1000,
        ..Limits::API_SERVER
    };
}

/// The flags that set [`Limits`], the same on both servers.
#[derive(Debug, Clone, clap::Args)]
pub struct ConnectionFlags {
    /// How long a client has to finish the TLS handshake (e.g. 10s).
    #[arg(long, value_parser = parse_duration)]
    pub tls_handshake_timeout: Option<Duration>,
    /// How long a client has, after the handshake, to send its first
    /// request's headers.
    #[arg(long, value_parser = parse_duration)]
    pub header_read_timeout: Option<Duration>,
    /// How long a connection with no request in flight stays open; a
    /// watch or a log stream is a request in flight.
    #[arg(long, value_parser = parse_duration)]
    pub idle_connection_timeout: Option<Duration>,
    /// How many connections are open at once; more are closed at once
    /// (default: 10000 on the API server, 1000 on the agent).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: Option<u64>,
}

impl ConnectionFlags {
    /// The limits these flags set, `defaults` for those not given.
    pub fn limits(&self, defaults: Limits) -> Limits {
        Limits {
            tls_handshake_timeout: self
                .tls_handshake_timeout
                .unwrap_or(defaults.tls_handshake_timeout),
            header_read_timeout: self
                .header_read_timeout
                .unwrap_or(defaults.header_read_timeout),
            idle_timeout: self
                .idle_connection_timeout
                .unwrap_or(defaults.idle_timeout),
            max_connections: self.max_connections.map_or(defaults.max_connections, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            }),
        }
    }
}

/// `10s`, `2m`, `500ms` or plain seconds; not zero.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration like 500ms, 10s or 2m");
    let at = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(at);
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let d = match unit {
        "" | "s" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => return Err(bad()),
    };
    if d.is_zero() {
        return Err(format!("{s:?}: must be more than zero"));
    }
    Ok(d)
}

/// The connections a server has open, for an orderly stop.
pub struct Connections {
    closing: watch::Sender<bool>,
    open: watch::Sender<()>,
}

impl Connections {
    /// Asks every connection to close once its requests are answered
    /// (HTTP/2: GOAWAY) and waits until they have.
    pub async fn shutdown(self) {
        self.closing.send_replace(true);
        self.open.closed().await;
    }
}

/// Serves `app` over TLS on `listener` within `limits` until `stop`
/// resolves, then stops accepting and returns the open connections. Each
/// request carries the [`PeerSubject`] of the client certificate rustls
/// checked, if any.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: axum::Router,
    limits: Limits,
    stop: impl Future<Output = ()>,
) -> Connections {
    let server = Arc::new(Server {
        acceptor: tokio_rustls::TlsAcceptor::from(tls),
        app,
        builder: hyper_util::server::conn::auto::Builder::new(TokioExecutor::new()),
        limits,
    });
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (closing, closing_rx) = watch::channel(false);
    let (open, _) = watch::channel(());
    let mut refusals = Refusals::default();
    tokio::pin!(stop);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    // Out of descriptors (EMFILE) or memory: wait for some
                    // to be freed rather than spin on the error.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(tcp);
            refusals.note(limits.max_connections);
            continue;
        };
        let io = Held { tcp, _slot: slot };
        let conn = server
            .clone()
            .connection(io, closing_rx.clone(), open.subscribe());
        tokio::spawn(async move {
            if let Err(why) = conn.await {
                tracing::debug!(%peer, "connection closed: {why}");
            }
        });
    }
    Connections { closing, open }
}

struct Server {
    acceptor: tokio_rustls::TlsAcceptor,
    app: axum::Router,
    builder: hyper_util::server::conn::auto::Builder<TokioExecutor>,
    limits: Limits,
}

impl Server {
    /// One connection, from the handshake to its close. `_open` is held
    /// until then.
    async fn connection(
        self: Arc<Self>,
        io: Held,
        mut closing: watch::Receiver<bool>,
        _open: watch::Receiver<()>,
    ) -> Result<(), String> {
        let limits = self.limits;
        let stream = tokio::time::timeout(limits.tls_handshake_timeout, self.acceptor.accept(io))
            .await
            .map_err(|_| "no TLS handshake within the timeout".to_string())?
            .map_err(|e| format!("TLS handshake failed: {e}"))?;
        // The client certificate rustls checked against the CA, if any,
        // goes with every request of the connection.
        let subject = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|certs| certs.first())
            .and_then(|c| PeerSubject::from_der(c.as_ref()));
        let (in_flight, idle) = watch::channel(0usize);
        let in_flight = Arc::new(in_flight);
        let app = self.app.clone();
        let service = hyper::service::service_fn(move |mut req: http::Request<Incoming>| {
            if let Some(s) = &subject {
                req.extensions_mut().insert(s.clone());
            }
            let request = InFlight::start(in_flight.clone());
            let app = app.clone();
            async move {
                let Ok(resp) = app.oneshot(req).await;
                Ok::<_, Infallible>(resp.map(|body| Tracked {
                    body,
                    _request: request,
                }))
            }
        });
        let conn = self
            .builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service);
        tokio::pin!(conn);
        let expired = idle_expired(
            idle.clone(),
            limits.header_read_timeout,
            limits.idle_timeout,
        );
        tokio::pin!(expired);
        let stopping = async move {
            // A server that dropped its Connections never stops them.
            if closing.wait_for(|c| *c).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::pin!(stopping);
        let mut closed = false;
        // After an idle close: how long GOAWAY and the close may take.
        let backstop = tokio::time::sleep(Duration::from_secs(1));
        tokio::pin!(backstop);
        let mut armed = false;
        loop {
            tokio::select! {
                ended = conn.as_mut() => return ended.map_err(|e| e.to_string()),
                _ = &mut expired, if !closed => {
                    closed = true;
                    conn.as_mut().graceful_shutdown();
                    backstop.as_mut().reset(tokio::time::Instant::now() + Duration::from_secs(1));
                    armed = true;
                }
                _ = &mut stopping, if !closed => {
                    closed = true;
                    conn.as_mut().graceful_shutdown();
                }
                _ = &mut backstop, if armed && *idle.borrow() == 0 => {
                    return Err("closed after the idle timeout".into());
                }
            }
        }
    }
}

/// Resolves once no request has been in flight for `first` (before the
/// first request) or `then` (after one).
async fn idle_expired(mut in_flight: watch::Receiver<usize>, first: Duration, then: Duration) {
    // A request may have come and gone before this is first polled (the
    // connection's task serves a quick one in a single poll).
    let mut limit = match in_flight.has_changed() {
        Ok(true) => then,
        _ => first,
    };
    loop {
        let changed = if *in_flight.borrow_and_update() == 0 {
            match tokio::time::timeout(limit, in_flight.changed()).await {
                Err(_) => return,
                Ok(changed) => changed,
            }
        } else {
            in_flight.changed().await
        };
        if changed.is_err() {
            // The connection is gone with its service.
            return std::future::pending().await;
        }
        limit = then;
    }
}

/// Counts a request in flight while it lives.
struct InFlight(Arc<watch::Sender<usize>>);

impl InFlight {
    fn start(counter: Arc<watch::Sender<usize>>) -> InFlight {
        counter.send_modify(|n| *n += 1);
        InFlight(counter)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// A response body that keeps its request in flight until it is sent or
/// dropped.
struct Tracked {
    body: Body,
    _request: InFlight,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A socket and its connection slot, given back when the socket closes,
/// also after an upgrade took it out of HTTP.
struct Held {
    tcp: TcpStream,
    _slot: OwnedSemaphorePermit,
}

impl AsyncRead for Held {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Held {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

/// Connections closed for want of a slot, logged at most every 10 s.
#[derive(Default)]
struct Refusals {
    since_logged: u64,
    logged: Option<std::time::Instant>,
}

impl Refusals {
    fn note(&mut self, max: usize) {
        self.since_logged += 1;
        if self
            .logged
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(10))
        {
            tracing::warn!(
                max_connections = max,
                refused = self.since_logged,
                "connection limit reached: closing new connections (--max-connections)"
            );
            self.since_logged = 0;
            self.logged = Some(std::time::Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_go_writes_them() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("1.5s").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn idle_means_no_request_in_flight_for_the_whole_timeout() {
        let (tx, rx) = watch::channel(0usize);
        let tx = Arc::new(tx);
        let first = Duration::from_secs(5);
        let then = Duration::from_secs(30);
        let started = tokio::time::Instant::now();
        let expired = tokio::spawn(idle_expired(rx, first, then));
        // A request at 4 s that takes 100 s (a watch): never idle meanwhile.
        tokio::time::sleep(Duration::from_secs(4)).await;
        let request = InFlight::start(tx.clone());
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert!(!expired.is_finished());
        drop(request);
        // Then `then` from its end, not `first`.
        tokio::time::sleep(Duration::from_secs(29)).await;
        assert!(!expired.is_finished());
        let short = InFlight::start(tx.clone());
        drop(short);
        tokio::time::sleep(Duration::from_secs(29)).await;
        assert!(!expired.is_finished());
        expired.await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(4 + 100 + 29 + 30));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_served_before_the_first_look_counts() {
        let (tx, rx) = watch::channel(0usize);
        let tx = Arc::new(tx);
        drop(InFlight::start(tx.clone()));
        let started = tokio::time::Instant::now();
        idle_expired(rx, Duration::from_secs(5), Duration::from_secs(30)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_a_request_expires_after_the_first_timeout() {
        let (_tx, rx) = watch::channel(0usize);
        let started = tokio::time::Instant::now();
        idle_expired(rx, Duration::from_secs(5), Duration::from_secs(30)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }
}
