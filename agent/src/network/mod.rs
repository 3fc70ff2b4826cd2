//! The pod network across hosts, flannel's host-gw way: every agent keeps
//! a route to each other Node's pod CIDR via that Node's InternalIP
//! ([`routes`]), and pod-to-pod traffic keeps the pods' own addresses
//! ([`masquerade`]); traffic leaving the cluster is still masqueraded by
//! Docker. Routes of Nodes that leave are removed. The node's own address
//! is chosen by [`address`]. Pods of nodes sharing one engine reach each
//! other across Docker's bridges through the forward chain of
//! [`firewall`].
//!
//! Routes, the NAT exception and the forward chain stay when the agent
//! stops (its pods keep running and keep talking); `bosun-agent --purge`
//! removes them.

pub mod address;
pub mod firewall;
pub mod masquerade;
pub mod netlink;
pub mod routes;

use std::net::Ipv4Addr;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Api, Client};

/// How often routes are checked even when no Node changed (someone may
/// have removed one by hand, or Docker moved its NAT rules up).
const RESYNC: Duration = Duration::from_secs(10);

/// The route keeper of one node.
pub struct HostGw {
    pub client: Client,
    pub node_name: String,
    pub pod_cidr: String,
    /// The cluster's pod network: no route to a Node's pod CIDR outside it.
    pub cluster_cidr: ipnet::Ipv4Net,
    /// The refused pod CIDRs last logged, so each is said once.
    pub refused: std::sync::Mutex<Vec<String>>,
}

impl HostGw {
    /// Keeps routes in line with the Nodes until `stop` turns true.
    pub async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let (reader, writer) = reflector::store::<Node>();
        let api: Api<Node> = Api::all(self.client.clone());
        let mut events = reflector(writer, watcher(api, watcher::Config::default()))
            .default_backoff()
            .boxed();
        let mut tick = tokio::time::interval(RESYNC);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_error = String::new();
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                ev = events.next() => if ev.is_none() { return },
                _ = tick.tick() => {}
            }
            // Take whatever else arrived at once.
            while let Some(Some(_)) = events.next().now_or_never() {}
            // The cache fills only while `events` is polled: do not wait
            // on it here.
            if reader.wait_until_ready().now_or_never().is_none() {
                continue;
            }
            let nodes: Vec<Node> = reader.state().iter().map(|n| (**n).clone()).collect();
            match self.sync(&nodes).await {
                Ok(()) => last_error.clear(),
                Err(e) if e != last_error => {
                    tracing::warn!(error = %e, "keeping routes to other nodes' pods");
                    last_error = e;
                }
                Err(_) => {}
            }
        }
    }

    /// One pass: the routes and, when there are any, the NAT exception.
    pub async fn sync(&self, nodes: &[Node]) -> Result<(), String> {
        let local: Vec<Ipv4Addr> = address::host_addresses()
            .map_err(|e| format!("listing this host's addresses: {e}"))?
            .into_iter()
            .map(|(_, ip)| ip)
            .collect();
        let (want, refused) = routes::desired(
            nodes,
            &self.node_name,
            &self.pod_cidr,
            &local,
            &self.cluster_cidr,
        );
        {
            let mut said = self.refused.lock().unwrap();
            for r in refused.iter().filter(|r| !said.contains(r)) {
                tracing::warn!(node_pod_cidr = %r, cluster_cidr = %self.cluster_cidr,
                    "not routing a node's pod CIDR outside the cluster's pod network");
            }
            *said = refused;
        }
        let cluster = firewall::supernet16(&self.pod_cidr)
            .ok_or_else(|| format!("pod CIDR {} is not IPv4", self.pod_cidr))?;
        // Put back the forward chain's jump if a firewall reload or a
        // hand took it away.
        let forward = firewall::ensure_forward_chain(&cluster).await;
        if !want.is_empty() {
            masquerade::ensure(&cluster).await?;
        }
        routes::apply(&want).await?;
        forward
    }
}

/// What `--purge` removed of the pod network across hosts.
pub async fn purge() -> Result<(Vec<String>, bool), String> {
    let routes = routes::remove_all().await?;
    let chain = masquerade::remove().await?;
    Ok((routes, chain))
}
