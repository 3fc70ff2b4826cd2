//! Printers for `certificates.k8s.io`: CertificateSigningRequest, as
//! kubectl's `printCertificateSigningRequest` shows it: the signer, the
//! requesting user, the requested duration and the condition summary
//! (`Pending`, `Approved,Issued`, `Denied`, `...,Failed`).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::{age_cell, human_duration};
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{array_at, name_cell, str_at};

pub(super) const CERTIFICATE_SIGNING_REQUEST: KindPrinter = KindPrinter {
    group: "certificates.k8s.io",
    kind: "CertificateSigningRequest",
    columns: &[
        NAME,
        AGE,
        Column::text(
            "SignerName",
            "Name of the signer to request a certificate from.",
        ),
        Column::text("Requestor", "Name of the user who submitted the request."),
        Column::text(
            "RequestedDuration",
            "Requested duration of the issued certificate.",
        ),
        Column::text("Condition", "Summary of the request's conditions."),
    ],
    cells: csr_cells,
};

/// kubectl's extractCSRStatus: Denied over Approved over Pending, then
/// `,Failed` and `,Issued`.
pub fn csr_condition(obj: &Value) -> String {
    let has = |t: &str| {
        array_at(obj, "/status/conditions")
            .iter()
            .any(|c| c.get("type").and_then(Value::as_str) == Some(t))
    };
    let mut out = String::from(if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    });
    if has("Failed") {
        out.push_str(",Failed");
    }
    if !str_at(obj, "/status/certificate").is_empty() {
        out.push_str(",Issued");
    }
    out
}

fn csr_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let duration = match obj
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
    {
        Some(s) => human_duration(chrono::Duration::seconds(s)),
        None => "<none>".into(),
    };
    vec![
        name_cell(obj),
        age_cell(obj, now),
        str_at(obj, "/spec/signerName").into(),
        str_at(obj, "/spec/username").into(),
        duration.into(),
        csr_condition(obj).into(),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn columns_as_kubectl_prints_them() {
        let obj = json!({"metadata": {"name": "c"},
            "spec": {"signerName": "kubernetes.io/kube-apiserver-client", "username": "jane",
                     "expirationSeconds": 86400},
            "status": {"conditions": [{"type": "Approved"}], "certificate": "LS0t"}});
        let cells = csr_cells(&obj, Utc::now());
        assert_eq!(cells[2], "kubernetes.io/kube-apiserver-client");
        assert_eq!(cells[3], "jane");
        assert_eq!(cells[4], "24h");
        assert_eq!(cells[5], "Approved,Issued");
        let pending = json!({"metadata": {"name": "c"}, "spec": {}});
        assert_eq!(csr_cells(&pending, Utc::now())[4], "<none>");
        assert_eq!(csr_condition(&pending), "Pending");
        let denied = json!({"status": {"conditions": [{"type": "Denied"}, {"type": "Failed"}]}});
        assert_eq!(csr_condition(&denied), "Denied,Failed");
    }
}
