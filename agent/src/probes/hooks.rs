//! Lifecycle hooks: postStart, run right after the worker starts a
//! container (which counts as not running until it is done), and preStop,
//! run before the stop signal within the pod's grace period. Both run an
//! [`Action`] against the container; a failure is reported in the
//! kubelet's words.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{LifecycleHandler, Pod};

use super::actions::{Action, Outcome, Target};

/// How long a postStart hook may run (Kubernetes sets no bound; one that
/// hangs forever would keep the container waiting forever).
pub const POST_START_TIMEOUT: Duration = Duration::from_secs(300);

/// After a preStop hook, the container still gets at least this long
/// between SIGTERM and SIGKILL (the kubelet's minimum grace period).
pub const MIN_GRACE_AFTER_PRE_STOP: Duration = Duration::from_secs(2);

/// The postStart hook's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookState {
    /// Running; the container counts as not yet running.
    Running,
    /// Done, or there was none to run.
    Done,
    Failed(String),
}

/// Runs a postStart hook (bounded by [`POST_START_TIMEOUT`]) and says how
/// it went: [`HookState::Done`], or [`HookState::Failed`] with the
/// message of the `FailedPostStartHook` event.
pub async fn run_post_start(target: &Target, hook: &Action) -> HookState {
    match target.run(hook, POST_START_TIMEOUT).await {
        Outcome::Success => HookState::Done,
        Outcome::Failure(msg) => HookState::Failed(format!("{}: {msg}", hook.hook_description())),
    }
}

/// Runs a preStop hook within `grace` and returns how long the container
/// then gets between SIGTERM and SIGKILL, and the hook's failure, if any.
///
/// As in the kubelet, the hook's time comes out of the grace period, but
/// at least [`MIN_GRACE_AFTER_PRE_STOP`] is left; with no grace at all
/// (a forced stop) the hook does not run.
pub async fn run_pre_stop(
    target: &Target,
    hook: Option<&LifecycleHandler>,
    grace: Duration,
) -> (Duration, Option<String>) {
    let Some(hook) = hook.filter(|_| !grace.is_zero()) else {
        return (grace, None);
    };
    let started = Instant::now();
    let action = Action::of_hook(hook);
    let failure = match tokio::time::timeout(grace, target.run(&action, grace)).await {
        Ok(Outcome::Success) => None,
        Ok(Outcome::Failure(msg)) => Some(msg),
        Err(_) => Some(format!("hook did not finish within {grace:?}")),
    };
    let left = grace
        .saturating_sub(started.elapsed())
        .max(MIN_GRACE_AFTER_PRE_STOP);
    (
        left,
        failure.map(|msg| format!("{}: {msg}", action.hook_description())),
    )
}

/// The kubelet's message for a failed lifecycle hook.
pub fn hook_failure_message(pod: &Pod, container: &str, failure: &str) -> String {
    format!(
        "{failure} (Container \"{container}\" in Pod \"{}_{}({})\")",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::probes::testing::target;
    use crate::runtime::fake::FakeRuntime;
    use serde_json::json;

    #[tokio::test]
    async fn pre_stop_takes_its_time_out_of_the_grace_period() {
        let rt = Arc::new(FakeRuntime::new());
        let t = target(rt.clone(), "127.0.0.1");
        let hook: LifecycleHandler =
            serde_json::from_value(json!({"sleep": {"seconds": 1}})).unwrap();
        let (left, failure) = run_pre_stop(&t, Some(&hook), Duration::from_secs(10)).await;
        assert!(failure.is_none());
        assert!(
            left <= Duration::from_secs(9) && left > Duration::from_secs(8),
            "{left:?}"
        );
        // At least the minimum is left, however long the hook took.
        let (left, _) = run_pre_stop(&t, Some(&hook), Duration::from_secs(1)).await;
        assert_eq!(left, MIN_GRACE_AFTER_PRE_STOP);
        // A forced stop skips the hook.
        let exec: LifecycleHandler =
            serde_json::from_value(json!({"exec": {"command": ["x"]}})).unwrap();
        let (left, _) = run_pre_stop(&t, Some(&exec), Duration::ZERO).await;
        assert_eq!(left, Duration::ZERO);
        assert!(rt.calls().is_empty());
        rt.set_exec_result("c1", 1);
        let (_, failure) = run_pre_stop(&t, Some(&exec), Duration::from_secs(5)).await;
        assert!(failure.unwrap().starts_with("Exec lifecycle hook ([x])"));
    }
}
