//! Printers for apiregistration.k8s.io: APIService, as kube-aggregator's
//! table convertor (NAME, SERVICE, AVAILABLE, AGE).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{name_cell, str_at};

pub(super) const API_SERVICE: KindPrinter = KindPrinter {
    group: "apiregistration.k8s.io",
    kind: "APIService",
    columns: &[
        NAME,
        Column::text(
            "Service",
            "The reference to the service that hosts this API endpoint.",
        ),
        Column::text("Available", "Whether this service is available."),
        AGE,
    ],
    cells: api_service_cells,
};

/// `Local` for a group served by the API server itself, else `NAMESPACE/NAME`.
fn service_cell(api_service: &Value) -> String {
    match api_service
        .pointer("/spec/service")
        .filter(|s| s.is_object())
    {
        None => "Local".to_string(),
        Some(s) => format!("{}/{}", str_at(s, "/namespace"), str_at(s, "/name")),
    }
}

/// `True`, or `False (Reason)`; `Unknown` without an Available condition.
fn available_cell(api_service: &Value) -> String {
    let conditions = api_service
        .pointer("/status/conditions")
        .and_then(Value::as_array);
    let available = conditions
        .into_iter()
        .flatten()
        .find(|c| str_at(c, "/type") == "Available");
    match available {
        None => "Unknown".to_string(),
        Some(c) if str_at(c, "/status") == "True" => "True".to_string(),
        Some(c) => format!("{} ({})", str_at(c, "/status"), str_at(c, "/reason")),
    }
}

fn api_service_cells(api_service: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(api_service),
        service_cell(api_service).into(),
        available_cell(api_service).into(),
        age_cell(api_service, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn local_and_remote_services_print_as_kubectl_shows_them() {
        let local = json!({"metadata": {"name": "v1.apps"}, "spec": {"group": "apps"},
            "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}});
        assert_eq!(service_cell(&local), "Local");
        assert_eq!(available_cell(&local), "True");
        let remote = json!({"metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}},
            "status": {"conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]}});
        assert_eq!(service_cell(&remote), "kube-system/metrics-server");
        assert_eq!(available_cell(&remote), "False (MissingEndpoints)");
        assert_eq!(available_cell(&json!({})), "Unknown");
    }
}
