//! The embedded store: one redb file under the data dir.
//!
//! Writes go through a single writer thread that commits whatever is
//! queued in one durable transaction (group commit): every acknowledged
//! write has been fsynced, and concurrent clients share the fsync instead
//! of queueing behind one each. The change history lives in the same file
//! (table `events`, bounded), so a watch can resume from a revision across
//! a restart of the process.
//!
//! Trimming the history frees pages inside the file but never shrinks it;
//! once the history has turned over and more than half of the file is
//! free, the writer compacts it at a moment when no write is waiting
//! ([`maybe_compact`]). A consistent copy of the whole store at one
//! revision, for snapshots, is [`EmbeddedStore::copy_to`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, RwLock, RwLockReadGuard};
use std::thread;
use std::time::Instant;

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use tokio::sync::{broadcast, oneshot};
use tokio_stream::wrappers::ReceiverStream;

use super::{Event, EventStream, EventType, KeyValue, Result, Revision, Store, StoreError};

/// key -> [mod_revision: u64 BE][json]
const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
/// revision -> encoded event
const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
/// "revision" (latest write), "compacted" (history holds revisions after it)
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// Most writes one transaction takes from the queue.
const MAX_BATCH: usize = 512;

#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// How many past events are kept for watches to resume from.
    pub history: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions { history: 20_000 }
    }
}

enum Op {
    Create {
        key: String,
        value: Vec<u8>,
    },
    Update {
        key: String,
        expected: Revision,
        value: Vec<u8>,
    },
    Delete {
        key: String,
        expected: Revision,
    },
}

struct WriteRequest {
    op: Op,
    reply: oneshot::Sender<Result<Revision>>,
}

struct Shared {
    /// Read-locked to begin a transaction (transactions do not borrow
    /// it); write-locked only by the writer, to compact the file.
    db: RwLock<Database>,
    /// The file, for its size (None in memory).
    path: Option<PathBuf>,
    revision: AtomicU64,
    events: broadcast::Sender<Arc<Event>>,
}

impl Shared {
    fn db(&self) -> RwLockReadGuard<'_, Database> {
        self.db
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn begin_read(&self) -> Result<redb::ReadTransaction> {
        self.db().begin_read().map_err(backend)
    }
}

pub struct EmbeddedStore {
    shared: Arc<Shared>,
    writer: Option<mpsc::Sender<WriteRequest>>,
    writer_thread: Option<thread::JoinHandle<()>>,
}

impl Drop for EmbeddedStore {
    /// Lets the writer finish what is queued and release the file.
    fn drop(&mut self) {
        self.writer.take();
        if let Some(thread) = self.writer_thread.take() {
            let _ = thread.join();
        }
    }
}

fn backend<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl EmbeddedStore {
    /// Opens (or creates) the store file at `path`, readable by its owner
    /// alone (it holds every Secret and token).
    pub fn open(path: &Path, options: StoreOptions) -> Result<Self> {
        bosun::files::make_private(path)
            .map_err(|e| backend(format!("{}: {e}", path.display())))?;
        let db = Database::create(path).map_err(backend)?;
        Self::with_database(db, Some(path.to_path_buf()), options)
    }

    /// Moves the store at `path` (not open elsewhere) `by` revisions on and
    /// marks every revision up to the new one compacted, as `etcdutl
    /// snapshot restore --bump-revision --mark-compacted` does: after a
    /// restore, the revisions clients saw on the old server (some after the
    /// snapshot's) are never handed out again for other writes, and a watch
    /// from any of them gets 410 Gone, so clients list again. Returns the
    /// new revision.
    pub fn bump_revision(path: &Path, by: u64) -> Result<Revision> {
        let db = Database::create(path).map_err(backend)?;
        let txn = db.begin_write().map_err(backend)?;
        let revision = {
            let mut meta = txn.open_table(META).map_err(backend)?;
            let current = meta
                .get("revision")
                .map_err(backend)?
                .map(|v| v.value())
                .unwrap_or(0);
            let next = current.saturating_add(by);
            meta.insert("revision", next).map_err(backend)?;
            meta.insert("compacted", next).map_err(backend)?;
            next
        };
        {
            // The history before it is of no use to anyone now.
            let mut events = txn.open_table(EVENTS).map_err(backend)?;
            events.retain(|_, _| false).map_err(backend)?;
        }
        txn.commit().map_err(backend)?;
        Ok(revision)
    }

    /// A store that lives in memory only, for unit tests of the API and of
    /// its clients (the controllers): the same code as on disk, minus the
    /// file.
    pub fn in_memory(options: StoreOptions) -> Result<Self> {
        let db = Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(backend)?;
        Self::with_database(db, None, options)
    }

    /// A store on a storage backend of the caller's: the power-loss tests'
    /// simulated disk. The same code as on a file, minus the file.
    #[cfg(test)]
    pub(crate) fn on_backend(
        storage: impl redb::StorageBackend,
        options: StoreOptions,
    ) -> Result<Self> {
        let db = Database::builder()
            .create_with_backend(storage)
            .map_err(backend)?;
        Self::with_database(db, None, options)
    }

    fn with_database(db: Database, path: Option<PathBuf>, options: StoreOptions) -> Result<Self> {
        let txn = db.begin_write().map_err(backend)?;
        let revision = {
            let mut meta = txn.open_table(META).map_err(backend)?;
            txn.open_table(OBJECTS).map_err(backend)?;
            txn.open_table(EVENTS).map_err(backend)?;
            let rev = meta.get("revision").map_err(backend)?.map(|v| v.value());
            match rev {
                Some(r) => r,
                None => {
                    meta.insert("revision", 0).map_err(backend)?;
                    meta.insert("compacted", 0).map_err(backend)?;
                    0
                }
            }
        };
        txn.commit().map_err(backend)?;

        let (events, _) = broadcast::channel(4096);
        let shared = Arc::new(Shared {
            db: RwLock::new(db),
            path,
            revision: AtomicU64::new(revision),
            events,
        });
        let (writer, queue) = mpsc::channel();
        let writer_shared = shared.clone();
        let writer_thread = thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || write_loop(writer_shared, queue, options))
            .map_err(backend)?;
        Ok(EmbeddedStore {
            shared,
            writer: Some(writer),
            writer_thread: Some(writer_thread),
        })
    }

    async fn submit(&self, op: Op) -> Result<Revision> {
        let (reply, rx) = oneshot::channel();
        self.writer
            .as_ref()
            .ok_or(StoreError::Closed)?
            .send(WriteRequest { op, reply })
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// The oldest revision a watch can start after.
    pub fn compacted_revision(&self) -> Result<Revision> {
        let txn = self.shared.begin_read()?;
        let meta = txn.open_table(META).map_err(backend)?;
        Ok(meta
            .get("compacted")
            .map_err(backend)?
            .map(|v| v.value())
            .unwrap_or(0))
    }
}

fn decode_object(key: &str, raw: &[u8]) -> KeyValue {
    let (rev, json) = raw.split_at(8);
    KeyValue {
        key: key.to_string(),
        value: Arc::from(json),
        mod_revision: u64::from_be_bytes(rev.try_into().expect("8 bytes")),
    }
}

fn encode_object(rev: Revision, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + value.len());
    out.extend_from_slice(&rev.to_be_bytes());
    out.extend_from_slice(value);
    out
}

fn put_chunk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

fn take_chunk<'a>(raw: &mut &'a [u8]) -> Option<&'a [u8]> {
    if raw.len() < 4 {
        return None;
    }
    let len = u32::from_be_bytes(raw[..4].try_into().ok()?) as usize;
    let chunk = raw.get(4..4 + len)?;
    *raw = &raw[4 + len..];
    Some(chunk)
}

fn encode_event(e: &Event) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + e.key.len() + e.value.len());
    out.push(match e.kind {
        EventType::Added => 0,
        EventType::Modified => 1,
        EventType::Deleted => 2,
    });
    put_chunk(&mut out, e.key.as_bytes());
    put_chunk(&mut out, &e.value);
    if let Some(prev) = &e.prev {
        put_chunk(&mut out, prev);
    }
    out
}

fn decode_event(revision: Revision, raw: &[u8]) -> Option<Event> {
    let (&kind, mut rest) = raw.split_first()?;
    let kind = match kind {
        0 => EventType::Added,
        1 => EventType::Modified,
        2 => EventType::Deleted,
        _ => return None,
    };
    let key = String::from_utf8(take_chunk(&mut rest)?.to_vec()).ok()?;
    let value = Arc::from(take_chunk(&mut rest)?);
    let prev = take_chunk(&mut rest).map(Arc::from);
    Some(Event {
        revision,
        kind,
        key,
        value,
        prev,
    })
}

/// The value at `key`, if it is still at revision `expected` (the
/// compare-and-swap precondition of updates and deletes).
fn current_at(
    objects: &redb::Table<&str, &[u8]>,
    key: &str,
    expected: Revision,
) -> Result<KeyValue, StoreError> {
    let prev = match objects.get(key).map_err(backend)? {
        None => return Err(StoreError::NotFound(key.to_string())),
        Some(raw) => decode_object(key, raw.value()),
    };
    if prev.mod_revision != expected {
        return Err(StoreError::Conflict {
            key: key.to_string(),
            expected,
            actual: prev.mod_revision,
        });
    }
    Ok(prev)
}

/// Applies one write inside the open transaction; returns the event it makes.
fn apply(
    objects: &mut redb::Table<&str, &[u8]>,
    rev: Revision,
    op: Op,
) -> Result<Event, StoreError> {
    match op {
        Op::Create { key, value } => {
            if objects.get(key.as_str()).map_err(backend)?.is_some() {
                return Err(StoreError::AlreadyExists(key));
            }
            objects
                .insert(key.as_str(), encode_object(rev, &value).as_slice())
                .map_err(backend)?;
            Ok(Event {
                revision: rev,
                kind: EventType::Added,
                key,
                value: Arc::from(value),
                prev: None,
            })
        }
        Op::Update {
            key,
            expected,
            value,
        } => {
            let prev = current_at(objects, &key, expected)?;
            objects
                .insert(key.as_str(), encode_object(rev, &value).as_slice())
                .map_err(backend)?;
            Ok(Event {
                revision: rev,
                kind: EventType::Modified,
                key,
                value: Arc::from(value),
                prev: Some(prev.value),
            })
        }
        Op::Delete { key, expected } => {
            let prev = current_at(objects, &key, expected)?;
            objects.remove(key.as_str()).map_err(backend)?;
            Ok(Event {
                revision: rev,
                kind: EventType::Deleted,
                key,
                value: prev.value.clone(),
                prev: Some(prev.value),
            })
        }
    }
}

/// The events a batch made, each write's own outcome, in order, and how
/// many events it trimmed from the history.
type Committed = (Vec<Arc<Event>>, Vec<Result<Revision>>, u64);

/// Applies a batch of writes in one durable transaction; returns the
/// events it made, each write's own outcome, in order, and how many old
/// events it trimmed.
fn commit_batch(shared: &Shared, ops: Vec<Op>, options: &StoreOptions) -> Result<Committed> {
    let txn = shared.db().begin_write().map_err(backend)?;
    let mut events = Vec::with_capacity(ops.len());
    let mut outcomes = Vec::with_capacity(ops.len());
    let mut trimmed = 0;
    {
        let mut objects = txn.open_table(OBJECTS).map_err(backend)?;
        let mut history = txn.open_table(EVENTS).map_err(backend)?;
        let mut meta = txn.open_table(META).map_err(backend)?;
        let mut rev = meta
            .get("revision")
            .map_err(backend)?
            .map(|v| v.value())
            .unwrap_or(0);
        for op in ops {
            match apply(&mut objects, rev + 1, op) {
                Ok(event) => {
                    rev += 1;
                    history
                        .insert(rev, encode_event(&event).as_slice())
                        .map_err(backend)?;
                    events.push(Arc::new(event));
                    outcomes.push(Ok(rev));
                }
                Err(e) => outcomes.push(Err(e)),
            }
        }
        meta.insert("revision", rev).map_err(backend)?;
        let compacted = meta
            .get("compacted")
            .map_err(backend)?
            .map(|v| v.value())
            .unwrap_or(0);
        if rev.saturating_sub(compacted) > options.history {
            let keep_after = rev - options.history;
            history
                .retain_in(..=keep_after, |_, _| false)
                .map_err(backend)?;
            meta.insert("compacted", keep_after).map_err(backend)?;
            trimmed = keep_after - compacted;
        }
    }
    txn.commit().map_err(backend)?;
    Ok((events, outcomes, trimmed))
}

/// The least free space in the file worth compacting for.
const MIN_FREE_TO_COMPACT: u64 = 1 << 20;

/// What [`maybe_compact`] did.
#[derive(Debug, PartialEq, Eq)]
enum Compaction {
    Done {
        before: u64,
        after: u64,
    },
    /// Less than half the file (or under [`MIN_FREE_TO_COMPACT`]) is free,
    /// or the store is in memory.
    NotWorthIt,
    /// A read transaction (a list, a snapshot's copy) is open: later.
    Busy,
}

/// Compacts the file if more than half of it is free. Called by the
/// writer between batches, so no write transaction is open; readers
/// wait for the lock while it runs.
fn maybe_compact(shared: &Shared) -> Result<Compaction> {
    let Some(path) = &shared.path else {
        return Ok(Compaction::NotWorthIt);
    };
    let file_len = || std::fs::metadata(path).map(|m| m.len()).map_err(backend);
    let before = file_len()?;
    let used = {
        let txn = shared.db().begin_write().map_err(backend)?;
        let stats = txn.stats().map_err(backend)?;
        txn.abort().map_err(backend)?;
        stats.allocated_pages() * stats.page_size() as u64
    };
    let free = before.saturating_sub(used);
    if free < MIN_FREE_TO_COMPACT || free < before / 2 {
        return Ok(Compaction::NotWorthIt);
    }
    let started = Instant::now();
    {
        let mut db = shared.db.write().unwrap_or_else(|p| p.into_inner());
        match db.compact() {
            Ok(_) => {}
            Err(redb::CompactionError::TransactionInProgress) => return Ok(Compaction::Busy),
            Err(e) => return Err(backend(e)),
        }
    }
    let after = file_len()?;
    tracing::info!(
        before,
        after,
        millis = started.elapsed().as_millis() as u64,
        "compacted the store file"
    );
    Ok(Compaction::Done { before, after })
}

fn write_loop(shared: Arc<Shared>, queue: mpsc::Receiver<WriteRequest>, options: StoreOptions) {
    // Events trimmed since the file was last looked at for compaction.
    let mut trimmed_since = 0u64;
    // A write taken from the queue to see whether it was empty.
    let mut carried = None;
    loop {
        let first = match carried.take() {
            Some(req) => req,
            None => match queue.recv() {
                Ok(req) => req,
                Err(_) => return,
            },
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(req) => batch.push(req),
                Err(_) => break,
            }
        }
        let (ops, replies): (Vec<Op>, Vec<_>) = batch.into_iter().map(|r| (r.op, r.reply)).unzip();
        match commit_batch(&shared, ops, &options) {
            Ok((events, outcomes, trimmed)) => {
                trimmed_since += trimmed;
                if let Some(last) = events.last() {
                    shared.revision.store(last.revision, Ordering::SeqCst);
                }
                for event in events {
                    // An error only means that nobody is watching.
                    let _ = shared.events.send(event);
                }
                for (reply, outcome) in replies.into_iter().zip(outcomes) {
                    let _ = reply.send(outcome);
                }
            }
            Err(e) => {
                // Nothing in the batch was committed, and every writer hears so.
                tracing::error!(error = %e, "store commit failed");
                for reply in replies {
                    let _ = reply.send(Err(StoreError::Backend(e.to_string())));
                }
            }
        }
        // Once the whole history has turned over, at a moment when no
        // write is waiting.
        if trimmed_since >= options.history.max(1) {
            match queue.try_recv() {
                Ok(req) => carried = Some(req),
                Err(mpsc::TryRecvError::Disconnected) => {}
                Err(mpsc::TryRecvError::Empty) => match maybe_compact(&shared) {
                    // Again after some more trimming.
                    Ok(Compaction::Busy) => trimmed_since = options.history / 2,
                    Ok(_) => trimmed_since = 0,
                    Err(e) => {
                        tracing::warn!(error = %e, "compacting the store file");
                        trimmed_since = 0;
                    }
                },
            }
        }
    }
}

impl Shared {
    fn read_history(&self, after: Revision) -> Result<Vec<Event>> {
        let txn = self.begin_read()?;
        let meta = txn.open_table(META).map_err(backend)?;
        let compacted = meta
            .get("compacted")
            .map_err(backend)?
            .map(|v| v.value())
            .unwrap_or(0);
        if after < compacted {
            return Err(StoreError::Compacted {
                requested: after,
                oldest: compacted,
            });
        }
        let history = txn.open_table(EVENTS).map_err(backend)?;
        let mut out = Vec::new();
        for entry in history.range(after + 1..).map_err(backend)? {
            let (rev, raw) = entry.map_err(backend)?;
            let event = decode_event(rev.value(), raw.value())
                .ok_or_else(|| backend(format!("corrupt event at revision {}", rev.value())))?;
            out.push(event);
        }
        Ok(out)
    }
}

/// Copies every entry of table `def` from one transaction to the other;
/// returns how many there were.
fn copy_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    from: &redb::ReadTransaction,
    to: &redb::WriteTransaction,
    def: TableDefinition<K, V>,
) -> Result<u64> {
    let source = from.open_table(def).map_err(backend)?;
    let mut target = to.open_table(def).map_err(backend)?;
    let mut n = 0;
    for entry in source.iter().map_err(backend)? {
        let (k, v) = entry.map_err(backend)?;
        target.insert(k.value(), v.value()).map_err(backend)?;
        n += 1;
    }
    Ok(n)
}

impl EmbeddedStore {
    /// Writes the whole store (objects, the kept history, the revisions)
    /// as it is at one revision into a new store file at `path`, which
    /// must not exist, while writes go on; returns that revision and how
    /// many objects the copy holds. The copy opens as a store of its own.
    pub fn copy_to(&self, path: &Path) -> Result<(Revision, u64)> {
        use std::os::unix::fs::OpenOptionsExt;
        let txn = self.shared.begin_read()?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| backend(format!("creating {}: {e}", path.display())))?;
        let copy = Database::builder()
            .create_with_backend(redb::backends::FileBackend::new(file).map_err(backend)?)
            .map_err(backend)?;
        let out = copy.begin_write().map_err(backend)?;
        let objects = copy_table(&txn, &out, OBJECTS)?;
        copy_table(&txn, &out, EVENTS)?;
        copy_table(&txn, &out, META)?;
        out.commit().map_err(backend)?;
        let revision = txn
            .open_table(META)
            .map_err(backend)?
            .get("revision")
            .map_err(backend)?
            .map(|v| v.value())
            .unwrap_or(0);
        Ok((revision, objects))
    }

    /// How many events the history holds now.
    pub fn history_len(&self) -> Result<u64> {
        let txn = self.shared.begin_read()?;
        let history = txn.open_table(EVENTS).map_err(backend)?;
        history.len().map_err(backend)
    }
}

#[async_trait::async_trait]
impl Store for EmbeddedStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let txn = self.shared.begin_read()?;
        let objects = txn.open_table(OBJECTS).map_err(backend)?;
        let raw = objects.get(key).map_err(backend)?;
        Ok(raw.map(|raw| decode_object(key, raw.value())))
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)> {
        let txn = self.shared.begin_read()?;
        let meta = txn.open_table(META).map_err(backend)?;
        let revision = meta
            .get("revision")
            .map_err(backend)?
            .map(|v| v.value())
            .unwrap_or(0);
        let objects = txn.open_table(OBJECTS).map_err(backend)?;
        let mut out = Vec::new();
        for entry in objects.range(prefix..).map_err(backend)? {
            let (key, raw) = entry.map_err(backend)?;
            let key = key.value();
            if !key.starts_with(prefix) {
                break;
            }
            out.push(decode_object(key, raw.value()));
        }
        Ok((out, revision))
    }

    async fn create(&self, key: &str, value: Vec<u8>) -> Result<Revision> {
        self.submit(Op::Create {
            key: key.to_string(),
            value,
        })
        .await
    }

    async fn update(&self, key: &str, expected: Revision, value: Vec<u8>) -> Result<Revision> {
        self.submit(Op::Update {
            key: key.to_string(),
            expected,
            value,
        })
        .await
    }

    async fn delete(&self, key: &str, expected: Revision) -> Result<Revision> {
        self.submit(Op::Delete {
            key: key.to_string(),
            expected,
        })
        .await
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<EventStream> {
        // Subscribe before reading history so that nothing committed in
        // between is missed; duplicates are skipped by revision.
        let mut live = self.shared.events.subscribe();
        let history = self.shared.read_history(after)?;
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event>>(256);
        let prefix = prefix.to_string();
        let shared = self.shared.clone();
        tokio::spawn(async move {
            let mut last = after;
            let mut pending = history;
            loop {
                for event in pending.drain(..) {
                    if event.revision <= last {
                        continue;
                    }
                    last = event.revision;
                    if event.key.starts_with(&prefix) && tx.send(Ok(event)).await.is_err() {
                        return;
                    }
                }
                let event = tokio::select! {
                    _ = tx.closed() => return,
                    e = live.recv() => e,
                };
                match event {
                    Ok(event) => pending.push((*event).clone()),
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        // Fell behind the live feed: catch up from history.
                        match shared.read_history(last) {
                            Ok(events) => pending = events,
                            Err(e) => {
                                let _ = tx.send(Err(e)).await;
                                return;
                            }
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(Box::pin(ReceiverStream::new(rx)))
    }

    fn current_revision(&self) -> Revision {
        self.shared.revision.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn open(dir: &Path, history: u64) -> EmbeddedStore {
        EmbeddedStore::open(&dir.join("store.redb"), StoreOptions { history }).unwrap()
    }

    #[tokio::test]
    async fn create_update_delete_with_revisions() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), 100);
        let r1 = store
            .create("/registry/pods/a/x", b"1".to_vec())
            .await
            .unwrap();
        assert!(matches!(
            store.create("/registry/pods/a/x", b"2".to_vec()).await,
            Err(StoreError::AlreadyExists(_))
        ));
        let r2 = store
            .update("/registry/pods/a/x", r1, b"2".to_vec())
            .await
            .unwrap();
        assert!(r2 > r1);
        assert!(matches!(
            store.update("/registry/pods/a/x", r1, b"3".to_vec()).await,
            Err(StoreError::Conflict { .. })
        ));
        let kv = store.get("/registry/pods/a/x").await.unwrap().unwrap();
        assert_eq!(&*kv.value, b"2");
        assert_eq!(kv.mod_revision, r2);
        assert!(matches!(
            store.delete("/registry/pods/a/x", r1).await,
            Err(StoreError::Conflict { .. })
        ));
        store.delete("/registry/pods/a/x", r2).await.unwrap();
        assert!(store.get("/registry/pods/a/x").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn list_by_prefix_is_exact() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), 100);
        for key in [
            "/registry/pods/a/1",
            "/registry/pods/b/2",
            "/registry/podsx/a/3",
        ] {
            store.create(key, b"{}".to_vec()).await.unwrap();
        }
        let (items, rev) = store.list("/registry/pods/").await.unwrap();
        let keys: Vec<_> = items.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(keys, ["/registry/pods/a/1", "/registry/pods/b/2"]);
        assert_eq!(rev, 3);
        let (items, _) = store.list("/registry/pods/b/").await.unwrap();
        assert_eq!(items.len(), 1);
    }

    #[tokio::test]
    async fn watch_replays_then_follows_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let rev = {
            let store = open(dir.path(), 100);
            let r = store
                .create("/registry/pods/a/1", b"a".to_vec())
                .await
                .unwrap();
            store
                .update("/registry/pods/a/1", r, b"b".to_vec())
                .await
                .unwrap();
            store
                .create("/registry/nodes/n", b"n".to_vec())
                .await
                .unwrap();
            r
        };
        let store = open(dir.path(), 100);
        assert_eq!(store.current_revision(), 3);
        let mut watch = store.watch("/registry/pods/", rev - 1).await.unwrap();
        let e1 = watch.next().await.unwrap().unwrap();
        assert_eq!((e1.kind, &*e1.value), (EventType::Added, &b"a"[..]));
        let e2 = watch.next().await.unwrap().unwrap();
        assert_eq!((e2.kind, &*e2.value), (EventType::Modified, &b"b"[..]));
        assert_eq!(e2.prev.as_deref(), Some(&b"a"[..]));
        store
            .delete("/registry/pods/a/1", e2.revision)
            .await
            .unwrap();
        let e3 = watch.next().await.unwrap().unwrap();
        assert_eq!(e3.kind, EventType::Deleted);
        assert_eq!(e3.revision, 4);
    }

    #[tokio::test]
    async fn compacted_revision_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), 5);
        for i in 0..20 {
            store
                .create(&format!("/k/{i}"), b"v".to_vec())
                .await
                .unwrap();
        }
        assert_eq!(store.compacted_revision().unwrap(), 15);
        assert!(store.history_len().unwrap() <= 5);
        assert!(matches!(
            store.watch("/k/", 3).await.err(),
            Some(StoreError::Compacted { requested: 3, .. })
        ));
        let mut watch = store.watch("/k/", 15).await.unwrap();
        assert_eq!(watch.next().await.unwrap().unwrap().revision, 16);
    }

    #[tokio::test]
    async fn the_file_shrinks_once_trimmed_history_frees_most_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.redb");
        let store = open(dir.path(), 200);
        let size = || std::fs::metadata(&path).unwrap().len();
        let big = vec![b'x'; 16 * 1024];
        let revs = futures::future::join_all((0..600).map(|i| {
            let (store, big) = (&store, big.clone());
            async move { store.create(&format!("/big/{i}"), big).await }
        }))
        .await;
        let peak = size();
        futures::future::join_all(revs.into_iter().enumerate().map(|(i, rev)| {
            let store = &store;
            async move { store.delete(&format!("/big/{i}"), rev.unwrap()).await }
        }))
        .await;
        // Small writes turn the history over: the deletes' events, which
        // carry the old values, are trimmed.
        for round in 0..4 {
            futures::future::join_all((0..100).map(|i| {
                let store = &store;
                async move {
                    store
                        .create(&format!("/small/{round}/{i}"), b"v".to_vec())
                        .await
                }
            }))
            .await;
        }
        assert!(
            store.compacted_revision().unwrap() > 1200,
            "history not trimmed"
        );
        let waited = Instant::now();
        let deadline = waited + std::time::Duration::from_secs(10);
        while size() > peak / 4 && Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let after = size();
        eprintln!(
            "store file: {peak} bytes at its peak, {after} after compaction \
             ({:?} after the last write)",
            waited.elapsed()
        );
        assert!(
            after <= peak / 4,
            "the file is {after} bytes, its peak was {peak}: it was not compacted"
        );
        // Still the same store, and writes go on.
        assert_eq!(store.list("/small/").await.unwrap().0.len(), 400);
        assert!(store.list("/big/").await.unwrap().0.is_empty());
        store.create("/after", b"v".to_vec()).await.unwrap();
        drop(store);
        let reopened = open(dir.path(), 200);
        assert_eq!(reopened.list("/small/").await.unwrap().0.len(), 400);
    }

    #[tokio::test]
    async fn copies_are_whole_stores_at_one_revision() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), 100);
        for i in 0..30 {
            store
                .create(&format!("/k/{i}"), format!("{i}").into_bytes())
                .await
                .unwrap();
        }
        let copy_path = dir.path().join("copy.redb");
        assert_eq!(store.copy_to(&copy_path).unwrap(), (30, 30));
        // Never over an existing file.
        assert!(store.copy_to(&copy_path).is_err());
        store.create("/k/later", b"x".to_vec()).await.unwrap();
        let copy = EmbeddedStore::open(&copy_path, StoreOptions { history: 100 }).unwrap();
        assert_eq!(copy.current_revision(), 30);
        let (items, rev) = copy.list("/k/").await.unwrap();
        assert_eq!((items.len(), rev), (30, 30));
        // Its history too: a watch resumes from a revision of the original.
        let mut watch = copy.watch("/k/", 27).await.unwrap();
        assert_eq!(watch.next().await.unwrap().unwrap().key, "/k/27");
    }

    #[tokio::test]
    async fn concurrent_writers_share_commits() {
        // On a disk whose syncs take 2 ms, like a real one's: 200 writers
        // at once must not queue behind 200 syncs.
        let disk = crate::store::power_loss_tests::Disk::with_sync_latency(
            std::time::Duration::from_millis(2),
        );
        let store = Arc::new(
            EmbeddedStore::on_backend(disk.clone(), StoreOptions { history: 10_000 }).unwrap(),
        );
        let before = disk.syncs();
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move { store.create(&format!("/c/{i}"), vec![1]).await })
            })
            .collect();
        let mut revs = Vec::new();
        for t in tasks {
            revs.push(t.await.unwrap().unwrap());
        }
        let syncs = disk.syncs() - before;
        revs.sort();
        revs.dedup();
        assert_eq!(revs.len(), 200, "every write gets its own revision");
        assert_eq!(store.list("/c/").await.unwrap().0.len(), 200);
        assert!(
            syncs <= 20,
            "200 concurrent writes took {syncs} syncs: they do not share commits"
        );
    }
}
