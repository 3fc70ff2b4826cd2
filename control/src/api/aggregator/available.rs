//! The `Available` condition of remote APIServices, as kube-aggregator's
//! AvailableConditionController keeps it: `ServiceNotFound`,
//! `ServicePortError`, `MissingEndpoints` when the Service cannot be
//! reached, `FailedDiscoveryCheck` when its server does not answer
//! `/apis/GROUP/VERSION` with a 200, else `Passed`. Checked every
//! [`RECHECK`] and whenever a Service, Endpoints or APIService changes.
//! The discovery document each check fetches is what the merged
//! discovery serves ([`super::discovery`]).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use super::proxy::{fetch, resolve, Unavailable};
use super::{Aggregator, Remote, PREFIX};
use crate::store::StoreError;

/// How often every remote APIService is checked, changes or not.
pub const RECHECK: Duration = Duration::from_secs(30);
/// How long one discovery check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// The condition one check comes to: (status, reason, message).
pub async fn check(aggregator: &Aggregator, remote: &Remote) -> (bool, &'static str, String) {
    let Some(front_proxy) = aggregator.front_proxy.as_deref() else {
        return (
            false,
            "FailedDiscoveryCheck",
            "no front-proxy client".into(),
        );
    };
    if let Err(Unavailable { reason, message }) = resolve(aggregator.store.as_ref(), remote).await {
        aggregator.set_discovered(&remote.name, None);
        return (false, reason, message);
    }
    let path = format!("/apis/{}/{}", remote.group, remote.version);
    match fetch(
        aggregator.store.as_ref(),
        front_proxy,
        remote,
        &path,
        CHECK_TIMEOUT,
    )
    .await
    .and_then(|body| serde_json::from_slice::<Value>(&body).map_err(|e| e.to_string()))
    {
        Ok(list) => {
            aggregator.set_discovered(&remote.name, Some(list));
            (true, "Passed", "all checks passed".to_string())
        }
        Err(e) => {
            aggregator.set_discovered(&remote.name, None);
            (
                false,
                "FailedDiscoveryCheck",
                format!(
                    "failing or missing response from https://{}:{}{path}: {e}",
                    remote.server_name(),
                    remote.port
                ),
            )
        }
    }
}

/// The status patch that records a check, or None when the stored
/// condition already says the same (its transition time is kept while
/// the status stays).
pub fn status_patch(
    current: &Value,
    available: bool,
    reason: &str,
    message: &str,
    now: &str,
) -> Option<Value> {
    let status = if available { "True" } else { "False" };
    let old = current["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Available");
    if old
        .is_some_and(|c| c["status"] == status && c["reason"] == reason && c["message"] == message)
    {
        return None;
    }
    let since = old
        .filter(|c| c["status"] == status)
        .and_then(|c| c["lastTransitionTime"].as_str())
        .unwrap_or(now);
    Some(json!({"status": {"conditions": [{
        "type": "Available",
        "status": status,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
    }]}}))
}

/// Checks every remote APIService and writes what changed.
async fn sync(aggregator: &Aggregator, api: &Api<DynamicObject>) {
    let services = aggregator.services();
    let remotes: Vec<(Remote, Value)> = services
        .values()
        .filter_map(|obj| Remote::from_object(obj).map(|r| (r, obj.clone())))
        .collect();
    for (remote, current) in remotes {
        let (available, reason, message) = check(aggregator, &remote).await;
        let now = bosun::time::now_rfc3339();
        let Some(patch) = status_patch(&current, available, reason, &message, &now) else {
            continue;
        };
        if let Err(e) = api
            .patch_status(&remote.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(apiservice = %remote.name, error = %e, "writing Available");
        }
    }
}

/// Runs the controller until the store closes.
pub async fn run(aggregator: Arc<Aggregator>, client: kube::Client) {
    let res = bosun::resources::by_name("apiservices").expect("served");
    let resource = kube::api::ApiResource {
        group: res.group.into(),
        version: res.version.into(),
        api_version: res.api_version(),
        kind: res.kind.into(),
        plural: res.plural.into(),
    };
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let prefixes = [
        PREFIX.to_string(),
        bosun::resources::by_name("services")
            .expect("served")
            .storage_prefix(),
        bosun::resources::by_name("endpoints")
            .expect("served")
            .storage_prefix(),
    ];
    loop {
        let from = aggregator.store.current_revision();
        sync(&aggregator, &api).await;
        let mut streams = Vec::new();
        for prefix in &prefixes {
            match aggregator.store.watch(prefix, from).await {
                Ok(s) => streams.push(s),
                Err(StoreError::Closed) => return,
                Err(e) => tracing::debug!(error = %e, "aggregator: watching {prefix}"),
            }
        }
        let mut changes = futures::stream::select_all(streams);
        tokio::select! {
            change = changes.next() => {
                if matches!(change, Some(Err(StoreError::Closed))) {
                    return;
                }
                // Let the rest of a burst of changes land first.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            _ = tokio::time::sleep(RECHECK) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_is_written_only_when_it_changes() {
        let none = json!({});
        let first = status_patch(&none, false, "MissingEndpoints", "m", "T1").unwrap();
        let stored = json!({"status": first["status"]});
        assert!(status_patch(&stored, false, "MissingEndpoints", "m", "T2").is_none());
        let other = status_patch(&stored, false, "ServiceNotFound", "s", "T2").unwrap();
        let c = &other["status"]["conditions"][0];
        assert_eq!(
            (c["reason"].as_str(), c["lastTransitionTime"].as_str()),
            (Some("ServiceNotFound"), Some("T1"))
        );
        let passed = status_patch(&stored, true, "Passed", "all checks passed", "T3").unwrap();
        let c = &passed["status"]["conditions"][0];
        assert_eq!(
            (c["status"].as_str(), c["lastTransitionTime"].as_str()),
            (Some("True"), Some("T3"))
        );
    }
}
