//! The agent's client-side load balancer over several control planes, as
//! k3s's agent has one (`pkg/agent/loadbalancer`): a TCP proxy on a
//! loopback port that every client of the agent (its kube client, its
//! watches, its lease renewals) is pointed at, forwarding each connection
//! to a live API server.
//!
//! - Connections are passed through untouched: TLS runs end to end between
//!   the agent and the API server, which the agent verifies against the
//!   cluster CA as before (every bosun control plane's serving certificate
//!   names 127.0.0.1, so the loopback address verifies).
//! - A new connection goes to the server the last one reached (sticky, so
//!   one API server sees the agent's watches together); if it cannot be
//!   dialled within [`Options::dial_timeout`] the next one is tried, the
//!   servers last seen healthy first. When none answers the connection is
//!   closed and the client retries, as it would with one server down.
//! - A health check dials every server each [`Options::health_interval`];
//!   one failing [`Options::failures_to_down`] checks in a row has its open
//!   connections closed, so long-lived watches through it are re-opened
//!   on a live server instead of hanging on a host that went away. A server
//!   killed outright closes them itself (the kernel resets its sockets).
//!
//! Simplified next to k3s: the list is fixed at start (k3s also learns
//! servers from the `kubernetes` Endpoints), and health is "accepts TCP",
//! not a request to `/readyz`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// How the load balancer dials and checks its servers.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub dial_timeout: Duration,
    pub health_interval: Duration,
    pub failures_to_down: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            dial_timeout: Duration::from_secs(3),
            health_interval: Duration::from_secs(5),
            failures_to_down: 2,
        }
    }
}

/// One API server behind the load balancer.
struct Server {
    /// `HOST:PORT`.
    address: String,
    healthy: AtomicBool,
    failures: AtomicU32,
    /// Bumped to close every connection open to this server.
    closing: watch::Sender<u64>,
}

struct State {
    servers: Vec<Server>,
    /// The server new connections try first.
    preferred: AtomicUsize,
    options: Options,
}

/// A running load balancer; it stops when dropped.
pub struct LoadBalancer {
    local: SocketAddr,
    state: Arc<State>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// `HOST:PORT` of an `https://HOST:PORT[/]` server URL.
pub fn server_address(url: &str) -> Result<String, String> {
    let parsed: http::Uri = url.parse().map_err(|e| format!("{url:?}: {e}"))?;
    let (Some("https"), Some(host)) = (parsed.scheme_str(), parsed.host()) else {
        return Err(format!("{url:?}: expected https://HOST:PORT"));
    };
    if !matches!(parsed.path(), "" | "/") {
        return Err(format!(
            "{url:?}: a control plane behind the agent's load balancer is served at / (no path)"
        ));
    }
    // IPv6 hosts keep their brackets here.
    Ok(format!("{host}:{}", parsed.port_u16().unwrap_or(443)))
}

impl LoadBalancer {
    /// Listens on a free loopback port and forwards to `servers` (`HOST:PORT`
    /// each, the first preferred).
    pub async fn start(servers: Vec<String>, options: Options) -> std::io::Result<LoadBalancer> {
        assert!(!servers.is_empty(), "a load balancer needs a server");
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let local = listener.local_addr()?;
        let state = Arc::new(State {
            servers: servers
                .into_iter()
                .map(|address| Server {
                    address,
                    healthy: AtomicBool::new(true),
                    failures: AtomicU32::new(0),
                    closing: watch::channel(0).0,
                })
                .collect(),
            preferred: AtomicUsize::new(0),
            options,
        });
        let accept = tokio::spawn(accept_loop(listener, state.clone()));
        let health = tokio::spawn(health_loop(state.clone()));
        tracing::info!(
            %local,
            servers = ?state.servers.iter().map(|s| &s.address).collect::<Vec<_>>(),
            "control-plane load balancer listening"
        );
        Ok(LoadBalancer {
            local,
            state,
            tasks: vec![accept, health],
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The URL the agent's clients use: `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.local)
    }

    /// The server new connections go to now.
    pub fn current(&self) -> String {
        let at = self.state.preferred.load(Ordering::Relaxed);
        self.state.servers[at].address.clone()
    }
}

impl Drop for LoadBalancer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl State {
    /// The order to try the servers in: the preferred one, then the
    /// others last seen healthy, then the rest.
    fn dial_order(&self) -> Vec<usize> {
        let n = self.servers.len();
        let first = self.preferred.load(Ordering::Relaxed) % n;
        let rotated = (0..n).map(|i| (first + i) % n);
        let (healthy, down): (Vec<usize>, Vec<usize>) =
            rotated.partition(|&i| i == first || self.servers[i].healthy.load(Ordering::Relaxed));
        healthy.into_iter().chain(down).collect()
    }

    fn mark_up(&self, at: usize) {
        let server = &self.servers[at];
        server.failures.store(0, Ordering::Relaxed);
        if !server.healthy.swap(true, Ordering::Relaxed) {
            tracing::info!(server = %server.address, "control plane answers again");
        }
    }

    /// Counts a failure; at `failures_to_down` in a row the server is down
    /// and its connections are closed.
    fn mark_failed(&self, at: usize, error: &str) {
        let server = &self.servers[at];
        let failures = server.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures >= self.options.failures_to_down
            && server.healthy.swap(false, Ordering::Relaxed)
        {
            tracing::warn!(server = %server.address, %error, "control plane is down; closing its connections");
            server.closing.send_modify(|g| *g += 1);
            if self.preferred.load(Ordering::Relaxed) == at {
                if let Some(next) = (0..self.servers.len())
                    .find(|&i| self.servers[i].healthy.load(Ordering::Relaxed))
                {
                    self.preferred.store(next, Ordering::Relaxed);
                }
            }
        }
    }
}

async fn dial(address: &str, timeout: Duration) -> Result<TcpStream, String> {
    match tokio::time::timeout(timeout, TcpStream::connect(address)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {timeout:?}")),
    }
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    loop {
        match listener.accept().await {
            Ok((inbound, _)) => {
                tokio::spawn(forward(inbound, state.clone()));
            }
            Err(e) => {
                // Out of file descriptors and the like: wait, do not spin.
                tracing::warn!(error = %e, "control-plane load balancer: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Forwards one client connection to the first server that answers.
async fn forward(mut inbound: TcpStream, state: Arc<State>) {
    let _ = inbound.set_nodelay(true);
    for at in state.dial_order() {
        let server = &state.servers[at];
        // Subscribed before dialling: a close decided meanwhile counts.
        let mut closing = server.closing.subscribe();
        match dial(&server.address, state.options.dial_timeout).await {
            Ok(mut outbound) => {
                let _ = outbound.set_nodelay(true);
                state.mark_up(at);
                if state.preferred.swap(at, Ordering::Relaxed) != at {
                    tracing::info!(server = %server.address, "control-plane connections now go here");
                }
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    _ = closing.changed() => {}
                }
                return;
            }
            Err(e) => {
                tracing::debug!(server = %server.address, error = %e, "dialling a control plane failed");
                // A refused dial is as good as a failed health check.
                state.mark_failed(at, &e);
            }
        }
    }
    tracing::warn!("no control plane answered; the client will retry");
}

async fn health_loop(state: Arc<State>) {
    let mut tick = tokio::time::interval(state.options.health_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for at in 0..state.servers.len() {
            match dial(&state.servers[at].address, state.options.dial_timeout).await {
                Ok(_) => state.mark_up(at),
                Err(e) => state.mark_failed(at, &e),
            }
        }
    }
}

#[cfg(test)]
mod tests;
