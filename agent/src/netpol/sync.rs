//! The enforcer's loop: one watch each of Pods, Namespaces and
//! NetworkPolicies (cluster-wide: peers may be anywhere) keeps a
//! [`PolicyState`]; once all three have listed, each burst of changes
//! ([`COALESCE`]) is resolved for this node ([`desired`]) and, when the
//! result differs from what is installed, the table is replaced in one
//! `nft -f` transaction. A failed apply is retried every second.
//!
//! The table stays when the agent stops: the pods keep running, and so
//! must their isolation. The next agent replaces it once its watches have
//! listed (never with an empty state first); `bosun-agent --purge`
//! removes it.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use super::model::{desired, NamespaceInfo, PodInfo, PodRules, PolicyInfo, PolicyState};
use super::render::{render, table_name, transaction};
use crate::proxy::nft;
use crate::services::watch::{apply, rebuild_on_change};
use crate::services::Key;

/// How long the enforcer gathers changes before it renders.
pub const COALESCE: Duration = Duration::from_millis(100);

/// The running enforcer of one node.
pub struct NetworkPolicyEnforcer {
    tasks: Vec<JoinHandle<()>>,
    table: String,
    installed: Arc<AtomicU8>,
}

/// What the enforcer last installed: nothing yet (a table of the last
/// agent may be there), a table isolating no pod, or one isolating some.
const UNKNOWN: u8 = 0;
const NO_POD: u8 = 1;
const SOME_PODS: u8 = 2;

impl Drop for NetworkPolicyEnforcer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The number of watches (Pods, Namespaces, NetworkPolicies).
const WATCHES: usize = 3;

impl NetworkPolicyEnforcer {
    /// Starts the watches and the applier for `node`.
    pub async fn start(client: Client, node: String) -> anyhow::Result<Self> {
        nft::check_installed().await?;
        if !crate::proxy::render::host_bridge_netfilter() {
            tracing::warn!("network policy: net.bridge.bridge-nf-call-iptables is not 1 (br_netfilter); traffic between pods of one bridge is not filtered");
        }
        let state = Arc::new(RwLock::new(PolicyState::default()));
        let changed = Arc::new(Notify::new());
        let listed = Arc::new(AtomicUsize::new(0));
        let table = table_name(&node);
        let (tx, rx) = watch::channel::<Option<Vec<PodRules>>>(None);
        let mut tasks = vec![
            tokio::spawn(feed(
                Api::<Pod>::all(client.clone()),
                state.clone(),
                changed.clone(),
                listed.clone(),
                PodInfo::from_pod,
                |s: &mut PolicyState| &mut s.pods,
            )),
            tokio::spawn(feed(
                Api::<Namespace>::all(client.clone()),
                state.clone(),
                changed.clone(),
                listed.clone(),
                NamespaceInfo::from_namespace,
                |s: &mut PolicyState| &mut s.namespaces,
            )),
            tokio::spawn(feed(
                Api::<NetworkPolicy>::all(client),
                state.clone(),
                changed.clone(),
                listed.clone(),
                PolicyInfo::from_policy,
                |s: &mut PolicyState| &mut s.policies,
            )),
        ];
        tasks.push(tokio::spawn(rebuild_on_change(
            changed,
            COALESCE,
            move || {
                if listed.load(Ordering::SeqCst) < WATCHES {
                    return;
                }
                let rules = desired(&state.read().expect("policy state"), &node);
                tx.send_if_modified(|current| {
                    let differs = current.as_ref() != Some(&rules);
                    if differs {
                        *current = Some(rules);
                    }
                    differs
                });
            },
        )));
        let installed = Arc::new(AtomicU8::new(UNKNOWN));
        tasks.push(tokio::spawn(apply_changes(
            rx,
            table.clone(),
            installed.clone(),
        )));
        tracing::info!(%table, "network policy: enforcing (the table is replaced once the watches have listed)");
        Ok(NetworkPolicyEnforcer {
            tasks,
            table,
            installed,
        })
    }

    /// Stops syncing. A table that isolates pods stays (they keep
    /// running, and so must their isolation until the next agent takes
    /// over); one that isolates none is removed.
    pub async fn shutdown(self) {
        for t in &self.tasks {
            t.abort();
        }
        if self.installed.load(Ordering::SeqCst) != NO_POD {
            tracing::info!(table = %self.table, "network policy: rules stay while the agent is down");
            return;
        }
        if let Err(e) = nft::delete_table(&self.table).await {
            tracing::error!(table = %self.table, error = %format!("{e:#}"), "network policy: removing the table");
        }
    }
}

/// Keeps `map_of(state)` equal to what the API holds of `K` (slimmed),
/// wakes `changed` when it changed, and counts `listed` up once, at the
/// end of the first list.
async fn feed<K, V>(
    api: Api<K>,
    state: Arc<RwLock<PolicyState>>,
    changed: Arc<Notify>,
    listed: Arc<AtomicUsize>,
    slim: fn(&K) -> Option<V>,
    map_of: fn(&mut PolicyState) -> &mut std::collections::BTreeMap<Key, V>,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
    V: PartialEq + Send,
{
    let kind = K::kind(&Default::default()).to_string();
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut relist = None;
    let mut first = true;
    let mut warned = false;
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(e) => {
                warned = false;
                e
            }
            Err(e) => {
                if !warned {
                    tracing::warn!(kind, error = %e, "network policy: watching; retrying");
                    warned = true;
                }
                continue;
            }
        };
        let done = matches!(event, Event::InitDone);
        let mut st = state.write().expect("policy state");
        let dirty = apply(map_of(&mut st), &mut relist, event, slim);
        drop(st);
        if done && first {
            first = false;
            listed.fetch_add(1, Ordering::SeqCst);
            changed.notify_one();
        } else if dirty {
            changed.notify_one();
        }
    }
}

/// Replaces the table with every new set of rules; on failure, retries
/// with whatever is newest every second.
async fn apply_changes(
    mut rx: watch::Receiver<Option<Vec<PodRules>>>,
    table: String,
    installed: Arc<AtomicU8>,
) {
    let mut failed = false;
    loop {
        if !failed && rx.changed().await.is_err() {
            return;
        }
        let Some(rules) = rx.borrow_and_update().clone() else {
            continue;
        };
        let start = std::time::Instant::now();
        let script = transaction(&table, &render(&table, &rules));
        match nft::apply(&script).await {
            Ok(()) => {
                let now = if rules.is_empty() { NO_POD } else { SOME_PODS };
                installed.store(now, Ordering::SeqCst);
                tracing::debug!(took = ?start.elapsed(), pods = rules.len(), "network policy: rules synced");
                failed = false;
            }
            Err(e) => {
                failed = true;
                tracing::error!(error = %format!("{e:#}"), "network policy: syncing the rules; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
