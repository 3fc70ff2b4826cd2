//! A watch on the etcd store: one etcd watch from `after + 1` with the
//! previous values and progress notifications, its events turned into the
//! store's. Its progress ([`ProgressWatch`]) is the revision of etcd's
//! last progress notification (sent once every event before it has been),
//! asked for every `progress_interval`.

use std::sync::Arc;

use etcd_client::{EventType as EtcdEventType, GetOptions, WatchOptions};
use tokio_stream::wrappers::ReceiverStream;

use super::{etcd_error, is_compacted, range_end, Shared};
use crate::store::{Event, EventType, ProgressWatch, Result, Revision, StoreError, Stored};

pub(super) async fn watch(
    shared: Arc<Shared>,
    prefix: &str,
    after: Revision,
) -> Result<ProgressWatch> {
    let key = shared.prefix_key(prefix)?;
    let end = range_end(&key);
    // etcd tells a watch from a compacted revision so only after it is
    // created, with no hurry; a read at that revision tells at once.
    let options = GetOptions::new()
        .with_range(end.clone())
        .with_count_only()
        .with_revision(after as i64 + 1);
    let compacted = match super::reading(|| {
        let (mut kv, key, options) = (shared.kv.clone(), key.clone(), options.clone());
        async move { kv.get(key, Some(options)).await }
    })
    .await
    {
        Ok(_) => false,
        Err(e) if is_compacted(&e) => true,
        // A revision after the latest write: nothing to replay.
        Err(e) if e.to_string().contains("future revision") => false,
        Err(e) => return Err(etcd_error(e)),
    };
    let options = WatchOptions::new()
        .with_range(end)
        .with_start_revision(after as i64 + 1)
        .with_prev_key()
        .with_progress_notify();
    let mut stream = shared
        .watch
        .clone()
        .watch(key, Some(options))
        .await
        .map_err(etcd_error)?;
    if compacted {
        // The watch is cancelled with the compacted revision.
        loop {
            match stream.message().await.map_err(etcd_error)? {
                Some(resp) if resp.compact_revision() != 0 => {
                    return Err(StoreError::Compacted {
                        requested: after,
                        oldest: resp.compact_revision() as u64,
                    })
                }
                Some(resp) if resp.canceled() => {
                    return Err(StoreError::Backend(format!(
                        "etcd cancelled the watch: {}",
                        resp.cancel_reason()
                    )))
                }
                Some(_) => continue,
                None => return Err(StoreError::Backend("etcd ended the watch".into())),
            }
        }
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event>>(256);
    let (progress, progress_rx) = tokio::sync::watch::channel(after);
    let (mut requests, mut stream) = stream.split();
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(shared.progress_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let message = tokio::select! {
                _ = tx.closed() => return,
                m = stream.message() => m,
                _ = ticker.tick() => {
                    // A failed request: the stream's own failure follows.
                    if shared.may_request_progress() {
                        let _ = requests.request_progress().await;
                    }
                    continue;
                }
            };
            let resp = match message {
                Ok(Some(resp)) => resp,
                // etcd (or the connection) ended the watch: so does this
                // one; its reader watches again from its last revision.
                Ok(None) => return,
                Err(e) => {
                    let _ = tx.send(Err(etcd_error(e))).await;
                    return;
                }
            };
            if resp.compact_revision() != 0 {
                let _ = tx
                    .send(Err(StoreError::Compacted {
                        requested: after,
                        oldest: resp.compact_revision() as u64,
                    }))
                    .await;
                return;
            }
            if resp.canceled() {
                let _ = tx
                    .send(Err(StoreError::Backend(format!(
                        "etcd cancelled the watch: {}",
                        resp.cancel_reason()
                    ))))
                    .await;
                return;
            }
            // Events and progress notifications alike move the revision on.
            let header = shared.seen(resp.header());
            if resp.events().is_empty() && !resp.created() {
                // A progress notification: every event up to it was sent.
                progress.send_if_modified(|p| {
                    let moved = header > *p;
                    *p = (*p).max(header);
                    moved
                });
                continue;
            }
            for event in resp.events() {
                let event = match convert(&shared, event) {
                    Ok(event) => event,
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                };
                if tx.send(Ok(event)).await.is_err() {
                    return;
                }
            }
        }
    });
    Ok(ProgressWatch {
        events: Box::pin(ReceiverStream::new(rx)),
        progress: progress_rx,
    })
}

/// One etcd event as the store's: a put whose key was created at its own
/// revision is an add; a delete carries the last value (etcd's previous
/// key-value) as its value.
fn convert(shared: &Shared, event: &etcd_client::Event) -> Result<Event> {
    let kv = event
        .kv()
        .ok_or_else(|| StoreError::Backend("etcd sent an event without its key".into()))?;
    let key = shared.bosun_key(kv.key())?;
    let prev = event.prev_kv().map(|p| Stored::new(p.value()));
    let revision = kv.mod_revision() as u64;
    Ok(match event.event_type() {
        EtcdEventType::Put => Event {
            revision,
            kind: if kv.create_revision() == kv.mod_revision() {
                EventType::Added
            } else {
                EventType::Modified
            },
            key,
            value: Stored::new(kv.value()),
            prev,
        },
        EtcdEventType::Delete => Event {
            revision,
            kind: EventType::Deleted,
            key,
            value: prev.clone().ok_or_else(|| {
                StoreError::Backend(format!(
                    "etcd sent the delete of {} at {revision} without its last value",
                    kv.key_str().unwrap_or("?")
                ))
            })?,
            prev,
        },
    })
}
