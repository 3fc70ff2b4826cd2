//! What the control plane's and the agent's `/metrics` share: how a
//! registry is written out, and Kubernetes' histogram buckets.
//!
//! The metrics themselves are the Prometheus project's Rust client
//! (`prometheus-client`), which writes the OpenMetrics text format, the
//! one Prometheus negotiates first and that `kubectl get --raw /metrics`
//! prints as it is.

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The media type of [`render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A family of histograms that all have the same buckets.
pub type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// The apiserver's request-duration buckets (seconds), which etcd's
/// request-duration histogram uses too.
pub const REQUEST_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// The store-operation buckets: from 100µs, as an embedded store answers
/// far below the apiserver's 5ms first bucket.
pub const STORE_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// The kubelet's pod-start buckets (seconds).
pub const POD_START_BUCKETS: &[f64] = &[
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0,
    300.0, 360.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];

/// The kubelet's image-pull buckets (seconds).
pub const IMAGE_PULL_BUCKETS: &[f64] = &[
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 60.0, 120.0, 180.0, 240.0, 300.0,
    600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];

/// The registry in the OpenMetrics text format.
pub fn render(registry: &Registry) -> String {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)
        .expect("writing to a String does not fail");
    out
}
