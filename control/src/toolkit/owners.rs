//! The wiring every controller of pods shares (ReplicaSets, Jobs,
//! StatefulSets, DaemonSets): what wakes an owner, and forgetting the
//! expectations of an owner that is gone.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;
use kube::runtime::{watcher, Controller};

use super::claim::owners_that_may_adopt;
use super::{expectations_key, Cached, Expectations, Informers};

/// A controller of the owners in `owners`, woken by their own changes,
/// by their pods changing or going, by an orphan pod one of them
/// `accepts` (it may adopt it), and every `resync`; the caller adds what
/// else it watches.
pub fn pod_owner_controller<O: Cached>(
    informers: &Informers,
    owners: Store<O>,
    accepts: impl Fn(&O, &Pod) -> bool + Send + Sync + 'static,
    resync: Duration,
) -> Controller<O> {
    let for_orphans = owners.clone();
    Controller::for_shared_stream(informers.subscribe::<O>(), owners)
        .owns_shared_stream(informers.subscribe::<Pod>())
        .owns_stream(informers.deleted::<Pod>())
        .watches_shared_stream(informers.subscribe::<Pod>(), move |pod: Arc<Pod>| {
            owners_that_may_adopt(&for_orphans, pod.as_ref(), |o| accepts(o, &pod))
        })
        .reconcile_all_on(
            tokio_stream::wrappers::IntervalStream::new(tokio::time::interval(resync)).map(|_| ()),
        )
}

/// Forgets what was expected of each deleted owner, so that one made
/// again under the same name starts clean.
pub async fn forget_deleted<O: Cached>(
    deleted: impl Stream<Item = Result<O, watcher::Error>>,
    expectations: &Expectations,
) {
    deleted
        .for_each(|owner| {
            if let Ok(owner) = owner {
                expectations.forget(&expectations_key(&owner));
            }
            futures::future::ready(())
        })
        .await
}
