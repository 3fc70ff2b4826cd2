//! Expires Events an hour (`--event-ttl`) after they last happened, as
//! kube-apiserver's `--event-ttl` does with etcd leases.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};

use crate::toolkit::{to_chrono, Clock, Shared};

fn micro_to_chrono(t: &k8s_openapi::jiff::Timestamp) -> DateTime<Utc> {
    DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond().max(0) as u32).unwrap_or_default()
}

/// When an event last happened: `lastTimestamp`, else `eventTime`, else
/// its creation.
fn last_seen(e: &Event) -> Option<DateTime<Utc>> {
    e.last_timestamp
        .as_ref()
        .map(to_chrono)
        .or_else(|| e.event_time.as_ref().map(|t| micro_to_chrono(&t.0)))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(to_chrono))
}

/// Deletes every Event older than `ttl`; returns how many went.
pub async fn sweep(client: &kube::Client, clock: &dyn Clock, ttl: Duration) -> kube::Result<usize> {
    let api: Api<Event> = Api::all(client.clone());
    let cutoff = clock.now() - chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::MAX);
    let mut deleted = 0;
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await?;
        for e in &page.items {
            if last_seen(e).is_none_or(|t| t >= cutoff) {
                continue;
            }
            let ns = e.metadata.namespace.as_deref().unwrap_or("default");
            let name = e.metadata.name.as_deref().unwrap_or_default();
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: e.metadata.uid.clone(),
                    resource_version: e.metadata.resource_version.clone(),
                }),
                ..Default::default()
            };
            match Api::<Event>::namespaced(client.clone(), ns)
                .delete(name, &dp)
                .await
            {
                Ok(_) => deleted += 1,
                // Gone already, or repeated since we looked: both fine.
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    Ok(deleted)
}

pub fn start(shared: &Arc<Shared>, ttl: Duration) -> BoxFuture<'static, ()> {
    let client = shared.client_for("eventttl");
    let clock = shared.clock.clone();
    let period = (ttl / 10).clamp(Duration::from_secs(1), Duration::from_secs(60));
    async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match sweep(&client, clock.as_ref(), ttl).await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(deleted = n, "expired events"),
                Err(e) => tracing::warn!(error = %e, "expiring events"),
            }
        }
    }
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toolkit::testing::TestApi;
    use serde_json::json;

    #[tokio::test]
    async fn events_expire_after_the_ttl_since_they_last_happened() {
        let api = TestApi::start().await;
        let now = api.clock.now();
        let stamp = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        for (name, last) in [
            ("old", now - chrono::Duration::minutes(61)),
            ("recent", now - chrono::Duration::minutes(59)),
        ] {
            let _: Event = api
                .create(json!({
                    "apiVersion": "v1", "kind": "Event",
                    "metadata": {"name": name, "namespace": "default"},
                    "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
                    "reason": "Test", "message": "m", "type": "Normal",
                    "firstTimestamp": stamp(now - chrono::Duration::minutes(120)),
                    "lastTimestamp": stamp(last),
                    "count": 2,
                }))
                .await;
        }
        let ttl = Duration::from_secs(3600);
        assert_eq!(
            sweep(&api.client, api.clock.as_ref(), ttl).await.unwrap(),
            1
        );
        let names: Vec<String> = Api::<Event>::all(api.client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|e| e.metadata.name)
            .collect();
        assert_eq!(names, vec!["recent".to_string()]);
        api.clock.advance(Duration::from_secs(120));
        assert_eq!(
            sweep(&api.client, api.clock.as_ref(), ttl).await.unwrap(),
            1
        );
    }
}
