//! Pod Security levels and versions, and the policy a namespace's labels
//! give, as upstream's `k8s.io/pod-security-admission/api`: a label with
//! a bad level is taken as `restricted` for enforce (fail closed) and as
//! `privileged` for audit and warn (fail open), a bad version as
//! `latest`, and each bad value is reported as a field error.

use std::collections::BTreeMap;
use std::fmt;

use bosun::validation::FieldError;

pub const ENFORCE_LEVEL_LABEL: &str = "pod-security.kubernetes.io/enforce";
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
pub const AUDIT_LEVEL_LABEL: &str = "pod-security.kubernetes.io/audit";
pub const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
pub const WARN_LEVEL_LABEL: &str = "pod-security.kubernetes.io/warn";
pub const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// Upstream's `ParseLevel` error.
const LEVEL_ERROR: &str = "must be one of privileged, baseline, restricted";
/// Upstream's `ParseVersion` error.
const VERSION_ERROR: &str = "must be \"latest\" or \"v1.x\"";

/// A Pod Security Standard, ordered from least to most strict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    /// `privileged`, `baseline` or `restricted`; anything else is an error
    /// (upstream then evaluates `restricted`).
    pub fn parse(s: &str) -> Result<Level, &'static str> {
        match s {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            _ => Err(LEVEL_ERROR),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy version: `latest` or `v1.<minor>` (there is only major 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    Latest,
    V1(u32),
}

impl Version {
    /// `latest` or `v1.x` without leading zeros, as upstream's
    /// `^v1\.([0-9]|[1-9][0-9]*)$`.
    pub fn parse(s: &str) -> Result<Version, &'static str> {
        if s == "latest" {
            return Ok(Version::Latest);
        }
        let minor = s.strip_prefix("v1.").ok_or(VERSION_ERROR)?;
        let digits = !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit());
        if !digits || (minor.len() > 1 && minor.starts_with('0')) {
            return Err(VERSION_ERROR);
        }
        minor.parse().map(Version::V1).map_err(|_| VERSION_ERROR)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Latest => f.write_str("latest"),
            Version::V1(minor) => write!(f, "v1.{minor}"),
        }
    }
}

/// A level at a version, printed as upstream prints it: `baseline:latest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    pub level: Level,
    pub version: Version,
}

impl LevelVersion {
    pub const PRIVILEGED: LevelVersion = LevelVersion {
        level: Level::Privileged,
        version: Version::Latest,
    };
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level, self.version)
    }
}

/// What each mode evaluates a namespace's pods against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub enforce: LevelVersion,
    pub audit: LevelVersion,
    pub warn: LevelVersion,
}

impl Default for Policy {
    /// Upstream's default: privileged in every mode.
    fn default() -> Self {
        Policy {
            enforce: LevelVersion::PRIVILEGED,
            audit: LevelVersion::PRIVILEGED,
            warn: LevelVersion::PRIVILEGED,
        }
    }
}

impl Policy {
    pub fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn]
            .iter()
            .all(|lv| lv.level == Level::Privileged)
    }

    /// The cluster default of `--pod-security-default`:
    /// `MODE=LEVEL[:VERSION]` items separated by commas, each mode
    /// (`enforce`, `audit`, `warn`) at most once, e.g.
    /// `enforce=baseline,warn=restricted:v1.30`. Modes left out stay
    /// privileged; an empty value is privileged everywhere.
    pub fn parse_defaults(s: &str) -> Result<Policy, String> {
        let mut policy = Policy::default();
        let mut seen = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (mode, value) = item.split_once('=').ok_or_else(|| {
                format!(
                    "{item:?} is not MODE=LEVEL[:VERSION] (e.g. enforce=baseline,warn=restricted)"
                )
            })?;
            let (mode, value) = (mode.trim(), value.trim());
            if seen.contains(&mode) {
                return Err(format!("mode {mode:?} is given more than once"));
            }
            let (level, version) = match value.split_once(':') {
                Some((l, v)) => (l, Some(v)),
                None => (value, None),
            };
            let level = Level::parse(level).map_err(|e| format!("{mode} level {level:?} {e}"))?;
            let version = match version {
                Some(v) => Version::parse(v).map_err(|e| format!("{mode} version {v:?} {e}"))?,
                None => Version::Latest,
            };
            let lv = LevelVersion { level, version };
            match mode {
                "enforce" => policy.enforce = lv,
                "audit" => policy.audit = lv,
                "warn" => policy.warn = lv,
                _ => {
                    return Err(format!(
                        "unknown mode {mode:?} in {item:?}: must be enforce, audit or warn"
                    ))
                }
            }
            seen.push(mode);
        }
        Ok(policy)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "enforce={},audit={},warn={}",
            self.enforce, self.audit, self.warn
        )
    }
}

fn label_error(label: &str, value: &str, detail: &str) -> FieldError {
    FieldError::invalid(format!("metadata.labels[{label}]"), value, detail)
}

/// The policy a namespace's labels give over `defaults`, and what was
/// wrong with them (upstream's `PolicyToEvaluate`). A valid policy is
/// always returned: a bad enforce level is `restricted`, a bad audit or
/// warn level `privileged`, a bad version `latest`. A warn level left out
/// follows an explicitly stricter enforce level (and its version).
pub fn policy_to_evaluate(
    labels: &BTreeMap<String, String>,
    defaults: &Policy,
) -> (Policy, Vec<FieldError>) {
    let mut p = *defaults;
    let mut errors = Vec::new();
    let level = |label: &str, fallback: Level, errors: &mut Vec<FieldError>| {
        labels.get(label).map(|v| match Level::parse(v) {
            Ok(l) => (l, true),
            Err(e) => {
                errors.push(label_error(label, v, e));
                (fallback, false)
            }
        })
    };
    let version = |label: &str, errors: &mut Vec<FieldError>| {
        labels.get(label).map(|v| {
            Version::parse(v).unwrap_or_else(|e| {
                errors.push(label_error(label, v, e));
                Version::Latest
            })
        })
    };
    let mut has_enforce_level = false;
    if let Some((l, ok)) = level(ENFORCE_LEVEL_LABEL, Level::Restricted, &mut errors) {
        p.enforce.level = l;
        has_enforce_level = ok;
    }
    if let Some(v) = version(ENFORCE_VERSION_LABEL, &mut errors) {
        p.enforce.version = v;
    }
    if let Some((l, _)) = level(AUDIT_LEVEL_LABEL, Level::Privileged, &mut errors) {
        p.audit.level = l;
    }
    if let Some(v) = version(AUDIT_VERSION_LABEL, &mut errors) {
        p.audit.version = v;
    }
    let has_warn_level = labels.contains_key(WARN_LEVEL_LABEL);
    if let Some((l, _)) = level(WARN_LEVEL_LABEL, Level::Privileged, &mut errors) {
        p.warn.level = l;
    }
    let warn_version = version(WARN_VERSION_LABEL, &mut errors);
    if let Some(v) = warn_version {
        p.warn.version = v;
    }
    if !has_warn_level && has_enforce_level && p.enforce.level > p.warn.level {
        p.warn.level = p.enforce.level;
        if warn_version.is_none() {
            p.warn.version = p.enforce.version;
        }
    }
    (p, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn lv(level: Level, version: Version) -> LevelVersion {
        LevelVersion { level, version }
    }

    #[test]
    fn levels_and_versions_parse_as_upstream() {
        assert_eq!(Level::parse("baseline"), Ok(Level::Baseline));
        assert_eq!(
            Level::parse("Baseline"),
            Err("must be one of privileged, baseline, restricted")
        );
        assert_eq!(Version::parse("latest"), Ok(Version::Latest));
        assert_eq!(Version::parse("v1.0"), Ok(Version::V1(0)));
        assert_eq!(Version::parse("v1.30"), Ok(Version::V1(30)));
        for bad in [
            "v1.01", "v2.1", "1.30", "v1.", "v1.x", "v1.-1", "Latest", "",
        ] {
            assert_eq!(
                Version::parse(bad),
                Err("must be \"latest\" or \"v1.x\""),
                "{bad}"
            );
        }
        assert_eq!(
            lv(Level::Restricted, Version::V1(29)).to_string(),
            "restricted:v1.29"
        );
        assert_eq!(LevelVersion::PRIVILEGED.to_string(), "privileged:latest");
    }

    #[test]
    fn labels_override_the_defaults_and_bad_values_fail_closed_for_enforce() {
        let (p, errs) = policy_to_evaluate(&labels(&[]), &Policy::default());
        assert!(p.fully_privileged() && errs.is_empty());

        let (p, errs) = policy_to_evaluate(
            &labels(&[
                (ENFORCE_LEVEL_LABEL, "bogus"),
                (AUDIT_LEVEL_LABEL, "bogus"),
                (WARN_LEVEL_LABEL, "bogus"),
                (WARN_VERSION_LABEL, "v1"),
            ]),
            &Policy::default(),
        );
        assert_eq!(p.enforce, lv(Level::Restricted, Version::Latest));
        assert_eq!(p.audit.level, Level::Privileged);
        assert_eq!(p.warn.level, Level::Privileged);
        let messages: Vec<String> = errs.iter().map(FieldError::message).collect();
        assert_eq!(
            messages,
            [
                "metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"bogus\": must be one of privileged, baseline, restricted",
                "metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: \"bogus\": must be one of privileged, baseline, restricted",
                "metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: \"bogus\": must be one of privileged, baseline, restricted",
                "metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: \"v1\": must be \"latest\" or \"v1.x\"",
            ]
        );
    }

    #[test]
    fn warn_follows_a_stricter_enforce_unless_set() {
        let (p, _) = policy_to_evaluate(
            &labels(&[
                (ENFORCE_LEVEL_LABEL, "baseline"),
                (ENFORCE_VERSION_LABEL, "v1.25"),
            ]),
            &Policy::default(),
        );
        assert_eq!(p.enforce, lv(Level::Baseline, Version::V1(25)));
        assert_eq!(p.warn, lv(Level::Baseline, Version::V1(25)));
        assert_eq!(p.audit, LevelVersion::PRIVILEGED);

        let (p, _) = policy_to_evaluate(
            &labels(&[
                (ENFORCE_LEVEL_LABEL, "restricted"),
                (WARN_LEVEL_LABEL, "baseline"),
            ]),
            &Policy::default(),
        );
        assert_eq!(p.warn.level, Level::Baseline);

        // The cluster default stays where labels say nothing.
        let defaults = Policy::parse_defaults("enforce=baseline,warn=restricted").unwrap();
        let (p, _) = policy_to_evaluate(&labels(&[(AUDIT_LEVEL_LABEL, "baseline")]), &defaults);
        assert_eq!(p.enforce.level, Level::Baseline);
        assert_eq!(p.warn.level, Level::Restricted);
        assert_eq!(p.audit.level, Level::Baseline);
    }

    #[test]
    fn the_flag_default_names_what_is_wrong() {
        assert_eq!(Policy::parse_defaults("").unwrap(), Policy::default());
        let p = Policy::parse_defaults("enforce=baseline, warn=restricted:v1.30").unwrap();
        assert_eq!(p.enforce, lv(Level::Baseline, Version::Latest));
        assert_eq!(p.warn, lv(Level::Restricted, Version::V1(30)));
        assert_eq!(p.audit, LevelVersion::PRIVILEGED);
        assert_eq!(
            p.to_string(),
            "enforce=baseline:latest,audit=privileged:latest,warn=restricted:v1.30"
        );
        let err = |s| Policy::parse_defaults(s).unwrap_err();
        assert_eq!(
            err("enforce=strict"),
            "enforce level \"strict\" must be one of privileged, baseline, restricted"
        );
        assert_eq!(
            err("warn=baseline:1.30"),
            "warn version \"1.30\" must be \"latest\" or \"v1.x\""
        );
        assert_eq!(
            err("deny=baseline"),
            "unknown mode \"deny\" in \"deny=baseline\": must be enforce, audit or warn"
        );
        assert_eq!(
            err("baseline"),
            "\"baseline\" is not MODE=LEVEL[:VERSION] (e.g. enforce=baseline,warn=restricted)"
        );
        assert_eq!(
            err("warn=baseline,warn=restricted"),
            "mode \"warn\" is given more than once"
        );
    }
}
