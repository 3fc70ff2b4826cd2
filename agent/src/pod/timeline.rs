//! A pod's start-up timeline: how long after its worker saw the pod each
//! step of its first start happened (volumes found, sandbox running, app
//! image checked, containers created and started, status written, Ready
//! written), logged once at debug when the pod is first written Ready, so
//! a burst's time can be traced to the step that took it:
//!
//! ```text
//! BOSUN_LOG=info,bosun_agent::pod::timeline=debug bosun-agent ...
//! DEBUG bosun_agent::pod::timeline: pod start timeline pod=default/web-1 seen_at=1796643071250
//!   steps="volumes=2 sandbox=301 sandbox_inspected=340 image=344 created=420 started=655 ... ready=702"
//! ```
//!
//! `seen_at` is the wall-clock time (Unix milliseconds) the worker saw the
//! pod, so a benchmark can tell how long the pod took to reach the agent
//! after it was created. Each step keeps its first time only; a step that
//! ran more than once (a retried sync) shows when it first finished.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// When each step of one pod's first start finished, after `seen`.
#[derive(Debug)]
pub struct Timeline {
    seen: Instant,
    /// `seen` on the wall clock, in Unix milliseconds.
    seen_at: u64,
    marks: Vec<(&'static str, Duration)>,
    done: bool,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline::new(Instant::now())
    }
}

impl Timeline {
    /// A timeline that starts when the pod was seen.
    pub fn new(seen: Instant) -> Self {
        let ago = seen.elapsed();
        let seen_at = SystemTime::now()
            .checked_sub(ago)
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as u64);
        Timeline {
            seen,
            seen_at,
            marks: Vec::new(),
            done: false,
        }
    }

    /// Step `step` has just finished (only its first time counts; nothing
    /// is kept once the timeline was reported).
    pub fn mark(&mut self, step: &'static str) {
        if self.done || self.marks.iter().any(|(s, _)| *s == step) {
            return;
        }
        self.marks.push((step, self.seen.elapsed()));
    }

    /// The steps as `name=milliseconds` in the order they finished.
    pub fn steps(&self) -> String {
        let mut out = String::new();
        for (step, at) in &self.marks {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&format!("{step}={}", at.as_millis()));
        }
        out
    }

    /// Logs the timeline of pod `pod` (once) and lets go of its steps.
    pub fn report(&mut self, pod: &str) {
        if self.done {
            return;
        }
        self.done = true;
        tracing::debug!(pod, seen_at = self.seen_at, steps = %self.steps(), "pod start timeline");
        self.marks = Vec::new();
    }

    /// Whether the timeline was reported.
    pub fn is_done(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_keep_their_first_time_in_order() {
        let seen = Instant::now() - Duration::from_millis(50);
        let mut t = Timeline::new(seen);
        t.mark("sandbox");
        t.mark("started");
        t.mark("sandbox");
        let steps = t.steps();
        let names: Vec<&str> = steps
            .split(' ')
            .map(|s| s.split('=').next().unwrap())
            .collect();
        assert_eq!(names, ["sandbox", "started"]);
        let ms: u64 = steps
            .split(' ')
            .next()
            .and_then(|s| s.split('=').nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap();
        assert!(ms >= 50, "{steps}");
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert!(
            t.seen_at <= now_ms - 50 && t.seen_at > now_ms - 5_000,
            "seen_at {} now {now_ms}",
            t.seen_at
        );
    }

    #[test]
    fn nothing_is_kept_after_the_report() {
        let mut t = Timeline::default();
        t.mark("sandbox");
        t.report("default/p");
        assert!(t.is_done());
        t.mark("started");
        assert_eq!(t.steps(), "");
    }
}
