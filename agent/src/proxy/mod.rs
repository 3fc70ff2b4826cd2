//! The service proxy (what kube-proxy's nftables mode is to a Kubernetes
//! node, inside the agent): connections from the node's pods and from the
//! host to a Service's `clusterIP:port`, and to `nodeIP:nodePort`, go to
//! one of the service's ready endpoints (TCP and UDP); whatever else is
//! addressed to the service range is rejected ("connection refused").
//!
//! - [`model`]: the service ports with their ready endpoints it makes of
//!   the agent's shared Services and EndpointSlices (`crate::services`).
//! - [`render`]: the nftables table of those (pure).
//! - [`nft`]: `nft -f -`, one atomic transaction per sync.
//! - [`render_iptables`], [`iptables`]: the same as iptables chains and
//!   one `iptables-restore --noflush` transaction per sync, where
//!   nftables is unavailable (`--proxy-mode iptables`, kube-proxy's
//!   iptables mode).
//! - [`sync`]: the loop that renders once per burst of changes of the
//!   shared Services and EndpointSlices (within 100 ms) and applies what
//!   changed.
//! - [`hairpin`]: hairpin mode on the pod bridge's ports, so a pod reaches
//!   itself through its own service.
//!
//! The rules live in one table of the agent's own, `ip bosun-<node>` (in
//! iptables mode: chains of its own, `BOSUN-<hash of the node>-…`, jumped
//! to from the built-in chains), installed at start (before any pod runs)
//! and removed on shutdown and by `bosun-agent --purge`; nothing else on
//! the host is touched. (The nftables mode also keeps one iptables chain,
//! `BOSUN-<hash>-FORWARD`: the accept of forwarded service traffic to the
//! node's pods, which no nftables verdict can give past Docker's iptables
//! FORWARD policy, DROP.)

pub mod hairpin;
pub mod iptables;
pub mod model;
pub mod nft;
pub mod render;
pub mod render_iptables;
pub mod sync;

#[cfg(test)]
mod tests;

pub use model::parse_cidr;
pub use render::{table_name, Settings};
pub use sync::ServiceProxy;

/// The default service range, as the control plane allocates from.
pub const DEFAULT_SERVICE_CIDR: &str = "10.96.0.0/12";

/// How the proxy programs the host (`--proxy-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProxyMode {
    /// One nftables table, `ip bosun-<node>`.
    Nftables,
    /// iptables chains `BOSUN-<hash>-…` (kube-proxy's iptables mode).
    Iptables,
}

impl ProxyMode {
    /// nftables when `nft` works here (it lists the tables), else iptables.
    pub async fn detect() -> ProxyMode {
        let works = tokio::process::Command::new("nft")
            .args(["list", "tables"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .await
            .is_ok_and(|s| s.success());
        if works {
            ProxyMode::Nftables
        } else {
            ProxyMode::Iptables
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ProxyMode::Nftables => "nftables",
            ProxyMode::Iptables => "iptables",
        }
    }
}
