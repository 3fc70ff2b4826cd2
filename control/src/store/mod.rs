//! The store: the narrow interface the API server keeps every object in.
//!
//! It is shaped after etcd's, so that an etcd backend can replace the
//! embedded one: keys are strings like `/registry/<resource>/<ns>/<name>`,
//! values are opaque bytes (JSON here), every write bumps one global
//! revision, updates and deletes are compare-and-swap on the key's
//! revision, and a watch replays every change after a revision that is
//! still inside a bounded history.

mod embedded;
#[cfg(test)]
mod power_loss_tests;

pub use embedded::{EmbeddedStore, StoreOptions};

use std::sync::Arc;

use futures::stream::BoxStream;

/// One global, monotonically increasing revision. An object's
/// `metadata.resourceVersion` is the revision of its last write.
pub type Revision = u64;

/// A stored value with the revision it was last written at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Arc<[u8]>,
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
    /// The new value; for a delete, the last value the key held.
    pub value: Arc<[u8]>,
    /// The value before the change (for modifications and deletes).
    pub prev: Option<Arc<[u8]>>,
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

/// What the API server needs of a store.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// The value at `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>>;

    /// Every value whose key starts with `prefix`, in key order, with the
    /// revision the listing is consistent with.
    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)>;

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

    /// The revision of the latest write.
    fn current_revision(&self) -> Revision;
}
