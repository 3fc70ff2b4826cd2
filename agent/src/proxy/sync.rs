//! The sync loop: once per burst of changes ([`COALESCE`]) of the agent's
//! shared Services and EndpointSlices ([`ServiceCache`]) the desired
//! service ports are worked out, and the applier renders them with the
//! backend of the [`ProxyMode`] and makes the host's rules those, over the
//! last ones, when they differ.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use super::model::{desired, ServicePort};
use super::render::{render, transaction, Settings};
use super::render_iptables::{self, Ruleset};
use super::{iptables, nft, ProxyMode};
use crate::services::watch::rebuild_on_change;
use crate::services::ServiceCache;

/// How long the proxy gathers changes before it renders.
pub const COALESCE: Duration = Duration::from_millis(100);

/// The running proxy: its watches, renderer and applier.
pub struct ServiceProxy {
    tasks: Vec<JoinHandle<()>>,
    table: String,
    mode: ProxyMode,
}

/// What one backend last made of the host's rules: None when unknown
/// (a sync failed), so the next one replaces them whole.
enum Installed {
    Nftables(Option<String>),
    Iptables(Option<Ruleset>),
}

impl Installed {
    /// Makes the host's rules those of `ports`.
    async fn apply(&mut self, settings: &Settings, ports: &[ServicePort]) -> anyhow::Result<()> {
        match self {
            Installed::Nftables(last) => {
                let table = render(settings, ports);
                let script = transaction(settings, &table, last.as_deref());
                *last = None;
                nft::apply(&script).await?;
                *last = Some(table);
            }
            Installed::Iptables(last) => {
                let rules = render_iptables::render(settings, ports);
                match last.take() {
                    Some(previous) => {
                        if let Some((script, delete)) = render_iptables::sync(&previous, &rules) {
                            iptables::restore(&script).await?;
                            if let Some(delete) = delete {
                                iptables::restore(&delete).await?;
                            }
                        }
                    }
                    None => iptables::replace(settings, &rules).await?,
                }
                *last = Some(rules);
            }
        }
        Ok(())
    }
}

impl ServiceProxy {
    /// Installs the rules with no services (so every service address is
    /// rejected before anything can send to one), then keeps them in sync.
    pub async fn start(
        services: ServiceCache,
        node: String,
        settings: Settings,
        mode: ProxyMode,
    ) -> anyhow::Result<Self> {
        let mut installed = match mode {
            ProxyMode::Nftables => {
                nft::check_installed().await?;
                Installed::Nftables(None)
            }
            ProxyMode::Iptables => {
                iptables::check_installed().await?;
                Installed::Iptables(None)
            }
        };
        installed
            .apply(&settings, &[])
            .await
            .with_context(|| match mode {
                ProxyMode::Nftables => format!("installing nftables table ip {}", settings.table),
                ProxyMode::Iptables => format!(
                    "installing iptables chains {}*",
                    render_iptables::chain_prefix(&settings.table)
                ),
            })?;
        if mode == ProxyMode::Nftables {
            // Node ports from other hosts through Docker's FORWARD policy.
            let accept = render_iptables::forward_accept(&settings);
            if let Err(e) = iptables::replace(&settings, &accept).await {
                tracing::warn!(error = %format!("{e:#}"), "service proxy: no iptables accept of forwarded service traffic; node ports may not answer other hosts");
            }
        }
        tracing::info!(mode = mode.name(), table = %settings.table, chains = %render_iptables::chain_prefix(&settings.table), service_cidr = %settings.service_cidr, bridge_netfilter = settings.bridge_netfilter, "service proxy: rules installed");
        let changed = Arc::new(Notify::new());
        services.subscribe(&changed);
        let (tx, rx) = watch::channel(Vec::new());
        let table = settings.table.clone();
        let applier_settings = settings.clone();
        let mut tasks = Vec::new();
        if let Some(gateway) = crate::dns::gateway_of(&settings.pod_cidr.to_string()) {
            tasks.push(tokio::spawn(super::hairpin::run(gateway)));
        }
        tasks.extend([
            tokio::spawn(rebuild_on_change(changed, COALESCE, move || {
                let ports = desired(&services.read(), &node, settings.pod_cidr);
                tx.send_if_modified(|current| {
                    let differs = *current != ports;
                    if differs {
                        *current = ports;
                    }
                    differs
                });
            })),
            tokio::spawn(apply_changes(rx, applier_settings, installed)),
        ]);
        Ok(ServiceProxy { tasks, table, mode })
    }

    /// Stops syncing and removes the rules.
    pub async fn shutdown(self) {
        for t in &self.tasks {
            t.abort();
        }
        let removed = match self.mode {
            ProxyMode::Nftables => match nft::delete_table(&self.table).await {
                // And the iptables accept of forwarded service traffic.
                Ok(_) => iptables::remove(&self.table).await,
                Err(e) => Err(e),
            },
            ProxyMode::Iptables => iptables::remove(&self.table).await,
        };
        match removed {
            Ok(_) => {
                tracing::info!(mode = self.mode.name(), table = %self.table, "service proxy: rules removed")
            }
            Err(e) => {
                tracing::error!(mode = self.mode.name(), table = %self.table, error = %format!("{e:#}"), "service proxy: removing the rules")
            }
        }
    }
}

/// Makes the rules those of every new set of service ports, over the last
/// ones applied; a failure is retried (with whatever is newest then,
/// replacing the rules whole) every second.
async fn apply_changes(
    mut rx: watch::Receiver<Vec<ServicePort>>,
    settings: Settings,
    mut installed: Installed,
) {
    let mut failed = false;
    loop {
        if !failed && rx.changed().await.is_err() {
            return;
        }
        let ports = rx.borrow_and_update().clone();
        let start = std::time::Instant::now();
        match installed.apply(&settings, &ports).await {
            Ok(()) => {
                tracing::debug!(took = ?start.elapsed(), ports = ports.len(), "service proxy: rules synced");
                failed = false;
            }
            Err(e) => {
                failed = true;
                tracing::error!(error = %format!("{e:#}"), "service proxy: syncing the rules; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
