//! The sync loop: watches of Services and EndpointSlices feed a
//! [`ProxyState`] (the cluster DNS's watch-cache helper); once per burst
//! of changes ([`COALESCE`]) the desired table is rendered, and the
//! applier makes the table that one, over the last one, when they differ.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::Client;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use super::model::{desired, ProxyState, SliceInfo, SvcInfo};
use super::nft;
use super::render::{render, transaction, Settings};
use crate::dns::cache::{feed, rebuild_on_change};

/// How long the proxy gathers changes before it renders.
pub const COALESCE: Duration = Duration::from_millis(100);

/// The running proxy: its watches, renderer and applier.
pub struct ServiceProxy {
    tasks: Vec<JoinHandle<()>>,
    table: String,
}

impl ServiceProxy {
    /// Installs the table with no services (so every service address is
    /// rejected before anything can send to one), then keeps it in sync.
    pub async fn start(client: Client, node: String, settings: Settings) -> anyhow::Result<Self> {
        nft::check_installed().await?;
        let empty = render(&settings, &[]);
        nft::apply(&transaction(&settings, &empty, None))
            .await
            .with_context(|| format!("installing nftables table ip {}", settings.table))?;
        tracing::info!(table = %settings.table, service_cidr = %settings.service_cidr, bridge_netfilter = settings.bridge_netfilter, "service proxy: table installed");
        let state = Arc::new(Mutex::new(ProxyState::default()));
        let changed = Arc::new(Notify::new());
        let (tx, rx) = watch::channel(empty.clone());
        let table = settings.table.clone();
        let applier_settings = settings.clone();
        let mut tasks = Vec::new();
        if let Some(gateway) = crate::dns::gateway_of(&settings.pod_cidr.to_string()) {
            tasks.push(tokio::spawn(super::hairpin::run(gateway)));
        }
        tasks.extend([
            tokio::spawn(feed(
                "service proxy",
                Api::<Service>::all(client.clone()),
                state.clone(),
                changed.clone(),
                SvcInfo::from_service,
                |st: &mut ProxyState| &mut st.services,
            )),
            tokio::spawn(feed(
                "service proxy",
                Api::<EndpointSlice>::all(client),
                state.clone(),
                changed.clone(),
                SliceInfo::from_slice,
                |st: &mut ProxyState| &mut st.slices,
            )),
            tokio::spawn(rebuild_on_change(changed, COALESCE, move || {
                let ports = desired(
                    &state.lock().expect("proxy state"),
                    &node,
                    settings.pod_cidr,
                );
                let table = render(&settings, &ports);
                tx.send_if_modified(|current| {
                    let differs = *current != table;
                    if differs {
                        *current = table;
                    }
                    differs
                });
            })),
            tokio::spawn(apply_changes(rx, applier_settings, empty)),
        ]);
        Ok(ServiceProxy { tasks, table })
    }

    /// Stops syncing and removes the table.
    pub async fn shutdown(self) {
        for t in &self.tasks {
            t.abort();
        }
        match nft::delete_table(&self.table).await {
            Ok(_) => tracing::info!(table = %self.table, "service proxy: table removed"),
            Err(e) => {
                tracing::error!(table = %self.table, error = %format!("{e:#}"), "service proxy: removing the table")
            }
        }
    }
}

/// Makes the table every new rendered one, over the last one applied; a
/// failure is retried (with whatever is newest then, replacing the table
/// whole) every second.
async fn apply_changes(mut rx: watch::Receiver<String>, settings: Settings, installed: String) {
    let mut last = Some(installed);
    loop {
        if last.is_some() && rx.changed().await.is_err() {
            return;
        }
        let table = rx.borrow_and_update().clone();
        let script = transaction(&settings, &table, last.as_deref());
        let start = std::time::Instant::now();
        match nft::apply(&script).await {
            Ok(()) => {
                tracing::debug!(took = ?start.elapsed(), bytes = script.len(), "service proxy: rules synced");
                last = Some(table);
            }
            Err(e) => {
                last = None;
                tracing::error!(error = %format!("{e:#}"), "service proxy: syncing the rules; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
