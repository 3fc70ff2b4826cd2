use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::*;
use crate::toolkit::testing::TestApi;

fn fast() -> LeaderElectionOptions {
    LeaderElectionOptions {
        enabled: true,
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
    }
}

async fn lease(api: &TestApi) -> LeaseSpec {
    api.api::<Lease>(Some(NAMESPACE))
        .get("kube-scheduler")
        .await
        .unwrap()
        .spec
        .unwrap()
}

#[tokio::test]
async fn the_first_candidate_creates_the_lease_and_the_second_waits() {
    let api = TestApi::start().await;
    let mut a = LeaderElector::new(api.client.clone(), SCHEDULER_LEASE, "host_a", fast());
    let mut b = LeaderElector::new(api.client.clone(), SCHEDULER_LEASE, "host_b", fast());
    assert!(a.try_acquire_or_renew().await.unwrap());
    let first = lease(&api).await;
    assert_eq!(first.holder_identity.as_deref(), Some("host_a"));
    assert_eq!(first.lease_transitions, Some(0));
    assert_eq!(first.lease_duration_seconds, Some(2));
    assert!(first.acquire_time.is_some());
    assert!(!b.try_acquire_or_renew().await.unwrap());
    // A renewal keeps acquireTime and the transitions, moves renewTime.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(a.try_acquire_or_renew().await.unwrap());
    let renewed = lease(&api).await;
    assert_eq!(renewed.acquire_time, first.acquire_time);
    assert_eq!(renewed.lease_transitions, Some(0));
    assert!(renewed.renew_time > first.renew_time);
    // b has just seen the record change: still not its turn.
    assert!(!b.try_acquire_or_renew().await.unwrap());
}

#[tokio::test]
async fn a_lease_no_longer_renewed_is_taken_over_after_its_duration() {
    let api = TestApi::start().await;
    let mut a = LeaderElector::new(api.client.clone(), SCHEDULER_LEASE, "host_a", fast());
    let mut b = LeaderElector::new(api.client.clone(), SCHEDULER_LEASE, "host_b", fast());
    assert!(a.try_acquire_or_renew().await.unwrap());
    assert!(!b.try_acquire_or_renew().await.unwrap());
    let seen = Instant::now();
    while !b.try_acquire_or_renew().await.unwrap() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        seen.elapsed() >= Duration::from_secs(2),
        "taken after {:?}, before the lease ran out",
        seen.elapsed()
    );
    let taken = lease(&api).await;
    assert_eq!(taken.holder_identity.as_deref(), Some("host_b"));
    assert_eq!(taken.lease_transitions, Some(1));
    // The old holder, back, finds it held.
    assert!(!a.try_acquire_or_renew().await.unwrap());
}

struct CountedTerm(Arc<AtomicUsize>);

/// How many terms an elector has started and stopped.
struct Terms {
    started: Arc<AtomicUsize>,
    stopped: Arc<AtomicUsize>,
}

impl Terms {
    /// Runs `elector` until `stop` says so, counting its terms.
    fn run(
        elector: LeaderElector,
        stop: watch::Receiver<bool>,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let terms = Terms {
            started: Arc::new(AtomicUsize::new(0)),
            stopped: Arc::new(AtomicUsize::new(0)),
        };
        let (s1, s2) = (terms.started.clone(), terms.stopped.clone());
        let running = tokio::spawn(elector.run(stop, move || {
            let (s1, s2) = (s1.clone(), s2.clone());
            async move {
                s1.fetch_add(1, Ordering::SeqCst);
                CountedTerm(s2)
            }
        }));
        (terms, running)
    }

    async fn wait_started(&self, what: &str) {
        crate::toolkit::testing::eventually(what, Duration::from_secs(10), || async {
            (self.started.load(Ordering::SeqCst) == 1).then_some(())
        })
        .await;
    }
}

impl Term for CountedTerm {
    async fn stop(self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn stopping_ends_the_term_and_releases_the_lease_for_the_next_at_once() {
    let api = TestApi::start().await;
    let (stop, rx) = watch::channel(false);
    let a = LeaderElector::new(api.client.clone(), SCHEDULER_LEASE, "host_a", fast());
    let (terms, running) = Terms::run(a, rx);
    terms.wait_started("a leads").await;
    let mut b = LeaderElector::new(api.client.clone(), SCHEDULER_LEASE, "host_b", fast());
    assert!(!b.try_acquire_or_renew().await.unwrap());
    stop.send(true).unwrap();
    running.await.unwrap();
    assert_eq!(terms.stopped.load(Ordering::SeqCst), 1);
    let released = lease(&api).await;
    assert_eq!(released.holder_identity, None);
    assert_eq!(released.lease_duration_seconds, Some(1));
    // No waiting for the lease duration: b takes it on its next try.
    assert!(b.try_acquire_or_renew().await.unwrap());
    assert_eq!(lease(&api).await.lease_transitions, Some(1));
}

#[tokio::test]
async fn a_holder_that_cannot_renew_stops_its_term_and_campaigns_again() {
    let api = TestApi::start().await;
    let (_stop, rx) = watch::channel(false);
    let a = LeaderElector::new(api.client.clone(), SCHEDULER_LEASE, "host_a", fast());
    let (terms, _running) = Terms::run(a, rx);
    terms.wait_started("a leads").await;
    // Someone else writes itself in as the holder (as a candidate that
    // took over while a was cut off would).
    let leases = api.api::<Lease>(Some(NAMESPACE));
    let mut l = leases.get(SCHEDULER_LEASE).await.unwrap();
    l.spec.as_mut().unwrap().holder_identity = Some("host_b".into());
    l.metadata.managed_fields = None;
    leases
        .replace(SCHEDULER_LEASE, &PostParams::default(), &l)
        .await
        .unwrap();
    crate::toolkit::testing::eventually("a stops leading", Duration::from_secs(10), || async {
        (terms.stopped.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    assert_eq!(
        lease(&api).await.holder_identity.as_deref(),
        Some("host_b"),
        "the loser wrote over the new holder"
    );
}

#[test]
fn the_flags_are_checked_as_upstream() {
    assert!(LeaderElectionOptions::default().validate().is_ok());
    let bad = LeaderElectionOptions {
        renew_deadline: Duration::from_secs(20),
        ..Default::default()
    };
    assert!(bad.validate().unwrap_err().contains("lease-duration"));
    assert!(identity().contains('_'));
}

#[tokio::test]
async fn a_candidate_follows_the_lease_and_takes_it_the_moment_it_runs_out() {
    // Tries 2-4.4 s apart: by polling alone, b would see a's last renewal
    // and the lease running out up to that much late.
    let slow = LeaderElectionOptions {
        enabled: true,
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_millis(2900),
        retry_period: Duration::from_secs(2),
    };
    let api = TestApi::start().await;
    let mut a = LeaderElector::new(api.client.clone(), SCHEDULER_LEASE, "host_a", slow.clone());
    assert!(a.try_acquire_or_renew().await.unwrap());
    let (led_tx, mut led) = tokio::sync::mpsc::unbounded_channel();
    let (_stop, rx) = watch::channel(false);
    let b = LeaderElector::new(api.client.clone(), SCHEDULER_LEASE, "host_b", slow);
    tokio::spawn(b.run(rx, move || {
        let led_tx = led_tx.clone();
        async move {
            led_tx.send(Instant::now()).unwrap();
            CountedTerm(Arc::new(AtomicUsize::new(0)))
        }
    }));
    // a renews every 300 ms, then is gone (as after a SIGKILL) before b's
    // second try (at least 2 s after its first, made as it started): a
    // candidate that only polled would see the last renewal over a
    // second late, and take over that much later.
    let mut last = Instant::now();
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(a.try_acquire_or_renew().await.unwrap());
        last = Instant::now();
    }
    let taken = tokio::time::timeout(Duration::from_secs(20), led.recv())
        .await
        .expect("b never took the lease")
        .unwrap();
    let after = taken.duration_since(last);
    assert!(
        after >= Duration::from_millis(2800) && after <= Duration::from_millis(3700),
        "b took the lease {after:?} after a's last renewal, not when its 3 s ran out"
    );
    assert_eq!(lease(&api).await.holder_identity.as_deref(), Some("host_b"));
}
