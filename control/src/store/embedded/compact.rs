//! Compacting the store file once trimmed history has freed most of it (redb frees pages but
//! never shrinks the file by itself).

use std::time::Instant;

use super::{backend, Shared};
use crate::store::Result;

/// The least free space in the file worth compacting for.
const MIN_FREE_TO_COMPACT: u64 = 1 << 20;

/// What [`maybe_compact`] did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Compaction {
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
pub(super) fn maybe_compact(shared: &Shared) -> Result<Compaction> {
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
