//! Printers for discovery.k8s.io: EndpointSlice, as kubectl's `printEndpointSlice`.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{array_at, name_cell, str_at};

pub(super) const ENDPOINT_SLICE: KindPrinter = KindPrinter {
    group: "discovery.k8s.io",
    kind: "EndpointSlice",
    columns: &[
        NAME,
        Column::text(
            "AddressType",
            "addressType specifies the type of address carried by this EndpointSlice.",
        ),
        Column::text(
            "Ports",
            "ports specifies the list of network ports exposed by each endpoint in this slice.",
        ),
        Column::text(
            "Endpoints",
            "endpoints is a list of unique endpoints in this slice.",
        ),
        AGE,
    ],
    cells: endpoint_slice_cells,
};

fn endpoint_slice_cells(slice: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(slice),
        str_at(slice, "/addressType").into(),
        slice_ports(slice).into(),
        slice_endpoints(slice).into(),
        age_cell(slice, now),
    ]
}

/// At most three entries, then ` + N more...`; `<unset>` when there are none.
fn list_with_more(items: impl Iterator<Item = String>) -> String {
    const MAX: usize = 3;
    let mut list = Vec::new();
    let mut count = 0;
    for item in items {
        if list.len() < MAX {
            list.push(item);
        }
        count += 1;
    }
    let ret = list.join(",");
    if count > MAX {
        format!("{ret} + {} more...", count - MAX)
    } else if ret.is_empty() {
        "<unset>".to_string()
    } else {
        ret
    }
}

/// The PORTS cell: each port's number, else its name, else `*`.
fn slice_ports(slice: &Value) -> String {
    list_with_more(array_at(slice, "/ports").iter().map(|p| {
        match p.get("port").and_then(Value::as_i64) {
            Some(n) => n.to_string(),
            None => p
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("*")
                .to_string(),
        }
    }))
}

/// The ENDPOINTS cell: every address of every endpoint, ready or not.
fn slice_endpoints(slice: &Value) -> String {
    list_with_more(
        array_at(slice, "/endpoints")
            .iter()
            .flat_map(|e| array_at(e, "/addresses"))
            .filter_map(Value::as_str)
            .map(str::to_string),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cells(slice: Value) -> Vec<Value> {
        endpoint_slice_cells(&slice, Utc::now())
    }

    #[test]
    fn endpoint_slices_print_like_kubectl() {
        let eps: Vec<Value> = (1..=5)
            .map(|i| json!({"addresses": [format!("10.244.1.{i}")]}))
            .collect();
        let row = cells(json!({
            "metadata": {"name": "web-abc12"},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 80}, {"name": "metrics"}, {}, {"port": 9}],
            "endpoints": eps,
        }));
        assert_eq!(row[0], "web-abc12");
        assert_eq!(row[1], "IPv4");
        assert_eq!(row[2], "80,metrics,* + 1 more...");
        assert_eq!(row[3], "10.244.1.1,10.244.1.2,10.244.1.3 + 2 more...");

        let row = cells(json!({"metadata": {"name": "e"}, "addressType": "IPv4",
                               "ports": [{"port": 80}],
                               "endpoints": [{"addresses": ["10.0.0.1"]}]}));
        assert_eq!(
            (row[2].as_str(), row[3].as_str()),
            (Some("80"), Some("10.0.0.1"))
        );

        let empty = cells(json!({"metadata": {"name": "e"}, "addressType": "IPv4"}));
        assert_eq!(empty[2], "<unset>");
        assert_eq!(empty[3], "<unset>");
    }
}
