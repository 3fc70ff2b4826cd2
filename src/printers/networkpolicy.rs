//! Printers for networking.k8s.io's NetworkPolicy, as kubectl's
//! `printNetworkPolicy`: NAME POD-SELECTOR AGE.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::name_cell;
use crate::selector::format_label_selector_json;

pub(super) const NETWORK_POLICY: KindPrinter = KindPrinter {
    group: "networking.k8s.io",
    kind: "NetworkPolicy",
    columns: &[
        NAME,
        Column::text(
            "Pod-Selector",
            "Selects the pods to which this NetworkPolicy object applies. The array of ingress rules is applied to any pods selected by this field. Multiple network policies can select the same set of pods. In this case, the ingress rules for each are combined additively. This field is NOT optional and follows standard label selector semantics. An empty podSelector matches all pods in this namespace.",
        ),
        AGE,
    ],
    cells: network_policy_cells,
};

fn network_policy_cells(np: &Value, now: DateTime<Utc>) -> Vec<Value> {
    // The pod selector is a value in Go: absent means empty, `<none>`.
    let empty = serde_json::json!({});
    let sel = np.pointer("/spec/podSelector").unwrap_or(&empty);
    vec![
        name_cell(np),
        format_label_selector_json(Some(sel)).into(),
        age_cell(np, now),
    ]
}
