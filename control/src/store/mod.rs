//! The store: the narrow interface the API server keeps every object in.
//!
//! It is shaped after etcd's, so that an etcd backend can replace the
//! embedded one: keys are strings like `/registry/<resource>/<ns>/<name>`,
//! values are opaque bytes (JSON here), every write bumps one global
//! revision, updates and deletes are compare-and-swap on the key's
//! revision, and a watch replays every change after a revision that is
//! still inside a bounded history.

#[cfg(test)]
mod conformance;
mod embedded;
mod etcd;
mod follow;
#[cfg(test)]
mod power_loss_tests;

pub use embedded::{EmbeddedStore, StoreOptions};
pub use etcd::{EtcdOptions, EtcdStore};
pub use follow::{reading, reload_on_change};

use std::any::Any;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use futures::stream::BoxStream;

/// One global, monotonically increasing revision. An object's
/// `metadata.resourceVersion` is the revision of its last write.
pub type Revision = u64;

/// The bytes of one write, shared by everyone who reads that write: every
/// list and get that finds it, and every watcher the write's event goes
/// to. Beside the bytes it keeps what its readers derive from them (the
/// API server's decoded labels and fields, where the metadata starts),
/// made by the first reader that needs it and reused by all the others,
/// as kube-apiserver's watch cache keeps each object decoded once however
/// many lists and watches read it. The store never looks at either.
pub struct Stored {
    bytes: Box<[u8]>,
    derived: OnceLock<Box<dyn Any + Send + Sync>>,
}

impl Stored {
    pub fn new(bytes: impl Into<Box<[u8]>>) -> Arc<Stored> {
        Arc::new(Stored {
            bytes: bytes.into(),
            derived: OnceLock::new(),
        })
    }

    /// What readers derive from these bytes, made by `make` the first
    /// time anyone asks for a `T`. A value keeps one derived thing: the
    /// API server's (a reader asking for another type gets its own,
    /// unshared).
    pub fn derived<T: Any + Send + Sync>(&self, make: impl Fn(&[u8]) -> T) -> DerivedRef<'_, T> {
        let kept = self.derived.get_or_init(|| Box::new(make(&self.bytes)));
        match kept.downcast_ref::<T>() {
            Some(t) => DerivedRef::Shared(t),
            None => DerivedRef::Own(make(&self.bytes)),
        }
    }
}

/// A derived value, shared with the other readers of a write or, when the
/// write already keeps a different kind of thing, made for this reader.
pub enum DerivedRef<'a, T> {
    Shared(&'a T),
    Own(T),
}

impl<T> Deref for DerivedRef<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            DerivedRef::Shared(t) => t,
            DerivedRef::Own(t) => t,
        }
    }
}

impl Deref for Stored {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl AsRef<[u8]> for Stored {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl PartialEq for Stored {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for Stored {}

impl fmt::Debug for Stored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::str::from_utf8(&self.bytes) {
            Ok(s) => write!(f, "{s:?}"),
            Err(_) => write!(f, "{:?}", &self.bytes),
        }
    }
}

/// A stored value with the revision it was last written at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Arc<Stored>,
    /// Revision of the write that produced this value.
    pub mod_revision: Revision,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change, as a watch delivers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub revision: Revision,
    pub kind: EventType,
    pub key: String,
    /// The new value; for a delete, the last value the key held (its
    /// bytes, as a value of its own: readers encode it at the revision of
    /// the delete).
    pub value: Arc<Stored>,
    /// The value before the change (for modifications and deletes).
    pub prev: Option<Arc<Stored>>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("key {0} already exists")]
    AlreadyExists(String),
    #[error("key {0} not found")]
    NotFound(String),
    /// The compare-and-swap precondition did not hold.
    #[error("key {key} is at revision {actual}, not {expected}")]
    Conflict {
        key: String,
        expected: Revision,
        actual: Revision,
    },
    /// The requested revision is older than the oldest kept in history.
    #[error("revision {requested} has been compacted; the oldest available is {oldest}")]
    Compacted {
        requested: Revision,
        oldest: Revision,
    },
    #[error("the store is shutting down")]
    Closed,
    #[error("storage error: {0}")]
    Backend(String),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A stream of events; it ends with an error if the watcher falls behind
/// the history that is kept.
pub type EventStream = BoxStream<'static, Result<Event>>;

/// A watch's events, and how far they go: the revision every change under
/// the watched prefix up to which has been put into `events` (those after
/// the revision the watch started from), whatever other keys changed at
/// the revisions in between. A watcher that has taken every event ready
/// in `events` after reading `progress` has seen every change up to it,
/// so it may resume from there (a bookmark's resourceVersion), though its
/// last event is older: on a quiet prefix the progress moves with the
/// writes elsewhere, and a resume from it stays inside the history.
pub struct ProgressWatch {
    pub events: EventStream,
    pub progress: tokio::sync::watch::Receiver<Revision>,
}

/// What the API server needs of a store.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// The value at `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>>;

    /// Every value whose key starts with `prefix`, in key order, with the
    /// revision the listing is consistent with.
    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)>;

    /// As [`Store::list`], but possibly from a cache behind the latest
    /// write (a list with `resourceVersion=0`). (A store that wraps
    /// another must pass this and [`Store::list_from`] on: the defaults
    /// would hide the inner store's own.)
    async fn list_stale(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)> {
        self.list(prefix).await
    }

    /// The values under `prefix` whose keys are `start` or after it, as
    /// they were at `revision` (None: now), with the revision read: a
    /// continued page of a list. Fails with [`StoreError::Compacted`]
    /// once `revision` has been compacted. A store that keeps no past
    /// values (the embedded one) reads them as they are now.
    async fn list_from(
        &self,
        prefix: &str,
        start: &str,
        revision: Option<Revision>,
    ) -> Result<(Vec<KeyValue>, Revision)> {
        let _ = revision;
        let (mut items, rev) = self.list(prefix).await?;
        let first = items.partition_point(|kv| kv.key.as_str() < start);
        items.drain(..first);
        Ok((items, rev))
    }

    /// Stores `value` at a key that must not exist; returns its revision.
    async fn create(&self, key: &str, value: Vec<u8>) -> Result<Revision>;

    /// Replaces the value at `key` if it is still at revision `expected`.
    async fn update(&self, key: &str, expected: Revision, value: Vec<u8>) -> Result<Revision>;

    /// Removes `key` if it is still at revision `expected`; returns the
    /// revision of the delete.
    async fn delete(&self, key: &str, expected: Revision) -> Result<Revision>;

    /// Every change under `prefix` after revision `after`, in order, then
    /// live. Fails with [`StoreError::Compacted`] if `after` is older than
    /// the kept history.
    async fn watch(&self, prefix: &str, after: Revision) -> Result<EventStream>;

    /// As [`Store::watch`], with the watch's progress (see
    /// [`ProgressWatch`]). The default knows of no progress but the
    /// watch's start (a store that wraps another must pass this on).
    async fn watch_with_progress(&self, prefix: &str, after: Revision) -> Result<ProgressWatch> {
        Ok(ProgressWatch {
            events: self.watch(prefix, after).await?,
            progress: tokio::sync::watch::channel(after).1,
        })
    }

    /// The revision of the latest write.
    fn current_revision(&self) -> Revision;
}
