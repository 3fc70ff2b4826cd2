//! flowcontrol.apiserver.k8s.io/v1 defaults (`SetDefaults_FlowSchemaSpec`,
//! `SetDefaults_LimitedPriorityLevelConfiguration`,
//! `SetDefaults_ExemptPriorityLevelConfiguration`,
//! `SetDefaults_QueuingConfiguration`): precedence 1000, 30 shares for a
//! limited level and 0 for an exempt one, no lending, 64 queues of hand
//! size 8 and length 50.

use serde_json::{json, Map, Value};

use super::{object_at, set};

fn is_zero_or_unset(m: &Map<String, Value>, k: &str) -> bool {
    m.get(k)
        .is_none_or(|v| v.is_null() || v.as_i64() == Some(0))
}

pub(super) fn default_flow_schema(root: &mut Map<String, Value>) {
    let spec = object_at(root, "spec");
    if is_zero_or_unset(spec, "matchingPrecedence") {
        spec.insert("matchingPrecedence".into(), json!(1000));
    }
}

pub(super) fn default_priority_level(root: &mut Map<String, Value>) {
    let spec = object_at(root, "spec");
    if let Some(Value::Object(e)) = spec.get_mut("exempt") {
        set(e, "nominalConcurrencyShares", json!(0));
        set(e, "lendablePercent", json!(0));
    }
    let Some(Value::Object(l)) = spec.get_mut("limited") else {
        return;
    };
    set(l, "nominalConcurrencyShares", json!(30));
    set(l, "lendablePercent", json!(0));
    let Some(Value::Object(lr)) = l.get_mut("limitResponse") else {
        return;
    };
    if let Some(Value::Object(q)) = lr.get_mut("queuing") {
        for (k, v) in [("queues", 64), ("handSize", 8), ("queueLengthLimit", 50)] {
            if is_zero_or_unset(q, k) {
                q.insert(k.into(), json!(v));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_defaults() {
        let mut fs = json!({"spec": {}});
        default_flow_schema(fs.as_object_mut().unwrap());
        assert_eq!(fs["spec"]["matchingPrecedence"], 1000);
        let mut pl = json!({"spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 0,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 4}}}}});
        default_priority_level(pl.as_object_mut().unwrap());
        let l = &pl["spec"]["limited"];
        // An explicit 0 is kept (v1: the field is a pointer).
        assert_eq!(l["nominalConcurrencyShares"], 0);
        assert_eq!(l["lendablePercent"], 0);
        assert_eq!(
            l["limitResponse"]["queuing"],
            json!({"queues": 4, "handSize": 8, "queueLengthLimit": 50})
        );
        let mut pl =
            json!({"spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Reject"}}}});
        default_priority_level(pl.as_object_mut().unwrap());
        assert_eq!(pl["spec"]["limited"]["nominalConcurrencyShares"], 30);
    }
}
