//! The embedded store on a real file: revisions, watches across a reopen, history trimming and
//! compaction, copies, group commit.

use std::time::Instant;

use futures::StreamExt;

use super::*;
use crate::store::EventType;

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
    assert_eq!(&kv.value[..], b"2");
    assert_eq!(kv.mod_revision, r2);
    assert!(matches!(
        store.delete("/registry/pods/a/x", r1).await,
        Err(StoreError::Conflict { .. })
    ));
    store.delete("/registry/pods/a/x", r2).await.unwrap();
    assert!(store.get("/registry/pods/a/x").await.unwrap().is_none());
}

/// A watch that starts far behind reads the history a batch at a time,
/// decoding only its own prefix's events (what it holds at once is one
/// batch), and still gets every one of them, in order, then live ones.
#[tokio::test]
async fn a_watch_far_behind_catches_up_a_batch_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 10_000);
    let n = HISTORY_BATCH * 2 + 5;
    for i in 0..n {
        let node = format!("/registry/nodes/n{i}");
        store.create(&node, b"n".to_vec()).await.unwrap();
        let pod = format!("/registry/pods/a/p{i}");
        store.create(&pod, b"p".to_vec()).await.unwrap();
    }
    let batch = store
        .shared
        .read_history(0, "/registry/pods/", HISTORY_BATCH)
        .unwrap();
    assert_eq!(batch.events.len(), HISTORY_BATCH);
    assert!(batch.more);
    assert!(batch
        .events
        .iter()
        .all(|e| e.key.starts_with("/registry/pods/")));

    let mut watch = store.watch("/registry/pods/", 0).await.unwrap();
    async fn next(watch: &mut EventStream) -> Event {
        tokio::time::timeout(std::time::Duration::from_secs(10), watch.next())
            .await
            .expect("the watch stalled")
            .expect("the watch ended")
            .unwrap()
    }
    for i in 0..n {
        assert_eq!(next(&mut watch).await.key, format!("/registry/pods/a/p{i}"));
    }
    store
        .create("/registry/nodes/live", b"n".to_vec())
        .await
        .unwrap();
    store
        .create("/registry/pods/a/live", b"p".to_vec())
        .await
        .unwrap();
    assert_eq!(next(&mut watch).await.key, "/registry/pods/a/live");
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
    assert_eq!((e1.kind, &e1.value[..]), (EventType::Added, &b"a"[..]));
    let e2 = watch.next().await.unwrap().unwrap();
    assert_eq!((e2.kind, &e2.value[..]), (EventType::Modified, &b"b"[..]));
    assert_eq!(e2.prev.as_deref().map(|p| &p[..]), Some(&b"a"[..]));
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

/// A list, a get and the next event share one copy of each write's bytes
/// (so what the API derives from them is made once).
#[tokio::test]
async fn readers_of_one_write_share_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 100);
    let r1 = store
        .create("/registry/pods/a/x", b"1".to_vec())
        .await
        .unwrap();
    let mut watch = store.watch("/registry/pods/", r1).await.unwrap();
    let (listed, rev) = store.list("/registry/pods/").await.unwrap();
    assert_eq!(rev, r1);
    let got = store.get("/registry/pods/a/x").await.unwrap().unwrap();
    assert!(Arc::ptr_eq(&listed[0].value, &got.value));

    let r2 = store
        .update("/registry/pods/a/x", r1, b"2".to_vec())
        .await
        .unwrap();
    let modified = watch.next().await.unwrap().unwrap();
    assert!(Arc::ptr_eq(modified.prev.as_ref().unwrap(), &got.value));
    let (listed, rev) = store.list("/registry/pods/").await.unwrap();
    assert_eq!(rev, r2);
    assert!(Arc::ptr_eq(&listed[0].value, &modified.value));

    store.delete("/registry/pods/a/x", r2).await.unwrap();
    let deleted = watch.next().await.unwrap().unwrap();
    assert_eq!(&deleted.value[..], b"2");
    // Encoded at the delete's revision: a value of its own.
    assert!(!Arc::ptr_eq(&deleted.value, &modified.value));
    assert!(store.list("/registry/pods/").await.unwrap().0.is_empty());
}
