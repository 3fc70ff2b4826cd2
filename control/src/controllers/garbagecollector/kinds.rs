//! The kinds the collector watches: every stored built-in resource but
//! Events (which never own anything and are many), and the custom
//! resources, found again every few seconds from the established CRDs as
//! upstream's collector re-reads discovery: a new one gets a watch, one no
//! longer served loses its watch.
//!
//! The watches are metadata-only (`PartialObjectMetadata`, as upstream's
//! collector uses metadata informers): the collector reads nothing but
//! uids, owner references, deletion timestamps and finalizers, so the
//! API server sends only each object's metadata, cut from its stored
//! bytes, and nothing here decodes the rest.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use tokio::sync::mpsc;

use bosun::resources::{ResourceInfo, RESOURCES};

use super::Change;
use crate::toolkit::dynamic::api_resource;

/// How often the custom resources are looked up again.
pub(super) const RESYNC: Duration = Duration::from_secs(5);

/// The built-in kinds watched.
pub(super) fn watched() -> Vec<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .filter(|r| r.is_storage_version() && r.kind != "Event")
        .collect()
}

/// Watches `res`, sending its changes to `tx` until aborted.
pub(super) fn spawn_watch(
    watches: &mut tokio::task::JoinSet<()>,
    client: &Client,
    res: &'static ResourceInfo,
    tx: mpsc::Sender<Change>,
) -> tokio::task::AbortHandle {
    let api: Api<PartialObjectMeta<DynamicObject>> =
        Api::all_with(client.clone(), &api_resource(res));
    watches.spawn(async move {
        let stream = watcher(api, watcher::Config::default()).default_backoff();
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            let change = match event {
                Ok(watcher::Event::Apply(o)) => Change::Apply(res, o.metadata),
                Ok(watcher::Event::Delete(o)) => Change::Delete(o.metadata),
                Ok(watcher::Event::Init) => Change::ListStart(res),
                Ok(watcher::Event::InitApply(o)) => Change::ListItem(res, o.metadata),
                Ok(watcher::Event::InitDone) => Change::ListDone(res),
                Err(e) => {
                    tracing::debug!(kind = res.kind, error = %e, "garbage collector watch");
                    continue;
                }
            };
            if tx.send(change).await.is_err() {
                return;
            }
        }
    })
}

/// The custom resources watched, by `plural.group`.
#[derive(Default)]
pub(super) struct CustomKinds {
    watching: HashMap<String, (&'static ResourceInfo, tokio::task::AbortHandle)>,
}

impl CustomKinds {
    /// Starts watching the custom resources served now and stops
    /// watching those no longer served.
    pub(super) async fn resync(
        &mut self,
        watches: &mut tokio::task::JoinSet<()>,
        client: &Client,
        tx: &mpsc::Sender<Change>,
    ) {
        let served = match crate::toolkit::dynamic::custom_resources(client).await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "garbage collector: listing custom resources");
                return;
            }
        };
        let keys: Vec<String> = served.iter().map(|r| r.plural_group()).collect();
        self.watching.retain(|k, (_, handle)| {
            let keep = keys.contains(k);
            if !keep {
                handle.abort();
            }
            keep
        });
        for (res, key) in served.into_iter().zip(keys) {
            if self
                .watching
                .get(&key)
                .is_some_and(|(r, _)| std::ptr::eq(*r, res))
            {
                continue;
            }
            if let Some((_, old)) = self.watching.remove(&key) {
                old.abort();
            }
            let handle = spawn_watch(watches, client, res, tx.clone());
            self.watching.insert(key, (res, handle));
        }
    }

    /// The custom resource of an owner reference's apiVersion and kind
    /// (its group and kind; the version watched serves it).
    pub(super) fn by_kind(&self, api_version: &str, kind: &str) -> Option<&'static ResourceInfo> {
        let group = api_version.split_once('/').map_or("", |(g, _)| g);
        self.watching
            .values()
            .map(|(r, _)| *r)
            .find(|r| r.group == group && r.kind == kind)
    }
}
