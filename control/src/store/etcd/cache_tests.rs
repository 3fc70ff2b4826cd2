//! The watch cache's own tests, on a throwaway etcd member (skipped, the
//! reason printed, when etcd is not installed). Writes come through a
//! second store on the same etcd, as from another API server, so that the
//! cache can only learn of them from etcd.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use crate::store::conformance::etcd_with;
use crate::store::{Event, EventStream, EventType, Store, StoreError};

async fn next(stream: &mut EventStream) -> Event {
    tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("an event within 20 s")
        .expect("the stream goes on")
        .expect("an event, not an error")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_list_right_after_another_servers_write_sees_it() {
    let Some(etcd) = bosun_test_support::etcd::Etcd::start() else {
        return;
    };
    let (cached, other) = (
        etcd_with(&etcd, "/registry").await,
        etcd_with(&etcd, "/registry").await,
    );
    other
        .create("/registry/pods/a/0", b"0".to_vec())
        .await
        .unwrap();
    // The cache exists (and follows etcd) from the first list on.
    cached.list("/registry/pods/").await.unwrap();
    for i in 1..30 {
        let key = format!("/registry/pods/a/{i:02}");
        let rev = other.create(&key, b"x".to_vec()).await.unwrap();
        // A write to another resource moves etcd's revision past the
        // cache's last event: the list waits for etcd's progress.
        let later = other
            .create(&format!("/registry/nodes/n{i}"), b"n".to_vec())
            .await
            .unwrap();
        let (items, listed_at) = cached.list("/registry/pods/").await.unwrap();
        assert_eq!(items.len(), i + 1, "the list right after write {i} has it");
        assert_eq!(items.last().unwrap().key, key);
        assert_eq!(items.last().unwrap().mod_revision, rev);
        assert!(listed_at >= later, "listed at {listed_at}, before {later}");
    }
    // Served from the cache: the first object's bytes are the ones the
    // cache holds, shared with every stale list (a read of etcd makes
    // new); from etcd where its requested progress may overtake events
    // (before 3.4.31 and 3.5.13, Debian's 3.4.23 among them), as
    // kube-apiserver does.
    let (stale, _) = cached.list_stale("/registry/pods/").await.unwrap();
    let (again, _) = cached.list_stale("/registry/pods/").await.unwrap();
    assert!(Arc::ptr_eq(&stale[0].value, &again[0].value));
    let (items, _) = cached.list("/registry/pods/a/").await.unwrap();
    assert_eq!(
        Arc::ptr_eq(&items[0].value, &stale[0].value),
        cached.requested_progress_in_order(),
        "a consistent list from the cache exactly when etcd's progress is in order"
    );
    let first = stale;
    let (uncached, _) = cached.list_uncached("/registry/pods/").await.unwrap();
    assert!(!Arc::ptr_eq(&uncached[0].value, &first[0].value));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_inside_the_window_are_served_from_it_and_before_it_by_etcd() {
    let Some(etcd) = bosun_test_support::etcd::Etcd::start() else {
        return;
    };
    let (cached, other) = (
        etcd_with(&etcd, "/registry").await,
        etcd_with(&etcd, "/registry").await,
    );
    let key = "/registry/configmaps/a/c";
    let before = other.create(key, b"0".to_vec()).await.unwrap();
    let mut rev = other.update(key, before, b"1".to_vec()).await.unwrap();
    // The cache starts here: its window holds what comes after.
    let (_, start) = cached.list("/registry/configmaps/").await.unwrap();
    assert_eq!(start, rev);
    let mut revs = vec![];
    for i in 2..8 {
        rev = other
            .update(key, rev, format!("{i}").into_bytes())
            .await
            .unwrap();
        revs.push(rev);
    }
    // etcd forgets everything up to the last write: only the cache can
    // replay the window.
    cached.compact(rev).await.unwrap();
    let mut one = cached
        .watch("/registry/configmaps/", revs[1])
        .await
        .unwrap();
    let mut two = cached
        .watch("/registry/configmaps/a/", revs[1])
        .await
        .unwrap();
    for (i, want) in revs[2..].iter().enumerate() {
        let (a, b) = (next(&mut one).await, next(&mut two).await);
        assert_eq!((a.kind, a.revision), (EventType::Modified, *want));
        assert_eq!(&a.value[..], format!("{}", i + 4).as_bytes());
        assert_eq!(
            a.prev.as_deref().map(|p| p.to_vec()),
            Some(format!("{}", i + 3).into_bytes())
        );
        // Each event is made once, for every watcher.
        assert!(Arc::ptr_eq(&a.value, &b.value));
    }
    // Then live, from another server's write.
    let last = other.delete(key, rev).await.unwrap();
    for stream in [&mut one, &mut two] {
        let e = next(stream).await;
        assert_eq!((e.kind, e.revision), (EventType::Deleted, last));
        assert_eq!(&e.value[..], b"7", "a delete carries the last value");
    }
    // Before the window, etcd answers, and it has compacted: 410.
    match cached.watch("/registry/configmaps/", before).await {
        Err(StoreError::Compacted { requested, .. }) => assert_eq!(requested, before),
        Ok(_) => panic!("a watch from before the window and the compaction was accepted"),
        Err(e) => panic!("a watch from before the window: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_before_the_window_of_a_cache_started_with_the_server_is_too_old() {
    let Some(etcd) = bosun_test_support::etcd::Etcd::start() else {
        return;
    };
    let (cached, other) = (
        etcd_with(&etcd, "/registry").await,
        etcd_with(&etcd, "/registry").await,
    );
    let key = "/registry/services/a/s";
    let before = other.create(key, b"0".to_vec()).await.unwrap();
    // The cache starts (as with the server) after that write: its window
    // begins there.
    cached.start_caches(["/registry/services/".to_string()]);
    let (_, start) = cached.list("/registry/services/").await.unwrap();
    assert!(start >= before);
    let after = other.update(key, before, b"1".to_vec()).await.unwrap();
    // etcd still has the history (nothing compacted: its own watch
    // replays it), but the cache refuses at once, as kube-apiserver's
    // cacher does: 410 "too old resource version".
    let mut uncached = cached
        .watch_uncached("/registry/services/", before - 1)
        .await
        .unwrap()
        .events;
    assert_eq!(next(&mut uncached).await.revision, before);
    match cached.watch("/registry/services/", before - 1).await {
        Err(StoreError::Compacted { requested, oldest }) => {
            assert_eq!((requested, oldest), (before - 1, start))
        }
        Ok(_) => panic!("a watch from before the window went on to etcd"),
        Err(e) => panic!("a watch from before the window: {e}"),
    }
    // From the window's start it is served.
    let mut served = cached.watch("/registry/services/", start).await.unwrap();
    let e = next(&mut served).await;
    assert_eq!((e.kind, e.revision), (EventType::Modified, after));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continued_list_reads_at_its_revision_until_compacted() {
    let Some(etcd) = bosun_test_support::etcd::Etcd::start() else {
        return;
    };
    let store = etcd_with(&etcd, "/registry").await;
    let mut revs = vec![];
    for i in 0..4 {
        let key = format!("/registry/secrets/a/{i}");
        revs.push(store.create(&key, b"old".to_vec()).await.unwrap());
    }
    let at = *revs.last().unwrap();
    store
        .update("/registry/secrets/a/3", revs[3], b"new".to_vec())
        .await
        .unwrap();
    store
        .create("/registry/secrets/a/4", b"new".to_vec())
        .await
        .unwrap();
    let (items, rev) = store
        .list_from("/registry/secrets/", "/registry/secrets/a/1\0", Some(at))
        .await
        .unwrap();
    let seen: Vec<_> = items
        .iter()
        .map(|kv| (kv.key.as_str(), &kv.value[..]))
        .collect();
    assert_eq!(
        seen,
        [
            ("/registry/secrets/a/2", &b"old"[..]),
            ("/registry/secrets/a/3", &b"old"[..])
        ],
        "the rest as it was at the first page's revision"
    );
    assert_eq!(rev, at);
    store.compact(at + 1).await.unwrap();
    match store
        .list_from("/registry/secrets/", "/registry/secrets/a/1\0", Some(at))
        .await
    {
        Err(StoreError::Compacted { requested, .. }) => assert_eq!(requested, at),
        other => panic!("a list at a compacted revision: {other:?}"),
    }
    let (items, _) = store
        .list_from("/registry/secrets/", "/registry/secrets/a/1\0", None)
        .await
        .unwrap();
    assert_eq!(items.len(), 3, "the rest as it is now");
}
