use std::collections::HashMap;
use std::time::Duration;

use base64::Engine;
use bosun::resources::{by_name, by_path};
use bosun::selector::LabelSelector;
use k8s_openapi::api::admissionregistration::v1 as ar;
use serde_json::{json, Value};

use super::configs::{Endpoint, Hook};
use super::matching::{matching_version, object_selected, rule_matches, Attributes};
use super::{apply_patch, review};

fn rule(
    ops: &[&str],
    groups: &[&str],
    versions: &[&str],
    resources: &[&str],
    scope: &str,
) -> ar::RuleWithOperations {
    let v = |s: &[&str]| Some(s.iter().map(|x| x.to_string()).collect());
    ar::RuleWithOperations {
        operations: v(ops),
        api_groups: v(groups),
        api_versions: v(versions),
        resources: v(resources),
        scope: Some(scope.to_string()),
    }
}

fn hook(rules: Vec<ar::RuleWithOperations>) -> Hook {
    Hook {
        config: "c".into(),
        name: "h.example.com".into(),
        rules,
        ignore_failures: false,
        exact: false,
        namespace_selector: LabelSelector::everything(),
        object_selector: LabelSelector::everything(),
        dry_run_safe: true,
        timeout: Duration::from_secs(10),
        reinvoke: false,
        match_conditions: Vec::new(),
        endpoint: Endpoint::Url(url::Url::parse("https://127.0.0.1:1/").unwrap()),
        tls: Err("unused".into()),
    }
}

#[test]
fn rules_match_operation_group_version_and_resource() {
    let cm = by_name("configmaps").unwrap();
    let pods = by_name("pods").unwrap();
    let r = rule(&["CREATE"], &[""], &["v1"], &["configmaps"], "*");
    assert!(rule_matches(&r, "CREATE", cm, "", "ns"));
    assert!(!rule_matches(&r, "UPDATE", cm, "", "ns"));
    assert!(!rule_matches(&r, "CREATE", pods, "", "ns"));
    let deploy = by_name("deployments").unwrap();
    assert!(!rule_matches(
        &rule(&["*"], &[""], &["*"], &["*"], "*"),
        "CREATE",
        deploy,
        "",
        "ns"
    ));
    assert!(rule_matches(
        &rule(&["*"], &["*"], &["*"], &["*"], "*"),
        "DELETE",
        deploy,
        "",
        "ns"
    ));
    assert!(!rule_matches(
        &rule(&["*"], &["apps"], &["v1beta1"], &["*"], "*"),
        "CREATE",
        deploy,
        "",
        "ns"
    ));
}

#[test]
fn subresources_match_only_when_named() {
    let pods = by_name("pods").unwrap();
    let all = |res: &str| rule(&["UPDATE"], &[""], &["v1"], &[res], "*");
    assert!(!rule_matches(&all("pods"), "UPDATE", pods, "status", "ns"));
    assert!(!rule_matches(&all("*"), "UPDATE", pods, "status", "ns"));
    assert!(rule_matches(
        &all("pods/status"),
        "UPDATE",
        pods,
        "status",
        "ns"
    ));
    assert!(rule_matches(
        &all("*/status"),
        "UPDATE",
        pods,
        "status",
        "ns"
    ));
    assert!(rule_matches(&all("pods/*"), "UPDATE", pods, "status", "ns"));
    assert!(rule_matches(&all("*/*"), "UPDATE", pods, "status", "ns"));
    assert!(rule_matches(&all("*/*"), "UPDATE", pods, "", "ns"));
    assert!(!rule_matches(&all("pods/status"), "UPDATE", pods, "", "ns"));
}

#[test]
fn scope_cluster_namespaced_and_namespaces_themselves() {
    let cm = by_name("configmaps").unwrap();
    let nodes = by_name("nodes").unwrap();
    let namespaces = by_name("namespaces").unwrap();
    let scoped = |s: &str| rule(&["*"], &["*"], &["*"], &["*"], s);
    assert!(rule_matches(&scoped("Namespaced"), "CREATE", cm, "", "ns"));
    assert!(!rule_matches(
        &scoped("Namespaced"),
        "CREATE",
        nodes,
        "",
        ""
    ));
    assert!(rule_matches(&scoped("Cluster"), "CREATE", nodes, "", ""));
    assert!(!rule_matches(&scoped("Cluster"), "CREATE", cm, "", "ns"));
    // A Namespace's requests carry its name as namespace, yet it is
    // cluster-scoped.
    assert!(rule_matches(
        &scoped("Cluster"),
        "CREATE",
        namespaces,
        "",
        "team-a"
    ));
    assert!(!rule_matches(
        &scoped("Namespaced"),
        "CREATE",
        namespaces,
        "",
        "team-a"
    ));
}

#[test]
fn equivalent_match_policy_reaches_the_other_version() {
    let v1 = by_path("autoscaling", "v1", "horizontalpodautoscalers").unwrap();
    let r = rule(
        &["CREATE"],
        &["autoscaling"],
        &["v2"],
        &["horizontalpodautoscalers"],
        "*",
    );
    let attrs = Attributes {
        operation: "CREATE",
        res: v1,
        subresource: "",
        namespace: "ns",
        object: None,
        old_object: None,
    };
    let mut h = hook(vec![r]);
    assert_eq!(matching_version(&h, &attrs).map(|r| r.version), Some("v2"));
    h.exact = true;
    assert!(matching_version(&h, &attrs).is_none());
}

#[test]
fn object_selector_on_new_or_old_labels() {
    let mut h = hook(vec![]);
    h.object_selector = LabelSelector::parse("deny=true").unwrap();
    let cm = by_name("configmaps").unwrap();
    let labelled = json!({"metadata": {"labels": {"deny": "true"}}});
    let plain = json!({"metadata": {}});
    let attrs = |obj: Option<&'static Value>, old: Option<&'static Value>| Attributes {
        operation: "UPDATE",
        res: cm,
        subresource: "",
        namespace: "ns",
        object: obj,
        old_object: old,
    };
    let labelled: &'static Value = Box::leak(Box::new(labelled));
    let plain: &'static Value = Box::leak(Box::new(plain));
    assert!(object_selected(&h, &attrs(Some(labelled), None)));
    assert!(object_selected(&h, &attrs(Some(plain), Some(labelled))));
    assert!(!object_selected(&h, &attrs(Some(plain), Some(plain))));
    assert!(object_selected(&hook(vec![]), &attrs(None, None)));
}

#[test]
fn a_patch_adds_a_label_and_unknown_fields_go() {
    let cm = by_name("configmaps").unwrap();
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "ns"}, "data": {"k": "v"}});
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "add", "path": "/metadata/labels", "value": {"mutated": "true"}},
        {"op": "add", "path": "/bogus", "value": 1},
    ]))
    .unwrap();
    let out = apply_patch(cm, &obj, &patch).unwrap();
    assert_eq!(out["metadata"]["labels"]["mutated"], "true");
    assert_eq!(out["data"]["k"], "v");
    assert!(out.get("bogus").is_none());
    let bad: json_patch::Patch =
        serde_json::from_value(json!([{"op": "remove", "path": "/nothing"}])).unwrap();
    assert!(apply_patch(cm, &obj, &bad).is_err());
}

fn reply(uid: &str, response: Value) -> Value {
    let mut r = response;
    r["uid"] = json!(uid);
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": r})
}

#[test]
fn answers_are_checked_as_upstream() {
    let b64 = base64::engine::general_purpose::STANDARD
        .encode(br#"[{"op":"add","path":"/x","value":1}]"#);
    let ok = review::answer(
        "u1",
        true,
        &reply(
            "u1",
            json!({"allowed": true,
        "patch": b64, "patchType": "JSONPatch", "warnings": ["careful"]}),
        ),
    )
    .unwrap();
    assert!(ok.allowed && ok.patch.is_some());
    assert_eq!(ok.warnings, ["careful"]);
    let err = |mutating: bool, v: Value| review::answer("u1", mutating, &v).unwrap_err();
    assert_eq!(
        err(true, reply("u2", json!({"allowed": true}))),
        "expected response.uid=\"u1\", got \"u2\""
    );
    assert_eq!(
        err(
            false,
            reply(
                "u1",
                json!({"allowed": true, "patch": b64, "patchType": "JSONPatch"})
            )
        ),
        "validating webhook may not return response.patch"
    );
    assert_eq!(
        err(true, reply("u1", json!({"allowed": true, "patch": b64}))),
        "webhook returned response.patch but not response.patchType"
    );
    assert!(err(true, json!({"apiVersion": "v1", "kind": "Status"}))
        .starts_with("expected webhook response of admission.k8s.io/v1"));
}

#[test]
fn refusals_carry_the_webhooks_words() {
    let e = review::refusal(
        "deny.example.com",
        Some(&json!({"code": 403, "reason": "Forbidden", "message": "no"})),
    );
    assert_eq!((e.code, e.reason), (403, "Forbidden"));
    assert_eq!(
        e.message,
        "admission webhook \"deny.example.com\" denied the request: no"
    );
    let e = review::refusal("deny.example.com", None);
    assert_eq!(e.code, 400);
    assert_eq!(
        e.message,
        "admission webhook \"deny.example.com\" denied the request without explanation"
    );
    let e = review::refusal("d.e.f", Some(&json!({"code": 200, "reason": "Odd"})));
    assert_eq!(
        (e.code, e.reason, e.message.as_str()),
        (
            400,
            "",
            "admission webhook \"d.e.f\" denied the request: Odd"
        )
    );
}

#[test]
fn a_review_names_the_request() {
    let cm = by_name("configmaps").unwrap();
    let req = crate::api::ApiRequest {
        who: crate::auth::Identity::Admin,
        method: http::Method::POST,
        target: crate::api::Target {
            res: cm,
            namespace: Some("ns".into()),
            name: None,
            subresource: None,
            custom: None,
        },
        query: HashMap::from([("fieldManager".to_string(), "kubectl".to_string())]),
        headers: Default::default(),
        output: Default::default(),
        body: Default::default(),
        body_limit: 0,
    };
    let obj = json!({"metadata": {"name": "a"}});
    let r = review::review(&review::Review {
        uid: "u1",
        req: &req,
        operation: "CREATE",
        matched: cm,
        subresource: "",
        name: "a",
        namespace: "ns",
        object: Some(&obj),
        old_object: None,
        dry_run: false,
    });
    let q = &r["request"];
    assert_eq!(r["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(
        q["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(q["resource"]["resource"], "configmaps");
    assert_eq!(
        (q["operation"].as_str(), q["namespace"].as_str()),
        (Some("CREATE"), Some("ns"))
    );
    assert_eq!(q["userInfo"]["username"], crate::auth::ADMIN_USER);
    assert_eq!(
        q["options"],
        json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl"})
    );
    assert_eq!(q["oldObject"], Value::Null);
}

/// With no webhook configured a write pays one lock read per admission
/// phase: measured here (printed with `--nocapture`) and bounded far
/// above what it costs, so a regression to listing the store shows.
#[tokio::test]
async fn no_configuration_costs_a_lock_read() {
    use crate::store::{EmbeddedStore, StoreOptions};
    let store = std::sync::Arc::new(EmbeddedStore::in_memory(StoreOptions::default()).unwrap());
    let webhooks = super::Webhooks::new(store).await.unwrap();
    const N: u32 = 200_000;
    let start = std::time::Instant::now();
    let mut called = 0;
    for _ in 0..N {
        let s = webhooks.snapshot();
        called += s.mutating.len() + s.validating.len();
    }
    let per_write = start.elapsed() / N;
    println!("no webhooks: {per_write:?} per admission phase");
    assert_eq!(called, 0);
    assert!(per_write < Duration::from_micros(5), "{per_write:?}");
}

#[test]
fn match_conditions_decide_with_cel_and_errors_are_the_webhooks() {
    let cm = by_name("configmaps").unwrap();
    let obj = json!({"metadata": {"name": "a", "labels": {"team": "x"}}, "data": {"k": "v"}});
    let attrs = Attributes {
        operation: "CREATE",
        res: cm,
        subresource: "",
        namespace: "ns",
        object: Some(&obj),
        old_object: None,
    };
    let with = |exprs: &[&str]| {
        let mut h = hook(Vec::new());
        h.match_conditions = exprs
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let p =
                    bosun::crd_schema::cel::compile_with(e, &["object", "oldObject", "request"]);
                (format!("c{i}"), p)
            })
            .collect();
        super::matching::match_conditions_allow(&h, &attrs)
    };
    assert_eq!(with(&[]), Ok(true));
    assert_eq!(
        with(&[
            "object.metadata.labels.team == 'x'",
            "request.operation == 'CREATE' && oldObject == null",
            "request.resource.resource == 'configmaps' && request.namespace == 'ns'",
        ]),
        Ok(true)
    );
    // Any false skips the webhook.
    assert_eq!(with(&["true", "has(object.data.missing)"]), Ok(false));
    // An error (no such key; a condition that does not compile) is left to
    // the failure policy.
    let err = with(&["object.spec.replicas > 1"]).unwrap_err();
    assert!(err.contains("evaluating match condition \"c0\""), "{err}");
    let err = with(&["authorizer.requestResource.check('get').allowed()"]).unwrap_err();
    assert!(err.contains("compiling match condition \"c0\""), "{err}");
}
