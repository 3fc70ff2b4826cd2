//! The `Store` trait's conformance tests, run against every backend: the
//! embedded store (in memory) and etcd (a throwaway member started per
//! test, skipped with the reason printed only when etcd is not installed).
//! Each test is one function taking a fresh, empty [`Subject`]; the
//! `conformance!` macro runs all of them for one backend.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};

use super::{Event, EventStream, EventType, Revision, Store, StoreError};

/// A fresh store, how to compact its history, and whatever must live as
/// long as it (etcd's process and dir).
pub(super) struct Subject {
    pub store: Arc<dyn Store>,
    compact: Box<dyn Fn(Revision) -> BoxFuture<'static, ()> + Send + Sync>,
    _keep: Box<dyn Any + Send>,
}

impl Subject {
    async fn compact(&self, revision: Revision) {
        (self.compact)(revision).await
    }
}

pub(super) async fn embedded() -> Option<Subject> {
    let store = Arc::new(super::EmbeddedStore::in_memory(super::StoreOptions::default()).unwrap());
    let compacting = store.clone();
    Some(Subject {
        store,
        compact: Box::new(move |rev| {
            let store = compacting.clone();
            Box::pin(async move { store.compact_to(rev).unwrap() })
        }),
        _keep: Box::new(()),
    })
}

/// An etcd store on its own member, with `prefix` as `--etcd-prefix`.
pub(super) async fn etcd_with(
    etcd: &bosun_test_support::etcd::Etcd,
    prefix: &str,
) -> Arc<super::EtcdStore> {
    let options = super::EtcdOptions {
        endpoints: vec![etcd.endpoint()],
        ca_file: None,
        cert_file: None,
        key_file: None,
        prefix: prefix.into(),
        compaction_interval: Duration::ZERO,
        watch_cache: true,
        progress_interval: Duration::from_millis(200),
    };
    Arc::new(
        super::EtcdStore::connect(&options, Duration::from_secs(10))
            .await
            .expect("connecting to the test's etcd"),
    )
}

pub(super) async fn etcd() -> Option<Subject> {
    let etcd = bosun_test_support::etcd::Etcd::start()?;
    let store = etcd_with(&etcd, "/registry").await;
    let compacting = store.clone();
    Some(Subject {
        store,
        compact: Box::new(move |rev| {
            let store = compacting.clone();
            Box::pin(async move { store.compact(rev).await.unwrap() })
        }),
        _keep: Box::new(etcd),
    })
}

/// The next event, within a generous time on a loaded machine.
async fn next(stream: &mut EventStream) -> Event {
    tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("an event within 20 s")
        .expect("the stream goes on")
        .expect("an event, not an error")
}

pub(super) async fn create_get_update_delete_with_conflicts(s: Subject) {
    let store = s.store;
    let key = "/registry/pods/a/x";
    assert!(store.get(key).await.unwrap().is_none());
    let r1 = store.create(key, b"1".to_vec()).await.unwrap();
    assert!(matches!(
        store.create(key, b"2".to_vec()).await,
        Err(StoreError::AlreadyExists(k)) if k == key
    ));
    let r2 = store.update(key, r1, b"2".to_vec()).await.unwrap();
    assert!(r2 > r1);
    match store.update(key, r1, b"3".to_vec()).await {
        Err(StoreError::Conflict {
            key: k,
            expected,
            actual,
        }) => assert_eq!((k.as_str(), expected, actual), (key, r1, r2)),
        other => panic!("a stale update: {other:?}"),
    }
    let kv = store.get(key).await.unwrap().unwrap();
    assert_eq!(
        (kv.key.as_str(), &kv.value[..], kv.mod_revision),
        (key, &b"2"[..], r2)
    );
    assert!(matches!(
        store.delete(key, r1).await,
        Err(StoreError::Conflict { actual, .. }) if actual == r2
    ));
    let r3 = store.delete(key, r2).await.unwrap();
    assert!(r3 > r2);
    assert!(store.get(key).await.unwrap().is_none());
    assert!(store.current_revision() >= r3);
    // Gone keys: neither updated (nor created by an update) nor deleted.
    assert!(matches!(
        store.update(key, r2, b"4".to_vec()).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.update(key, 0, b"4".to_vec()).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.delete(key, r2).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(store.get(key).await.unwrap().is_none());
    // And created again, anew.
    let r4 = store.create(key, b"5".to_vec()).await.unwrap();
    assert!(r4 > r3);
}

pub(super) async fn list_by_prefix_at_a_revision(s: Subject) {
    let store = s.store;
    let mut revs = HashMap::new();
    for key in [
        "/registry/pods/a/1",
        "/registry/pods/b/2",
        "/registry/podsx/a/3",
        "/registry/nodes/n",
    ] {
        revs.insert(
            key,
            store.create(key, key.as_bytes().to_vec()).await.unwrap(),
        );
    }
    let last = revs["/registry/nodes/n"];
    let (items, rev) = store.list("/registry/pods/").await.unwrap();
    let keys: Vec<_> = items.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, ["/registry/pods/a/1", "/registry/pods/b/2"]);
    for kv in &items {
        assert_eq!(kv.mod_revision, revs[kv.key.as_str()]);
        assert_eq!(&kv.value[..], kv.key.as_bytes());
    }
    assert_eq!(rev, last, "a list is consistent with the latest write");
    let (items, _) = store.list("/registry/pods/b/").await.unwrap();
    assert_eq!(items.len(), 1);
    let (items, _) = store.list("").await.unwrap();
    assert_eq!(items.len(), 4, "the empty prefix lists every key");
    let (items, _) = store.list("/registry/secrets/").await.unwrap();
    assert!(items.is_empty());
    // More keys than one page of a backend's reads.
    let many: Vec<String> = (0..1100)
        .map(|i| format!("/registry/configmaps/m/{i:05}"))
        .collect();
    for chunk in many.chunks(100) {
        futures::future::try_join_all(chunk.iter().map(|k| store.create(k, b"{}".to_vec())))
            .await
            .unwrap();
    }
    let (items, rev) = store.list("/registry/configmaps/").await.unwrap();
    let keys: Vec<_> = items.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(keys, many);
    assert_eq!(rev, store.current_revision());
}

pub(super) async fn watch_from_a_revision_with_previous_values(s: Subject) {
    let store = s.store;
    let key = "/registry/pods/a/1";
    let r1 = store.create(key, b"a".to_vec()).await.unwrap();
    let r2 = store.update(key, r1, b"b".to_vec()).await.unwrap();
    store
        .create("/registry/nodes/n", b"n".to_vec())
        .await
        .unwrap();
    let r3 = store.delete(key, r2).await.unwrap();

    // From before the create: everything under the prefix, in order.
    let mut all = store.watch("/registry/pods/", r1 - 1).await.unwrap();
    let e = next(&mut all).await;
    assert_eq!(
        (e.kind, e.revision, &e.value[..]),
        (EventType::Added, r1, &b"a"[..])
    );
    assert_eq!(e.key, key);
    assert!(e.prev.is_none());
    let e = next(&mut all).await;
    assert_eq!(
        (e.kind, e.revision, &e.value[..]),
        (EventType::Modified, r2, &b"b"[..])
    );
    assert_eq!(e.prev.as_deref().map(|p| &p[..]), Some(&b"a"[..]));
    let e = next(&mut all).await;
    assert_eq!((e.kind, e.revision), (EventType::Deleted, r3));
    assert_eq!(&e.value[..], b"b", "a delete carries the last value");
    assert_eq!(e.prev.as_deref().map(|p| &p[..]), Some(&b"b"[..]));

    // From the update on: only what came after it.
    let mut later = store.watch("/registry/pods/", r2).await.unwrap();
    let e = next(&mut later).await;
    assert_eq!((e.kind, e.revision), (EventType::Deleted, r3));

    // Then live, on both, and nothing from another prefix in between.
    let r4 = store
        .create("/registry/pods/b/2", b"c".to_vec())
        .await
        .unwrap();
    for stream in [&mut all, &mut later] {
        let e = next(stream).await;
        assert_eq!(
            (e.kind, e.revision, e.key.as_str()),
            (EventType::Added, r4, "/registry/pods/b/2")
        );
    }
    // A watch of one key (as port-forward's of its pod).
    let mut one = store.watch("/registry/pods/b/2", r4).await.unwrap();
    let r5 = store
        .update("/registry/pods/b/2", r4, b"d".to_vec())
        .await
        .unwrap();
    let e = next(&mut one).await;
    assert_eq!((e.kind, e.revision), (EventType::Modified, r5));
    assert!(store.current_revision() >= r5);
}

pub(super) async fn watch_after_compaction_is_refused(s: Subject) {
    let key = "/registry/configmaps/a/c";
    let mut rev = s.store.create(key, b"0".to_vec()).await.unwrap();
    let first = rev;
    for i in 1..10 {
        rev = s
            .store
            .update(key, rev, format!("{i}").into_bytes())
            .await
            .unwrap();
    }
    let compacted_at = rev - 3;
    s.compact(compacted_at).await;
    match s.store.watch("/registry/configmaps/", first).await {
        Err(StoreError::Compacted { requested, oldest }) => {
            assert_eq!(requested, first);
            assert!(
                oldest > first,
                "oldest {oldest} after the requested {first}"
            );
        }
        Ok(_) => panic!("a watch from a compacted revision was accepted"),
        Err(e) => panic!("a watch from a compacted revision: {e}"),
    }
    // From the compaction on, the history is there.
    let mut stream = s
        .store
        .watch("/registry/configmaps/", compacted_at)
        .await
        .unwrap();
    let e = next(&mut stream).await;
    assert_eq!(e.revision, compacted_at + 1);
    assert_eq!(e.prev.as_deref().map(|p| p.to_vec()), Some(b"6".to_vec()));
    // Lists and gets are untouched.
    let kv = s.store.get(key).await.unwrap().unwrap();
    assert_eq!((&kv.value[..], kv.mod_revision), (&b"9"[..], rev));
}

/// A watch's progress moves on with the writes to other prefixes, and
/// never past an event it has not yet put into its stream: once it shows
/// a revision, every change under the prefix up to it is ready to read.
/// For one resource's prefix (the etcd store's watch cache) and for every
/// key (etcd's own watch).
pub(super) async fn watch_progress_moves_with_writes_elsewhere(s: Subject) {
    let store = s.store;
    let start = store
        .create("/registry/podtemplates/a/t", b"0".to_vec())
        .await
        .unwrap();
    for (i, prefix) in ["/registry/podtemplates/", ""].into_iter().enumerate() {
        // From the latest write: nothing to replay.
        let from = store.current_revision().max(start);
        let mut watch = store.watch_with_progress(prefix, from).await.unwrap();
        assert!(*watch.progress.borrow() <= from);
        let mut written = Vec::new();
        for round in 0..3 {
            let node = format!("/registry/nodes/n{i}-{round}");
            let elsewhere = store.create(&node, b"n".to_vec()).await.unwrap();
            written.push((node, elsewhere));
            let key = format!("/registry/podtemplates/a/t{i}-{round}");
            let here = store.create(&key, b"t".to_vec()).await.unwrap();
            written.push((key, here));
            let node = format!("/registry/nodes/m{i}-{round}");
            let elsewhere = store.create(&node, b"m".to_vec()).await.unwrap();
            written.push((node, elsewhere));
            // Reaches the last write, though not under the watched prefix
            // when that is one resource's.
            let progress = tokio::time::timeout(
                Duration::from_secs(20),
                watch.progress.wait_for(|p| *p >= elsewhere),
            )
            .await
            .unwrap_or_else(|_| panic!("{prefix:?}: no progress to {elsewhere} within 20 s"))
            .map(|p| *p)
            .expect("the watch goes on");
            // Every change up to it is in the stream already.
            let mut ready = Vec::new();
            while let Some(Some(event)) = watch.events.next().now_or_never() {
                ready.push(event.expect("an event, not an error"));
            }
            let wanted: Vec<_> = written
                .drain(..)
                .filter(|(key, _)| key.starts_with(prefix))
                .collect();
            let got: Vec<_> = ready.iter().map(|e| (e.key.clone(), e.revision)).collect();
            assert_eq!(got, wanted, "{prefix:?} at progress {progress}");
        }
    }
}

pub(super) async fn concurrent_updates_compare_and_swap(s: Subject) {
    let key = "/registry/configmaps/a/counter";
    s.store.create(key, b"0".to_vec()).await.unwrap();
    const WRITERS: usize = 6;
    const EACH: usize = 15;
    let conflicts = futures::future::join_all((0..WRITERS).map(|_| {
        let store = s.store.clone();
        async move {
            let mut conflicts = 0;
            for _ in 0..EACH {
                loop {
                    let kv = store.get(key).await.unwrap().unwrap();
                    let n: usize = std::str::from_utf8(&kv.value).unwrap().parse().unwrap();
                    match store
                        .update(key, kv.mod_revision, (n + 1).to_string().into_bytes())
                        .await
                    {
                        Ok(_) => break,
                        Err(StoreError::Conflict { actual, .. }) => {
                            assert!(actual > kv.mod_revision);
                            conflicts += 1;
                        }
                        Err(e) => panic!("updating the counter: {e}"),
                    }
                }
            }
            conflicts
        }
    }))
    .await;
    let kv = s.store.get(key).await.unwrap().unwrap();
    assert_eq!(
        std::str::from_utf8(&kv.value).unwrap(),
        (WRITERS * EACH).to_string(),
        "no increment lost ({} conflicts retried)",
        conflicts.iter().sum::<usize>()
    );
}

pub(super) async fn large_values(s: Subject) {
    let store = s.store;
    // 1 MiB each (under etcd's default 1.5 MiB request limit); the list of
    // all of them is larger than gRPC's default 4 MiB message.
    let value = |i: u8| -> Vec<u8> {
        (0..1 << 20)
            .map(|j: u32| b'a' + ((j as u8) ^ i) % 26)
            .collect()
    };
    let mut watch = store
        .watch("/registry/secrets/", store.current_revision())
        .await
        .unwrap();
    for i in 0..6u8 {
        store
            .create(&format!("/registry/secrets/a/{i}"), value(i))
            .await
            .unwrap();
    }
    for i in 0..6u8 {
        let e = next(&mut watch).await;
        assert_eq!(e.key, format!("/registry/secrets/a/{i}"));
        assert!(
            e.value[..] == value(i)[..],
            "the watched value {i} is whole"
        );
    }
    let kv = store.get("/registry/secrets/a/3").await.unwrap().unwrap();
    assert!(kv.value[..] == value(3)[..]);
    let (items, _) = store.list("/registry/secrets/").await.unwrap();
    assert_eq!(items.len(), 6);
    for (i, kv) in items.iter().enumerate() {
        assert!(
            kv.value[..] == value(i as u8)[..],
            "the listed value {i} is whole"
        );
    }
}

/// Runs every conformance test against one backend, each on a fresh
/// store from `$open` (an async fn returning `Option<Subject>`; None
/// skips, having said why).
macro_rules! conformance {
    ($open:path) => {
        conformance!(@tests $open;
            create_get_update_delete_with_conflicts,
            list_by_prefix_at_a_revision,
            watch_from_a_revision_with_previous_values,
            watch_after_compaction_is_refused,
            watch_progress_moves_with_writes_elsewhere,
            concurrent_updates_compare_and_swap,
            large_values);
    };
    (@tests $open:path; $($test:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                if let Some(subject) = $open().await {
                    crate::store::conformance::$test(subject).await;
                }
            }
        )*
    };
}

mod embedded {
    conformance!(crate::store::conformance::embedded);
}

mod etcd {
    conformance!(crate::store::conformance::etcd);

    /// Two clusters on one etcd (`--etcd-prefix`) see only their own keys.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn prefixes_keep_clusters_apart() {
        let Some(etcd) = bosun_test_support::etcd::Etcd::start() else {
            return;
        };
        let one = super::etcd_with(&etcd, "/one").await;
        let two = super::etcd_with(&etcd, "/one2").await;
        use crate::store::Store;
        let rev = one
            .create("/registry/pods/a/x", b"1".to_vec())
            .await
            .unwrap();
        let mut watch = two.watch("", rev - 1).await.unwrap();
        two.create("/registry/pods/a/y", b"2".to_vec())
            .await
            .unwrap();
        assert!(two.get("/registry/pods/a/x").await.unwrap().is_none());
        let (items, _) = two.list("").await.unwrap();
        let keys: Vec<_> = items.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(keys, ["/registry/pods/a/y"]);
        let e = super::next(&mut watch).await;
        assert_eq!(
            e.key, "/registry/pods/a/y",
            "the other cluster's write is not seen"
        );
        let (items, _) = one.list("/registry/").await.unwrap();
        assert_eq!(items.len(), 1);
    }
}
