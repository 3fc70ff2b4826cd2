//! The checks of each level at each version, as upstream's
//! `policy/registry.go`: every check has versions, each from a minimum
//! policy version on; a level at a version runs, for each check, the
//! newest version not newer than it. `restricted` runs the baseline checks
//! too, except those a restricted check overrides (restricted volume types
//! replace hostPath volumes, restricted capabilities and seccomp replace
//! the baseline ones). Checks run in the order of their IDs, baseline
//! first, so messages come out in upstream's order. `latest` and versions
//! past the newest check mean the newest checks.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde_json::Value;

use super::levels::{Level, LevelVersion, Version};
use super::{baseline, restricted};

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

fn all_checks() -> impl Iterator<Item = &'static Check> {
    baseline::CHECKS.iter().chain(restricted::CHECKS.iter())
}

/// The newest minimum version of any check: what `latest` means.
pub fn newest_minor() -> u32 {
    all_checks()
        .filter_map(|c| c.versions.last())
        .map(|v| v.min_minor)
        .max()
        .unwrap_or(0)
}

/// The version of `check` in force at `v1.<minor>`, if any.
fn in_force(check: &Check, minor: u32) -> Option<&'static VersionedCheck> {
    check.versions.iter().rev().find(|v| v.min_minor <= minor)
}

/// Runs the checks of `lv` on `pod`; what they forbid, in upstream's order.
pub fn evaluate(lv: LevelVersion, pod: &PodView) -> Vec<Forbidden> {
    if lv.level == Level::Privileged {
        return Vec::new();
    }
    let newest = newest_minor();
    let minor = match lv.version {
        Version::Latest => newest,
        Version::V1(m) => m.min(newest),
    };
    let mut ordered: Vec<(Level, &'static str, &'static VersionedCheck)> = all_checks()
        .filter(|c| c.level <= lv.level)
        .filter_map(|c| in_force(c, minor).map(|v| (c.level, c.id, v)))
        .collect();
    let overridden: Vec<&str> = ordered
        .iter()
        .filter(|(level, _, _)| *level == Level::Restricted)
        .flat_map(|(_, _, v)| v.overrides.iter().copied())
        .collect();
    ordered.retain(|(level, id, _)| *level != Level::Baseline || !overridden.contains(id));
    ordered.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    ordered
        .iter()
        .filter_map(|(_, _, v)| (v.check)(pod))
        .collect()
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
