//! Printers for flowcontrol.apiserver.k8s.io, as kubectl's
//! `printFlowSchema` (its level, precedence, distinguisher and whether the
//! level is missing: the `Dangling` condition, `?` before it is set) and
//! `printPriorityLevelConfiguration` (`<none>` where an exempt level or a
//! rejecting one has no such number).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{array_at, name_cell, str_at};

pub(super) const FLOW_SCHEMA: KindPrinter = KindPrinter {
    group: "flowcontrol.apiserver.k8s.io",
    kind: "FlowSchema",
    columns: &[
        NAME,
        Column::text("PriorityLevel", "`name` is the name of the priority level configuration being referenced Required."),
        Column::text("MatchingPrecedence", "`matchingPrecedence` is used to choose among the FlowSchemas that match a given request. The chosen FlowSchema is among those with the numerically lowest (which we take to be logically highest) MatchingPrecedence.  Each MatchingPrecedence value must be ranged in [1,10000]. Note that if the precedence is not specified, it will be set to 1000 as default."),
        Column::text("DistinguisherMethod", "`distinguisherMethod` defines how to compute the flow distinguisher for requests that match this schema. `nil` specifies that the distinguisher is disabled and thus will always be the empty string."),
        AGE,
        Column::text("MissingPL", "references a broken or non-existent PriorityLevelConfiguration"),
    ],
    cells: flow_schema_cells,
};

fn flow_schema_cells(fs: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let method = match str_at(fs, "/spec/distinguisherMethod/type") {
        "" => "<none>",
        t => t,
    };
    let missing = array_at(fs, "/status/conditions")
        .iter()
        .find(|c| str_at(c, "/type") == "Dangling")
        .map_or("?", |c| str_at(c, "/status"));
    vec![
        name_cell(fs),
        str_at(fs, "/spec/priorityLevelConfiguration/name").into(),
        fs.pointer("/spec/matchingPrecedence")
            .cloned()
            .unwrap_or(Value::from(0)),
        method.into(),
        age_cell(fs, now),
        missing.into(),
    ]
}

pub(super) const PRIORITY_LEVEL_CONFIGURATION: KindPrinter = KindPrinter {
    group: "flowcontrol.apiserver.k8s.io",
    kind: "PriorityLevelConfiguration",
    columns: &[
        NAME,
        Column::text("Type", "`type` indicates whether this priority level is subject to limitation on request execution.  A value of `\"Exempt\"` means that requests of this priority level are not subject to a limit (and thus are never queued) and do not detract from the capacity made available to other priority levels.  A value of `\"Limited\"` means that (a) requests of this priority level _are_ subject to limits and (b) some of the server's limited capacity is made available exclusively to this priority level. Required."),
        Column::text("NominalConcurrencyShares", "`nominalConcurrencyShares` (NCS) contributes to the computation of the NominalConcurrencyLimit (NominalCL) of this level."),
        Column::text("Queues", "`queues` is the number of queues for this priority level."),
        Column::text("HandSize", "`handSize` is a small positive number that configures the shuffle sharding of requests into queues."),
        Column::text("QueueLengthLimit", "`queueLengthLimit` is the maximum number of requests allowed to be waiting in a given queue of this priority level at a time; excess requests are rejected."),
        AGE,
    ],
    cells: priority_level_cells,
};

fn priority_level_cells(pl: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let at = |ptr: &str| pl.pointer(ptr).cloned().unwrap_or(Value::from("<none>"));
    let (ncs, queues, hand, limit) = match pl.pointer("/spec/limited") {
        Some(l) if !l.is_null() => (
            at("/spec/limited/nominalConcurrencyShares"),
            at("/spec/limited/limitResponse/queuing/queues"),
            at("/spec/limited/limitResponse/queuing/handSize"),
            at("/spec/limited/limitResponse/queuing/queueLengthLimit"),
        ),
        _ => {
            let none = Value::from("<none>");
            (none.clone(), none.clone(), none.clone(), none)
        }
    };
    vec![
        name_cell(pl),
        str_at(pl, "/spec/type").into(),
        ncs,
        queues,
        hand,
        limit,
        age_cell(pl, now),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn flow_schema_columns() {
        let fs = json!({"metadata": {"name": "exempt"}, "spec": {
            "priorityLevelConfiguration": {"name": "exempt"}, "matchingPrecedence": 1}});
        let cells = flow_schema_cells(&fs, Utc::now());
        assert_eq!(cells[1], "exempt");
        assert_eq!(cells[2], 1);
        assert_eq!(cells[3], "<none>");
        assert_eq!(cells[5], "?");
        let fs = json!({"metadata": {"name": "x"}, "spec": {
            "priorityLevelConfiguration": {"name": "gone"}, "matchingPrecedence": 500,
            "distinguisherMethod": {"type": "ByUser"}},
            "status": {"conditions": [{"type": "Dangling", "status": "True"}]}});
        let cells = flow_schema_cells(&fs, Utc::now());
        assert_eq!((&cells[3], &cells[5]), (&json!("ByUser"), &json!("True")));
    }

    #[test]
    fn priority_level_columns() {
        let pl = json!({"metadata": {"name": "w"}, "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 40, "limitResponse": {"type": "Queue",
            "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}});
        let cells = priority_level_cells(&pl, Utc::now());
        assert_eq!(
            &cells[1..6],
            &[json!("Limited"), json!(40), json!(128), json!(6), json!(50)]
        );
        let pl = json!({"metadata": {"name": "exempt"}, "spec": {"type": "Exempt"}});
        assert_eq!(priority_level_cells(&pl, Utc::now())[2], "<none>");
    }
}
