//! Printers for the `batch` group: Job and CronJob, as kubectl's printers show them.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::{age_cell, human_age};
use super::column::{Column, KindPrinter, AGE, CONTAINERS, IMAGES, NAME, SELECTOR};
use super::fields::{
    array_at, container_cells, has_condition, int_at, is_deleting, name_cell, non_empty_or, str_at,
    time_at,
};
use crate::selector::format_label_selector_json;

pub(super) const JOB: KindPrinter = KindPrinter {
    group: "batch",
    kind: "Job",
    columns: &[
        NAME,
        Column::text("Status", "Status of the job."),
        Column::text(
            "Completions",
            "The desired number of successfully finished pods the job should be run with.",
        ),
        Column::text("Duration", "Time required to complete the job."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: job_cells,
};

fn job_cells(job: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (name, age) = (name_cell(job), age_cell(job, now));
    let succeeded = int_at(job, "/status/succeeded");
    let completions = match job.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(n) => format!("{succeeded}/{n}"),
        None => {
            let parallelism = int_at(job, "/spec/parallelism");
            if parallelism > 1 {
                format!("{succeeded}/1 of {parallelism}")
            } else {
                format!("{succeeded}/1")
            }
        }
    };
    let duration = match (
        time_at(job, "/status/startTime"),
        time_at(job, "/status/completionTime"),
    ) {
        (None, _) => String::new(),
        (Some(start), None) => human_age(start, now),
        (Some(start), Some(done)) => human_age(start, done),
    };
    let cond = |t: &str| has_condition(job, "/status/conditions", t);
    let status = if cond("Complete") {
        "Complete"
    } else if cond("Failed") {
        "Failed"
    } else if is_deleting(job) {
        "Terminating"
    } else if cond("Suspended") {
        "Suspended"
    } else if cond("FailureTarget") {
        "FailureTarget"
    } else if cond("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let (names, images) = container_cells(job, "/spec/template/spec/containers");
    vec![
        name,
        status.into(),
        completions.into(),
        duration.into(),
        age,
        names,
        images,
        format_label_selector_json(job.pointer("/spec/selector")).into(),
    ]
}

pub(super) const CRON_JOB: KindPrinter = KindPrinter {
    group: "batch",
    kind: "CronJob",
    columns: &[
        NAME,
        Column::text("Schedule", "The schedule in Cron format."),
        Column::text("Timezone", "The time zone name for the given schedule."),
        Column::text(
            "Suspend",
            "This flag tells the controller to suspend subsequent executions.",
        ),
        Column::integer("Active", "A list of pointers to currently running jobs."),
        Column::text(
            "Last Schedule",
            "Information when was the last time the job was successfully scheduled.",
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: cron_job_cells,
};

fn cron_job_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (name, age) = (name_cell(obj), age_cell(obj, now));
    let (names, images) = container_cells(obj, "/spec/jobTemplate/spec/template/spec/containers");
    let last = match time_at(obj, "/status/lastScheduleTime") {
        Some(t) => human_age(t, now),
        None => "<none>".to_string(),
    };
    let selector = format_label_selector_json(obj.pointer("/spec/jobTemplate/spec/selector"));
    vec![
        name,
        str_at(obj, "/spec/schedule").into(),
        non_empty_or(str_at(obj, "/spec/timeZone"), "<none>").into(),
        match obj.pointer("/spec/suspend").and_then(Value::as_bool) {
            Some(true) => "True",
            Some(false) => "False",
            None => "<unset>",
        }
        .into(),
        array_at(obj, "/status/active").len().into(),
        last.into(),
        age,
        names,
        images,
        selector.into(),
    ]
}
