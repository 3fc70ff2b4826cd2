//! When a CronJob is due (Kubernetes' `pkg/controller/cronjob/utils.go`):
//! the most recent scheduled time not yet run, how many were missed, and
//! how long until the next one. The cron syntax and the next-time
//! arithmetic are [`bosun::cron`], shared with validation.

use std::time::Duration;

use bosun::cron::{Schedule, TimeZone};
use chrono::{DateTime, Utc};
use k8s_openapi::api::batch::v1::CronJob;

use crate::toolkit::to_chrono;

/// More missed times than this and only the latest is considered, with a
/// warning (Kubernetes' arbitrary "more than 80, less than lots").
pub const MANY_MISSED: i64 = 100;

/// The requeue lands this long after the scheduled time, so the sync then
/// sees it as passed (Kubernetes' `nextScheduleDelta`).
pub const NEXT_SCHEDULE_DELTA: Duration = Duration::from_millis(100);

/// What `mostRecentScheduleTime` finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MostRecent {
    /// Where the search started: lastScheduleTime, else creation (later
    /// of it and `now - startingDeadlineSeconds` when that counts).
    pub earliest: DateTime<Utc>,
    /// The latest scheduled time in `(earliest, now]`, if any.
    pub time: Option<DateTime<Utc>>,
    /// Roughly how many scheduled times passed since `earliest`.
    pub missed: i64,
}

/// The schedule's next time after `t` in `tz`; None when it never comes.
fn next(schedule: &Schedule, tz: &TimeZone, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
    schedule.next(t, tz)
}

/// Kubernetes' `mostRecentScheduleTime`: the latest scheduled time at or
/// before `now` since the last one run (or the CronJob's creation).
/// Counts the missed ones by the interval between the first two, then
/// walks the schedule only over the last two intervals, so a CronJob
/// years behind costs no more than one on time. An error for a schedule
/// that never fires or fires less than a second apart.
pub fn most_recent_schedule_time(
    cj: &CronJob,
    now: DateTime<Utc>,
    schedule: &Schedule,
    tz: &TimeZone,
    include_starting_deadline: bool,
) -> Result<MostRecent, String> {
    let created = cj
        .metadata
        .creation_timestamp
        .as_ref()
        .map(to_chrono)
        .unwrap_or(now);
    let mut earliest = cj
        .status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref())
        .map(to_chrono)
        .unwrap_or(created);
    if include_starting_deadline {
        if let Some(secs) = cj.spec.starting_deadline_seconds {
            // Nothing before the deadline will be started.
            let deadline = now - chrono::Duration::seconds(secs);
            if deadline > earliest {
                earliest = deadline;
            }
        }
    }
    let none = |missed| MostRecent {
        earliest,
        time: None,
        missed,
    };
    let never = "time difference between two schedules is less than 1 second".to_string();
    let Some(t1) = next(schedule, tz, earliest) else {
        return Err(never);
    };
    if now < t1 {
        return Ok(none(0));
    }
    let Some(t2) = next(schedule, tz, t1) else {
        return Err(never);
    };
    if now < t2 {
        return Ok(MostRecent {
            earliest,
            time: Some(t1),
            missed: 0,
        });
    }
    // Go's Duration.Round(time.Second).Seconds(), truncated.
    let between = ((t2 - t1).num_milliseconds() + 500).div_euclid(1000);
    if between < 1 {
        return Err(never);
    }
    let elapsed = (now - t1).num_seconds();
    let missed = elapsed / between + 1;
    // Back two intervals from the estimate, then walk the schedule: exact
    // for uneven schedules such as `30 6-16/4 * * 1-5`.
    let potential = t1 + chrono::Duration::seconds((missed - 2) * between);
    let mut most_recent = None;
    let mut t = next(schedule, tz, potential);
    while let Some(at) = t.filter(|at| *at <= now) {
        most_recent = Some(at);
        t = next(schedule, tz, at);
    }
    Ok(MostRecent {
        earliest,
        time: most_recent,
        missed,
    })
}

/// Kubernetes' `nextScheduleTimeDuration`: how long until the sync after
/// the next scheduled time. None when the schedule never fires again.
pub fn requeue_after(
    cj: &CronJob,
    now: DateTime<Utc>,
    schedule: &Schedule,
    tz: &TimeZone,
) -> Option<Duration> {
    let from = match most_recent_schedule_time(cj, now, schedule, tz, false) {
        Err(_) => now,
        Ok(MostRecent { time: Some(t), .. }) => t,
        Ok(MostRecent {
            earliest,
            missed: 0,
            ..
        }) => earliest,
        // Missed ones but none in reach: aim after now.
        Ok(_) => now,
    };
    let at = next(schedule, tz, from)?;
    let wait = (at - now).to_std().unwrap_or(Duration::ZERO);
    Some(wait + NEXT_SCHEDULE_DELTA)
}
