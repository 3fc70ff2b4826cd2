//! [`KeyBackoff`]: per-key exponential back-off for failed reconciles
//! (client-go's rate-limited work queue).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Per-key exponential back-off for failed reconciles, as client-go's
/// rate-limited work queue: 5 ms doubling to at most 1000 s, forgotten
/// on the first success.
#[derive(Default)]
pub struct KeyBackoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl KeyBackoff {
    const BASE: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(1000);

    /// The delay before retrying `key` after one more failure.
    pub fn next(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap();
        let n = failures.entry(key.to_string()).or_insert(0);
        let delay = Self::BASE
            .checked_mul(1u32.checked_shl(*n).unwrap_or(u32::MAX))
            .unwrap_or(Self::MAX)
            .min(Self::MAX);
        *n = n.saturating_add(1);
        delay
    }

    pub fn forget(&self, key: &str) {
        self.failures.lock().unwrap().remove(key);
    }

    pub fn failures(&self, key: &str) -> u32 {
        self.failures.lock().unwrap().get(key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_per_key_and_resets() {
        let b = KeyBackoff::default();
        assert_eq!(b.next("a"), Duration::from_millis(5));
        assert_eq!(b.next("a"), Duration::from_millis(10));
        assert_eq!(b.next("a"), Duration::from_millis(20));
        assert_eq!(b.next("b"), Duration::from_millis(5));
        b.forget("a");
        assert_eq!(b.next("a"), Duration::from_millis(5));
        for _ in 0..40 {
            b.next("c");
        }
        assert_eq!(b.next("c"), KeyBackoff::MAX);
    }
}
