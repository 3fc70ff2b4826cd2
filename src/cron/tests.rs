use super::*;
use chrono::TimeZone as _;

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// The next `n` activations after `from`, in zone `zone`, as RFC 3339
/// in that zone.
fn nexts(spec: &str, zone: &str, from: &str, n: usize) -> Vec<String> {
    let s = Schedule::parse(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    let tz = load_location(zone).unwrap();
    let mut t = utc(from);
    (0..n)
        .map(|_| {
            t = s.next(t, &tz).expect("a next time");
            let ts = to_timestamp(t);
            ts.to_zoned(tz.clone())
                .strftime("%Y-%m-%dT%H:%M:%S%:z")
                .to_string()
        })
        .collect()
}

#[test]
fn every_minute_and_steps() {
    assert_eq!(
        nexts("*/1 * * * *", "UTC", "2026-01-01T00:00:00Z", 2),
        ["2026-01-01T00:01:00+00:00", "2026-01-01T00:02:00+00:00"]
    );
    // Strictly after: from a whole minute with nanoseconds too.
    assert_eq!(
        nexts("* * * * *", "UTC", "2026-01-01T00:00:59.500Z", 1),
        ["2026-01-01T00:01:00+00:00"]
    );
    assert_eq!(
        nexts("*/20 * * * *", "UTC", "2026-01-01T00:05:00Z", 3),
        [
            "2026-01-01T00:20:00+00:00",
            "2026-01-01T00:40:00+00:00",
            "2026-01-01T01:00:00+00:00"
        ]
    );
    // `a/n` is `a-max/n`; `a-b/n` steps within the range.
    assert_eq!(
        nexts("5/20 * * * *", "UTC", "2026-01-01T00:00:00Z", 3),
        [
            "2026-01-01T00:05:00+00:00",
            "2026-01-01T00:25:00+00:00",
            "2026-01-01T00:45:00+00:00"
        ]
    );
    assert_eq!(
        nexts("0 1-10/4 * * *", "UTC", "2026-01-01T00:00:00Z", 4),
        [
            "2026-01-01T01:00:00+00:00",
            "2026-01-01T05:00:00+00:00",
            "2026-01-01T09:00:00+00:00",
            "2026-01-02T01:00:00+00:00"
        ]
    );
}

#[test]
fn lists_ranges_and_names() {
    // 2026-01-01 is a Thursday.
    assert_eq!(
        nexts("0,30 9 * * MON-wed", "UTC", "2026-01-01T00:00:00Z", 3),
        [
            "2026-01-05T09:00:00+00:00",
            "2026-01-05T09:30:00+00:00",
            "2026-01-06T09:00:00+00:00"
        ]
    );
    assert_eq!(
        nexts("0 0 1 jan,JUL ?", "UTC", "2026-01-01T00:00:00Z", 2),
        ["2026-07-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"]
    );
    assert_eq!(
        nexts("15 14 1 * *", "UTC", "2026-01-31T00:00:00Z", 1),
        ["2026-02-01T14:15:00+00:00"]
    );
    // Sunday is 0.
    assert_eq!(
        nexts("0 0 * * 0", "UTC", "2026-01-01T00:00:00Z", 1),
        ["2026-01-04T00:00:00+00:00"]
    );
}

#[test]
fn restricted_day_fields_are_ored_stars_and() {
    // The 13th, or any Friday.
    assert_eq!(
        nexts("0 0 13 * FRI", "UTC", "2026-01-01T00:00:00Z", 3),
        [
            "2026-01-02T00:00:00+00:00",
            "2026-01-09T00:00:00+00:00",
            "2026-01-13T00:00:00+00:00"
        ]
    );
    // `*` in one day field: only the other counts.
    assert_eq!(
        nexts("0 0 * * FRI", "UTC", "2026-01-01T00:00:00Z", 2),
        ["2026-01-02T00:00:00+00:00", "2026-01-09T00:00:00+00:00"]
    );
    // `*/2` is not a star in robfig: odd days OR Mondays.
    assert_eq!(
        nexts("0 0 */2 * MON", "UTC", "2026-01-01T00:00:00Z", 4),
        [
            "2026-01-03T00:00:00+00:00",
            "2026-01-05T00:00:00+00:00",
            "2026-01-07T00:00:00+00:00",
            "2026-01-09T00:00:00+00:00"
        ]
    );
    assert_eq!(
        nexts("0 0 2-3 * MON", "UTC", "2026-01-01T00:00:00Z", 3),
        [
            "2026-01-02T00:00:00+00:00",
            "2026-01-03T00:00:00+00:00",
            "2026-01-05T00:00:00+00:00"
        ]
    );
}

#[test]
fn descriptors() {
    let from = "2026-05-15T10:10:00Z";
    let one = |s| nexts(s, "UTC", from, 1).remove(0);
    assert_eq!(one("@yearly"), "2027-01-01T00:00:00+00:00");
    assert_eq!(one("@annually"), "2027-01-01T00:00:00+00:00");
    assert_eq!(one("@monthly"), "2026-06-01T00:00:00+00:00");
    assert_eq!(one("@weekly"), "2026-05-17T00:00:00+00:00"); // a Sunday
    assert_eq!(one("@daily"), "2026-05-16T00:00:00+00:00");
    assert_eq!(one("@midnight"), "2026-05-16T00:00:00+00:00");
    assert_eq!(one("@hourly"), "2026-05-15T11:00:00+00:00");
    assert_eq!(
        nexts("@every 1h30m", "UTC", from, 2),
        ["2026-05-15T11:40:00+00:00", "2026-05-15T13:10:00+00:00"]
    );
    assert_eq!(
        Schedule::parse("@every 500ms").unwrap(),
        Schedule::Every(Duration::from_secs(1))
    );
}

#[test]
fn time_zones_and_dst() {
    // 09:00 in Berlin is 08:00 UTC in winter, 07:00 in summer.
    assert_eq!(
        nexts("0 9 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", 2),
        ["2026-03-29T09:00:00+02:00", "2026-03-30T09:00:00+02:00"]
    );
    // Spring forward in New York (2026-03-08 02:00 -> 03:00): 02:30
    // does not exist that day, and robfig skips it.
    assert_eq!(
        nexts("30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", 2),
        ["2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"]
    );
    // Hourly runs keep one hour apart in real time across the gap.
    assert_eq!(
        nexts("0 * * * *", "America/New_York", "2026-03-08T06:30:00Z", 2),
        ["2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"]
    );
    // Fall back (2026-11-01 02:00 EDT -> 01:00 EST): 01:30 happens
    // twice, and robfig runs both.
    assert_eq!(
        nexts("30 1 * * *", "America/New_York", "2026-11-01T04:00:00Z", 3),
        [
            "2026-11-01T01:30:00-04:00",
            "2026-11-01T01:30:00-05:00",
            "2026-11-02T01:30:00-05:00"
        ]
    );
    // A daily run at midnight stays at local midnight across DST.
    assert_eq!(
        nexts("0 0 * * *", "America/New_York", "2026-03-07T12:00:00Z", 2),
        ["2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00"]
    );
    // Chile springs forward at midnight (2026-09-06 00:00 -> 01:00):
    // stepping a day lands on 23:00 the day before, and robfig moves
    // it to the next midnight, so the 6th is not skipped.
    assert_eq!(
        nexts("0 1 6 9 *", "America/Santiago", "2026-09-01T12:00:00Z", 1),
        ["2026-09-06T01:00:00-03:00"]
    );
    // The UTC instant: 2026-03-29T09:00+02:00 is 07:00Z.
    let s = Schedule::parse("0 9 * * *").unwrap();
    let tz = load_location("Europe/Berlin").unwrap();
    assert_eq!(
        s.next(Utc.with_ymd_and_hms(2026, 3, 28, 12, 0, 0).unwrap(), &tz),
        Some(Utc.with_ymd_and_hms(2026, 3, 29, 7, 0, 0).unwrap())
    );
}

#[test]
fn impossible_dates_have_no_next_time() {
    let s = Schedule::parse("0 0 30 2 *").unwrap();
    assert_eq!(s.next(utc("2026-01-01T00:00:00Z"), &TimeZone::UTC), None);
    // Feb 29 comes in leap years.
    assert_eq!(
        nexts("0 0 29 2 *", "UTC", "2026-01-01T00:00:00Z", 1),
        ["2028-02-29T00:00:00+00:00"]
    );
}

#[test]
fn errors_are_robfigs() {
    let err = |s: &str| Schedule::parse(s).unwrap_err();
    assert_eq!(err(""), "empty spec string");
    assert_eq!(
        err("* * * *"),
        "expected exactly 5 fields, found 4: [* * * *]"
    );
    assert_eq!(
        err("* * * * * *"),
        "expected exactly 5 fields, found 6: [* * * * * *]"
    );
    assert_eq!(err("@often"), "unrecognized descriptor: @often");
    assert_eq!(
        err("60 * * * *"),
        "end of range (60) above maximum (59): 60"
    );
    assert_eq!(
        err("* 24 * * *"),
        "end of range (24) above maximum (23): 24"
    );
    assert_eq!(
        err("* * 0 * *"),
        "beginning of range (0) below minimum (1): 0"
    );
    assert_eq!(
        err("* * * 13 *"),
        "end of range (13) above maximum (12): 13"
    );
    assert_eq!(err("* * * * 7"), "end of range (7) above maximum (6): 7");
    assert_eq!(
        err("5-1 * * * *"),
        "beginning of range (5) beyond end of range (1): 5-1"
    );
    assert_eq!(
        err("*/0 * * * *"),
        "step of range should be a positive number: */0"
    );
    assert_eq!(
        err("x * * * *"),
        "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax"
    );
    assert_eq!(err("1-2-3 * * * *"), "too many hyphens: 1-2-3");
    assert_eq!(err("*/2/3 * * * *"), "too many slashes: */2/3");
    assert_eq!(
        err("* * * FOO *"),
        "failed to parse int from FOO: strconv.Atoi: parsing \"FOO\": invalid syntax"
    );
    assert_eq!(
        err("@every x"),
        "failed to parse duration @every x: time: invalid duration \"x\""
    );
    assert_eq!(
        err("TZ=Mars/Base * * * * *"),
        "provided bad location Mars/Base: unknown time zone Mars/Base"
    );
}

#[test]
fn a_tz_prefix_sets_the_zone() {
    let s = Schedule::parse("CRON_TZ=Asia/Tokyo 0 9 * * *").unwrap();
    assert_eq!(
        s.next(utc("2026-01-01T00:00:00Z"), &TimeZone::UTC),
        Some(utc("2026-01-02T00:00:00Z"))
    );
}
