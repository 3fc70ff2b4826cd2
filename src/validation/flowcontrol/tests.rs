use serde_json::json;

use super::*;

fn fs_errors(spec: Value) -> Vec<String> {
    let mut errs = Vec::new();
    validate_flow_schema(
        &json!({"metadata": {"name": "mine"}, "spec": spec}),
        &mut errs,
    );
    errs.iter().map(|e| e.to_string()).collect()
}

fn pl_errors(name: &str, spec: Value) -> Vec<String> {
    let mut errs = Vec::new();
    validate_priority_level(
        &json!({"metadata": {"name": name}, "spec": spec}),
        &mut errs,
    );
    errs.iter().map(|e| e.to_string()).collect()
}

fn rule() -> Value {
    json!({"subjects": [{"kind": "User", "user": {"name": "alice"}}],
        "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"],
            "namespaces": ["default"]}]})
}

#[test]
fn flow_schema_fields() {
    let ok = json!({"priorityLevelConfiguration": {"name": "pl"},
        "matchingPrecedence": 500, "rules": [rule()]});
    assert!(fs_errors(ok).is_empty());
    let errs = fs_errors(json!({"matchingPrecedence": 1,
        "distinguisherMethod": {"type": "ByPod"}}));
    assert_eq!(errs.len(), 3, "{errs:?}");
    assert!(errs[0].starts_with("spec.matchingPrecedence: Invalid value: 1: only the schema"));
    assert!(errs[1].starts_with("spec.distinguisherMethod.type: Unsupported value"));
    assert_eq!(
        errs[2],
        "spec.priorityLevelConfiguration.name: Required value: must reference a priority level"
    );
    let errs = fs_errors(json!({"priorityLevelConfiguration": {"name": "pl"},
        "matchingPrecedence": 10001}));
    assert_eq!(
        errs,
        ["spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000"]
    );
}

#[test]
fn rules_and_subjects() {
    let errs = fs_errors(json!({"priorityLevelConfiguration": {"name": "pl"},
    "matchingPrecedence": 500,
    "rules": [
        {"subjects": []},
        {"subjects": [{"kind": "User", "group": {"name": "g"}},
                      {"kind": "ServiceAccount", "serviceAccount": {"name": "*"}},
                      {"kind": "Robot"}],
         "resourceRules": [{"verbs": ["get", "*"], "apiGroups": [], "resources": ["*", "pods"]}],
         "nonResourceRules": [{"verbs": ["fly"], "nonResourceURLs": ["healthz", "/a*"]}]},
    ]}));
    let want = [
        "spec.rules[0].subjects: Required value: subjects must contain at least one value",
        "spec.rules[0]: Required value: at least one of resourceRules and nonResourceRules has to be non-empty",
        "spec.rules[1].subjects[0].user: Required value: user is required when subject kind is 'User'",
        "spec.rules[1].subjects[0].group: Forbidden: group is forbidden when subject kind is not 'Group'",
        "spec.rules[1].subjects[1].serviceAccount.namespace: Required value: must specify namespace for service account",
        "spec.rules[1].subjects[2].kind: Unsupported value: \"Robot\"",
        "spec.rules[1].resourceRules[0].verbs: Invalid value",
        "spec.rules[1].resourceRules[0].apiGroups: Required value",
        "spec.rules[1].resourceRules[0].resources: Invalid value",
        "spec.rules[1].resourceRules[0].namespaces: Required value",
        "spec.rules[1].nonResourceRules[0].verbs: Unsupported value",
        "spec.rules[1].nonResourceRules[0].nonResourceURLs[0]: Invalid value: \"healthz\": must start with slash",
        "spec.rules[1].nonResourceRules[0].nonResourceURLs[1]: Invalid value: \"/a*\": wildcard can only do suffix matching",
    ];
    assert_eq!(errs.len(), want.len(), "{errs:#?}");
    for (e, w) in errs.iter().zip(want) {
        assert!(e.starts_with(w), "{e} / {w}");
    }
}

#[test]
fn a_wildcard_stands_alone() {
    let errs = fs_errors(json!({"priorityLevelConfiguration": {"name": "pl"},
    "matchingPrecedence": 500,
    "rules": [{"subjects": [{"kind": "Group", "group": {"name": "g"}}],
         "resourceRules": [{"verbs": ["*", "get"], "apiGroups": ["*", "apps"],
            "resources": ["*"], "namespaces": ["*", "default"]}],
         "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*", "/healthz"]}]}]}));
    let p = "spec.rules[0]";
    assert_eq!(
        errs,
        [
            format!("{p}.resourceRules[0].verbs: Invalid value: []string{{\"*\", \"get\"}}: if '*' is present, must not specify other verbs"),
            format!("{p}.resourceRules[0].apiGroups: Invalid value: []string{{\"*\", \"apps\"}}: if '*' is present, must not specify other api groups"),
            format!("{p}.resourceRules[0].namespaces: Invalid value: []string{{\"*\", \"default\"}}: if '*' is present, must not specify other namespaces"),
            format!("{p}.nonResourceRules[0].nonResourceURLs: Invalid value: []string{{\"*\", \"/healthz\"}}: if '*' is present, must not specify other non-resource URLs"),
        ]
    );
}

#[test]
fn mandatory_schemas_are_fixed() {
    let mut exempt = mandatory("FlowSchema", "exempt").unwrap();
    let mut errs = Vec::new();
    validate_flow_schema(&exempt, &mut errs);
    assert!(errs.is_empty(), "{errs:?}");
    exempt["spec"]["matchingPrecedence"] = json!(2);
    validate_flow_schema(&exempt, &mut errs);
    assert!(errs[0]
        .to_string()
        .contains("spec of 'exempt' must equal the fixed value"));
}

#[test]
fn priority_level_fields() {
    let queue = |q: Value| {
        json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 1,
            "limitResponse": {"type": "Queue", "queuing": q}}})
    };
    assert!(pl_errors(
        "pl",
        queue(json!({"queues": 64, "handSize": 8, "queueLengthLimit": 50}))
    )
    .is_empty());
    let errs = pl_errors(
        "pl",
        queue(json!({"queues": 4, "handSize": 5, "queueLengthLimit": 0})),
    );
    assert_eq!(errs, [
        "spec.limited.limitResponse.queuing.queueLengthLimit: Invalid value: 0: must be positive",
        "spec.limited.limitResponse.queuing.handSize: Invalid value: 5: should not be greater than queues (4)",
    ]);
    let errs = pl_errors(
        "pl",
        queue(json!({"queues": 1_000_000, "handSize": 5, "queueLengthLimit": 1})),
    );
    assert!(errs[0].contains("required entropy bits"), "{errs:?}");
    let errs = pl_errors("pl", json!({"type": "Exempt"}));
    assert_eq!(errs, ["spec.type: Invalid value: \"Exempt\": type must be 'Exempt' if and only if name is 'exempt'"]);
    let errs = pl_errors(
        "pl",
        json!({"type": "Limited", "limited": {
        "nominalConcurrencyShares": -1, "lendablePercent": 101, "borrowingLimitPercent": -1,
        "limitResponse": {"type": "Reject", "queuing": {}}}}),
    );
    assert_eq!(errs.len(), 4, "{errs:?}");
    assert!(errs[0].starts_with("spec.limited.nominalConcurrencyShares: Invalid value: -1"));
    assert!(errs[3].starts_with("spec.limited.limitResponse.queuing: Forbidden"));
    let errs = pl_errors("pl", json!({"type": "Limited"}));
    assert_eq!(
        errs,
        ["spec.limited: Required value: must not be empty when type is Limited"]
    );
    let errs = pl_errors(
        "catch-all",
        json!({"type": "Limited", "limited": {
        "nominalConcurrencyShares": 50, "lendablePercent": 0, "limitResponse": {"type": "Reject"}}}),
    );
    assert_eq!(errs.len(), 1);
    assert!(errs[0].contains("spec of 'catch-all' must equal the fixed value"));
    // The exempt level's numbers may be changed.
    assert!(pl_errors(
        "exempt",
        json!({"type": "Exempt",
        "exempt": {"nominalConcurrencyShares": 10, "lendablePercent": 0}})
    )
    .is_empty());
}
