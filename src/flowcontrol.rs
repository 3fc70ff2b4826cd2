//! API Priority and Fairness' bootstrap configuration: the FlowSchemas
//! and PriorityLevelConfigurations kube-apiserver keeps (upstream's
//! `apiserver/pkg/apis/flowcontrol/bootstrap`). The mandatory ones
//! (`exempt`, `catch-all`) are restored whenever changed or deleted; the
//! suggested ones are created and kept current only while their
//! `apf.kubernetes.io/autoupdate-spec` annotation is `"true"`.
//!
//! The objects are given fully defaulted, so a stored object's spec is
//! compared with them as it is.

use serde_json::{json, Value};

/// Whether the API server keeps an object's spec at its bootstrap value.
pub const AUTOUPDATE_ANNOTATION: &str = "apf.kubernetes.io/autoupdate-spec";

/// The mandatory priority levels and flow schemas' names.
pub const EXEMPT: &str = "exempt";
pub const CATCH_ALL: &str = "catch-all";

/// The highest `matchingPrecedence`.
pub const MAX_MATCHING_PRECEDENCE: i64 = 10000;

fn pl(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name, "annotations": {AUTOUPDATE_ANNOTATION: "true"}},
        "spec": spec,
    })
}

fn queued(shares: i64, lendable: i64, queues: i64, hand: i64) -> Value {
    json!({
        "type": "Limited",
        "limited": {
            "nominalConcurrencyShares": shares,
            "lendablePercent": lendable,
            "limitResponse": {
                "type": "Queue",
                "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": 50},
            },
        },
    })
}

fn fs(name: &str, level: &str, precedence: i64, by: Option<&str>, rules: Value) -> Value {
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": rules,
    });
    if let Some(by) = by {
        spec["distinguisherMethod"] = json!({"type": by});
    }
    json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": name, "annotations": {AUTOUPDATE_ANNOTATION: "true"}},
        "spec": spec,
    })
}

fn group(name: &str) -> Value {
    json!({"kind": "Group", "group": {"name": name}})
}

fn user(name: &str) -> Value {
    json!({"kind": "User", "user": {"name": name}})
}

fn kube_system_sa(name: &str) -> Value {
    json!({"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": name}})
}

/// Every resource and non-resource request of `subjects`.
fn everything(subjects: Value) -> Value {
    json!([{
        "subjects": subjects,
        "resourceRules": [{
            "verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
            "clusterScope": true, "namespaces": ["*"],
        }],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
    }])
}

fn everyone() -> Value {
    json!([
        group("system:unauthenticated"),
        group("system:authenticated")
    ])
}

/// `exempt` and `catch-all`.
pub fn mandatory_priority_levels() -> Vec<Value> {
    vec![
        pl(
            EXEMPT,
            json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}),
        ),
        pl(
            CATCH_ALL,
            json!({"type": "Limited", "limited": {
                "nominalConcurrencyShares": 5,
                "lendablePercent": 0,
                "limitResponse": {"type": "Reject"},
            }}),
        ),
    ]
}

/// `exempt` (system:masters) and `catch-all` (everyone else).
pub fn mandatory_flow_schemas() -> Vec<Value> {
    vec![
        fs(
            EXEMPT,
            EXEMPT,
            1,
            None,
            everything(json!([group("system:masters")])),
        ),
        fs(
            CATCH_ALL,
            CATCH_ALL,
            MAX_MATCHING_PRECEDENCE,
            Some("ByUser"),
            everything(everyone()),
        ),
    ]
}

/// The suggested priority levels of Kubernetes 1.32.
pub fn suggested_priority_levels() -> Vec<Value> {
    vec![
        pl("system", queued(30, 33, 64, 6)),
        pl("node-high", queued(40, 25, 64, 6)),
        pl("leader-election", queued(10, 0, 16, 4)),
        pl("workload-high", queued(40, 50, 128, 6)),
        pl("workload-low", queued(100, 90, 128, 6)),
        pl("global-default", queued(20, 50, 128, 6)),
    ]
}

/// The suggested flow schemas of Kubernetes 1.32.
pub fn suggested_flow_schemas() -> Vec<Value> {
    // Leader election's objects: Leases anywhere, and the Endpoints and
    // ConfigMaps older electors locked (in `lock_namespaces`).
    let election = |subjects: Value, lock_namespaces: &str| {
        json!([{
            "subjects": subjects,
            "resourceRules": [
                {
                    "verbs": ["get", "create", "update"],
                    "apiGroups": [""],
                    "resources": ["endpoints", "configmaps"],
                    "namespaces": [lock_namespaces],
                },
                {
                    "verbs": ["get", "create", "update"],
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "namespaces": ["*"],
                },
            ],
        }])
    };
    vec![
        fs(
            "probes",
            EXEMPT,
            2,
            None,
            json!([{
                "subjects": everyone(),
                "nonResourceRules": [{
                    "verbs": ["get"],
                    "nonResourceURLs": ["/healthz", "/readyz", "/livez"],
                }],
            }]),
        ),
        fs(
            "system-leader-election",
            "leader-election",
            100,
            Some("ByUser"),
            election(
                json!([
                    user("system:kube-controller-manager"),
                    user("system:kube-scheduler"),
                    kube_system_sa("*"),
                ]),
                "kube-system",
            ),
        ),
        fs(
            "endpoint-controller",
            "workload-high",
            150,
            Some("ByUser"),
            json!([{
                "subjects": [user("system:kube-controller-manager"),
                    kube_system_sa("endpoint-controller")],
                "resourceRules": [{
                    "verbs": ["get", "create", "update"],
                    "apiGroups": [""],
                    "resources": ["endpoints"],
                    "namespaces": ["*"],
                }],
            }]),
        ),
        fs(
            "workload-leader-election",
            "leader-election",
            200,
            Some("ByUser"),
            election(json!([kube_system_sa("*")]), "*"),
        ),
        fs(
            "system-node-high",
            "node-high",
            400,
            Some("ByUser"),
            json!([{
                "subjects": [group("system:nodes")],
                "resourceRules": [
                    {
                        "verbs": ["*"],
                        "apiGroups": [""],
                        "resources": ["nodes", "nodes/status"],
                        "clusterScope": true,
                    },
                    {
                        "verbs": ["*"],
                        "apiGroups": ["coordination.k8s.io"],
                        "resources": ["leases"],
                        "namespaces": ["*"],
                    },
                ],
            }]),
        ),
        fs(
            "system-nodes",
            "system",
            500,
            Some("ByUser"),
            everything(json!([group("system:nodes")])),
        ),
        fs(
            "kube-controller-manager",
            "workload-high",
            800,
            Some("ByNamespace"),
            everything(json!([user("system:kube-controller-manager")])),
        ),
        fs(
            "kube-scheduler",
            "workload-high",
            800,
            Some("ByNamespace"),
            everything(json!([user("system:kube-scheduler")])),
        ),
        fs(
            "kube-system-service-accounts",
            "workload-high",
            900,
            Some("ByNamespace"),
            everything(json!([kube_system_sa("*")])),
        ),
        fs(
            "service-accounts",
            "workload-low",
            9000,
            Some("ByUser"),
            everything(json!([group("system:serviceaccounts")])),
        ),
        fs(
            "global-default",
            "global-default",
            9900,
            Some("ByUser"),
            everything(everyone()),
        ),
    ]
}

/// The mandatory object of a kind (`FlowSchema` or
/// `PriorityLevelConfiguration`) named `name`, if there is one.
pub fn mandatory(kind: &str, name: &str) -> Option<Value> {
    let all = match kind {
        "FlowSchema" => mandatory_flow_schemas(),
        "PriorityLevelConfiguration" => mandatory_priority_levels(),
        _ => return None,
    };
    all.into_iter().find(|o| o["metadata"]["name"] == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_names_a_bootstrap_level() {
        let levels: Vec<Value> = mandatory_priority_levels()
            .into_iter()
            .chain(suggested_priority_levels())
            .collect();
        for fs in mandatory_flow_schemas()
            .into_iter()
            .chain(suggested_flow_schemas())
        {
            let level = &fs["spec"]["priorityLevelConfiguration"]["name"];
            assert!(
                levels.iter().any(|l| &l["metadata"]["name"] == level),
                "{}",
                fs["metadata"]["name"]
            );
        }
        assert!(mandatory("FlowSchema", "exempt").is_some());
        assert!(mandatory("FlowSchema", "global-default").is_none());
    }
}
