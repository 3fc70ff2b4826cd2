//! Which API servers are live, for the `kubernetes` Service's endpoints:
//! each API server keeps an identity Lease in `kube-system` (as
//! kube-apiserver's `apiserver-<hash>` Leases, labelled
//! `apiserver.kubernetes.io/identity=kube-apiserver`), renewed on every
//! pass of the keeper (every 10 s); the endpoints list every server whose
//! Lease was renewed within the last [`ENDPOINT_TTL`], as upstream's lease
//! endpoint reconciler lists the master leases it keeps in etcd with a
//! 15 s TTL. Beside upstream's labels the Lease carries the address pods
//! reach that server at (annotation [`ENDPOINT_ANNOTATION`]), which
//! upstream keeps in the master lease's value instead.
//!
//! Liveness is judged from `renewTime` against this host's clock (etcd's
//! TTLs are not in the store interface), so the control-plane hosts'
//! clocks must agree within a few seconds, as they must for certificates.
//! A server stopping with SIGTERM deletes its Lease and takes itself out
//! of the endpoints at once ([`super::leave`]); one killed drops out after
//! the TTL. Leases not renewed for their whole duration (an hour, as
//! upstream's) are deleted by whichever server sees them, as upstream's
//! apiserver lease garbage collector does.

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Client;

use crate::toolkit::api_errors::is_status;

/// The label every API server identity Lease carries.
pub const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
pub const IDENTITY_VALUE: &str = "kube-apiserver";
/// Where the server's endpoint (`IP:port`) is written on its Lease.
pub const ENDPOINT_ANNOTATION: &str = "bosun.io/apiserver-endpoint";
/// How long after its last renewal a server still counts as live.
pub const ENDPOINT_TTL: Duration = Duration::from_secs(15);
/// The identity Leases' duration, as upstream's.
const LEASE_DURATION_SECONDS: i32 = 3600;
const NAMESPACE: &str = "kube-system";

/// The identity Lease's name for the server reached at `endpoint` on this
/// host: `apiserver-<hash>` (upstream hashes the host name; several
/// servers on one host are told apart by their endpoint too).
pub fn lease_name(endpoint: SocketAddr) -> String {
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let hash = crate::toolkit::hash::hash_value(
        &serde_json::json!({"host": host, "endpoint": endpoint.to_string()}),
        None,
    );
    format!("apiserver-{hash}")
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// Creates or renews this server's identity Lease.
pub async fn renew(client: &Client, endpoint: SocketAddr) -> Result<(), kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let name = lease_name(endpoint);
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let now = now();
    match leases.get_opt(&name).await? {
        Some(mut lease) => {
            let spec = lease.spec.get_or_insert_with(Default::default);
            spec.renew_time = Some(now);
            spec.holder_identity = Some(name.clone());
            spec.lease_duration_seconds = Some(LEASE_DURATION_SECONDS);
            lease
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(ENDPOINT_ANNOTATION.into(), endpoint.to_string());
            lease.metadata.managed_fields = None;
            match leases.replace(&name, &PostParams::default(), &lease).await {
                Ok(_) => Ok(()),
                // Renewed by a concurrent pass: fine.
                Err(e) if is_status(&e, 409) => Ok(()),
                Err(e) => Err(e),
            }
        }
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(NAMESPACE.into()),
                    labels: Some(
                        [
                            (IDENTITY_LABEL.to_string(), IDENTITY_VALUE.to_string()),
                            ("kubernetes.io/hostname".to_string(), host),
                        ]
                        .into(),
                    ),
                    annotations: Some(
                        [(ENDPOINT_ANNOTATION.to_string(), endpoint.to_string())].into(),
                    ),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(name),
                    lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    ..Default::default()
                }),
            };
            match leases.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(()),
                Err(e) if is_status(&e, 409) => Ok(()),
                Err(e) => Err(e),
            }
        }
    }
}

/// Deletes this server's identity Lease (on shutdown).
pub async fn remove(client: &Client, endpoint: SocketAddr) -> Result<(), kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    match leases
        .delete(&lease_name(endpoint), &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Seconds since `t` by this host's clock (negative if in the future).
fn age(t: &MicroTime) -> f64 {
    let now = k8s_openapi::jiff::Timestamp::now();
    (now.as_millisecond() - t.0.as_millisecond()) as f64 / 1000.0
}

/// The endpoints of every live API server, sorted; Leases past their
/// whole duration are deleted on the way.
pub async fn live(client: &Client) -> Result<Vec<SocketAddr>, kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let list = leases
        .list(&ListParams::default().labels(&format!("{IDENTITY_LABEL}={IDENTITY_VALUE}")))
        .await?;
    let mut live = Vec::new();
    for lease in list.items {
        let spec = lease.spec.clone().unwrap_or_default();
        let Some(renewed) = spec.renew_time.as_ref().map(age) else {
            continue;
        };
        let duration = f64::from(
            spec.lease_duration_seconds
                .unwrap_or(LEASE_DURATION_SECONDS),
        );
        if renewed > duration {
            if let Some(name) = &lease.metadata.name {
                let _ = leases.delete(name, &DeleteParams::default()).await;
            }
            continue;
        }
        if renewed > ENDPOINT_TTL.as_secs_f64() {
            continue;
        }
        let endpoint = lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ENDPOINT_ANNOTATION))
            .and_then(|e| e.parse::<SocketAddr>().ok());
        live.extend(endpoint);
    }
    live.sort();
    live.dedup();
    Ok(live)
}
