//! [`Expectations`]: a controller does not act on an owner again until its
//! cache has seen the objects it just created or deleted (Kubernetes'
//! `ControllerExpectations`, tracked by identity here).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use kube::Resource;
use std::time::{Duration, Instant};

/// How long an expectation may stay unmet before the controller acts
/// anyway (a lost watch event must not wedge an owner forever).
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Default)]
struct Pending {
    creates: HashSet<String>,
    deletes: HashSet<String>,
    since: Option<Instant>,
}

/// What a controller is waiting for its cache to see, per owner key.
///
/// Kubernetes' controllers count expected adds and deletes and lower the
/// counts from watch events. Here they are tracked by identity instead, so
/// they are checked against the cache's current state (level-triggered):
/// a created object is seen once the cache holds it, a deleted one once
/// the cache no longer holds it as live.
#[derive(Default)]
pub struct Expectations {
    pending: Mutex<HashMap<String, Pending>>,
}

impl Expectations {
    /// The controller just created `name` for `owner`.
    pub fn expect_create(&self, owner: &str, name: &str) {
        let mut pending = self.pending.lock().unwrap();
        let p = pending.entry(owner.to_string()).or_default();
        p.creates.insert(name.to_string());
        p.since.get_or_insert_with(Instant::now);
    }

    /// The controller just deleted the object with `uid` for `owner`.
    pub fn expect_delete(&self, owner: &str, uid: &str) {
        let mut pending = self.pending.lock().unwrap();
        let p = pending.entry(owner.to_string()).or_default();
        p.deletes.insert(uid.to_string());
        p.since.get_or_insert_with(Instant::now);
    }

    /// The delete of `uid` for `owner` failed: the cache will not see it
    /// go, so it is expected no more (upstream lowers the count the same
    /// way, `DeletionObserved` on a failed delete). Else the owner would
    /// wait [`EXPECTATIONS_TIMEOUT`] before trying again.
    pub fn delete_failed(&self, owner: &str, uid: &str) {
        let mut pending = self.pending.lock().unwrap();
        if let Some(p) = pending.get_mut(owner) {
            p.deletes.remove(uid);
        }
    }

    /// True when the cache has caught up with everything `owner` expects:
    /// `created(name)` tells whether the cache holds a created object,
    /// `gone(uid)` whether a deleted one has left it. Met expectations are
    /// dropped; unmet ones expire after [`EXPECTATIONS_TIMEOUT`].
    pub fn satisfied(
        &self,
        owner: &str,
        created: impl Fn(&str) -> bool,
        gone: impl Fn(&str) -> bool,
    ) -> bool {
        let mut pending = self.pending.lock().unwrap();
        let Some(p) = pending.get_mut(owner) else {
            return true;
        };
        p.creates.retain(|n| !created(n));
        p.deletes.retain(|u| !gone(u));
        let expired = p.since.is_some_and(|s| s.elapsed() > EXPECTATIONS_TIMEOUT);
        if p.creates.is_empty() && p.deletes.is_empty() || expired {
            if expired {
                tracing::warn!(%owner, "expectations expired; acting on the cache as it is");
            }
            pending.remove(owner);
            true
        } else {
            false
        }
    }

    /// Forgets everything about `owner` (it was deleted).
    pub fn forget(&self, owner: &str) {
        self.pending.lock().unwrap().remove(owner);
    }
}

/// The key an owner's expectations are kept under: per instance, so an
/// owner deleted and created again under the same name starts afresh.
pub fn expectations_key<K: Resource>(owner: &K) -> String {
    format!(
        "{}/{}/{}",
        owner.meta().namespace.as_deref().unwrap_or_default(),
        owner.meta().name.as_deref().unwrap_or_default(),
        owner.meta().uid.as_deref().unwrap_or_default()
    )
}

impl Expectations {
    /// [`Expectations::satisfied`] against objects the cache holds: a
    /// created one is seen once its name is there, a deleted one once its
    /// uid is gone or terminating.
    pub fn satisfied_by<K: Resource>(&self, owner: &str, cached: &[Arc<K>]) -> bool {
        let by_uid: HashMap<&str, &K> = cached
            .iter()
            .filter_map(|o| Some((o.meta().uid.as_deref()?, o.as_ref())))
            .collect();
        let names: HashSet<&str> = cached
            .iter()
            .filter_map(|o| o.meta().name.as_deref())
            .collect();
        self.satisfied(
            owner,
            |name| names.contains(name),
            |uid| {
                by_uid
                    .get(uid)
                    .is_none_or(|o| o.meta().deletion_timestamp.is_some())
            },
        )
    }
}

impl Expectations {
    /// [`Expectations::satisfied_by`] against the pod cache's index, by
    /// lookup of the expected names (in `ns`) and uids rather than by sets
    /// of every cached pod.
    pub fn satisfied_in(&self, owner: &str, ns: &str, pods: &super::PodIndex) -> bool {
        self.satisfied(
            owner,
            |name| pods.get(ns, name).is_some(),
            |uid| {
                pods.by_uid(uid)
                    .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations_wait_for_the_cache() {
        let e = Expectations::default();
        assert!(e.satisfied("ns/rs", |_| false, |_| false));
        e.expect_create("ns/rs", "rs-a");
        e.expect_create("ns/rs", "rs-b");
        e.expect_delete("ns/rs", "uid-1");
        assert!(!e.satisfied("ns/rs", |n| n == "rs-a", |_| true));
        // rs-a stays seen; rs-b arrives now.
        assert!(e.satisfied("ns/rs", |n| n == "rs-b", |_| true));
        assert!(e.satisfied("ns/rs", |_| false, |_| false));
    }

    #[test]
    fn a_failed_delete_is_expected_no_more() {
        let e = Expectations::default();
        e.expect_delete("ns/rs", "uid-1");
        e.expect_delete("ns/rs", "uid-2");
        // Both pods still live in the cache: waiting.
        assert!(!e.satisfied("ns/rs", |_| false, |_| false));
        // uid-1's delete was refused (a 429 after every retry): the pod
        // stays, and only uid-2 is still awaited.
        e.delete_failed("ns/rs", "uid-1");
        assert!(!e.satisfied("ns/rs", |_| false, |u| u == "uid-1"));
        e.delete_failed("ns/rs", "uid-2");
        assert!(e.satisfied("ns/rs", |_| false, |_| false));
    }
}
