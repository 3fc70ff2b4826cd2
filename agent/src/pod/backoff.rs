//! Crash-loop and image-pull back-off, the kubelet's `doBackOff`: one
//! wait per container and kind, the first `base` long, each next one
//! twice the last up to `max`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What is backing off: restarting a container that exited, or pulling
/// its image. Keyed by the container's name (unique in a pod across init
/// and app containers).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BackoffKey {
    Restart(String),
    Pull(String),
}

/// One wait: how long it is and when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub delay: Duration,
    pub until: Instant,
    /// The `BackOff` event for this wait was recorded.
    announced: bool,
}

/// The waits of one pod's containers.
#[derive(Debug)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    waits: HashMap<BackoffKey, Wait>,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Self {
        Backoff {
            base,
            max,
            waits: HashMap::new(),
        }
    }

    /// The wait `key` is in at `now`, if it has not ended.
    pub fn waiting(&self, key: &BackoffKey, now: Instant) -> Option<Wait> {
        self.waits.get(key).copied().filter(|w| now < w.until)
    }

    /// Starts `key`'s next wait at `now` and returns its length: `base`
    /// the first time (or after `reset`, when the container ran long
    /// enough to forget its crashes), else twice the last, at most `max`.
    pub fn start(&mut self, key: BackoffKey, now: Instant, reset: bool) -> Duration {
        let delay = match self.waits.get(&key) {
            Some(w) if !reset => (w.delay * 2).min(self.max),
            _ => self.base,
        };
        self.waits.insert(
            key,
            Wait {
                delay,
                until: now + delay,
                announced: false,
            },
        );
        delay
    }

    /// Forgets `key`'s waits: the next one starts at `base` again.
    pub fn forget(&mut self, key: &BackoffKey) {
        self.waits.remove(key);
    }

    /// True the first time it is asked during `key`'s current wait, so the
    /// `BackOff` event is recorded once per wait, not once per sync.
    pub fn announce(&mut self, key: &BackoffKey) -> bool {
        match self.waits.get_mut(key) {
            Some(w) if !w.announced => {
                w.announced = true;
                true
            }
            _ => false,
        }
    }

    /// When the first wait that has not ended at `now` ends.
    pub fn next_end(&self, now: Instant) -> Option<Instant> {
        self.waits
            .values()
            .map(|w| w.until)
            .filter(|u| *u > now)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_max_and_reset() {
        let s = Duration::from_secs;
        let mut b = Backoff::new(s(10), s(35));
        let key = BackoffKey::Restart("a".into());
        let now = Instant::now();
        assert_eq!(b.waiting(&key, now), None);
        let lengths: Vec<Duration> = (0..4).map(|_| b.start(key.clone(), now, false)).collect();
        assert_eq!(lengths, [s(10), s(20), s(35), s(35)]);
        assert_eq!(b.waiting(&key, now).map(|w| w.until), Some(now + s(35)));
        assert_eq!(b.waiting(&key, now + s(35)), None, "over once it ends");
        assert_eq!(b.start(key.clone(), now, true), s(10));
        // Restart and pull waits of one container are apart.
        let pull = BackoffKey::Pull("a".into());
        assert_eq!(b.start(pull.clone(), now, false), s(10));
        assert_eq!(b.start(pull.clone(), now, false), s(20));
        b.forget(&pull);
        assert_eq!(b.start(pull, now, false), s(10));
        assert_eq!(b.next_end(now), Some(now + s(10)));
    }

    #[test]
    fn a_wait_is_announced_once() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(8));
        let key = BackoffKey::Restart("a".into());
        assert!(!b.announce(&key), "nothing to announce without a wait");
        b.start(key.clone(), Instant::now(), false);
        assert!(b.announce(&key));
        assert!(!b.announce(&key));
        b.start(key.clone(), Instant::now(), false);
        assert!(b.announce(&key), "a new wait is announced again");
    }
}
