//! Leader election through a `coordination.k8s.io/v1` Lease, as
//! client-go's `tools/leaderelection` (the resource lock kube-scheduler
//! and kube-controller-manager take in `kube-system`): several control
//! planes campaign for the same Lease and only the holder runs what it
//! guards.
//!
//! The rules, as upstream's `tryAcquireOrRenew`:
//! - a missing Lease is created with this candidate as the holder
//!   (`acquireTime` = `renewTime` = now, `leaseTransitions` 0);
//! - a Lease held by another is taken only once its record has not changed
//!   for `leaseDurationSeconds` as seen by this candidate's own clock (the
//!   time the record was last *observed* changing, not its `renewTime`, so
//!   clock skew between hosts does not matter), or at once if its holder
//!   is empty (released);
//! - taking it over sets `acquireTime` and adds one to
//!   `leaseTransitions`; renewing keeps both and moves `renewTime`;
//! - every write is a compare-and-swap on the `resourceVersion` read, so
//!   of two candidates racing only one wins.
//!
//! The holder renews every retry period; if no renewal succeeds for the
//! renew deadline it has lost the lease and stops what it runs
//! (upstream's components exit the process there; bosun stops the term's
//! tasks and goes back to campaigning, so a process that lost the lease
//! in a network partition takes part again once it heals). On SIGTERM the
//! holder stops its term and then releases the Lease (upstream's
//! `ReleaseOnCancel`: holder emptied, `leaseDurationSeconds` 1), so a
//! planned restart hands over at once rather than after the whole lease
//! duration.
//!
//! Candidates also watch the Lease between their tries (client-go only
//! polls): the record's last change is then seen when it is written, not
//! up to a jittered retry period later, and a candidate tries the moment
//! the lease runs out by its clock or is released. After a holder's
//! SIGKILL the handover takes the lease duration less the time since its
//! last renewal, not up to two retry periods more.

#[cfg(test)]
mod tests;

pub mod components;

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::Client;
use rand::Rng;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::toolkit::api_errors::is_status;

/// The namespace the control plane's Leases live in.
pub const NAMESPACE: &str = "kube-system";
/// kube-scheduler's Lease.
pub const SCHEDULER_LEASE: &str = "kube-scheduler";
/// kube-controller-manager's Lease.
pub const CONTROLLER_MANAGER_LEASE: &str = "kube-controller-manager";
/// client-go's `JitterFactor`: retries wait between 1 and 2.2 retry
/// periods so candidates do not move in step.
const JITTER: f64 = 1.2;

/// kube-scheduler's and kube-controller-manager's `--leader-elect*` flags.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderElectionOptions {
    /// `--leader-elect`: campaign for the Leases (default true); false
    /// runs the scheduler and controllers unconditionally, as one control
    /// plane always did.
    pub enabled: bool,
    /// How long a non-holder waits after the last observed change of the
    /// record before taking the Lease over.
    pub lease_duration: Duration,
    /// How long the holder keeps trying to renew before it gives up.
    pub renew_deadline: Duration,
    /// How long candidates wait between tries.
    pub retry_period: Duration,
}

impl Default for LeaderElectionOptions {
    fn default() -> Self {
        LeaderElectionOptions {
            enabled: true,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl LeaderElectionOptions {
    /// client-go's checks: the lease outlasts the renew deadline, which
    /// outlasts the retry period times the jitter factor.
    pub fn validate(&self) -> Result<(), String> {
        if self.lease_duration <= self.renew_deadline {
            return Err(
                "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"
                    .into(),
            );
        }
        if self.renew_deadline.as_secs_f64() <= JITTER * self.retry_period.as_secs_f64() {
            return Err(
                "--leader-elect-renew-deadline must be greater than 1.2 x --leader-elect-retry-period"
                    .into(),
            );
        }
        if self.retry_period.is_zero() {
            return Err("--leader-elect-retry-period must be more than 0".into());
        }
        Ok(())
    }
}

/// This process's identity as a candidate: `<hostname>_<uuid>`, as
/// kube-scheduler and kube-controller-manager make theirs.
pub fn identity() -> String {
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// What the holder runs while it leads; stopped (and waited for) when the
/// lease is lost or the process stops.
pub trait Term: Send {
    fn stop(self) -> impl Future<Output = ()> + Send;
}

/// One candidate for one Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    name: String,
    identity: String,
    options: LeaderElectionOptions,
    /// The record last read and when this candidate saw it change.
    observed: Option<(LeaseSpec, Instant)>,
}

impl LeaderElector {
    /// A candidate for `kube-system/<name>` writing through `client`.
    pub fn new(client: Client, name: &str, identity: &str, options: LeaderElectionOptions) -> Self {
        LeaderElector {
            api: Api::namespaced(client, NAMESPACE),
            name: name.to_string(),
            identity: identity.to_string(),
            options,
            observed: None,
        }
    }

    /// Campaigns until `stop` turns true: whenever this candidate holds
    /// the Lease, runs what `lead` starts, and stops it when the lease is
    /// lost. On stop, a held Lease is released after the term has stopped.
    pub async fn run<T, F, Fut>(mut self, mut stop: watch::Receiver<bool>, lead: F)
    where
        T: Term,
        F: Fn() -> Fut,
        Fut: Future<Output = T>,
    {
        loop {
            // Campaign: try every retry period, and between tries follow
            // the record through a watch, so that its last change is seen
            // when it happens (not up to a jittered retry period later)
            // and the try comes the moment the lease runs out or is
            // released.
            let mut changes = self.record_changes();
            loop {
                if *stop.borrow() {
                    return;
                }
                if self.try_once().await {
                    break;
                }
                let next = Instant::now() + jittered(self.options.retry_period);
                loop {
                    let until = self.expiry().map_or(next, |at| at.min(next));
                    tokio::select! {
                        _ = tokio::time::sleep_until(until) => break,
                        Some(record) = changes.next() => self.observe(record),
                        _ = stop.changed() => break,
                    }
                }
            }
            drop(changes);
            tracing::info!(lease = %self.name, identity = %self.identity, "acquired the lease; leading");
            let term = lead().await;
            let stopping = tokio::select! {
                _ = self.keep_renewing() => false,
                _ = wait_true(&mut stop) => true,
            };
            term.stop().await;
            if stopping {
                self.release().await;
                return;
            }
            tracing::warn!(lease = %self.name, identity = %self.identity,
                "lost the lease: stopped, campaigning again");
        }
    }

    /// Renews every retry period; returns once renewing has failed for
    /// the whole renew deadline.
    async fn keep_renewing(&mut self) {
        loop {
            let deadline = Instant::now() + self.options.renew_deadline;
            loop {
                if Instant::now() >= deadline {
                    return;
                }
                match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
                    Ok(Ok(true)) => break,
                    Ok(Ok(false)) => {
                        // Another holds it now (or won a race): lost.
                        return;
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(lease = %self.name, error = %e, "renewing the lease")
                    }
                    Err(_) => return,
                }
                tokio::time::sleep_until(
                    (Instant::now() + self.options.retry_period).min(deadline),
                )
                .await;
            }
            tokio::time::sleep(self.options.retry_period).await;
        }
    }

    /// One try, errors logged: whether this candidate holds the Lease now.
    async fn try_once(&mut self) -> bool {
        let limit = self.options.renew_deadline;
        match tokio::time::timeout(limit, self.try_acquire_or_renew()).await {
            Ok(Ok(held)) => held,
            Ok(Err(e)) => {
                tracing::debug!(lease = %self.name, error = %e, "trying to acquire the lease");
                false
            }
            Err(_) => false,
        }
    }

    /// client-go's `tryAcquireOrRenew`.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = now();
        let current = match self.api.get(&self.name).await {
            Ok(lease) => lease,
            Err(e) if is_status(&e, 404) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(NAMESPACE.into()),
                        ..Default::default()
                    },
                    spec: Some(self.held_record(None, now.clone())),
                };
                return match self.api.create(&PostParams::default(), &lease).await {
                    Ok(created) => {
                        self.observe(created.spec.unwrap_or_default());
                        Ok(true)
                    }
                    Err(e) if is_status(&e, 409) => Ok(false),
                    Err(e) => Err(e),
                };
            }
            Err(e) => return Err(e),
        };
        let record = current.spec.clone().unwrap_or_default();
        self.observe(record.clone());
        let holder = record.holder_identity.clone().unwrap_or_default();
        let mine = holder == self.identity;
        if !mine && !holder.is_empty() && self.observed_valid(&record) {
            return Ok(false);
        }
        let next = self.held_record(Some(&record), now);
        let mut lease = current;
        lease.spec = Some(next);
        lease.metadata.managed_fields = None;
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.observe(written.spec.unwrap_or_default());
                Ok(true)
            }
            Err(e) if is_status(&e, 409) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Whether the record of another holder is still within its lease
    /// duration, by this candidate's clock.
    fn observed_valid(&self, record: &LeaseSpec) -> bool {
        let duration = record
            .lease_duration_seconds
            .map(|s| Duration::from_secs(s.max(0) as u64))
            .unwrap_or(self.options.lease_duration);
        self.observed
            .as_ref()
            .is_none_or(|(_, seen)| seen.elapsed() < duration)
    }

    /// When the record of another holder runs out by this candidate's
    /// clock (now if it was released; None while this one holds it or
    /// before anything was read).
    fn expiry(&self) -> Option<Instant> {
        let (record, seen) = self.observed.as_ref()?;
        let holder = record.holder_identity.as_deref().unwrap_or_default();
        if holder == self.identity {
            return None;
        }
        if holder.is_empty() {
            return Some(Instant::now());
        }
        let duration = record
            .lease_duration_seconds
            .map(|s| Duration::from_secs(s.max(0) as u64))
            .unwrap_or(self.options.lease_duration);
        Some(*seen + duration)
    }

    /// The Lease's record each time the API reports it written (a watch
    /// of this one Lease, backing off on errors).
    fn record_changes(&self) -> futures::stream::BoxStream<'static, LeaseSpec> {
        use kube::runtime::{watcher, WatchStreamExt};
        watcher::watcher(
            self.api.clone(),
            watcher::Config::default().fields(&format!("metadata.name={}", self.name)),
        )
        .default_backoff()
        .filter_map(|e| async move {
            match e {
                Ok(watcher::Event::Apply(l)) | Ok(watcher::Event::InitApply(l)) => {
                    Some(l.spec.unwrap_or_default())
                }
                _ => None,
            }
        })
        .boxed()
    }

    /// Remembers `record`, and when it changed.
    fn observe(&mut self, record: LeaseSpec) {
        let changed = self.observed.as_ref().is_none_or(|(r, _)| *r != record);
        if changed {
            self.observed = Some((record, Instant::now()));
        }
    }

    /// The record this candidate writes as the holder, from the one read.
    fn held_record(&self, old: Option<&LeaseSpec>, now: MicroTime) -> LeaseSpec {
        let old_holder = old.and_then(|r| r.holder_identity.as_deref());
        let renewing = old_holder == Some(self.identity.as_str());
        let transitions = old.and_then(|r| r.lease_transitions).unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.options.lease_duration.as_secs() as i32),
            acquire_time: if renewing {
                old.and_then(|r| r.acquire_time.clone())
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(match old {
                None => 0,
                Some(_) if renewing => transitions,
                // Taken from a holder (or from a released Lease, whose
                // holder is empty): a transition, as upstream counts it.
                Some(_) => transitions + 1,
            }),
            ..Default::default()
        }
    }

    /// Empties the holder if this candidate still holds the Lease
    /// (client-go's `release`).
    async fn release(&mut self) {
        let Ok(mut lease) = self.api.get(&self.name).await else {
            return;
        };
        let record = lease.spec.clone().unwrap_or_default();
        if record.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        let now = now();
        lease.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: record.lease_transitions,
            ..Default::default()
        });
        lease.metadata.managed_fields = None;
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.name, "released the lease"),
            Err(e) => tracing::warn!(lease = %self.name, error = %e, "releasing the lease"),
        }
    }
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// `period` stretched by up to the jitter factor.
fn jittered(period: Duration) -> Duration {
    period.mul_f64(1.0 + rand::rng().random_range(0.0..JITTER))
}

/// Resolves once `stop` is (or turns) true; never if its sender is gone.
async fn wait_true(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}
