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
//! ([`compact::maybe_compact`]). A consistent copy of the whole store at one
//! revision, for snapshots, is [`EmbeddedStore::copy_to`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, RwLock, RwLockReadGuard};
use std::thread;

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use tokio::sync::{broadcast, oneshot};
use tokio_stream::wrappers::ReceiverStream;

use super::{Event, EventStream, KeyValue, ProgressWatch, Result, Revision, Store, StoreError};

mod codec;
mod compact;
mod mirror;
mod writer;

use codec::{decode_event, event_key};
use mirror::Mirror;
use writer::write_loop;

/// key -> [mod_revision: u64 BE][json]
const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
/// revision -> encoded event
const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
/// "revision" (latest write), "compacted" (history holds revisions after it)
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// redb's page cache. Reads are answered from the [`Mirror`]; the file is
/// read by writes (the compare-and-swap of the key written), by watches
/// resuming from history and by snapshots, which need little of it cached.
/// redb's default (1 GiB) would hold a second copy of every object.
const CACHE_SIZE: usize = 16 << 20;

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
    /// Every object, as of the last commit (gets and lists read it).
    mirror: Mirror,
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
        let db = Database::builder()
            .set_cache_size(CACHE_SIZE)
            .create(path)
            .map_err(backend)?;
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
        let mirror = Mirror::load(&db.begin_read().map_err(backend)?, revision)?;

        let (events, _) = broadcast::channel(4096);
        let shared = Arc::new(Shared {
            db: RwLock::new(db),
            path,
            revision: AtomicU64::new(revision),
            mirror,
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

/// How many events of its prefix a watch decodes from the history at a
/// time while it catches up (from the revision it was asked for, or after
/// falling behind the live feed). Each decoded event is a fresh copy of
/// its value and previous value, so this bounds what a watch that is
/// behind holds: reading all the history at once cost every lagging watch
/// a copy of every change kept (20,000 by default), which under load added
/// up to gigabytes.
const HISTORY_BATCH: usize = 64;

/// A batch of history read by [`Shared::read_history`].
struct HistoryBatch {
    /// The events of the prefix, in revision order.
    events: Vec<Event>,
    /// The last revision looked at (events of other keys included).
    scanned_to: Revision,
    /// Whether the history goes on after `scanned_to`.
    more: bool,
}

impl Shared {
    /// Up to `max` events after revision `after` whose key starts with
    /// `prefix`; events of other keys are skipped without being decoded.
    fn read_history(&self, after: Revision, prefix: &str, max: usize) -> Result<HistoryBatch> {
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
        let mut batch = HistoryBatch {
            events: Vec::new(),
            scanned_to: after,
            more: false,
        };
        for entry in history.range(after + 1..).map_err(backend)? {
            if batch.events.len() == max {
                batch.more = true;
                break;
            }
            let (rev, raw) = entry.map_err(backend)?;
            let (rev, raw) = (rev.value(), raw.value());
            let corrupt = || backend(format!("corrupt event at revision {rev}"));
            if event_key(raw)
                .ok_or_else(corrupt)?
                .starts_with(prefix.as_bytes())
            {
                batch
                    .events
                    .push(decode_event(rev, raw).ok_or_else(corrupt)?);
            }
            batch.scanned_to = rev;
        }
        Ok(batch)
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

    /// Drops the history up to `revision`, as etcd's compaction does: a
    /// watch from before it fails with [`StoreError::Compacted`]. (The
    /// writer trims the history by length; this is for the store's
    /// conformance tests, which compact at a revision of their choosing.)
    #[cfg(test)]
    pub(crate) fn compact_to(&self, revision: Revision) -> Result<()> {
        let db = self.shared.db();
        let txn = db.begin_write().map_err(backend)?;
        {
            let mut events = txn.open_table(EVENTS).map_err(backend)?;
            events.retain(|rev, _| rev > revision).map_err(backend)?;
            let mut meta = txn.open_table(META).map_err(backend)?;
            meta.insert("compacted", revision).map_err(backend)?;
        }
        txn.commit().map_err(backend)
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
        Ok(self.shared.mirror.get(key))
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)> {
        Ok(self.shared.mirror.list(prefix))
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
        Ok(self.watch_with_progress(prefix, after).await?.events)
    }

    /// The watch's progress is the last revision its task has looked at,
    /// of any key (every write is broadcast, so it moves with the writes
    /// elsewhere), published once that revision's event, if it is the
    /// prefix's, is in the stream.
    async fn watch_with_progress(&self, prefix: &str, after: Revision) -> Result<ProgressWatch> {
        // Subscribe before reading history so that nothing committed in
        // between is missed; duplicates are skipped by revision.
        let mut live = self.shared.events.subscribe();
        let first = self.shared.read_history(after, prefix, HISTORY_BATCH)?;
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event>>(256);
        let (progress, progress_rx) = tokio::sync::watch::channel(after);
        let prefix = prefix.to_string();
        let shared = self.shared.clone();
        tokio::spawn(async move {
            let mut last = after;
            let mut history = Some(first);
            loop {
                // Catch up from the history, a batch at a time.
                while let Some(batch) = history.take() {
                    for event in batch.events {
                        if event.revision <= last {
                            continue;
                        }
                        last = event.revision;
                        if tx.send(Ok(event)).await.is_err() {
                            return;
                        }
                    }
                    last = last.max(batch.scanned_to);
                    progress.send_replace(last);
                    if batch.more {
                        match shared.read_history(last, &prefix, HISTORY_BATCH) {
                            Ok(next) => history = Some(next),
                            Err(e) => {
                                let _ = tx.send(Err(e)).await;
                                return;
                            }
                        }
                    }
                }
                let event = tokio::select! {
                    _ = tx.closed() => return,
                    e = live.recv() => e,
                };
                let mut lagged = false;
                match event {
                    Ok(event) => {
                        // This event and every other one already there,
                        // then the progress once: each `send_replace`
                        // takes the channel's locks whether anyone waits
                        // or not, and in a burst of writes every watch
                        // (of every resource) has many events waiting.
                        let mut next = Some(event);
                        while let Some(event) = next.take() {
                            if event.revision > last {
                                last = event.revision;
                                if event.key.starts_with(&prefix)
                                    && tx.send(Ok((*event).clone())).await.is_err()
                                {
                                    return;
                                }
                            }
                            match live.try_recv() {
                                Ok(more) => next = Some(more),
                                Err(broadcast::error::TryRecvError::Lagged(_)) => lagged = true,
                                Err(_) => {}
                            }
                        }
                        progress.send_replace(last);
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => lagged = true,
                    Err(broadcast::error::RecvError::Closed) => return,
                }
                if lagged {
                    // Fell behind the live feed: catch up from history.
                    match shared.read_history(last, &prefix, HISTORY_BATCH) {
                        Ok(batch) => history = Some(batch),
                        Err(e) => {
                            let _ = tx.send(Err(e)).await;
                            return;
                        }
                    }
                }
            }
        });
        Ok(ProgressWatch {
            events: Box::pin(ReceiverStream::new(rx)),
            progress: progress_rx,
        })
    }

    fn current_revision(&self) -> Revision {
        self.shared.revision.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests;
