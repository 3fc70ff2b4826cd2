//! Ages and durations as kubectl prints them (Kubernetes' `duration.HumanDuration`), for
//! the AGE column, other time cells and `describe`.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::fields::time_at;

/// The AGE cell: kubectl's translateTimestampSince on `metadata.creationTimestamp`.
pub(super) fn age_cell(obj: &Value, now: DateTime<Utc>) -> Value {
    time_since(time_at(obj, "/metadata/creationTimestamp"), now).into()
}

/// The time since `t` as [`human_age`] prints it, `<unknown>` without one.
pub(super) fn time_since(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match t {
        Some(t) => human_age(t, now),
        None => "<unknown>".to_string(),
    }
}

/// kubectl's age format: 5s, 4m15s, 3h20m, 2d3h, 45d: [`human_duration`] of the time since
/// `created`.
pub fn human_age(created: DateTime<Utc>, now: DateTime<Utc>) -> String {
    human_duration(now.signed_duration_since(created))
}

/// Kubernetes' `duration.HumanDuration`, which kubectl prints ages and durations with in both
/// `get` and `describe`: about two significant figures (`119s`, `9m59s`, `179m`, `7h59m`,
/// `47h`, `7d23h`, `729d`, `2y`, `7y364d`, `8y`); `0s` for clock skew under two seconds,
/// `<invalid>` for more.
pub fn human_duration(d: chrono::Duration) -> String {
    // Whole seconds, truncated toward zero like Go's int(d.Seconds()).
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".to_string();
    } else if seconds < 0 {
        return "0s".to_string();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return with_remainder(minutes, "m", seconds % 60, "s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return with_remainder(hours, "h", minutes % 60, "m");
    } else if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if days < 8 {
        return with_remainder(days, "d", hours % 24, "h");
    } else if days < 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if years < 8 {
        return with_remainder(years, "y", days % 365, "d");
    }
    format!("{years}y")
}

/// `2m`, `2m1s`: a count and unit, then the remainder in the next unit unless it is zero.
fn with_remainder(count: i64, unit: &str, remainder: i64, remainder_unit: &str) -> String {
    if remainder == 0 {
        format!("{count}{unit}")
    } else {
        format!("{count}{unit}{remainder}{remainder_unit}")
    }
}
