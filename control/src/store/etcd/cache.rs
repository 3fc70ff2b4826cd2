//! The watch cache of the etcd store, as kube-apiserver's cacher: one per
//! resource (the keys under `/registry/<resource>/`), fed by one etcd
//! watch. The server starts one for every built-in resource when it starts
//! ([`Caches::start`]), as kube-apiserver starts its cachers, so that each
//! window begins then; any other resource (a custom one) gets its cache
//! the first time a list or a watch asks for it.
//!
//! It holds every object of its resource (each write's bytes one
//! [`Stored`], shared by the cache, every list that returns it and every
//! watcher its event goes to) and a window of the latest events, and it
//! knows the revision it is current to: the revision of its last event,
//! or of etcd's last progress notification (which etcd sends only once
//! every event before it has been sent).
//!
//! - A consistent list (kube-apiserver 1.31's ConsistentListFromCache)
//!   reads etcd's current revision with a one-key read, asks etcd for a
//!   progress notification and waits until the cache has reached that
//!   revision; after [`CATCH_UP`] it is answered from etcd instead.
//! - A `resourceVersion=0` list is answered from the cache as it is.
//! - A watch from a revision inside the window is replayed from it and then
//!   fed live: one etcd watch per resource however many watchers, each
//!   event made once and shared. A watch from before the window of a
//!   cache started with the server is a 410 Expired "too old resource
//!   version" at once, as kube-apiserver's cacher answers (its client lists
//!   again), not an etcd watch of its own replaying history the cache let
//!   go. A cache made lazily sends such a watch on to etcd instead: its
//!   window began at its first reader, after revisions a client may
//!   rightly hold (a create's), and etcd answers 410 once it compacted.
//! - Its watchers' progress ([`ProgressWatch`]) is the cache's revision,
//!   which etcd's progress notifications move on with the writes to other
//!   resources: while the cache has watchers it asks etcd for one every
//!   `progress_interval` (the API's bookmark interval), so that the
//!   bookmarks of a watch of a quiet resource keep up with etcd's
//!   revision and a client resuming from one stays inside the history.
//! - A watcher that falls [`WATCHER_BUFFER`] events behind is ended (its
//!   client watches again from its last revision), as the cacher ends a
//!   blocked watcher, so that one slow client holds up no one.
//!
//! When the etcd watch fails, the cache ends its watchers, lists again
//! and watches on; meanwhile reads go to etcd.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use etcd_client::{EventType as EtcdEventType, GetOptions, WatchOptions};
use tokio::sync::{mpsc, watch, Notify};
use tokio_stream::wrappers::ReceiverStream;

use super::{etcd_error, list_range, range_end, Shared};
use crate::store::{
    Event, EventType, KeyValue, ProgressWatch, Result, Revision, StoreError, Stored,
};

/// How many of the latest events each cache keeps for watches from a
/// past revision.
pub(super) const WINDOW: usize = 1000;

/// How many events a watcher may have waiting before it is ended.
const WATCHER_BUFFER: usize = 1024;

/// How long a consistent list waits for the cache to catch up with etcd
/// before it is read from etcd (kube-apiserver's 3 s).
pub(super) const CATCH_UP: Duration = Duration::from_secs(3);

/// How long a cache being made is waited for by its first reader.
const FIRST_SYNC: Duration = Duration::from_secs(5);

/// The caches of one store, by resource prefix.
pub(super) struct Caches {
    shared: Arc<Shared>,
    /// `--watch-cache`: without it, no cache is made.
    enabled: bool,
    by_prefix: Mutex<HashMap<String, Arc<Cache>>>,
}

impl Drop for Caches {
    fn drop(&mut self) {
        for cache in lock(&self.by_prefix).values() {
            if let Some(task) = lock(&cache.task).take() {
                task.abort();
            }
        }
    }
}

/// The resource prefix `/registry/<resource>/` of a store prefix, if it
/// lies inside one resource (`/registry/pods/`, `/registry/pods/ns/`, one
/// pod's key).
fn resource_prefix(prefix: &str) -> Option<&str> {
    let rest = prefix.strip_prefix("/registry/")?;
    let end = rest.find('/')?;
    (end > 0).then(|| &prefix[.."/registry/".len() + end + 1])
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Caches {
    pub(super) fn new(shared: Arc<Shared>, enabled: bool) -> Caches {
        Caches {
            shared,
            enabled,
            by_prefix: Mutex::new(HashMap::new()),
        }
    }

    /// Starts the caches of the resources under `prefixes` (each a
    /// `/registry/<resource>/`), as the server starts: their windows begin
    /// now, and a watch from before one is too old.
    pub(super) fn start(&self, prefixes: impl IntoIterator<Item = String>) {
        if !self.enabled {
            return;
        }
        let mut caches = lock(&self.by_prefix);
        for prefix in prefixes {
            let Some(resource) = resource_prefix(&prefix) else {
                continue;
            };
            if !caches.contains_key(resource) {
                let cache = Cache::start(self.shared.clone(), resource.to_string(), true);
                caches.insert(resource.to_string(), cache);
            }
        }
    }

    /// The cache of the resource `prefix` lies in (started, and waited
    /// for a while, if this is its first reader or it is listing); None
    /// for a prefix wider than one resource.
    pub(super) async fn of(&self, prefix: &str) -> Option<Arc<Cache>> {
        if !self.enabled {
            return None;
        }
        let resource = resource_prefix(prefix)?;
        let (cache, new) = {
            let mut caches = lock(&self.by_prefix);
            match caches.get(resource) {
                Some(cache) => (cache.clone(), false),
                None => {
                    let cache = Cache::start(self.shared.clone(), resource.to_string(), false);
                    caches.insert(resource.to_string(), cache.clone());
                    (cache, true)
                }
            }
        };
        // A cache started with the server is waited for while it lists (at
        // the start, or again after losing its etcd watch), as
        // kube-apiserver's cacher holds requests until it is ready: sent
        // on to etcd, a watch from before its window would be accepted.
        if new || (cache.eager && *cache.revision.borrow() == 0) {
            let mut ready = cache.revision.subscribe();
            let _ = tokio::time::timeout(FIRST_SYNC, ready.wait_for(|rev| *rev > 0)).await;
        }
        Some(cache)
    }
}

struct Watcher {
    prefix: String,
    after: Revision,
    tx: mpsc::Sender<Result<Event>>,
}

#[derive(Default)]
struct State {
    /// Whether the cache holds the resource (false while it lists).
    ready: bool,
    /// The revision the cache is current to.
    revision: Revision,
    /// key -> (mod revision, value)
    objects: BTreeMap<String, (Revision, Arc<Stored>)>,
    /// The latest events, oldest first.
    window: VecDeque<Event>,
    /// Every event after this revision is in the window.
    oldest: Revision,
    watchers: Vec<Watcher>,
}

pub(super) struct Cache {
    /// The resource's prefix, `/registry/<resource>/`.
    prefix: String,
    /// Started with the server (see [`Caches::start`]): a watch from
    /// before its window is too old, not sent on to etcd.
    eager: bool,
    state: Mutex<State>,
    /// The revision the cache is current to; 0 while it is not ready.
    revision: watch::Sender<Revision>,
    /// Asks the cache's task for a progress notification from etcd.
    progress: Notify,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Cache {
    fn start(shared: Arc<Shared>, prefix: String, eager: bool) -> Arc<Cache> {
        let cache = Arc::new(Cache {
            prefix,
            eager,
            state: Mutex::new(State::default()),
            revision: watch::channel(0).0,
            progress: Notify::new(),
            task: Mutex::new(None),
        });
        let task = tokio::spawn(run(Arc::downgrade(&cache), shared));
        *lock(&cache.task) = Some(task);
        cache
    }

    /// Every object under `prefix` as the cache holds them now, and the
    /// revision they are as of; None while the cache is not ready.
    pub(super) fn snapshot(&self, prefix: &str) -> Option<(Vec<KeyValue>, Revision)> {
        let state = lock(&self.state);
        if !state.ready {
            return None;
        }
        let items = state
            .objects
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(key, (rev, value))| KeyValue {
                key: key.clone(),
                value: value.clone(),
                mod_revision: *rev,
            })
            .collect();
        Some((items, state.revision))
    }

    /// A consistent list: the objects under `prefix` once the cache has
    /// caught up with etcd's current revision; None if it has not within
    /// [`CATCH_UP`] (the caller reads etcd).
    pub(super) async fn list(
        &self,
        shared: &Shared,
        prefix: &str,
    ) -> Result<Option<(Vec<KeyValue>, Revision)>> {
        let current = current_revision(shared, &self.prefix).await?;
        // Without progress in order, only the cache's own events show how
        // far it is: current already, or read etcd at once.
        let within = if shared.may_request_progress() {
            CATCH_UP
        } else {
            Duration::ZERO
        };
        if self
            .caught_up(current, within, shared.may_request_progress())
            .await
        {
            Ok(self.snapshot(prefix))
        } else {
            tracing::info!(prefix = %self.prefix, current, "the watch cache is behind etcd: listing from etcd");
            Ok(None)
        }
    }

    /// Waits until the cache is current to `revision`, asking etcd for
    /// progress notifications meanwhile.
    async fn caught_up(&self, revision: Revision, within: Duration, ask: bool) -> bool {
        let mut rx = self.revision.subscribe();
        if *rx.borrow_and_update() >= revision {
            return true;
        }
        let wait = async {
            loop {
                if *rx.borrow_and_update() >= revision {
                    return;
                }
                if ask {
                    self.progress.notify_one();
                }
                // etcd answers a progress request only once every watcher
                // on the stream is in sync: ask again if it did not.
                let _ = tokio::time::timeout(Duration::from_millis(100), rx.changed()).await;
            }
        };
        tokio::time::timeout(within, wait).await.is_ok()
    }

    /// The changes under `prefix` after `after`, replayed from the window
    /// and then live, with the cache's revision as their progress; None
    /// when the cache is not ready, or `after` is before the window of a
    /// cache made lazily: the caller watches etcd. From before the window
    /// of a cache started with the server: [`StoreError::Compacted`]
    /// (kube-apiserver's cacher's "too old resource version").
    pub(super) fn watch(&self, prefix: &str, after: Revision) -> Result<Option<ProgressWatch>> {
        let mut state = lock(&self.state);
        if !state.ready {
            return Ok(None);
        }
        if after < state.oldest {
            if !self.eager {
                return Ok(None);
            }
            return Err(StoreError::Compacted {
                requested: after,
                oldest: state.oldest,
            });
        }
        let replay: Vec<Event> = state
            .window
            .iter()
            .filter(|e| e.revision > after && e.key.starts_with(prefix))
            .cloned()
            .collect();
        let (tx, rx) = mpsc::channel(replay.len() + WATCHER_BUFFER);
        for event in replay {
            let _ = tx.try_send(Ok(event));
        }
        state.watchers.push(Watcher {
            prefix: prefix.to_string(),
            after,
            tx,
        });
        // Subscribed under the state's lock: every revision it shows from
        // now on is one whose events were sent to this watcher first.
        let progress = self.revision.subscribe();
        Ok(Some(ProgressWatch {
            events: Box::pin(ReceiverStream::new(rx)),
            progress,
        }))
    }

    /// Whether anyone watches the cache (its progress is worth asking for).
    fn watched(&self) -> bool {
        let mut state = lock(&self.state);
        state.watchers.retain(|w| !w.tx.is_closed());
        !state.watchers.is_empty()
    }

    /// Takes a fresh listing: ends every watcher (their clients watch
    /// again, from the window that starts here or from etcd).
    fn reset(&self, items: Vec<KeyValue>, revision: Revision) {
        let mut state = lock(&self.state);
        *state = State {
            ready: true,
            revision,
            objects: items
                .into_iter()
                .map(|kv| (kv.key, (kv.mod_revision, kv.value)))
                .collect(),
            window: VecDeque::new(),
            oldest: revision,
            watchers: Vec::new(),
        };
        drop(state);
        self.revision.send_replace(revision);
    }

    /// The cache stops serving until it has listed again.
    fn unready(&self) {
        let mut state = lock(&self.state);
        state.ready = false;
        state.watchers.clear();
        state.window.clear();
        state.objects.clear();
        drop(state);
        self.revision.send_replace(0);
    }

    /// Applies one etcd watch response's events, then moves the cache's
    /// revision to `progress` (a notification's) if it is later.
    fn apply(
        &self,
        shared: &Shared,
        events: &[etcd_client::Event],
        progress: Revision,
    ) -> Result<()> {
        let mut state = lock(&self.state);
        for event in events {
            let kv = event
                .kv()
                .ok_or_else(|| StoreError::Backend("etcd sent an event without its key".into()))?;
            let key = shared.bosun_key(kv.key())?;
            let revision = kv.mod_revision() as u64;
            let event = match event.event_type() {
                EtcdEventType::Put => {
                    let value = Stored::new(kv.value());
                    let old = state.objects.insert(key.clone(), (revision, value.clone()));
                    Event {
                        revision,
                        kind: if old.is_some() {
                            EventType::Modified
                        } else {
                            EventType::Added
                        },
                        key,
                        value,
                        prev: old.map(|(_, v)| v),
                    }
                }
                EtcdEventType::Delete => match state.objects.remove(&key) {
                    Some((_, old)) => Event {
                        revision,
                        kind: EventType::Deleted,
                        key,
                        value: old.clone(),
                        prev: Some(old),
                    },
                    // Not in the cache: nothing any reader has seen.
                    None => continue,
                },
            };
            state.revision = state.revision.max(revision);
            state.watchers.retain(|w| {
                if event.revision <= w.after || !event.key.starts_with(&w.prefix) {
                    return !w.tx.is_closed();
                }
                // A full buffer ends the watcher: its stream ends.
                w.tx.try_send(Ok(event.clone())).is_ok()
            });
            if state.window.len() == WINDOW {
                if let Some(gone) = state.window.pop_front() {
                    state.oldest = gone.revision;
                }
            }
            state.window.push_back(event);
        }
        state.revision = state.revision.max(progress);
        let revision = state.revision;
        drop(state);
        self.revision.send_if_modified(|r| {
            let moved = *r != revision;
            *r = revision;
            moved
        });
        Ok(())
    }
}

/// etcd's current revision, with one linearizable read of one key (the
/// resource's prefix itself, which holds no object).
async fn current_revision(shared: &Shared, prefix: &str) -> Result<Revision> {
    let key = shared.key(prefix)?;
    // Sent again if its member is down or dies with it in flight.
    let resp = super::reading(|| {
        let (mut kv, key) = (shared.kv.clone(), key.clone());
        async move { kv.get(key, Some(GetOptions::new().with_keys_only())).await }
    })
    .await
    .map_err(etcd_error)?;
    Ok(shared.seen(resp.header()))
}

/// The cache's task: lists, watches from the listing on, and starts over
/// when the watch fails; ends with the cache.
async fn run(cache: std::sync::Weak<Cache>, shared: Arc<Shared>) {
    loop {
        let Some(this) = cache.upgrade() else { return };
        let result = follow(&this, &shared).await;
        this.unready();
        drop(this);
        if let Err(e) = result {
            tracing::warn!(error = %e, "the watch cache lost its etcd watch; listing again");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn follow(cache: &Cache, shared: &Shared) -> Result<()> {
    let (items, revision) = list_range(shared, &cache.prefix, None, None)
        .await
        .map_err(etcd_error)?;
    let key = shared.key(&cache.prefix)?;
    let options = WatchOptions::new()
        .with_range(range_end(&key))
        .with_start_revision(revision as i64 + 1)
        .with_progress_notify();
    let stream = shared
        .watch
        .clone()
        .watch(key, Some(options))
        .await
        .map_err(etcd_error)?;
    let (mut requests, mut responses) = stream.split();
    cache.reset(items, revision);
    let mut ticker = tokio::time::interval(shared.progress_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let resp = tokio::select! {
            _ = cache.progress.notified() => {
                requests.request_progress().await.map_err(etcd_error)?;
                continue;
            }
            // The watchers' bookmarks: one request per cache and interval,
            // however many watch it.
            _ = ticker.tick() => {
                if cache.watched() && shared.may_request_progress() {
                    requests.request_progress().await.map_err(etcd_error)?;
                }
                continue;
            }
            m = responses.message() => m.map_err(etcd_error)?,
        };
        let Some(resp) = resp else {
            return Err(StoreError::Backend("etcd ended the watch".into()));
        };
        if resp.compact_revision() != 0 {
            return Err(StoreError::Compacted {
                requested: cache.revision.borrow().to_owned(),
                oldest: resp.compact_revision() as u64,
            });
        }
        if resp.canceled() {
            return Err(StoreError::Backend(format!(
                "etcd cancelled the watch: {}",
                resp.cancel_reason()
            )));
        }
        let header = shared.seen(resp.header());
        // A response without events is a progress notification (every
        // event up to its revision has been sent), except the one that
        // says the watch was created.
        let progress = if resp.events().is_empty() && !resp.created() {
            header
        } else {
            0
        };
        cache.apply(shared, resp.events(), progress)?;
    }
}

#[cfg(test)]
mod tests {
    use super::resource_prefix;

    #[test]
    fn prefixes_map_to_their_resource() {
        assert_eq!(resource_prefix("/registry/pods/"), Some("/registry/pods/"));
        assert_eq!(
            resource_prefix("/registry/pods/ns/"),
            Some("/registry/pods/")
        );
        assert_eq!(
            resource_prefix("/registry/pods/ns/x"),
            Some("/registry/pods/")
        );
        assert_eq!(
            resource_prefix("/registry/deployments.apps/a/"),
            Some("/registry/deployments.apps/")
        );
        for wider in ["", "/registry/", "/registry/pods", "/reg", "/other/pods/"] {
            assert_eq!(resource_prefix(wider), None, "{wider}");
        }
    }
}
