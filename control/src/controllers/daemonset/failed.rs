//! Back-off for replacing failed daemon pods (the daemon controller's
//! `failedPodsBackoff`, client-go's `flowcontrol.Backoff`): a node whose
//! agent keeps failing the set's pod would otherwise see it deleted and
//! made again in a hot loop. Per set, generation and node, the delay
//! starts at 1 s and doubles up to 15 min; an entry idle for twice the
//! maximum starts over.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};

pub const INITIAL: Duration = Duration::from_secs(1);
pub const MAX: Duration = Duration::from_secs(15 * 60);

#[derive(Default)]
pub struct FailedPodBackoff {
    entries: Mutex<HashMap<String, (DateTime<Utc>, Duration)>>,
}

fn elapsed(since: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (now - since).to_std().unwrap_or(Duration::ZERO)
}

impl FailedPodBackoff {
    /// How long `key` must still wait before its failed pod may be
    /// deleted again; None when it may be now (`IsInBackOffSinceUpdate`).
    pub fn wait(&self, key: &str, now: DateTime<Utc>) -> Option<Duration> {
        let entries = self.entries.lock().unwrap();
        let (last, delay) = entries.get(key)?;
        let since = elapsed(*last, now);
        if since > 2 * MAX || since >= *delay {
            return None;
        }
        Some(*delay - since)
    }

    /// Records a deletion of `key`'s failed pod now (`Next`).
    pub fn next(&self, key: &str, now: DateTime<Utc>) {
        let mut entries = self.entries.lock().unwrap();
        let delay = match entries.get(key) {
            Some((last, delay)) if elapsed(*last, now) <= 2 * MAX => (*delay * 2).min(MAX),
            _ => INITIAL,
        };
        entries.insert(key.to_string(), (now, delay));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_delay_doubles_to_its_cap_and_starts_over_when_idle() {
        let b = FailedPodBackoff::default();
        let t0 = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let secs = |s: i64| t0 + chrono::Duration::seconds(s);
        assert_eq!(b.wait("k", t0), None);
        b.next("k", t0);
        assert_eq!(b.wait("k", t0), Some(INITIAL));
        assert_eq!(b.wait("k", secs(1)), None);
        b.next("k", secs(1));
        assert_eq!(b.wait("k", secs(2)), Some(Duration::from_secs(1)));
        assert_eq!(b.wait("k", secs(3)), None);
        for i in 0..20 {
            b.next("k", secs(3 + i));
        }
        assert_eq!(b.wait("k", secs(22)), Some(MAX));
        // Idle for more than twice the cap: from the start again.
        let later = secs(22 + 2 * MAX.as_secs() as i64 + 1);
        assert_eq!(b.wait("k", later), None);
        b.next("k", later);
        assert_eq!(b.wait("k", later), Some(INITIAL));
        assert_eq!(b.wait("other", later), None);
    }
}
