//! batch/v1: Job and CronJob, with the cron schedule syntax CronJobs accept.

use serde_json::Value;

use super::meta::{selector_is_empty, validate_label_selector};
use super::pod::{template_labels, template_labels_value, validate_pod_template};
use super::{child, get, nonnegative, str_of, sub, FieldError};
use crate::cron::Schedule;
use crate::selector::LabelSelector;

/// `validateJobSpec`; `template` = inside a CronJob's jobTemplate, whose selector is generated.
fn validate_job_spec(spec: &Value, path: &str, in_template: bool, errs: &mut Vec<FieldError>) {
    for k in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
    ] {
        nonnegative(errs, spec, k, path);
    }
    if let Some(mode) = get(spec, "completionMode").and_then(Value::as_str) {
        if mode != "NonIndexed" && mode != "Indexed" {
            errs.push(FieldError::not_supported(
                child(path, "completionMode"),
                mode,
                &["NonIndexed", "Indexed"],
            ));
        }
        if mode == "Indexed" && get(spec, "completions").is_none() {
            errs.push(FieldError::required(
                child(path, "completions"),
                "when completion mode is Indexed",
            ));
        }
    }
    let manual = spec
        .get("manualSelector")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let tpl = sub(spec, "template");
    if in_template {
        if let Some(sel) = get(spec, "selector") {
            errs.push(FieldError::invalid(
                child(path, "selector"),
                sel.clone(),
                "`selector` will be auto-generated",
            ));
        }
        if manual {
            errs.push(FieldError::not_supported(
                child(path, "manualSelector"),
                true,
                &["nil", "false"],
            ));
        }
    } else {
        match get(spec, "selector") {
            // Without manualSelector the API server generates the selector before validation;
            // a Job that still has none is the server's business, not the user's.
            None if !manual => {}
            None => errs.push(FieldError::required(child(path, "selector"), "")),
            Some(sel) => {
                let before = errs.len();
                validate_label_selector(sel, &child(path, "selector"), errs);
                if errs.len() == before {
                    if selector_is_empty(sel) {
                        errs.push(FieldError::required(child(path, "selector"), ""));
                    } else if let Ok(s) = LabelSelector::from_json(sel) {
                        if !s.matches(&template_labels(tpl)) {
                            let labels = template_labels_value(tpl);
                            errs.push(FieldError::invalid(
                                child(path, "template.metadata.labels"),
                                labels,
                                "`selector` does not match template `labels`",
                            ));
                        }
                    }
                }
            }
        }
    }
    let tpl_path = child(path, "template");
    validate_pod_template(tpl, &tpl_path, errs);
    let restart = str_of(sub(tpl, "spec"), "restartPolicy");
    if restart != "OnFailure" && restart != "Never" {
        errs.push(FieldError::not_supported(
            child(&tpl_path, "spec.restartPolicy"),
            restart,
            &["OnFailure", "Never"],
        ));
    }
}

pub(crate) fn validate_job(spec: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    validate_job_spec(spec, "spec", false, errs);
    if let Some(old) = old {
        for k in [
            "completions",
            "selector",
            "template",
            "completionMode",
            "podFailurePolicy",
            "backoffLimitPerIndex",
        ] {
            let (new, was) = (sub(spec, k), sub(old, k));
            if new != was {
                errs.push(FieldError::immutable(child("spec", k), new.clone()));
            }
        }
    }
}

pub(crate) fn validate_cronjob(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let spec = sub(obj, "spec");
    // The Job's name adds `-<minutes since the epoch>` (11 characters) to
    // the CronJob's, and must stay a DNS-1035 label (63).
    let name = str_of(sub(obj, "metadata"), "name");
    if old.is_none() && name.len() > 52 {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            "must be no more than 52 characters",
        ));
    }
    let schedule = str_of(spec, "schedule");
    if schedule.is_empty() {
        errs.push(FieldError::required("spec.schedule", ""));
    } else {
        if let Err(e) = Schedule::parse(schedule) {
            errs.push(FieldError::invalid("spec.schedule", schedule, e));
        }
        if schedule.contains("TZ") {
            errs.push(FieldError::invalid(
                "spec.schedule",
                schedule,
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            ));
        }
    }
    nonnegative(errs, spec, "startingDeadlineSeconds", "spec");
    match str_of(spec, "concurrencyPolicy") {
        "Allow" | "Forbid" | "Replace" => {}
        "" => errs.push(FieldError::required("spec.concurrencyPolicy", "")),
        other => errs.push(FieldError::not_supported(
            "spec.concurrencyPolicy",
            other,
            &["Allow", "Forbid", "Replace"],
        )),
    }
    nonnegative(errs, spec, "successfulJobsHistoryLimit", "spec");
    nonnegative(errs, spec, "failedJobsHistoryLimit", "spec");
    validate_job_spec(
        sub(sub(spec, "jobTemplate"), "spec"),
        "spec.jobTemplate.spec",
        true,
        errs,
    );
    if let Some(tz) = get(spec, "timeZone").and_then(Value::as_str) {
        if let Err(e) = validate_time_zone(tz) {
            errs.push(FieldError::invalid("spec.timeZone", tz, e));
        }
    }
}

/// Kubernetes' `validateTimeZone`: an IANA name this host knows, not
/// "Local", made of the characters zone names use.
fn validate_time_zone(tz: &str) -> Result<(), String> {
    if tz.is_empty() {
        return Err("timeZone must be nil or non-empty string".into());
    }
    let valid_part = |p: &str| {
        (1..=14).contains(&p.len())
            && p != "."
            && p != ".."
            && !p.starts_with('-')
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-+".contains(c))
    };
    if !tz.split('/').all(valid_part) {
        return Err(format!("unknown time zone {tz}"));
    }
    if tz.eq_ignore_ascii_case("Local") {
        return Err(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
                .into(),
        );
    }
    crate::cron::load_location(tz).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(spec: Value) -> Vec<String> {
        let mut errs = Vec::new();
        let obj = json!({"metadata": {"name": "hello"}, "spec": spec});
        validate_cronjob(&obj, None, &mut errs);
        // The template is not defaulted here; only the CronJob's own fields count.
        errs.iter()
            .map(|e| e.message())
            .filter(|m| !m.starts_with("spec.jobTemplate"))
            .collect()
    }

    fn cronjob(schedule: &str, tz: Option<&str>) -> Value {
        let mut spec = json!({"schedule": schedule, "concurrencyPolicy": "Allow",
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                "containers": [{"name": "c", "image": "busybox"}]}}}}});
        if let Some(tz) = tz {
            spec["timeZone"] = json!(tz);
        }
        spec
    }

    #[test]
    fn a_bad_schedule_is_rejected_naming_the_field() {
        assert!(errors(cronjob("*/1 * * * *", None)).is_empty());
        assert!(errors(cronjob("@every 1h30m", None)).is_empty());
        let errs = errors(cronjob("61 * * * *", None));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].contains("spec.schedule"), "{errs:?}");
        assert!(
            errs[0].contains("end of range (61) above maximum (59)"),
            "{errs:?}"
        );
        let errs = errors(cronjob("* * * * 7", None));
        assert!(errs[0].contains("spec.schedule"), "{errs:?}");
    }

    #[test]
    fn tz_in_the_schedule_is_rejected_for_the_time_zone_field() {
        let errs = errors(cronjob("TZ=UTC */1 * * * *", None));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].contains("spec.schedule"), "{errs:?}");
        assert!(errs[0].contains("use timeZone field instead"), "{errs:?}");
        let errs = errors(cronjob("CRON_TZ=Europe/Berlin 0 * * * *", None));
        assert!(errs[0].contains("use timeZone field instead"), "{errs:?}");
    }

    #[test]
    fn time_zones_are_iana_names() {
        assert!(errors(cronjob("0 9 * * *", Some("Europe/Berlin"))).is_empty());
        assert!(errors(cronjob("0 9 * * *", Some("America/New_York"))).is_empty());
        assert!(errors(cronjob("0 9 * * *", Some("UTC"))).is_empty());
        for bad in [
            "Mars/Olympus",
            "europe/berlin",
            "Local",
            "",
            "../etc/passwd",
        ] {
            let errs = errors(cronjob("0 9 * * *", Some(bad)));
            assert_eq!(errs.len(), 1, "{bad}: {errs:?}");
            assert!(errs[0].contains("spec.timeZone"), "{bad}: {errs:?}");
        }
        let errs = errors(cronjob("0 9 * * *", Some("Mars/Olympus")));
        assert!(
            errs[0].contains("unknown time zone Mars/Olympus"),
            "{errs:?}"
        );
    }

    #[test]
    fn names_leave_room_for_the_job_suffix() {
        let mut errs = Vec::new();
        let obj = json!({"metadata": {"name": "a".repeat(53)}, "spec": cronjob("@hourly", None)});
        validate_cronjob(&obj, None, &mut errs);
        assert!(errs[0].message().contains("metadata.name"));
        assert!(errs[0]
            .message()
            .contains("must be no more than 52 characters"));
    }
}
