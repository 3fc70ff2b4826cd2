//! batch/v1: Job and CronJob, with the cron schedule syntax CronJobs accept.

use serde_json::Value;

use super::meta::{selector_is_empty, validate_label_selector};
use super::pod::{template_labels, template_labels_value, validate_pod_template};
use super::{child, get, nonnegative, str_of, sub, FieldError};
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

pub(crate) fn validate_cronjob(spec: &Value, errs: &mut Vec<FieldError>) {
    let schedule = str_of(spec, "schedule");
    if schedule.is_empty() {
        errs.push(FieldError::required("spec.schedule", ""));
    } else {
        if schedule.contains("TZ") {
            errs.push(FieldError::invalid(
                "spec.schedule",
                schedule,
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            ));
        }
        if let Err(e) = parse_schedule(schedule) {
            errs.push(FieldError::invalid("spec.schedule", schedule, e));
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
}

/// A parsed five-field cron schedule: the allowed values of each field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub minutes: Vec<u32>,
    pub hours: Vec<u32>,
    pub days_of_month: Vec<u32>,
    pub months: Vec<u32>,
    pub days_of_week: Vec<u32>,
    /// Whether the day-of-month field was `*` (cron ORs the two day fields unless one is `*`).
    pub dom_star: bool,
    pub dow_star: bool,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

fn parse_value(s: &str, names: &[&str], name_base: u32) -> Result<u32, String> {
    let lower = s.to_ascii_lowercase();
    if let Some(i) = names.iter().position(|n| *n == lower) {
        return Ok(i as u32 + name_base);
    }
    s.parse::<u32>().map_err(|_| {
        format!("failed to parse int from {s}: strconv.Atoi: parsing {s:?}: invalid syntax")
    })
}

fn parse_field(
    field: &str,
    min: u32,
    max: u32,
    names: &[&str],
    name_base: u32,
) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                if s.contains('/') {
                    return Err(format!("too many slashes: {part}"));
                }
                let step: u32 = s.parse().map_err(|_| {
                    format!(
                        "failed to parse int from {s}: strconv.Atoi: parsing {s:?}: invalid syntax"
                    )
                })?;
                if step == 0 {
                    return Err(format!("step of range should be a positive number: {part}"));
                }
                (r, Some(step))
            }
            None => (part, None),
        };
        let (lo, hi) = if range == "*" || range == "?" {
            (min, max)
        } else {
            let bounds: Vec<&str> = range.split('-').collect();
            match bounds.as_slice() {
                [one] => {
                    let v = parse_value(one, names, name_base)?;
                    // `5/15` means from 5 to the end in steps of 15.
                    (v, if step.is_some() { max } else { v })
                }
                [a, b] => (
                    parse_value(a, names, name_base)?,
                    parse_value(b, names, name_base)?,
                ),
                _ => return Err(format!("too many hyphens: {range}")),
            }
        };
        if lo < min {
            return Err(format!(
                "beginning of range ({lo}) below minimum ({min}): {part}"
            ));
        }
        if hi > max {
            return Err(format!("end of range ({hi}) above maximum ({max}): {part}"));
        }
        if lo > hi {
            return Err(format!(
                "beginning of range ({lo}) beyond end of range ({hi}): {part}"
            ));
        }
        let step = step.unwrap_or(1);
        let mut v = lo;
        while v <= hi {
            out.push(v);
            v += step;
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Parses a standard cron schedule (`*/5 * * * *`, `0 9-17 * * MON-FRI`, `@hourly`),
/// with robfig/cron's error messages.
pub fn parse_schedule(spec: &str) -> Result<Schedule, String> {
    let spec = spec.trim();
    let expanded = if let Some(macro_name) = spec.strip_prefix('@') {
        match macro_name {
            "yearly" | "annually" => "0 0 1 1 *",
            "monthly" => "0 0 1 * *",
            "weekly" => "0 0 * * 0",
            "daily" | "midnight" => "0 0 * * *",
            "hourly" => "0 * * * *",
            _ => return Err(format!("unrecognized descriptor: {spec}")),
        }
    } else {
        spec
    };
    let fields: Vec<&str> = expanded.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    let mut days_of_week = parse_field(fields[4], 0, 7, &DAYS, 0)?;
    // 7 is Sunday too.
    if days_of_week.contains(&7) {
        days_of_week.retain(|d| *d != 7);
        if !days_of_week.contains(&0) {
            days_of_week.insert(0, 0);
        }
    }
    Ok(Schedule {
        minutes: parse_field(fields[0], 0, 59, &[], 0)?,
        hours: parse_field(fields[1], 0, 23, &[], 0)?,
        days_of_month: parse_field(fields[2], 1, 31, &[], 0)?,
        months: parse_field(fields[3], 1, 12, &MONTHS, 1)?,
        days_of_week,
        dom_star: fields[2].starts_with('*') || fields[2] == "?",
        dow_star: fields[4].starts_with('*') || fields[4] == "?",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cron_schedules() {
        let s = parse_schedule("*/1 * * * *").unwrap();
        assert_eq!(s.minutes.len(), 60);
        let s = parse_schedule("*/15 9-17 * * MON-FRI").unwrap();
        assert_eq!(s.minutes, vec![0, 15, 30, 45]);
        assert_eq!(s.hours, (9..=17).collect::<Vec<_>>());
        assert_eq!(s.days_of_week, vec![1, 2, 3, 4, 5]);
        assert!(!s.dow_star && s.dom_star);
        let s = parse_schedule("0,30 0 1,15 jan,jul 7").unwrap();
        assert_eq!(s.minutes, vec![0, 30]);
        assert_eq!(s.months, vec![1, 7]);
        assert_eq!(s.days_of_week, vec![0]);
        assert_eq!(parse_schedule("@hourly").unwrap().minutes, vec![0]);
        assert_eq!(parse_schedule("@daily").unwrap().hours, vec![0]);
        assert_eq!(
            parse_schedule("5/20 * * * *").unwrap().minutes,
            vec![5, 25, 45]
        );
    }

    #[test]
    fn cron_errors() {
        assert_eq!(
            parse_schedule("* * * *").unwrap_err(),
            "expected exactly 5 fields, found 4: [* * * *]"
        );
        assert_eq!(
            parse_schedule("@often").unwrap_err(),
            "unrecognized descriptor: @often"
        );
        assert_eq!(
            parse_schedule("60 * * * *").unwrap_err(),
            "end of range (60) above maximum (59): 60"
        );
        assert_eq!(
            parse_schedule("* * 0 * *").unwrap_err(),
            "beginning of range (0) below minimum (1): 0"
        );
        assert!(parse_schedule("*/0 * * * *")
            .unwrap_err()
            .contains("positive"));
        assert!(parse_schedule("x * * * *")
            .unwrap_err()
            .contains("failed to parse int from x"));
        assert!(parse_schedule("1-2-3 * * * *")
            .unwrap_err()
            .contains("too many hyphens"));
    }
}
