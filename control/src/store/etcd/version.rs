//! Which etcd versions send a requested progress notification in order
//! with the events before it, and the members' versions as their status
//! says: the store trusts requested progress (consistent lists from the
//! watch cache, progress asked for bookmarks) only on those.

use std::time::Duration;

use etcd_client::{Client, ConnectOptions};

/// Each member's version, as its status says (a member that does not
/// answer is left out; none answering gives none).
pub(super) async fn member_versions(
    endpoints: &[String],
    connect: &ConnectOptions,
) -> Vec<(String, String)> {
    let mut versions = Vec::new();
    for endpoint in endpoints {
        let status = async {
            let mut client = Client::connect([endpoint], Some(connect.clone())).await?;
            client.status().await
        };
        match tokio::time::timeout(Duration::from_secs(5), status).await {
            Ok(Ok(status)) => versions.push((endpoint.clone(), status.version().to_string())),
            Ok(Err(e)) => {
                tracing::warn!(%endpoint, error = %e, "reading the etcd member's version")
            }
            Err(_) => tracing::warn!(%endpoint, "reading the etcd member's version: timed out"),
        }
    }
    versions
}

/// Whether an etcd of `version` ("3.4.23") sends a requested progress
/// notification in order with the events before it: etcd before 3.4.31
/// and 3.5.13 sent it on a stream of its own that could overtake events
/// still queued (etcd issues 15220 and 17507). kube-apiserver serves
/// consistent reads from its watch cache only from those versions on.
pub(crate) fn requested_progress_in_order(version: &str) -> bool {
    let mut parts = version
        .trim_start_matches('v')
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u64>().ok());
    let (Some(Some(major)), Some(Some(minor)), Some(Some(patch))) =
        (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    match (major, minor) {
        (3, 4) => patch >= 31,
        (3, 5) => patch >= 13,
        (3, m) => m >= 6,
        (m, _) => m > 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requested_progress_is_in_order_from_the_fixed_releases_on() {
        for v in [
            "3.4.31", "3.4.40", "3.5.13", "3.5.21", "3.6.0", "v3.6.4", "4.0.0",
        ] {
            assert!(requested_progress_in_order(v), "{v}");
        }
        for v in [
            "3.4.23", "3.4.30", "3.5.0", "3.5.12", "3.3.27", "2.3.8", "", "3.x",
        ] {
            assert!(!requested_progress_in_order(v), "{v}");
        }
    }
}
