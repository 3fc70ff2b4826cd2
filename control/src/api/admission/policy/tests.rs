//! Matching of policies and bindings, and the messages and failures of
//! evaluation.

use std::collections::BTreeMap;

use bosun::resources::by_name;
use k8s_openapi::api::admissionregistration::v1 as ar;
use serde_json::{json, Value};

use super::configs::{self, check_expressions, matcher};
use super::evaluate::{evaluate, Denial, Inputs, Outcome};
use super::matching::matches;
use crate::api::admission::webhook::matching::Attributes;

fn policy(spec: Value) -> configs::Policy {
    let p: ar::ValidatingAdmissionPolicy =
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap();
    configs::policy(&p, "1".into())
}

fn match_resources(v: Value) -> configs::Matcher {
    matcher(&serde_json::from_value::<ar::MatchResources>(v).unwrap())
}

fn deploy_rule() -> Value {
    json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
           "resources": ["deployments"], "scope": "*"})
}

fn attrs<'a>(res: &str, op: &'a str, ns: &'a str, obj: Option<&'a Value>) -> Attributes<'a> {
    Attributes {
        operation: op,
        res: by_name(res).unwrap(),
        subresource: "",
        namespace: ns,
        object: obj,
        old_object: None,
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn rules_exclusions_and_resource_names() {
    let m = match_resources(json!({"resourceRules": [deploy_rule()],
        "excludeResourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
            "operations": ["*"], "resources": ["deployments"], "resourceNames": ["skip-me"]}],
        "matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {}}));
    let d = json!({"metadata": {"name": "web"}});
    assert!(matches(
        &m,
        &attrs("deployments", "CREATE", "ns", Some(&d)),
        "web",
        None,
        false
    )
    .is_some());
    assert!(matches(
        &m,
        &attrs("deployments", "DELETE", "ns", None),
        "web",
        None,
        false
    )
    .is_none());
    assert!(matches(
        &m,
        &attrs("deployments", "CREATE", "ns", Some(&d)),
        "skip-me",
        None,
        false
    )
    .is_none());
    assert!(matches(
        &m,
        &attrs("statefulsets", "CREATE", "ns", Some(&d)),
        "web",
        None,
        false
    )
    .is_none());
    let named = match_resources(json!({"resourceRules": [{"apiGroups": ["apps"],
        "apiVersions": ["v1"], "operations": ["*"], "resources": ["deployments"],
        "resourceNames": ["only"]}]}));
    assert!(matches(
        &named,
        &attrs("deployments", "CREATE", "ns", Some(&d)),
        "only",
        None,
        false
    )
    .is_some());
    assert!(matches(
        &named,
        &attrs("deployments", "CREATE", "ns", Some(&d)),
        "web",
        None,
        false
    )
    .is_none());
}

#[test]
fn selectors_and_bindings_without_rules() {
    let m = match_resources(
        json!({"namespaceSelector": {"matchLabels": {"env": "test"}},
        "objectSelector": {"matchLabels": {"app": "web"}}}),
    );
    let web = json!({"metadata": {"name": "a", "labels": {"app": "web"}}});
    let other = json!({"metadata": {"name": "a", "labels": {"app": "db"}}});
    let test = labels(&[("env", "test")]);
    let prod = labels(&[("env", "prod")]);
    let a = attrs("deployments", "CREATE", "ns", Some(&web));
    // A binding without resource rules selects what its policy matched...
    assert!(matches(&m, &a, "a", Some(&test), true).is_some());
    // ...a policy without them matches nothing (validation requires some).
    assert!(matches(&m, &a, "a", Some(&test), false).is_none());
    assert!(matches(&m, &a, "a", Some(&prod), true).is_none());
    // Cluster-scoped objects other than Namespaces pass namespace selectors.
    assert!(matches(&m, &a, "a", None, true).is_some());
    let b = attrs("deployments", "CREATE", "ns", Some(&other));
    assert!(matches(&m, &b, "a", Some(&test), true).is_none());
    // The old object's labels count too.
    let mut update = attrs("deployments", "UPDATE", "ns", Some(&other));
    update.old_object = Some(&web);
    assert!(matches(&m, &update, "a", Some(&test), true).is_some());
}

#[test]
fn match_policy_equivalent_reaches_the_storage_version() {
    // HorizontalPodAutoscalers are served as autoscaling/v1 and stored as v2.
    let v1 = bosun::resources::by_path("autoscaling", "v1", "horizontalpodautoscalers").unwrap();
    let rules = |policy: &str| {
        match_resources(
            json!({"matchPolicy": policy, "resourceRules": [{"apiGroups": ["autoscaling"],
            "apiVersions": ["v2"], "operations": ["CREATE"],
            "resources": ["horizontalpodautoscalers"]}]}),
        )
    };
    let a = Attributes {
        operation: "CREATE",
        res: v1,
        subresource: "",
        namespace: "ns",
        object: None,
        old_object: None,
    };
    let matched = matches(&rules("Equivalent"), &a, "h", None, false).expect("equivalent");
    assert_eq!(matched.version, "v2");
    assert!(matches(&rules("Exact"), &a, "h", None, false).is_none());
}

fn run(p: &configs::Policy, object: Value, params: Value) -> Outcome {
    let null = Value::Null;
    let request = json!({"operation": "CREATE", "name": "web"});
    evaluate(
        p,
        &Inputs {
            object: &object,
            old_object: &null,
            request: &request,
            params: &params,
            namespace_object: &null,
        },
    )
}

fn messages(o: &Outcome) -> Vec<&str> {
    o.denials.iter().map(|d| d.message.as_str()).collect()
}

#[test]
fn messages_fall_back_as_upstream() {
    let p = policy(json!({"validations": [
        {"expression": "object.spec.replicas <= 5"},
        {"expression": "object.spec.replicas <= 4", "message": "  at most four  "},
        {"expression": "object.spec.replicas <= 3", "message": "fallback",
         "messageExpression": "'got ' + string(object.spec.replicas)", "reason": "Forbidden"},
        {"expression": "object.spec.replicas <= 2", "message": "one line only",
         "messageExpression": "'two\\nlines'"},
        {"expression": "object.spec.replicas <= 1", "message": "not a string",
         "messageExpression": "object.spec.replicas"},
    ]}));
    let o = run(&p, json!({"spec": {"replicas": 6}}), Value::Null);
    assert_eq!(
        messages(&o),
        [
            "failed expression: object.spec.replicas <= 5",
            "at most four",
            "got 6",
            "one line only",
            "not a string",
        ]
    );
    assert_eq!(o.denials[2].reason.as_deref(), Some("Forbidden"));
    assert_eq!(o.denials[2].index, 2);
    assert!(run(&p, json!({"spec": {"replicas": 1}}), Value::Null)
        .denials
        .is_empty());
}

#[test]
fn failures_follow_the_failure_policy() {
    let spec = |fp: &str| json!({"failurePolicy": fp, "validations": [{"expression": "object.spec.missing > 1"}]});
    let o = run(&policy(spec("Fail")), json!({"spec": {}}), Value::Null);
    assert_eq!(o.denials.len(), 1);
    assert!(
        o.denials[0]
            .message
            .starts_with("expression 'object.spec.missing > 1' resulted in error: "),
        "{:?}",
        o.denials
    );
    assert_eq!(o.denials[0].reason, None);
    assert!(
        run(&policy(spec("Ignore")), json!({"spec": {}}), Value::Null)
            .denials
            .is_empty()
    );
}

#[test]
fn match_conditions_variables_params_and_annotations() {
    let p = policy(json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConditions": [{"name": "not-exempt",
            "expression": "!has(object.metadata.labels) || !('exempt' in object.metadata.labels)"}],
        "variables": [
            {"name": "limit", "expression": "int(params.data.max)"},
            {"name": "twice", "expression": "variables.limit * 2"}],
        "validations": [{"expression": "object.spec.replicas <= variables.limit",
            "messageExpression": "'limit ' + string(variables.limit) + ', twice ' + string(variables.twice)"}],
        "auditAnnotations": [{"key": "replicas",
            "valueExpression": "string(object.spec.replicas)"},
            {"key": "empty", "valueExpression": "null"}]}));
    let params = json!({"data": {"max": "3"}});
    let o = run(
        &p,
        json!({"metadata": {}, "spec": {"replicas": 4}}),
        params.clone(),
    );
    assert_eq!(
        o,
        Outcome {
            denials: vec![Denial {
                message: "limit 3, twice 6".into(),
                reason: None,
                index: 0
            }],
            annotations: vec![("replicas".into(), "4".into())],
        }
    );
    let exempt = json!({"metadata": {"labels": {"exempt": "yes"}}, "spec": {"replicas": 4}});
    assert_eq!(run(&p, exempt, params), Outcome::default());
}

#[test]
fn expressions_are_compiled_at_write_naming_the_field() {
    let errs = check_expressions(&json!({"spec": {
        "matchConditions": [{"name": "a", "expression": "params.x"}],
        "validations": [{"expression": "object.spec.replicas <="},
                        {"expression": "true", "messageExpression": "authorizer.x"}]}}));
    let msgs: Vec<String> = errs.iter().map(|e| e.message()).collect();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert!(msgs[0].starts_with(
        "spec.matchConditions[0].expression: Invalid value: \"params.x\": compilation failed: \
         ERROR: <input>:1:1: undeclared reference to 'params'"
    ));
    assert!(msgs[1].starts_with(
        "spec.validations[0].expression: Invalid value: \"object.spec.replicas <=\": \
         compilation failed: ERROR: <input>:1:"
    ));
    assert!(
        msgs[2].contains("undeclared reference to 'authorizer'"),
        "{}",
        msgs[2]
    );
    // With a param kind, params may be named.
    assert!(
        check_expressions(&json!({"spec": {"paramKind": {"kind": "ConfigMap"},
        "validations": [{"expression": "params.data.x == 'y'"}]}}))
        .is_empty()
    );
}
