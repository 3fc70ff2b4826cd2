//! Where the controller gets pod metrics: `metrics.k8s.io` through the API
//! (as kube-controller-manager's resource metrics client does), behind a
//! trait so unit tests feed numbers.

use std::time::Duration;

use chrono::{DateTime, Utc};
use kube::Client;
use serde_json::Value;

use super::replica_calculator::{PodMetric, PodMetrics};

#[async_trait::async_trait]
pub trait MetricsSource: Send + Sync + 'static {
    /// Each pod's usage of `resource` (its containers' summed), in
    /// milli-units, for the pods of `namespace` matching `selector`.
    async fn resource_metric(
        &self,
        resource: &str,
        namespace: &str,
        selector: &str,
    ) -> Result<PodMetrics, String>;
}

/// The resource metrics API of this control plane.
pub struct ApiMetrics {
    pub client: Client,
}

/// A metav1.Duration as metrics-server writes it (`10s`, `1.5s`, `1m0s`).
fn parse_window(s: &str) -> Duration {
    let mut total = 0.0;
    let mut number = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            number.push(c);
            continue;
        }
        let mut unit = c.to_string();
        if c == 'm' && chars.peek() == Some(&'s') {
            unit.push(chars.next().unwrap());
        }
        let n: f64 = number.parse().unwrap_or(0.0);
        number.clear();
        total += match unit.as_str() {
            "h" => n * 3600.0,
            "m" => n * 60.0,
            "s" => n,
            "ms" => n / 1000.0,
            _ => 0.0,
        };
    }
    Duration::from_secs_f64(total)
}

/// The usage of `resource` per pod of a PodMetricsList; a pod with a
/// container that lacks the resource is left out (`GetResourceMetric`).
pub fn from_pod_metrics_list(list: &Value, resource: &str) -> Result<PodMetrics, String> {
    let items = list["items"].as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        return Err("no metrics returned from resource metrics API".into());
    }
    let mut out = PodMetrics::new();
    for item in items {
        let mut total = 0i64;
        let mut complete = true;
        for c in item["containers"].as_array().cloned().unwrap_or_default() {
            match c["usage"][resource]
                .as_str()
                .and_then(|q| bosun::quantity::parse_quantity(q).ok())
            {
                Some(q) => total += q.millis() as i64,
                None => {
                    complete = false;
                    break;
                }
            }
        }
        if !complete {
            continue;
        }
        let timestamp = item["timestamp"]
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_else(Utc::now);
        out.insert(
            item["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            PodMetric {
                value: total,
                timestamp,
                window: parse_window(item["window"].as_str().unwrap_or("0s")),
            },
        );
    }
    Ok(out)
}

#[async_trait::async_trait]
impl MetricsSource for ApiMetrics {
    async fn resource_metric(
        &self,
        resource: &str,
        namespace: &str,
        selector: &str,
    ) -> Result<PodMetrics, String> {
        let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let path = format!(
            "/apis/metrics.k8s.io/v1beta1/namespaces/{}/pods?labelSelector={}",
            enc(namespace),
            enc(selector)
        );
        let req = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let text = self
            .client
            .request_text(req)
            .await
            .map_err(|e| e.to_string())?;
        let list: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        from_pod_metrics_list(&list, resource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_metrics_lists_become_milli_usage_per_pod() {
        let list = json!({"items": [
            {"metadata": {"name": "a"}, "timestamp": "2026-01-01T00:00:00Z", "window": "10.5s",
             "containers": [{"name": "x", "usage": {"cpu": "45000000n", "memory": "5120Ki"}},
                            {"name": "y", "usage": {"cpu": "5m", "memory": "1Mi"}}]},
            {"metadata": {"name": "b"}, "timestamp": "2026-01-01T00:00:00Z", "window": "1m0s",
             "containers": [{"name": "x", "usage": {"memory": "1Mi"}}]},
        ]});
        let cpu = from_pod_metrics_list(&list, "cpu").unwrap();
        assert_eq!(cpu.len(), 1, "b has no cpu figure");
        assert_eq!(cpu["a"].value, 50);
        assert_eq!(cpu["a"].window, Duration::from_millis(10_500));
        let memory = from_pod_metrics_list(&list, "memory").unwrap();
        assert_eq!(memory["a"].value, (5 << 20) * 1000 + (1 << 20) * 1000);
        assert_eq!(memory["b"].window, Duration::from_secs(60));
        assert_eq!(
            from_pod_metrics_list(&json!({"items": []}), "cpu").unwrap_err(),
            "no metrics returned from resource metrics API"
        );
    }
}
