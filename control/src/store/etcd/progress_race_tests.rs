//! A consistent list served by the watch cache must hold every write that
//! finished before the list began, as a list read from etcd does: a
//! client (an informer) lists and then watches from the list's revision,
//! so an object missing from the list and older than that revision is
//! never seen at all (a CertificateSigningRequest no controller approves).
//!
//! The cache decides it is current by asking etcd for a progress
//! notification (`RequestProgress`). etcd before v3.4.31 / v3.5.13 can
//! answer that request ahead of events still queued for the same stream
//! (etcd-io/etcd#15220, #17507); Kubernetes serves consistent lists from
//! its watch cache only on etcd with those fixes and reads etcd
//! otherwise, and so does this store (`requested_progress_in_order`).
//! Debian's etcd-server is 3.4.23. This test writes from a second store
//! (the cache learns of writes only from its etcd watch) while large
//! writes keep events queued, and lists right after each write, whichever
//! way the store answers. Before the version check it did not fail here
//! in 400 rounds (the race needs the answer to overtake that very event);
//! it guards the guarantee the flake in `agent/tests/hollow.rs` on etcd
//! looked like a breach of.

use std::time::Duration;

use crate::store::conformance::etcd_with;
use crate::store::Store;

const PREFIX: &str = "/registry/certificatesigningrequests/";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_list_right_after_a_write_holds_it_while_others_stream_in() {
    let Some(etcd) = bosun_test_support::etcd::Etcd::start() else {
        return;
    };
    let (cached, other) = (
        etcd_with(&etcd, "/registry").await,
        etcd_with(&etcd, "/registry").await,
    );
    // The cache exists (and follows etcd) before the writes.
    cached.list(PREFIX).await.unwrap();
    // Large writes keep events queued between etcd and the cache (gRPC
    // flow control), where a progress answer can overtake them.
    let busy = {
        let other = other.clone();
        tokio::spawn(async move {
            for i in 0u64.. {
                let key = format!("{PREFIX}busy-{}", i % 8);
                let value = vec![b'b'; 256 << 10];
                match other.get(&key).await.unwrap() {
                    Some(kv) => {
                        let _ = other.update(&key, kv.mod_revision, value).await;
                    }
                    None => {
                        let _ = other.create(&key, value).await;
                    }
                }
            }
        })
    };
    let rounds: usize = std::env::var("BOSUN_PROGRESS_RACE_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(100);
    let mut failure = None;
    for round in 0..rounds {
        let key = format!("{PREFIX}csr-{round:04}");
        let written = other.create(&key, b"x".to_vec()).await.unwrap();
        let (items, listed_at) = tokio::time::timeout(Duration::from_secs(20), cached.list(PREFIX))
            .await
            .expect("a list within 20 s")
            .unwrap();
        if !items.iter().any(|kv| kv.key == key) {
            failure = Some(format!(
                "round {round}: the consistent list at revision {listed_at} misses {key}, \
                 written at revision {written} before the list began"
            ));
            break;
        }
    }
    busy.abort();
    if let Some(failure) = failure {
        panic!("{failure}");
    }
}
