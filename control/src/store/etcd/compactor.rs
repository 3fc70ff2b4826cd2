//! Periodic compaction of etcd's history (`--etcd-compaction-interval`),
//! as kube-apiserver's compactor: each tick compacts up to the revision
//! the previous tick saw, so that watches can resume from anything in the
//! last interval. The ticks of every API server on the same etcd take
//! turns through etcd's `compact_rev_key` (the key kube-apiserver uses):
//! a tick whose compare-and-swap on its version fails leaves the
//! compaction to the server that won, and compaction is etcd-wide anyway.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{CompactionOptions, Compare, CompareOp, Txn, TxnOp, TxnOpResponse};

use super::{etcd_error, Shared};
use crate::store::{Result, Revision};

/// The key the API servers sharing an etcd take turns on (kube-apiserver's).
const COMPACT_REV_KEY: &str = "compact_rev_key";

pub(super) async fn run(shared: Arc<Shared>, interval: Duration) {
    // The version of compact_rev_key this server last saw, and the
    // revision to compact to next.
    let mut version = 0i64;
    let mut revision: Revision = 0;
    loop {
        tokio::time::sleep(interval).await;
        match tick(&shared, version, revision).await {
            Ok((v, r)) => (version, revision) = (v, r),
            Err(e) => tracing::warn!(error = %e, "compacting etcd"),
        }
    }
}

/// One tick: claims this turn by moving `compact_rev_key` on from
/// `version`, and if the claim holds compacts up to `revision`. Returns
/// the key's version and the revision to compact to next time.
async fn tick(shared: &Shared, version: i64, revision: Revision) -> Result<(i64, Revision)> {
    let txn = Txn::new()
        .when([Compare::version(COMPACT_REV_KEY, CompareOp::Equal, version)])
        .and_then([TxnOp::put(COMPACT_REV_KEY, revision.to_string(), None)])
        .or_else([TxnOp::get(COMPACT_REV_KEY, None)]);
    let resp = shared.kv.clone().txn(txn).await.map_err(etcd_error)?;
    // Not taken as the store's revision: the key lies outside the
    // prefix, so no watch of the store's would ever deliver it.
    let current = resp.header().map_or(0, |h| h.revision().max(0) as u64);
    if !resp.succeeded() {
        // Another server's turn: follow its version.
        let theirs = resp.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.version()),
            _ => None,
        });
        return Ok((theirs.unwrap_or(0), current));
    }
    if revision != 0 {
        compact(shared, revision).await?;
        tracing::info!(revision, "compacted etcd");
    }
    Ok((version + 1, current))
}

/// Compacts etcd's history up to `revision` (a compaction already at or
/// past it is no failure).
pub(super) async fn compact(shared: &Shared, revision: Revision) -> Result<()> {
    match shared
        .kv
        .clone()
        .compact(revision as i64, Some(CompactionOptions::new()))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if super::is_compacted(&e) => Ok(()),
        Err(e) => Err(etcd_error(e)),
    }
}
