//! Container probes and lifecycle hooks, by Kubernetes' rules.
//!
//! - [`actions`]: how a probe or hook reaches a container (`exec` through
//!   the runtime, `httpGet` and `tcpSocket` over the pod network, `sleep`);
//! - [`hooks`]: the postStart and preStop lifecycle hooks;
//! - [`runner`]: the probe state machine of one container instance
//!   (initial delay, period, thresholds, results), which the pod worker
//!   reads on every sync and which wakes it when a result matters.
//!
//! A restarted container gets a new runner, so results never leak from
//! one instance to the next.

pub mod actions;
pub mod hooks;
pub mod runner;
#[cfg(test)]
mod testing;

pub use actions::{Action, Outcome, Target};
pub use hooks::{
    hook_failure_message, run_post_start, run_pre_stop, HookState, MIN_GRACE_AFTER_PRE_STOP,
    POST_START_TIMEOUT,
};
pub use runner::{KillReason, ProbeKind, ProbeRunner, ProbeSpec, ProbeView};
