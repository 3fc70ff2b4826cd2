//! The scheduling queue: pods waiting for a node, higher priority first
//! and then in the order they joined (kube-scheduler's PrioritySort), and
//! unschedulable pods parked until something changes or their back-off
//! runs out (kube-scheduler's activeQ and unschedulablePods).

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
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
    priority: i32,
}

/// Where an active pod sorts: higher priority first, then the earlier
/// arrival.
type Order = (Reverse<i32>, u64);

#[derive(Default)]
pub struct SchedulingQueue {
    order: BTreeMap<Order, String>,
    active: HashMap<String, Order>,
    parked: HashMap<String, Parked>,
    attempts: HashMap<String, u32>,
    /// Arrivals so far: each activation's place in line.
    arrivals: u64,
}

impl SchedulingQueue {
    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    pub fn is_active(&self, key: &str) -> bool {
        self.active.contains_key(key)
    }

    fn activate(&mut self, key: &str, priority: i32) {
        if let Some(old) = self.active.get(key) {
            if old.0 .0 == priority {
                return;
            }
            // Its priority changed: it keeps its arrival, in its new place.
            let old = *old;
            self.order.remove(&old);
            let order = (Reverse(priority), old.1);
            self.order.insert(order, key.to_string());
            self.active.insert(key.to_string(), order);
            return;
        }
        crate::observe::queue_add("scheduler");
        self.arrivals += 1;
        let order = (Reverse(priority), self.arrivals);
        self.order.insert(order, key.to_string());
        self.active.insert(key.to_string(), order);
    }

    fn deactivate(&mut self, key: &str) {
        if let Some(order) = self.active.remove(key) {
            self.order.remove(&order);
        }
    }

    /// A pod needing a node was added or changed: queue it, or wake it if
    /// it is parked and changed since.
    pub fn add_or_update(&mut self, key: &str, fingerprint: &str, priority: i32) {
        match self.parked.get(key) {
            Some(p) if p.fingerprint == fingerprint => {}
            Some(_) => {
                self.parked.remove(key);
                self.activate(key, priority);
            }
            None => self.activate(key, priority),
        }
    }

    /// Queues a pod the queue does not know at all.
    pub fn add_if_unknown(&mut self, key: &str, priority: i32) {
        if !self.parked.contains_key(key) && !self.active.contains_key(key) {
            self.activate(key, priority);
        }
    }

    /// The next pod to schedule: the highest priority, the earliest of
    /// those.
    pub fn pop(&mut self) -> Option<String> {
        let (_, key) = self.order.pop_first()?;
        self.active.remove(&key);
        Some(key)
    }

    /// The pod is bound or gone.
    pub fn forget(&mut self, key: &str) {
        self.deactivate(key);
        self.parked.remove(key);
        self.attempts.remove(key);
    }

    /// No node fits the pod: park it with a back-off that doubles per
    /// attempt up to [`PARK_MAX`].
    pub fn park(&mut self, key: &str, fingerprint: &str, priority: i32) {
        let n = self.attempts.entry(key.to_string()).or_insert(0);
        let delay = PARK_BASE
            .checked_mul(1u32.checked_shl(*n).unwrap_or(u32::MAX))
            .unwrap_or(PARK_MAX)
            .min(PARK_MAX);
        *n = n.saturating_add(1);
        self.park_for(key, fingerprint, priority, delay);
    }

    /// The API failed: try again shortly.
    pub fn park_briefly(&mut self, key: &str, fingerprint: &str, priority: i32) {
        self.park_for(key, fingerprint, priority, RETRY_AFTER_ERROR);
    }

    fn park_for(&mut self, key: &str, fingerprint: &str, priority: i32, delay: Duration) {
        self.deactivate(key);
        self.parked.insert(
            key.to_string(),
            Parked {
                retry_at: Instant::now() + delay,
                fingerprint: fingerprint.to_string(),
                priority,
            },
        );
    }

    /// Something changed that may make room: every parked pod is tried
    /// again.
    pub fn move_all_to_active(&mut self) {
        let parked: Vec<(String, Parked)> = self.parked.drain().collect();
        for (key, p) in parked {
            self.activate(&key, p.priority);
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
            if let Some(p) = self.parked.remove(&key) {
                self.activate(&key, p.priority);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(q: &mut SchedulingQueue) -> Vec<String> {
        std::iter::from_fn(|| q.pop()).collect()
    }

    // Upstream's PrioritySort Less: higher priority first; equal
    // priorities in the order they joined the queue.
    #[tokio::test(start_paused = true)]
    async fn higher_priority_first_then_arrival() {
        let mut q = SchedulingQueue::default();
        for (key, priority) in [("a", 0), ("b", 10), ("c", -5), ("d", 10), ("e", 0)] {
            q.add_or_update(key, key, priority);
        }
        assert_eq!(drain(&mut q), ["b", "d", "a", "e", "c"]);

        // A parked pod coming back joins behind those already waiting at
        // its priority, ahead of lower ones.
        q.add_or_update("low", "low", 1);
        q.add_or_update("x", "x", 5);
        q.park("parked", "parked", 5);
        q.add_or_update("y", "y", 5);
        q.move_all_to_active();
        assert_eq!(drain(&mut q), ["x", "y", "parked", "low"]);

        // Queued twice: once.
        q.add_or_update("a", "a", 0);
        q.add_if_unknown("a", 0);
        q.add_or_update("a", "a", 0);
        assert_eq!(drain(&mut q), ["a"]);

        // Forgotten while queued: never popped.
        q.add_or_update("gone", "gone", 100);
        q.add_or_update("kept", "kept", 0);
        q.forget("gone");
        assert_eq!(drain(&mut q), ["kept"]);
        assert!(q.is_empty());
    }
}
