//! The node-local cluster DNS server (what CoreDNS is to a Kubernetes
//! cluster, but one per node, inside the agent).
//!
//! Every pod of the node reaches it on the pod bridge's gateway address
//! (Docker's embedded resolver forwards there, from the pod's own IP). It
//! is authoritative for the cluster domain and answers from caches fed by
//! watches of Services and EndpointSlices (the agent's shared ones,
//! `crate::services`) and of Pods, so answers follow the
//! cluster within a second and keep coming while the control plane is
//! down. Everything outside the zone goes to the host's upstream
//! resolvers.
//!
//! - [`zone`]: the records, as the Kubernetes DNS specification defines
//!   them, built from the Services, EndpointSlices and [`pods`].
//! - [`arena`]: how a zone is stored (one text, sorted names, flat
//!   records) and packed by its builder.
//! - [`lookup`]: the answer to one question (A, AAAA, SRV, PTR, CNAME,
//!   NXDOMAIN/NODATA, autopath for relative names).
//! - [`pods`]: what DNS keeps of a Pod.
//! - [`cache`]: the Pod watch and the subscription to the shared
//!   Services/EndpointSlices, which rebuild the [`zone::Zone`] once per
//!   burst of changes (within 100 ms); the heap a rebuild frees goes
//!   back to the system ([`crate::memory`]).
//! - [`server`]: the hickory-server request handler: answers from the
//!   zone, forwards the rest with a short timeout (SERVFAIL on failure).
//! - [`udp`]: the UDP workers: answers the zone gave before are sent
//!   again from their encoded bytes (the fast path); the rest goes to the
//!   handler (the general path). TCP is hickory-server's.
//! - [`upstream`]: the host's upstream resolvers and search domains, from
//!   where the real ones are listed (never a systemd stub, never
//!   ourselves).

pub mod arena;
pub mod cache;
pub mod lookup;
pub mod pods;
pub mod server;
pub mod udp;
pub mod upstream;
pub mod zone;

#[cfg(test)]
mod tests;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use hickory_server::Server;
use tokio::task::JoinHandle;

pub use server::DnsHandler;
use udp::UdpFront;

use crate::services::{ServiceCache, ServiceState};
pub use lookup::Answer;
pub use zone::Zone;

/// TTL of the records in the zone, as CoreDNS's default for Kubernetes.
pub const DEFAULT_TTL: u32 = 5;
/// How long a forwarded query may take before the client gets SERVFAIL.
pub const DEFAULT_FORWARD_TIMEOUT: Duration = Duration::from_secs(2);

/// What the DNS server needs to run.
#[derive(Debug, Clone)]
pub struct DnsSettings {
    /// UDP and TCP address to listen on.
    pub bind: SocketAddr,
    /// The cluster domain (`cluster.local`).
    pub domain: String,
    /// Where names outside the zone go.
    pub upstreams: Vec<SocketAddr>,
    pub ttl: u32,
    pub forward_timeout: Duration,
    /// The Services and EndpointSlices shared with the service proxy;
    /// None: the server watches them itself.
    pub services: Option<ServiceCache>,
}

/// The zone as the handler reads it: swapped whole on every rebuild.
pub type SharedZone = Arc<RwLock<Arc<Zone>>>;

/// The pod bridge's gateway of a pod CIDR: its first host address, which
/// Docker gives the bridge of a network created with that subnet
/// (`10.244.3.0/24` → `10.244.3.1`).
pub fn gateway_of(pod_cidr: &str) -> Option<Ipv4Addr> {
    let net: ipnet::Ipv4Net = pod_cidr.parse().ok()?;
    // A /31 or /32 has no gateway besides its hosts.
    net.hosts().next().filter(|_| net.prefix_len() <= 30)
}

/// A running DNS server: its sockets and the watches that feed it.
pub struct DnsServer {
    server: Server<DnsHandler>,
    udp: UdpFront,
    feeders: Vec<JoinHandle<()>>,
    pub local_addr: SocketAddr,
}

/// How many threads receive on the UDP socket: one per core, at most four.
fn udp_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4)
}

/// UDP and TCP sockets on one address. With port 0 the UDP socket picks
/// the port and TCP follows; if that port is taken for TCP (another
/// process got it first) another is tried.
async fn bind_both(
    bind: SocketAddr,
) -> anyhow::Result<(std::net::UdpSocket, tokio::net::TcpListener)> {
    use anyhow::Context;
    let mut attempts = if bind.port() == 0 { 20 } else { 1 };
    loop {
        attempts -= 1;
        let udp =
            std::net::UdpSocket::bind(bind).with_context(|| format!("DNS: binding UDP {bind}"))?;
        let local_addr = udp.local_addr()?;
        match tokio::net::TcpListener::bind(local_addr).await {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && attempts > 0 => continue,
            Err(e) => {
                return Err(e).with_context(|| format!("DNS: binding TCP {local_addr}"));
            }
        }
    }
}

impl DnsServer {
    /// Binds UDP and TCP on `settings.bind` and serves `zone`.
    pub async fn serve(settings: &DnsSettings, zone: SharedZone) -> anyhow::Result<DnsServer> {
        use anyhow::Context;
        let (udp, tcp) = bind_both(settings.bind).await?;
        let local_addr = udp.local_addr()?;
        let upstreams: Vec<SocketAddr> = settings
            .upstreams
            .iter()
            .copied()
            .filter(|u| *u != local_addr)
            .collect();
        let handler = DnsHandler::new(zone.clone(), upstreams, settings.forward_timeout);
        let udp = UdpFront::start(udp, handler.clone(), zone, udp_workers())
            .context("DNS: starting the UDP workers")?;
        let mut server = Server::new(handler);
        server.register_listener(tcp, Duration::from_secs(5), 64 * 1024);
        Ok(DnsServer {
            server,
            udp,
            feeders: Vec::new(),
            local_addr,
        })
    }

    /// Starts the watches and the server: the agent's entry point.
    pub async fn start(client: kube::Client, settings: DnsSettings) -> anyhow::Result<DnsServer> {
        let zone: SharedZone = Arc::new(RwLock::new(Arc::new(Zone::build(
            &ServiceState::default(),
            &pods::Pods::new(),
            &settings.domain,
            settings.ttl,
        ))));
        let mut server = Self::serve(&settings, zone.clone()).await?;
        let services =
            (settings.services.clone()).unwrap_or_else(|| ServiceCache::new(client.clone()));
        server.feeders = cache::spawn(
            client,
            &services,
            zone,
            settings.domain.clone(),
            settings.ttl,
        );
        tracing::info!(
            addr = %server.local_addr,
            domain = %settings.domain,
            upstreams = ?settings.upstreams,
            "cluster DNS serving"
        );
        Ok(server)
    }

    /// How many encoded answers the UDP fast path holds.
    pub fn filed_answers(&self) -> usize {
        self.udp.answers.count()
    }

    /// Stops serving and watching.
    pub async fn shutdown(mut self) {
        for f in &self.feeders {
            f.abort();
        }
        self.udp.stop().await;
        if let Err(e) = self.server.shutdown_gracefully().await {
            tracing::debug!(error = %e, "DNS server shutdown");
        }
    }
}
