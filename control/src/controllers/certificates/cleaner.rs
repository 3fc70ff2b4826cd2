//! csrcleaner: removes CertificateSigningRequests that are done with, as
//! upstream's: issued or denied or failed an hour after that condition
//! was last updated, pending (no conditions) a day after creation, and
//! any whose issued certificate has expired.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};
use kube::ResourceExt;

use crate::toolkit::{to_chrono, Clock, Shared};

const APPROVED_EXPIRATION: chrono::Duration = chrono::Duration::hours(1);
const DENIED_EXPIRATION: chrono::Duration = chrono::Duration::hours(1);
const PENDING_EXPIRATION: chrono::Duration = chrono::Duration::hours(24);
/// Upstream polls hourly; a list a minute is cheap and keeps the
/// durations closer.
const POLLING_INTERVAL: Duration = Duration::from_secs(60);

/// When the condition of type `t` was last updated, if it is there.
fn condition_updated(csr: &CertificateSigningRequest, t: &str) -> Option<DateTime<Utc>> {
    csr.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| {
            c.last_update_time
                .as_ref()
                .map(to_chrono)
                .unwrap_or_default()
        })
}

fn certificate_expired(csr: &CertificateSigningRequest, now: DateTime<Utc>) -> bool {
    let Some(pem) = csr.status.as_ref().and_then(|s| s.certificate.as_ref()) else {
        return false;
    };
    let Ok((_, block)) = x509_parser::pem::parse_x509_pem(&pem.0) else {
        return false;
    };
    block
        .parse_x509()
        .is_ok_and(|c| c.validity().not_after.timestamp() < now.timestamp())
}

/// Whether `csr` is due for removal at `now`, and why.
pub fn due(csr: &CertificateSigningRequest, now: DateTime<Utc>) -> Option<&'static str> {
    let older = |t: Option<DateTime<Utc>>, d| t.is_some_and(|t| now - t > d);
    let issued = csr
        .status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|c| !c.0.is_empty());
    let no_conditions = csr
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_none_or(Vec::is_empty);
    if issued && older(condition_updated(csr, "Approved"), APPROVED_EXPIRATION) {
        Some("issued")
    } else if older(condition_updated(csr, "Denied"), DENIED_EXPIRATION) {
        Some("denied")
    } else if older(condition_updated(csr, "Failed"), DENIED_EXPIRATION) {
        Some("failed")
    } else if no_conditions
        && older(
            csr.metadata.creation_timestamp.as_ref().map(to_chrono),
            PENDING_EXPIRATION,
        )
    {
        Some("pending")
    } else if certificate_expired(csr, now) {
        Some("expired")
    } else {
        None
    }
}

/// Deletes every request due for removal; returns how many went.
pub async fn sweep(client: &kube::Client, clock: &dyn Clock) -> kube::Result<usize> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let now = clock.now();
    let mut deleted = 0;
    for csr in api.list(&ListParams::default()).await?.items {
        let Some(why) = due(&csr, now) else {
            continue;
        };
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: csr.metadata.uid.clone(),
                resource_version: csr.metadata.resource_version.clone(),
            }),
            ..Default::default()
        };
        match api.delete(&csr.name_any(), &dp).await {
            Ok(_) => {
                tracing::info!(csr = %csr.name_any(), why, "cleaned up a certificate signing request");
                deleted += 1;
            }
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}

pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    let client = shared.client_for("csrcleaner");
    let clock = shared.clock.clone();
    async move {
        let mut tick = tokio::time::interval(POLLING_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = sweep(&client, clock.as_ref()).await {
                tracing::warn!(error = %e, "cleaning up certificate signing requests");
            }
        }
    }
    .boxed()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn csr(created: &str, status: serde_json::Value) -> CertificateSigningRequest {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "creationTimestamp": created},
            "spec": {"request": "", "signerName": "a.b/c"},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn upstream_durations() {
        let now: DateTime<Utc> = "2026-01-02T12:00:00Z".parse().unwrap();
        let pending = csr("2026-01-01T11:59:00Z", json!({}));
        assert_eq!(due(&pending, now), Some("pending"));
        let young = csr("2026-01-01T12:01:00Z", json!({}));
        assert_eq!(due(&young, now), None);
        let cond = |t: &str, at: &str| {
            json!({"conditions": [
            {"type": t, "status": "True", "lastUpdateTime": at}]})
        };
        let denied = csr(
            "2026-01-02T10:00:00Z",
            cond("Denied", "2026-01-02T10:59:00Z"),
        );
        assert_eq!(due(&denied, now), Some("denied"));
        let denied_now = csr(
            "2026-01-02T10:00:00Z",
            cond("Denied", "2026-01-02T11:01:00Z"),
        );
        assert_eq!(due(&denied_now, now), None);
        let failed = csr(
            "2026-01-02T10:00:00Z",
            cond("Failed", "2026-01-02T10:00:00Z"),
        );
        assert_eq!(due(&failed, now), Some("failed"));
        // Approved but not issued (another signer's): kept.
        let approved = csr(
            "2026-01-02T10:00:00Z",
            cond("Approved", "2026-01-02T10:00:00Z"),
        );
        assert_eq!(due(&approved, now), None);
    }
}
