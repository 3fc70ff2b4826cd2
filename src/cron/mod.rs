//! Cron schedules as Kubernetes reads a CronJob's `spec.schedule`: the
//! syntax and the next-time arithmetic of robfig/cron v3's
//! `ParseStandard` / `SpecSchedule.Next`, which both the apiserver's
//! validation and the CronJob controller use. One parser serves both here
//! too, so what validation accepts is exactly what the controller runs.
//!
//! Why a parser of our own rather than the `cron` crate: that crate reads
//! a different dialect (a seconds field, 1-7 weekdays with Sunday as 1, no
//! `?`/OR rule of the day fields as robfig has it, no `@every`), so
//! schedules users copy from Kubernetes would mean other times. Here:
//!
//! - five fields: minute, hour, day of month, month (`1-12` or `JAN`..),
//!   day of week (`0-6` or `SUN`..; 7 is rejected, as robfig does);
//! - `*` and `?`, values, ranges `a-b`, steps `*/n`, `a-b/n`, `a/n`
//!   (= `a-max/n`), lists `a,b`;
//! - the day fields: when either is a star (`*`, `?`, or `*/1`), a day
//!   must match both; otherwise either (`0 0 1 * MON` runs on the first
//!   and on Mondays), as in robfig, where `*/2` is not a star;
//! - `@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`,
//!   `@hourly`, `@every <Go duration>`;
//! - a `TZ=`/`CRON_TZ=` prefix is parsed (validation then rejects it, as
//!   Kubernetes requires `spec.timeZone`).
//!
//! Times are computed in an IANA zone read from the system's zoneinfo (as
//! Go's `time.LoadLocation`), with jiff, which k8s-openapi already pulls
//! in. [`Schedule::next`] steps as robfig does: calendar steps for months
//! and days, exact one-hour and one-minute steps below that, so across a
//! spring-forward gap a 02:30 run is skipped that day and across a
//! fall-back fold a 01:30 run happens twice, as in Kubernetes.

use std::time::Duration;

use chrono::{DateTime, Utc};
use jiff::civil;
pub use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

/// Set on a field written as a star: it makes the day fields AND-ed.
const STAR: u64 = 1 << 63;

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// The five fields as bit sets (bit `n` = value `n` allowed).
    Spec(Spec),
    /// `@every <duration>`: a constant delay, in whole seconds (≥ 1 s).
    Every(Duration),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub minute: u64,
    pub hour: u64,
    pub dom: u64,
    pub month: u64,
    pub dow: u64,
    /// The zone of a `TZ=`/`CRON_TZ=` prefix, if any.
    pub location: Option<String>,
}

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [&'static str],
    /// The value of the first name.
    name_base: u32,
}

impl Bounds {
    /// A field of numbers only.
    const fn numbers(min: u32, max: u32) -> Bounds {
        Bounds {
            min,
            max,
            names: &[],
            name_base: 0,
        }
    }
}

const MINUTES: Bounds = Bounds::numbers(0, 59);
const HOURS: Bounds = Bounds::numbers(0, 23);
const DOM: Bounds = Bounds::numbers(1, 31);
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
    name_base: 1,
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
    name_base: 0,
};

fn bits(min: u32, max: u32, step: u32) -> u64 {
    if step == 1 {
        return !(u64::MAX << (max + 1)) & (u64::MAX << min);
    }
    let mut b = 0;
    let mut v = min;
    while v <= max {
        b |= 1 << v;
        v += step;
    }
    b
}

fn all(r: &Bounds) -> u64 {
    bits(r.min, r.max, 1) | STAR
}

/// Go's `strconv.Atoi` as robfig's `mustParseInt` reports it.
fn parse_int(expr: &str) -> Result<u32, String> {
    let n: i64 = expr.parse().map_err(|e: std::num::ParseIntError| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                "value out of range"
            }
            _ => "invalid syntax",
        };
        format!("failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: {why}")
    })?;
    if n < 0 {
        return Err(format!("negative number ({n}) not allowed: {expr}"));
    }
    Ok(n.min(u32::MAX as i64) as u32)
}

fn parse_int_or_name(expr: &str, r: &Bounds) -> Result<u32, String> {
    let lower = expr.to_ascii_lowercase();
    if let Some(i) = r.names.iter().position(|n| *n == lower) {
        return Ok(i as u32 + r.name_base);
    }
    parse_int(expr)
}

/// robfig's `getRange`: one list element.
fn parse_range(expr: &str, r: &Bounds) -> Result<u64, String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let mut extra = 0;
    let (start, mut end);
    if low_and_high[0] == "*" || low_and_high[0] == "?" {
        start = r.min;
        end = r.max;
        extra = STAR;
    } else {
        start = parse_int_or_name(low_and_high[0], r)?;
        end = match low_and_high.len() {
            1 => start,
            2 => parse_int_or_name(low_and_high[1], r)?,
            _ => return Err(format!("too many hyphens: {expr}")),
        };
    }
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = parse_int(range_and_step[1])?;
            // `N/step` means `N-max/step`.
            if single {
                end = r.max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < r.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            r.min
        ));
    }
    if end > r.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            r.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(bits(start, end, step) | extra)
}

/// robfig's `getField`: a comma-separated list (empty elements ignored, as
/// Go's `strings.FieldsFunc` drops them).
fn parse_field(field: &str, r: &Bounds) -> Result<u64, String> {
    let mut b = 0;
    for expr in field.split(',').filter(|e| !e.is_empty()) {
        b |= parse_range(expr, r)?;
    }
    Ok(b)
}

/// Loads an IANA zone as Go's `time.LoadLocation` does: "UTC" and "" are
/// UTC, "Local" is the host's zone, otherwise the name must be a file of
/// the system zoneinfo, spelled with its exact case.
pub fn load_location(name: &str) -> Result<TimeZone, String> {
    if name.is_empty() || name == "UTC" {
        return Ok(TimeZone::UTC);
    }
    if name == "Local" {
        // bosun-control keeps cron time in UTC, as kube-controller-manager
        // in its container does (validation rejects "Local" anyway).
        return Ok(TimeZone::UTC);
    }
    let unknown = || format!("unknown time zone {name}");
    let tz = TimeZone::get(name).map_err(|_| unknown())?;
    // jiff looks names up ignoring case; Go (on Linux) does not.
    if tz.iana_name() != Some(name) {
        return Err(unknown());
    }
    Ok(tz)
}

fn parse_descriptor(spec: &str, location: Option<String>) -> Result<Schedule, String> {
    let one = |r: &Bounds| 1u64 << r.min;
    let s = |minute, hour, dom, month, dow| {
        Ok(Schedule::Spec(Spec {
            minute,
            hour,
            dom,
            month,
            dow,
            location: location.clone(),
        }))
    };
    match spec {
        "@yearly" | "@annually" => s(
            one(&MINUTES),
            one(&HOURS),
            one(&DOM),
            one(&MONTHS),
            all(&DOW),
        ),
        "@monthly" => s(
            one(&MINUTES),
            one(&HOURS),
            one(&DOM),
            all(&MONTHS),
            all(&DOW),
        ),
        "@weekly" => s(
            one(&MINUTES),
            one(&HOURS),
            all(&DOM),
            all(&MONTHS),
            one(&DOW),
        ),
        "@daily" | "@midnight" => s(
            one(&MINUTES),
            one(&HOURS),
            all(&DOM),
            all(&MONTHS),
            all(&DOW),
        ),
        "@hourly" => s(
            one(&MINUTES),
            all(&HOURS),
            all(&DOM),
            all(&MONTHS),
            all(&DOW),
        ),
        _ => match spec.strip_prefix("@every ") {
            Some(d) => {
                let d = parse_go_duration(d)
                    .map_err(|e| format!("failed to parse duration {spec}: {e}"))?;
                // robfig: at least a second, in whole seconds.
                let d = d.max(Duration::from_secs(1));
                Ok(Schedule::Every(Duration::from_secs(d.as_secs())))
            }
            None => Err(format!("unrecognized descriptor: {spec}")),
        },
    }
}

/// Go's `time.ParseDuration` for what `@every` needs (non-negative):
/// `1h30m`, `90s`, `1.5h`, `500ms`.
fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let invalid = || format!("time: invalid duration {s:?}");
    let body = s.strip_prefix('+').unwrap_or(s);
    if body == "0" {
        return Ok(Duration::ZERO);
    }
    if body.is_empty() || body.starts_with('-') {
        return Err(invalid());
    }
    let mut rest = body;
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("time: missing unit in duration {s:?}"))?;
        let num: f64 = rest[..num_len].parse().map_err(|_| invalid())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let nanos = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(format!("time: missing unit in duration {s:?}")),
            u => return Err(format!("time: unknown unit {u:?} in duration {s:?}")),
        };
        total += num * nanos;
        rest = &rest[unit_len..];
    }
    Ok(Duration::from_nanos(total as u64))
}

impl Schedule {
    /// Parses as robfig/cron's `ParseStandard`, with its error messages.
    pub fn parse(spec: &str) -> Result<Schedule, String> {
        if spec.is_empty() {
            return Err("empty spec string".into());
        }
        let mut spec = spec;
        let mut location = None;
        if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
            let eq = spec.find('=').unwrap_or(0);
            let end = spec.find(' ').unwrap_or(spec.len());
            let name = &spec[eq + 1..end];
            load_location(name).map_err(|e| format!("provided bad location {name}: {e}"))?;
            location = Some(name.to_string());
            spec = spec[end..].trim();
        }
        if spec.starts_with('@') {
            return parse_descriptor(spec, location);
        }
        let fields: Vec<&str> = spec.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "expected exactly 5 fields, found {}: [{}]",
                fields.len(),
                fields.join(" ")
            ));
        }
        Ok(Schedule::Spec(Spec {
            minute: parse_field(fields[0], &MINUTES)?,
            hour: parse_field(fields[1], &HOURS)?,
            dom: parse_field(fields[2], &DOM)?,
            month: parse_field(fields[3], &MONTHS)?,
            dow: parse_field(fields[4], &DOW)?,
            location,
        }))
    }

    /// The first activation strictly after `after`, in zone `tz` (a
    /// `TZ=` prefix's zone wins, as in robfig); None if there is none
    /// within five years (e.g. `0 0 30 2 *`).
    pub fn next(&self, after: DateTime<Utc>, tz: &TimeZone) -> Option<DateTime<Utc>> {
        let t = to_timestamp(after);
        let next = match self {
            Schedule::Every(d) => {
                // robfig: t + delay - t's sub-second part.
                let d = SignedDuration::from_secs(d.as_secs() as i64)
                    - SignedDuration::from_nanos(t.subsec_nanosecond() as i64);
                t.checked_add(d).ok()
            }
            Schedule::Spec(spec) => {
                let own;
                let tz = match &spec.location {
                    Some(name) => {
                        own = load_location(name).unwrap_or(TimeZone::UTC);
                        &own
                    }
                    None => tz,
                };
                spec.next(t, tz)
            }
        }?;
        DateTime::from_timestamp(next.as_second(), next.subsec_nanosecond().max(0) as u32)
    }
}

/// `t` in `tz` as Go's RFC 3339 (`Z` for a zero offset), whole seconds.
pub fn rfc3339_in(t: DateTime<Utc>, tz: &TimeZone) -> String {
    let zoned = Timestamp::new(t.timestamp(), 0)
        .unwrap_or_default()
        .to_zoned(tz.clone());
    if zoned.offset().seconds() == 0 {
        zoned.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        zoned.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }
}

fn to_timestamp(t: DateTime<Utc>) -> Timestamp {
    Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32).unwrap_or_default()
}

/// Go's `time.Date` in a zone: a wall-clock time in a gap or a fold gets
/// the offset Go picks (look the offset up as if the wall time were UTC,
/// then once more at the result if that lands in another period).
fn go_date(dt: civil::DateTime, tz: &TimeZone) -> Timestamp {
    let naive = dt.to_zoned(TimeZone::UTC).map(|z| z.timestamp());
    let Ok(naive) = naive else {
        return Timestamp::MAX;
    };
    let mut offset = tz.to_offset(naive);
    let utc = naive - SignedDuration::from_secs(offset.seconds() as i64);
    if tz.to_offset(utc) != offset {
        offset = tz.to_offset(utc);
    }
    naive - SignedDuration::from_secs(offset.seconds() as i64)
}

fn add(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

impl Spec {
    fn day_matches(&self, c: &civil::DateTime) -> bool {
        let dom = 1u64 << c.day() & self.dom > 0;
        let dow = 1u64 << c.weekday().to_sunday_zero_offset() & self.dow > 0;
        if self.dom & STAR > 0 || self.dow & STAR > 0 {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// robfig's `SpecSchedule.Next`, step for step.
    fn next(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let civil = |t: Timestamp| tz.to_datetime(t);
        let sec = SignedDuration::from_secs(1);
        let min = SignedDuration::from_mins(1);
        let hour = SignedDuration::from_hours(1);
        // The earliest possible time: the upcoming second.
        let mut t = add(
            after,
            sec - SignedDuration::from_nanos(after.subsec_nanosecond() as i64),
        );
        let mut added = false;
        let year_limit = civil(t).year() + 5;
        'wrap: loop {
            if civil(t).year() > year_limit || t == Timestamp::MAX {
                return None;
            }
            while 1u64 << civil(t).month() & self.month == 0 {
                if !added {
                    added = true;
                    let c = civil(t);
                    t = go_date(civil::date(c.year(), c.month(), 1).at(0, 0, 0, 0), tz);
                }
                // t.AddDate(0, 1, 0)
                let c = civil(t);
                let next = c
                    .date()
                    .checked_add(jiff::Span::new().months(1))
                    .unwrap_or(civil::Date::MAX);
                t = go_date(next.to_datetime(c.time()), tz);
                if civil(t).month() == 1 {
                    continue 'wrap;
                }
            }
            while !self.day_matches(&civil(t)) {
                if !added {
                    added = true;
                    t = go_date(civil(t).date().to_datetime(civil::Time::midnight()), tz);
                }
                // t.AddDate(0, 0, 1)
                let c = civil(t);
                let next = c.date().tomorrow().unwrap_or(civil::Date::MAX);
                t = go_date(next.to_datetime(c.time()), tz);
                // A DST change may have moved midnight: back to it.
                let h = civil(t).hour() as i64;
                if h != 0 {
                    t = if h > 12 {
                        add(t, SignedDuration::from_hours(24 - h))
                    } else {
                        add(t, SignedDuration::from_hours(-h))
                    };
                }
                if civil(t).day() == 1 {
                    continue 'wrap;
                }
            }
            while 1u64 << civil(t).hour() & self.hour == 0 {
                if !added {
                    added = true;
                    let c = civil(t);
                    t = go_date(c.date().at(c.hour(), 0, 0, 0), tz);
                }
                t = add(t, hour);
                if civil(t).hour() == 0 {
                    continue 'wrap;
                }
            }
            while 1u64 << civil(t).minute() & self.minute == 0 {
                if !added {
                    added = true;
                    t = truncate(t, 60);
                }
                t = add(t, min);
                if civil(t).minute() == 0 {
                    continue 'wrap;
                }
            }
            // The seconds field of the standard syntax is always 0.
            while civil(t).second() != 0 {
                if !added {
                    added = true;
                    t = truncate(t, 1);
                }
                t = add(t, sec);
                if civil(t).second() == 0 {
                    continue 'wrap;
                }
            }
            return Some(t);
        }
    }
}

/// Go's `Time.Truncate` to whole `secs` (absolute time, not wall clock).
fn truncate(t: Timestamp, secs: i64) -> Timestamp {
    Timestamp::new(t.as_second() - t.as_second().rem_euclid(secs), 0).unwrap_or(t)
}

#[cfg(test)]
mod tests;
