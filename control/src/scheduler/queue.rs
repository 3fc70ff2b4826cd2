//! The scheduling queue: pods waiting for a node, in arrival order, and
//! unschedulable pods parked until something changes or their back-off
//! runs out (kube-scheduler's activeQ and unschedulablePods).

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

/// First wait of a parked pod before it is tried again on its own.
pub const PARK_BASE: Duration = Duration::from_secs(5);
/// The longest wait: an unschedulable pod is retried at least this often.
pub const PARK_MAX: Duration = Duration::from_secs(30);
/// The wait after an API failure.
pub const RETRY_AFTER_ERROR: Duration = Duration::from_secs(1);

struct Parked {
    retry_at: Instant,
    /// The pod's spec and labels when it was parked: a change to them
    /// may make it fit.
    fingerprint: String,
}

#[derive(Default)]
pub struct SchedulingQueue {
    order: VecDeque<String>,
    active: HashSet<String>,
    parked: HashMap<String, Parked>,
    attempts: HashMap<String, u32>,
}

impl SchedulingQueue {
    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    pub fn is_active(&self, key: &str) -> bool {
        self.active.contains(key)
    }

    fn activate(&mut self, key: &str) {
        if self.active.insert(key.to_string()) {
            crate::observe::queue_add("scheduler");
            self.order.push_back(key.to_string());
        }
    }

    /// A pod needing a node was added or changed: queue it, or wake it if
    /// it is parked and changed since.
    pub fn add_or_update(&mut self, key: &str, fingerprint: &str) {
        match self.parked.get(key) {
            Some(p) if p.fingerprint == fingerprint => {}
            Some(_) => {
                self.parked.remove(key);
                self.activate(key);
            }
            None => self.activate(key),
        }
    }

    /// Queues a pod the queue does not know at all.
    pub fn add_if_unknown(&mut self, key: &str, _fingerprint: &str) {
        if !self.parked.contains_key(key) {
            self.activate(key);
        }
    }

    /// The next pod to schedule.
    pub fn pop(&mut self) -> Option<String> {
        while let Some(key) = self.order.pop_front() {
            if self.active.remove(&key) {
                return Some(key);
            }
        }
        None
    }

    /// The pod is bound or gone.
    pub fn forget(&mut self, key: &str) {
        self.active.remove(key);
        self.parked.remove(key);
        self.attempts.remove(key);
    }

    /// No node fits the pod: park it with a back-off that doubles per
    /// attempt up to [`PARK_MAX`].
    pub fn park(&mut self, key: &str, fingerprint: &str) {
        let n = self.attempts.entry(key.to_string()).or_insert(0);
        let delay = PARK_BASE
            .checked_mul(1u32.checked_shl(*n).unwrap_or(u32::MAX))
            .unwrap_or(PARK_MAX)
            .min(PARK_MAX);
        *n = n.saturating_add(1);
        self.park_for(key, fingerprint, delay);
    }

    /// The API failed: try again shortly.
    pub fn park_briefly(&mut self, key: &str, fingerprint: &str) {
        self.park_for(key, fingerprint, RETRY_AFTER_ERROR);
    }

    fn park_for(&mut self, key: &str, fingerprint: &str, delay: Duration) {
        self.active.remove(key);
        self.parked.insert(
            key.to_string(),
            Parked {
                retry_at: Instant::now() + delay,
                fingerprint: fingerprint.to_string(),
            },
        );
    }

    /// Something changed that may make room: every parked pod is tried
    /// again.
    pub fn move_all_to_active(&mut self) {
        let keys: Vec<String> = self.parked.drain().map(|(k, _)| k).collect();
        for key in keys {
            self.activate(&key);
        }
    }

    /// Publishes the queue's lengths (`workqueue_depth`,
    /// `scheduler_pending_pods`).
    pub fn observe(&self) {
        crate::observe::scheduler_queue(self.active.len(), self.parked.len());
    }

    /// Parked pods whose back-off ran out are tried again.
    pub fn flush_backed_off(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .parked
            .iter()
            .filter(|(_, p)| p.retry_at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            self.parked.remove(&key);
            self.activate(&key);
        }
    }
}
