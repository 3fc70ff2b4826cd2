//! String `format`s the apiextensions-apiserver checks (kube-openapi's
//! strfmt registry as CRDs may use it). Formats it does not know, and those
//! bosun does not check (`isbn`, `creditcard`, `ssn`, `password`), pass.

use base64::Engine;

/// Whether `s` is a valid `format` string.
pub(crate) fn check_format(format: &str, s: &str) -> bool {
    match format {
        "uuid" => uuid(s, None),
        "uuid3" => uuid(s, Some('3')),
        "uuid4" => uuid(s, Some('4')),
        "uuid5" => uuid(s, Some('5')),
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        "date-time" | "datetime" => date_time(s),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => s.parse::<ipnet::IpNet>().is_ok(),
        "mac" => mac(s),
        "hostname" => hostname(s),
        "email" => email(s),
        // Go's ParseRequestURI: an absolute URI or an absolute path.
        "uri" => url::Url::parse(s).is_ok() || s.starts_with('/'),
        "hexcolor" => {
            s.len() == 7 && s.starts_with('#') && s[1..].chars().all(|c| c.is_ascii_hexdigit())
        }
        "rgbcolor" => rgb(s),
        "bsonobjectid" => s.len() == 24 && s.chars().all(|c| c.is_ascii_hexdigit()),
        "duration" => duration(s),
        _ => true,
    }
}

fn uuid(s: &str, version: Option<char>) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    let shape = groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()));
    shape && version.is_none_or(|v| groups[2].starts_with(v))
}

fn date_time(s: &str) -> bool {
    chrono::DateTime::parse_from_rfc3339(s).is_ok()
        || chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").is_ok()
}

fn mac(s: &str) -> bool {
    let parts: Vec<&str> = s.split([':', '-']).collect();
    matches!(parts.len(), 6 | 8 | 20)
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
}

fn hostname(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s.trim_end_matches('.').split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn email(s: &str) -> bool {
    match s.rsplit_once('@') {
        Some((local, domain)) => !local.is_empty() && !local.contains(' ') && hostname(domain),
        None => false,
    }
}

fn rgb(s: &str) -> bool {
    let Some(inner) = s.strip_prefix("rgb(").and_then(|r| r.strip_suffix(')')) else {
        return false;
    };
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    parts.len() == 3 && parts.iter().all(|p| p.parse::<u8>().is_ok())
}

/// Go's `time.ParseDuration` syntax (`1h30m`, `-1.5s`, `300ms`), or the
/// strfmt long form (`3 days`).
fn duration(s: &str) -> bool {
    let s = s.trim();
    if s.contains(' ') {
        let mut it = s.split_whitespace();
        let (Some(n), Some(unit), None) = (it.next(), it.next(), it.next()) else {
            return false;
        };
        return n.parse::<i64>().is_ok()
            && matches!(
                unit.trim_end_matches('s'),
                "n" | "ns"
                    | "u"
                    | "us"
                    | "ms"
                    | "s"
                    | "sec"
                    | "m"
                    | "min"
                    | "h"
                    | "hr"
                    | "hour"
                    | "d"
                    | "day"
                    | "w"
                    | "wk"
                    | "week"
                    | "second"
                    | "minute"
            );
    }
    let mut rest = s.strip_prefix(['-', '+']).unwrap_or(s);
    if rest == "0" {
        return true;
    }
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_end == 0 || rest[..num_end].parse::<f64>().is_err() {
            return false;
        }
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        if !matches!(
            &rest[..unit_end],
            "ns" | "us" | "µs" | "ms" | "s" | "m" | "h"
        ) {
            return false;
        }
        rest = &rest[unit_end..];
    }
    true
}
