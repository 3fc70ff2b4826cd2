//! Reads across a change of etcd's leader. A linearizable read waits for
//! a read index from the leader; when the leader dies, the reads waiting
//! on the survivors fail with etcd's "leader changed" as soon as a new
//! leader is elected, before anything was read. The store sends them
//! again, so killing one member of three changes nothing a client sees
//! (issue 27; CI once saw a ConfigMap create fail with "etcdserver:
//! leader changed" in `several_servers.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_test_support::etcd::EtcdCluster;

use super::{EtcdOptions, EtcdStore};
use crate::store::Store;

const PREFIX: &str = "/registry/configmaps/default/";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_go_on_while_the_members_elect_a_new_leader() {
    let Some(mut etcd) = EtcdCluster::start(3) else {
        return;
    };
    let options = EtcdOptions {
        endpoints: EtcdOptions::parse_endpoints(&etcd.store_url()).unwrap(),
        ca_file: None,
        cert_file: None,
        key_file: None,
        prefix: "/registry".into(),
        compaction_interval: Duration::ZERO,
        watch_cache: false,
        progress_interval: Duration::from_secs(1),
    };
    let store = Arc::new(
        EtcdStore::connect(&options, Duration::from_secs(10))
            .await
            .unwrap(),
    );
    let key = format!("{PREFIX}kept");
    store.create(&key, b"{}".to_vec()).await.unwrap();

    // Readers running through the kill: gets and lists, both linearizable.
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (store, stop, key) = (store.clone(), stop.clone(), key.clone());
            tokio::spawn(async move {
                let (mut reads, mut failures) = (0, Vec::new());
                while !stop.load(Ordering::SeqCst) {
                    match store.get(&key).await {
                        Ok(Some(_)) => reads += 1,
                        Ok(None) => failures.push("the key was not found".to_string()),
                        Err(e) => failures.push(e.to_string()),
                    }
                    match store.list_uncached(PREFIX).await {
                        Ok((items, _)) if items.len() == 1 => reads += 1,
                        Ok((items, _)) => failures.push(format!("{} items listed", items.len())),
                        Err(e) => failures.push(e.to_string()),
                    }
                }
                (reads, failures)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let leader = etcd.leader().expect("a leader");
    etcd.kill(leader);
    let killed = Instant::now();
    // Until the survivors have a new leader, then a second more.
    let elected = loop {
        if let Some(new) = etcd.leader() {
            break new;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "no new leader 30 s after member {leader} was killed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!(
        "member {leader} killed; member {elected} leads after {:?}",
        killed.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::SeqCst);

    let mut total = 0;
    for reader in readers {
        let (reads, failures) = reader.await.unwrap();
        assert!(
            failures.is_empty(),
            "reads failed across the leader change: {failures:?}"
        );
        total += reads;
    }
    println!("{total} reads, none failed");
    assert!(total > 0);
}
