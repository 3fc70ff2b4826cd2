//! Waiting for a condition with a deadline: the one `wait_for` of the
//! integration tests.

use std::time::{Duration, Instant};

/// How often a condition is checked.
const POLL: Duration = Duration::from_millis(50);

/// What a condition of [`wait_for`] returns: `true`/`false`, or
/// `Some(value)` once there is one (the value is `wait_for`'s result).
pub trait Condition {
    type Output;
    fn ready(self) -> Option<Self::Output>;
}

impl Condition for bool {
    type Output = ();
    fn ready(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Condition for Option<T> {
    type Output = T;
    fn ready(self) -> Option<T> {
        self
    }
}

/// Checks `check` every 50 ms until it holds (`true`, or `Some(value)`,
/// then returned); fails the test, naming `what`, once `timeout` has passed.
pub fn wait_for<C: Condition>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> C,
) -> C::Output {
    let start = Instant::now();
    loop {
        if let Some(v) = check().ready() {
            return v;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(POLL);
    }
}
