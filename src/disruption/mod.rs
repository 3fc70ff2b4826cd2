//! PodDisruptionBudgets' rules, shared by the API server and the
//! controller manager: [`budget`], what a budget's status adds up to (the
//! disruption controller's arithmetic), and [`eviction`], whether an
//! eviction may go ahead under the budgets of a pod's namespace
//! (kube-apiserver's `EvictionREST`), callable by anything else that
//! must honour budgets.

pub mod budget;
pub mod eviction;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Whether the pod's Ready condition is True (`podutil.IsPodReady`).
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The pod's phase, "" when unset.
pub fn phase_of(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// An API timestamp as chrono time.
pub fn to_chrono(t: &Time) -> DateTime<Utc> {
    DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
        .unwrap_or_default()
}

/// A chrono time as an API timestamp.
pub fn from_chrono(t: DateTime<Utc>) -> Time {
    Time(
        k8s_openapi::jiff::Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32)
            .unwrap_or_default(),
    )
}
