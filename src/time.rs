//! Timestamps as Kubernetes writes them.

use chrono::{SecondsFormat, Utc};

/// Now, in RFC 3339 with second precision (`2026-01-02T03:04:05Z`), as
/// Kubernetes writes `creationTimestamp` and the other timestamps.
pub fn now_rfc3339() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    #[test]
    fn now_is_to_the_second_in_utc() {
        let now = super::now_rfc3339();
        assert_eq!(now.len(), "2026-01-02T03:04:05Z".len(), "{now}");
        assert!(now.ends_with('Z'), "{now}");
        assert!(chrono::DateTime::parse_from_rfc3339(&now).is_ok());
    }
}
