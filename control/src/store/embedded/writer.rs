//! The single writer thread: takes the queued writes, applies them in one durable
//! transaction (group commit), trims the history, announces the events, and compacts the
//! file when the history has turned over and nothing is waiting.

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};

use redb::ReadableTable;

use super::codec::{decode_object, encode_event, encode_object};
use super::compact::{maybe_compact, Compaction};
use super::{backend, Op, Shared, StoreOptions, WriteRequest, EVENTS, META, OBJECTS};
use crate::store::{Event, EventType, KeyValue, Result, Revision, StoreError, Stored};

/// Most writes one transaction takes from the queue.
const MAX_BATCH: usize = 512;

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
                value: Stored::new(value),
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
                value: Stored::new(value),
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
                value: Stored::new(&prev.value[..]),
                prev: Some(prev.value),
            })
        }
    }
}

/// The events a batch made, each write's own outcome, in order, and how
/// many events it trimmed from the history.
type Committed = (Vec<Event>, Vec<Result<Revision>>, u64);

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
                    events.push(event);
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

pub(super) fn write_loop(
    shared: Arc<Shared>,
    queue: mpsc::Receiver<WriteRequest>,
    options: StoreOptions,
) {
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
            Ok((mut events, outcomes, trimmed)) => {
                trimmed_since += trimmed;
                if let Some(last) = events.last().map(|e| e.revision) {
                    shared.mirror.apply(&mut events, last);
                    shared.revision.store(last, Ordering::SeqCst);
                }
                for event in events {
                    // An error only means that nobody is watching.
                    let _ = shared.events.send(Arc::new(event));
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
