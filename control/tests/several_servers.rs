//! Several `bosun-control` processes on one etcd, sharing the PKI: the
//! elected scheduler and controller manager hand over at once on SIGTERM,
//! and Services created through both servers at once never share a
//! cluster IP or node port.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use bosun_test_support::etcd::Etcd;
use common::{wait_for, ControlPlane};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, PostParams};

/// The files every control plane of one cluster shares (the cluster CA,
/// the service-account signing key, the front-proxy CA, the admin token),
/// copied from `from` into a new data dir.
fn shared_pki(from: &ControlPlane) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for file in [
        "ca.crt",
        "ca.key",
        "sa.key",
        "front-proxy-ca.crt",
        "front-proxy-ca.key",
        "admin-token",
    ] {
        std::fs::copy(from.data_dir().join(file), dir.path().join(file))
            .unwrap_or_else(|e| panic!("copying {file}: {e}"));
    }
    dir
}

async fn holder(client: &kube::Client, lease: &str) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    leases
        .get_opt(lease)
        .await
        .ok()
        .flatten()?
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

async fn wait_holder(client: &kube::Client, lease: &str, not: Option<&str>) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(h) = holder(client, lease).await {
            if Some(h.as_str()) != not {
                return h;
            }
        }
        assert!(Instant::now() < deadline, "no new holder of {lease}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_both_leases_to_the_other_server_at_once() {
    let Some(etcd) = Etcd::start() else { return };
    let store = etcd.store_url();
    let mut one = ControlPlane::start_with(&["--store", &store]);
    let c1 = one.client().await;
    let first_scheduler = wait_holder(&c1, "kube-scheduler", None).await;
    let first_kcm = wait_holder(&c1, "kube-controller-manager", None).await;
    let two = ControlPlane::start_in(shared_pki(&one), &["--store", &store]);
    let c2 = two.client().await;
    // The second campaigns but does not take a held lease.
    let leases: Api<Lease> = Api::namespaced(c2.clone(), "kube-system");
    let before = leases.get("kube-scheduler").await.unwrap().spec.unwrap();
    assert_eq!(
        before.holder_identity.as_deref(),
        Some(first_scheduler.as_str())
    );
    assert!(
        first_scheduler.contains('_'),
        "holderIdentity is <hostname>_<uuid>: {first_scheduler}"
    );
    wait_for(
        "the second server's log to show it campaigning",
        Duration::from_secs(30),
        || two.log().contains("campaigning").then_some(()),
    );

    let sent = Instant::now();
    one.terminate();
    let scheduler = wait_holder(&c2, "kube-scheduler", Some(&first_scheduler)).await;
    let kcm = wait_holder(&c2, "kube-controller-manager", Some(&first_kcm)).await;
    let took = sent.elapsed();
    println!("both leases handed over {took:?} after SIGTERM");
    assert!(
        took < Duration::from_secs(10),
        "handed over after {took:?}: the lease was not released (15 s lease duration)"
    );
    assert_ne!(scheduler, first_scheduler);
    assert_ne!(kcm, first_kcm);
    let after = leases.get("kube-scheduler").await.unwrap().spec.unwrap();
    assert_eq!(
        after.lease_transitions,
        Some(before.lease_transitions.unwrap_or(0) + 1)
    );
    assert!(two.log().contains("acquired the lease"), "{}", two.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_created_through_two_servers_at_once_never_share_an_ip_or_port() {
    let Some(etcd) = Etcd::start() else { return };
    let store = etcd.store_url();
    // A small range, so that random picks meet often.
    let flags = [
        "--store",
        store.as_str(),
        "--service-cluster-ip-range",
        "10.112.0.0/26",
    ];
    let one = ControlPlane::start_with(&flags);
    let two = ControlPlane::start_in(shared_pki(&one), &flags);
    let clients = [one.client().await, two.client().await];
    let mut creates = Vec::new();
    for i in 0..40 {
        let api: Api<Service> = Api::namespaced(clients[i % 2].clone(), "default");
        creates.push(async move {
            let svc: Service = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("s{i}")},
                "spec": {"type": "NodePort", "ports": [{"port": 80}]},
            }))
            .unwrap();
            api.create(&PostParams::default(), &svc).await
        });
    }
    let created = futures::future::join_all(creates).await;
    let mut ips = HashSet::new();
    let mut ports = HashSet::new();
    for (i, result) in created.into_iter().enumerate() {
        let svc = result.unwrap_or_else(|e| panic!("creating s{i}: {e}"));
        let spec = svc.spec.unwrap();
        let ip = spec.cluster_ip.unwrap();
        let port = spec.ports.unwrap()[0].node_port.unwrap();
        assert!(ips.insert(ip.clone()), "cluster IP {ip} given twice");
        assert!(ports.insert(port), "node port {port} given twice");
    }
    println!("40 Services through two servers: 40 cluster IPs, 40 node ports");
}

/// When a writer's last write was acknowledged.
type LastAck = std::sync::Arc<std::sync::Mutex<Option<Instant>>>;

/// Creates ConfigMaps `<prefix>-<n>` through `client` until `stop`,
/// returning the names the API acknowledged and when, and when writes
/// failed (as through a killed server); `last_ack` follows the last
/// acknowledgement as it comes.
async fn writer(
    client: kube::Client,
    prefix: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    last_ack: LastAck,
) -> (Vec<(String, Instant)>, Vec<(Instant, String)>) {
    use k8s_openapi::api::core::v1::ConfigMap;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut acked = Vec::new();
    let mut failed = Vec::new();
    let mut n = 0;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let name = format!("{prefix}-{n}");
        n += 1;
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}, "data": {"n": n.to_string()},
        }))
        .unwrap();
        let params = PostParams::default();
        let write = api.create(&params, &cm);
        // Failures are recorded with when the write was sent.
        let sent = Instant::now();
        match tokio::time::timeout(Duration::from_secs(10), write).await {
            Ok(Ok(_)) => {
                acked.push((name, Instant::now()));
                *last_ack.lock().unwrap() = Some(Instant::now());
            }
            Ok(Err(e)) => failed.push((sent, e.to_string())),
            Err(_) => failed.push((sent, "timed out".into())),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (acked, failed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_killed_and_an_etcd_member_killed_lose_nothing_acknowledged() {
    use bosun_test_support::etcd::EtcdCluster;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let Some(mut etcd) = EtcdCluster::start(3) else {
        return;
    };
    let store = etcd.store_url();
    let mut one = ControlPlane::start_with(&["--store", &store]);
    let c1 = one.client().await;
    let first_scheduler = wait_holder(&c1, "kube-scheduler", None).await;
    let first_kcm = wait_holder(&c1, "kube-controller-manager", None).await;
    let two = ControlPlane::start_in(shared_pki(&one), &["--store", &store]);
    let three = ControlPlane::start_in(shared_pki(&one), &["--store", &store]);
    let (c2, c3) = (two.client().await, three.client().await);

    let stop = Arc::new(AtomicBool::new(false));
    let last_acks: Vec<LastAck> = (0..3).map(|_| LastAck::default()).collect();
    let writers: Vec<_> = [
        ("one", c1.clone()),
        ("two", c2.clone()),
        ("three", c3.clone()),
    ]
    .into_iter()
    .zip(&last_acks)
    .map(|((name, client), last)| {
        tokio::spawn(writer(
            client,
            format!("w-{name}"),
            stop.clone(),
            last.clone(),
        ))
    })
    .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;

    let killed = Instant::now();
    one.kill9();
    let scheduler = wait_holder(&c2, "kube-scheduler", Some(&first_scheduler)).await;
    let moved_scheduler = killed.elapsed();
    let kcm = wait_holder(&c2, "kube-controller-manager", Some(&first_kcm)).await;
    let moved_kcm = killed.elapsed();
    println!(
        "after SIGKILL of the leader: kube-scheduler to {scheduler} in {moved_scheduler:?}, \
         kube-controller-manager to {kcm} in {moved_kcm:?}"
    );
    // A killed holder cannot release: the others, following the Lease,
    // take it as the 15 s lease from its last renewal (before the kill)
    // runs out; a 2 s retry period of slack for a loaded machine.
    assert!(
        moved_scheduler.max(moved_kcm) < Duration::from_secs(17),
        "the leases took {moved_scheduler:?} / {moved_kcm:?} to move"
    );

    // The member that leads raft: the hardest to lose (reads waiting on
    // the others fail with "leader changed" when a new one is elected,
    // and the store sends them again).
    let etcd_leader = etcd.leader().expect("an etcd leader");
    etcd.kill(etcd_leader);
    let member_killed = Instant::now();
    // Writes through both surviving servers go through again (a write in
    // flight as the member died may wait out the writer's 10 s timeout,
    // and raft elects a new leader first), then a few more seconds of
    // them.
    for (i, name) in [(1, "two"), (2, "three")] {
        for tries in 0.. {
            let last = *last_acks[i].lock().unwrap();
            if last.is_some_and(|at| at > member_killed) {
                break;
            }
            assert!(
                tries < 600,
                "no write through server {name} went through in 60 s after the etcd member died"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::SeqCst);
    let mut acked = Vec::new();
    let mut failures = Vec::new();
    for w in writers {
        let (ok, failed) = w.await.unwrap();
        acked.push(ok);
        failures.push(failed);
    }
    for (i, name) in [(1, "two"), (2, "three")] {
        let after = acked[i]
            .iter()
            .filter(|(_, at)| *at > member_killed)
            .count();
        println!("writes through server {name} after an etcd member was killed: {after}");
        assert!(
            after > 0,
            "no write through server {name} went through after the etcd member died"
        );
        // A write in flight to the member as it died, or sent while
        // raft elects a new leader, may fail (its outcome is unknown to
        // the API server, which says so, as kube-apiserver does); once
        // writes go through again, none may.
        let back = acked[i]
            .iter()
            .map(|(_, at)| *at)
            .find(|at| *at > member_killed)
            .expect("a write acknowledged after the member died");
        let failed: Vec<&String> = failures[i]
            .iter()
            .filter(|(sent, _)| *sent > back)
            .map(|(_, e)| e)
            .collect();
        assert!(
            failed.is_empty(),
            "writes through server {name} failed once an etcd member was down: {failed:?}"
        );
    }
    // Every acknowledged write, read back through a surviving server.
    use k8s_openapi::api::core::v1::ConfigMap;
    let api: Api<ConfigMap> = Api::namespaced(c3.clone(), "default");
    let total: usize = acked.iter().map(Vec::len).sum();
    for (name, _) in acked.iter().flatten() {
        assert!(
            api.get_opt(name).await.unwrap().is_some(),
            "acknowledged ConfigMap {name} is gone"
        );
    }
    println!(
        "{total} acknowledged writes read back (through the killed server: {})",
        acked[0].len()
    );
}
