//! ResourceQuota and LimitRange, as kubectl's `printResourceQuota` and
//! `printLimitRange`.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{KindPrinter, AGE, NAME};
use super::fields::name_cell;
use super::Column;

pub(super) const RESOURCE_QUOTA: KindPrinter = KindPrinter {
    group: "",
    kind: "ResourceQuota",
    columns: &[
        NAME,
        AGE,
        Column::text(
            "Request",
            "Request represents a minimum amount of cpu/memory that a container may consume.",
        ),
        Column::text(
            "Limit",
            "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
        ),
    ],
    cells: resource_quota_cells,
};

/// REQUEST and LIMIT: `used/hard` of each resource of `spec.hard`,
/// sorted; the `limits.*` ones under LIMIT, the rest under REQUEST.
fn resource_quota_cells(q: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut names: Vec<&String> = q
        .pointer("/spec/hard")
        .and_then(Value::as_object)
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    names.sort();
    let quantity = |ptr: &str, name: &str| {
        q.pointer(ptr)
            .and_then(|m| m.get(name))
            .and_then(Value::as_str)
            .unwrap_or("0")
            .to_string()
    };
    let (mut request, mut limit) = (Vec::new(), Vec::new());
    for name in names {
        let cell = format!(
            "{name}: {}/{}",
            quantity("/status/used", name),
            quantity("/status/hard", name)
        );
        if name.split('.').next() == Some("limits") && name.contains('.') {
            limit.push(cell);
        } else {
            request.push(cell);
        }
    }
    vec![
        name_cell(q),
        age_cell(q, now),
        request.join(", ").into(),
        limit.join(", ").into(),
    ]
}

pub(super) const LIMIT_RANGE: KindPrinter = KindPrinter {
    group: "",
    kind: "LimitRange",
    columns: &[
        NAME,
        Column {
            type_: "date",
            ..Column::text(
                "Created At",
                "CreationTimestamp is a timestamp representing the server time when this object was created.",
            )
        },
    ],
    cells: |lr, _| {
        vec![
            name_cell(lr),
            lr.pointer("/metadata/creationTimestamp")
                .cloned()
                .unwrap_or(Value::Null),
        ]
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quota_rows_split_requests_from_limits_as_kubectl() {
        let q = json!({
            "metadata": {"name": "compute", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"hard": {"pods": "2", "limits.cpu": "2", "requests.memory": "1Gi", "cpu": "1"}},
            "status": {"hard": {"pods": "2", "limits.cpu": "2", "requests.memory": "1Gi", "cpu": "1"},
                       "used": {"pods": "1", "limits.cpu": "500m", "requests.memory": "128Mi", "cpu": "0"}},
        });
        let now = "2024-01-01T00:05:00Z".parse().unwrap();
        let cells = resource_quota_cells(&q, now);
        assert_eq!(cells[1], json!("5m"));
        assert_eq!(
            cells[2],
            json!("cpu: 0/1, pods: 1/2, requests.memory: 128Mi/1Gi")
        );
        assert_eq!(cells[3], json!("limits.cpu: 500m/2"));
        // Before the controller's first sync: used and hard print as 0.
        let fresh = json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "2"}}});
        assert_eq!(resource_quota_cells(&fresh, now)[2], json!("pods: 0/0"));
    }
}
