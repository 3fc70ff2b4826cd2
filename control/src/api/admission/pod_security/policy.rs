//! The vocabulary of the checks, as upstream's `policy/checks.go` and
//! `helpers.go`: the pod as the checks see it, a check and its versions,
//! what a check forbids, and the wording helpers every message uses.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde_json::Value;

use super::levels::Level;

/// What a pod (or a workload's pod template) is checked on: its
/// annotations and spec, and every container (init, app, ephemeral) in
/// upstream's visiting order.
pub struct PodView {
    pub annotations: BTreeMap<String, String>,
    pub spec: PodSpec,
    pub containers: Vec<Container>,
    /// `spec.volumes` as sent, so that every volume source is seen, even
    /// those the typed spec no longer has.
    pub volumes: Vec<Value>,
}

impl PodView {
    /// From a pod's (or template's) `metadata` and `spec`.
    pub fn new(metadata: Option<&Value>, spec: &Value) -> Result<PodView, serde_json::Error> {
        let annotations = metadata
            .and_then(|m| m.get("annotations"))
            .map(|a| serde_json::from_value(a.clone()))
            .transpose()?
            .unwrap_or_default();
        let typed: PodSpec = serde_json::from_value(spec.clone())?;
        let mut containers: Vec<Container> = Vec::new();
        containers.extend(typed.init_containers.iter().flatten().cloned());
        containers.extend(typed.containers.iter().cloned());
        // An ephemeral container has a container's fields (and a target).
        for e in spec
            .get("ephemeralContainers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            containers.push(serde_json::from_value(e.clone())?);
        }
        let volumes = spec
            .get("volumes")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        Ok(PodView {
            annotations,
            spec: typed,
            containers,
            volumes,
        })
    }

    /// `spec.securityContext`, if set.
    pub fn pod_security_context(&self) -> Option<&k8s_openapi::api::core::v1::PodSecurityContext> {
        self.spec.security_context.as_ref()
    }

    /// Whether the pod runs in a user namespace (`hostUsers: false`).
    pub fn in_user_namespace(&self) -> bool {
        self.spec.host_users == Some(false)
    }

    /// Whether `spec.os.name` is `windows`.
    pub fn is_windows(&self) -> bool {
        self.spec.os.as_ref().is_some_and(|os| os.name == "windows")
    }
}

/// Why a check forbids a pod: a short reason and, optionally, which
/// fields and values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forbidden {
    pub reason: String,
    pub detail: String,
}

/// A check's verdict: `None` allows the pod.
pub type CheckFn = fn(&PodView) -> Option<Forbidden>;

/// One version of a check, in force from `v1.<min_minor>` on.
pub struct VersionedCheck {
    pub min_minor: u32,
    pub check: CheckFn,
    /// Baseline checks this (restricted) one replaces.
    pub overrides: &'static [&'static str],
}

pub struct Check {
    pub id: &'static str,
    pub level: Level,
    /// Oldest first.
    pub versions: &'static [VersionedCheck],
}

/// `host ports, privileged`: the reasons alone (upstream's
/// `ForbiddenReason`, used for the existing pods of a namespace).
pub fn forbidden_reason(results: &[Forbidden]) -> String {
    let reasons: Vec<&str> = results.iter().map(|r| r.reason.as_str()).collect();
    reasons.join(", ")
}

/// `hostPort (container "a" uses hostPort 80), privileged (...)`: each
/// reason with its detail in parentheses (upstream's `ForbiddenDetail`).
pub fn forbidden_detail(results: &[Forbidden]) -> String {
    let parts: Vec<String> = results
        .iter()
        .map(|r| {
            if r.detail.is_empty() {
                r.reason.clone()
            } else {
                format!("{} ({})", r.reason, r.detail)
            }
        })
        .collect();
    parts.join(", ")
}

/// `"a", "b"`, as upstream's `joinQuote`.
pub fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let inner: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("\"{}\"", inner.join("\", \""))
}

pub fn pluralize<'a>(singular: &'a str, plural: &'a str, count: usize) -> &'a str {
    if count == 1 {
        singular
    } else {
        plural
    }
}

/// `container "a"` or `containers "a", "b"`.
pub fn containers_named<S: AsRef<str>>(names: &[S]) -> String {
    format!(
        "{} {}",
        pluralize("container", "containers", names.len()),
        join_quote(names)
    )
}

/// Go's `%q` of a string: quoted, with `"`, `\` and control characters
/// escaped.
pub fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A forbidding result.
pub fn forbid(reason: impl Into<String>, detail: impl Into<String>) -> Option<Forbidden> {
    Some(Forbidden {
        reason: reason.into(),
        detail: detail.into(),
    })
}

/// The names of the containers `bad` picks, in visiting order.
pub fn containers_where(pod: &PodView, bad: impl Fn(&Container) -> bool) -> Vec<String> {
    pod.containers
        .iter()
        .filter(|c| bad(c))
        .map(|c| c.name.clone())
        .collect()
}

/// `pod and containers "a", "b"`: who set a forbidden value.
pub fn setters(pod_set: bool, containers: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    if pod_set {
        out.push("pod".to_string());
    }
    if !containers.is_empty() {
        out.push(containers_named(containers));
    }
    out
}
