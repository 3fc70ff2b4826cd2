//! A cache rebuilt whole on any change: the loop shared by the API
//! server's followers of kinds that change rarely (RBAC's roles and
//! bindings, the webhook configurations, the APIServices), where
//! re-reading everything is simpler than applying each event and costs
//! nothing that matters.

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;

use super::{Result, Revision, Store, StoreError};

/// Calls `reload` (which reads the kinds under `prefixes` and returns the
/// revision it read at), then waits for the first change under any of
/// `prefixes` after that revision, or the watch's end, and reloads again;
/// returns when the store closes. Failures are logged under `what` and
/// retried after a second.
pub async fn reload_on_change<F, Fut>(
    store: &dyn Store,
    prefixes: &[String],
    what: &str,
    mut reload: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Revision>>,
{
    loop {
        let rev = match reload().await {
            Ok(rev) => rev,
            Err(StoreError::Closed) => return,
            Err(e) => {
                tracing::warn!(error = %e, "{what}: reading");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut streams = Vec::with_capacity(prefixes.len());
        for prefix in prefixes {
            match store.watch(prefix, rev).await {
                Ok(s) => streams.push(s),
                Err(StoreError::Closed) => return,
                Err(e) => {
                    tracing::warn!(error = %e, %prefix, "{what}: watching");
                    break;
                }
            }
        }
        if streams.len() < prefixes.len() {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let mut events = futures::stream::select_all(streams);
        match events.next().await {
            Some(Err(StoreError::Closed)) => return,
            Some(_) => {}
            None => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// `e` as an error reading `what`, still [`StoreError::Closed`] when it
/// was, so that a follower stops with the store.
pub fn reading(what: &str, e: StoreError) -> StoreError {
    match e {
        StoreError::Closed => StoreError::Closed,
        e => StoreError::Backend(format!("reading {what}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::store::{EmbeddedStore, StoreOptions};

    /// A write under either followed prefix reloads.
    #[tokio::test]
    async fn reloads_on_a_change_under_a_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(
            EmbeddedStore::open(&dir.path().join("store"), StoreOptions::default()).unwrap(),
        );
        let loads = Arc::new(AtomicU64::new(0));
        let (s, l) = (store.clone(), loads.clone());
        let task = tokio::spawn(async move {
            let prefixes = ["/a/".to_string(), "/b/".to_string()];
            reload_on_change(s.as_ref(), &prefixes, "test", || {
                let (s, l) = (s.clone(), l.clone());
                async move {
                    l.fetch_add(1, Ordering::SeqCst);
                    Ok(s.current_revision())
                }
            })
            .await
        });
        let wait_for = |n: u64| {
            let loads = loads.clone();
            async move {
                for _ in 0..500 {
                    if loads.load(Ordering::SeqCst) >= n {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                panic!("{n} loads expected, saw {}", loads.load(Ordering::SeqCst));
            }
        };
        wait_for(1).await;
        store.create("/b/x", b"1".to_vec()).await.unwrap();
        wait_for(2).await;
        store.create("/a/x", b"1".to_vec()).await.unwrap();
        wait_for(3).await;
        task.abort();
    }
}
