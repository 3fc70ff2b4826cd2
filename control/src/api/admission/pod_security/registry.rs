//! The checks of each level at each version, as upstream's
//! `policy/registry.go`: every check has versions, each from a minimum
//! policy version on; a level at a version runs, for each check, the
//! newest version not newer than it. `restricted` runs the baseline checks
//! too, except those a restricted check overrides (restricted volume types
//! replace hostPath volumes, restricted capabilities and seccomp replace
//! the baseline ones). Checks run in the order of their IDs, baseline
//! first, so messages come out in upstream's order. `latest` and versions
//! past the newest check mean the newest checks.

use super::levels::{Level, LevelVersion, Version};
use super::policy::{Check, Forbidden, PodView, VersionedCheck};
use super::{baseline, restricted};

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
