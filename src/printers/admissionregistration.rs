//! Printers for ValidatingWebhookConfiguration and
//! MutatingWebhookConfiguration (`admissionregistration.k8s.io`), as
//! kubectl's printValidatingWebhook and printMutatingWebhook: the number
//! of webhooks.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{array_at, name_cell};

const WEBHOOKS: Column = Column::integer(
    "Webhooks",
    "Webhooks indicates the number of webhooks registered in this configuration",
);

pub(super) const VALIDATING_WEBHOOK_CONFIGURATION: KindPrinter = KindPrinter {
    group: "admissionregistration.k8s.io",
    kind: "ValidatingWebhookConfiguration",
    columns: &[NAME, WEBHOOKS, AGE],
    cells: webhook_cells,
};

pub(super) const MUTATING_WEBHOOK_CONFIGURATION: KindPrinter = KindPrinter {
    group: "admissionregistration.k8s.io",
    kind: "MutatingWebhookConfiguration",
    columns: &[NAME, WEBHOOKS, AGE],
    cells: webhook_cells,
};

fn webhook_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(obj),
        array_at(obj, "/webhooks").len().into(),
        age_cell(obj, now),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn counts_webhooks() {
        let obj =
            json!({"metadata": {"name": "w"}, "webhooks": [{"name": "a.b.c"}, {"name": "d.e.f"}]});
        assert_eq!(webhook_cells(&obj, Utc::now())[1], 2);
        let none = json!({"metadata": {"name": "w"}});
        assert_eq!(webhook_cells(&none, Utc::now())[1], 0);
    }
}
