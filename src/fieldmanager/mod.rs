//! Server-side apply's field management: which manager owns which fields
//! of an object (`metadata.managedFields`), computed on plain JSON values.
//!
//! - [`fieldset`]: the set of field paths and its `FieldsV1` form.
//! - [`walk`]: fields an object sets, differences, merge and removal,
//!   against the list types of [`crate::patch::apply_list_type`].
//! - [`managed`]: the entries, and how apply and update move ownership.

pub mod fieldset;
pub mod managed;
pub mod walk;

#[cfg(test)]
mod tests;

pub use fieldset::FieldSet;
pub use managed::{Actor, Applied, Conflict, Entry, Scope};

/// The manager of bosun's controllers' writes, as kube-controller-manager's
/// clients are named in `managedFields`.
pub const KUBE_CONTROLLER_MANAGER: &str = "kube-controller-manager";
/// The manager of the scheduler's writes.
pub const KUBE_SCHEDULER: &str = "kube-scheduler";
/// The manager of the agent's writes (pod and node status), as the
/// kubelet's.
pub const KUBELET: &str = "kubelet";

/// Longest field manager name the API accepts.
pub const MAX_MANAGER_LEN: usize = 128;

/// A client's User-Agent as client-go makes it
/// (`<component>/<version> (<os>/<arch>) kubernetes/<commit>`, here
/// `bosun/<bosun's version>`), so the API names the component as the
/// manager of what it writes without a `fieldManager`.
pub fn user_agent(component: &str) -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!(
        "{component}/{} ({}/{arch}) bosun/{}",
        crate::version::git_version(),
        std::env::consts::OS,
        env!("CARGO_PKG_VERSION")
    )
}

/// The field manager the apiserver takes from a User-Agent when a write
/// names none: the part before the first `/` (`kubectl/v1.32 ...` is
/// `kubectl`), at most [`MAX_MANAGER_LEN`] characters; `None` for an
/// empty one.
pub fn manager_of_user_agent(agent: &str) -> Option<String> {
    let name: String = agent
        .split('/')
        .next()
        .unwrap_or("")
        .chars()
        .take(MAX_MANAGER_LEN)
        .collect();
    (!name.is_empty()).then_some(name)
}
