//! Printers for ValidatingWebhookConfiguration and
//! MutatingWebhookConfiguration (`admissionregistration.k8s.io`), as
//! kubectl's printValidatingWebhook and printMutatingWebhook: the number
//! of webhooks; ValidatingAdmissionPolicy (its validations and param kind)
//! and ValidatingAdmissionPolicyBinding (its policy and param reference),
//! as printValidatingAdmissionPolicy and printValidatingAdmissionPolicyBinding.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{array_at, name_cell, str_at};

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

const VALIDATIONS: Column = Column::integer(
    "Validations",
    "Validations indicates the number of validation rules defined in this configuration",
);
const PARAM_KIND: Column = Column::text(
    "ParamKind",
    "ParamKind specifies the kind of resources used to parameterize this policy",
);
const POLICY_NAME: Column = Column::text(
    "PolicyName",
    "PolicyName indicates the policy definition which the policy binding binded to",
);
const PARAM_REF: Column = Column::text(
    "ParamRef",
    "ParamRef indicates the param resource which sets the configration param",
);

pub(super) const VALIDATING_ADMISSION_POLICY: KindPrinter = KindPrinter {
    group: "admissionregistration.k8s.io",
    kind: "ValidatingAdmissionPolicy",
    columns: &[NAME, VALIDATIONS, PARAM_KIND, AGE],
    cells: policy_cells,
};

pub(super) const VALIDATING_ADMISSION_POLICY_BINDING: KindPrinter = KindPrinter {
    group: "admissionregistration.k8s.io",
    kind: "ValidatingAdmissionPolicyBinding",
    columns: &[NAME, POLICY_NAME, PARAM_REF, AGE],
    cells: binding_cells,
};

fn policy_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let param_kind = match obj.pointer("/spec/paramKind") {
        Some(pk) if pk.is_object() => {
            format!("{}/{}", str_at(pk, "/apiVersion"), str_at(pk, "/kind"))
        }
        _ => "<unset>".to_string(),
    };
    vec![
        name_cell(obj),
        array_at(obj, "/spec/validations").len().into(),
        param_kind.into(),
        age_cell(obj, now),
    ]
}

fn binding_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(obj),
        str_at(obj, "/spec/policyName").into(),
        param_ref_cell(obj.pointer("/spec/paramRef")).into(),
        age_cell(obj, now),
    ]
}

/// `ns/name`, `*/name` (no namespace: the param may be cluster-scoped),
/// or the selector as Go prints a LabelSelector; `<unset>` without one.
fn param_ref_cell(param_ref: Option<&Value>) -> String {
    let Some(pr) = param_ref.filter(|p| p.is_object()) else {
        return "<unset>".to_string();
    };
    let name = str_at(pr, "/name");
    let namespace = str_at(pr, "/namespace");
    if !name.is_empty() {
        return if namespace.is_empty() {
            format!("*/{name}")
        } else {
            format!("{namespace}/{name}")
        };
    }
    let Some(sel) = pr.get("selector").filter(|s| s.is_object()) else {
        return "<unset>".to_string();
    };
    let mut labels: Vec<(&String, &Value)> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    labels.sort_by(|a, b| a.0.cmp(b.0));
    let labels: String = labels
        .iter()
        .map(|(k, v)| format!("{k}: {},", v.as_str().unwrap_or_default()))
        .collect();
    let exprs: String = array_at(sel, "/matchExpressions")
        .iter()
        .map(|e| {
            let values: Vec<&str> = array_at(e, "/values")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                str_at(e, "/key"),
                str_at(e, "/operator"),
                values.join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},\
         MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}"
    )
}

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

    #[test]
    fn policy_columns() {
        let p = json!({"metadata": {"name": "p"}, "spec": {
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "validations": [{"expression": "true"}, {"expression": "false"}]}});
        let cells = policy_cells(&p, Utc::now());
        assert_eq!(cells[1], 2);
        assert_eq!(cells[2], "v1/ConfigMap");
        let bare = json!({"metadata": {"name": "p"}, "spec": {}});
        assert_eq!(policy_cells(&bare, Utc::now())[2], "<unset>");
    }

    #[test]
    fn binding_columns() {
        let cell = |pr: Value| {
            binding_cells(
                &json!({"spec": {"policyName": "p",
            "paramRef": pr}}),
                Utc::now(),
            )[2]
            .clone()
        };
        assert_eq!(
            cell(json!({"name": "limits", "namespace": "ns"})),
            "ns/limits"
        );
        assert_eq!(cell(json!({"name": "limits"})), "*/limits");
        assert_eq!(
            cell(json!({"selector": {"matchLabels": {"b": "2", "a": "1"},
                "matchExpressions": [{"key": "env", "operator": "In", "values": ["x", "y"]}]}})),
            "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:\
             []LabelSelectorRequirement{LabelSelectorRequirement{Key:env,Operator:In,\
             Values:[x y],},},}"
        );
        assert_eq!(cell(Value::Null), "<unset>");
        let b = json!({"spec": {"policyName": "p"}});
        assert_eq!(binding_cells(&b, Utc::now())[1], "p");
    }
}
