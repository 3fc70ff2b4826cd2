//! Upstream's ResourceQuota admission cases (`admission_test.go`), on JSON.

use serde_json::{json, Value};

use super::*;

fn quota(hard: Value, used: Value) -> Value {
    json!({"metadata": {"name": "q", "namespace": "ns"}, "spec": {"hard": hard},
           "status": {"hard": hard, "used": used}})
}

fn pod(requests: Value, limits: Value) -> Value {
    json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [
        {"name": "app", "image": "busybox", "resources": {"requests": requests, "limits": limits}}]}})
}

fn pods() -> &'static ResourceInfo {
    bosun::resources::by_name("pods").unwrap()
}

/// Quota hard, used, pod requests, limits, and the charge or refusal.
type Case = (
    Value,
    Value,
    Value,
    Value,
    Result<Option<&'static str>, &'static str>,
);

#[test]
fn pod_quota_cases() {
    // (quota hard, used, pod requests, limits, expected)
    let cases: Vec<Case> = vec![
        (json!({"pods": "2"}), json!({"pods": "1"}), json!({}), json!({}), Ok(Some("pods=1"))),
        (
            json!({"pods": "2"}),
            json!({"pods": "2"}),
            json!({}),
            json!({}),
            Err("exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"),
        ),
        (
            json!({"requests.cpu": "1", "pods": "10"}),
            json!({"requests.cpu": "800m", "pods": "1"}),
            json!({"cpu": "300m"}),
            json!({}),
            Err("exceeded quota: q, requested: requests.cpu=300m, used: requests.cpu=800m, limited: requests.cpu=1"),
        ),
        (
            json!({"requests.memory": "1Gi"}),
            json!({"requests.memory": "512Mi"}),
            json!({"memory": "256Mi"}),
            json!({}),
            Ok(Some("requests.memory=256Mi")),
        ),
        (
            json!({"limits.cpu": "2", "limits.memory": "1Gi"}),
            json!({"limits.cpu": "0", "limits.memory": "0"}),
            json!({}),
            json!({"cpu": "1"}),
            Err("failed quota: q: must specify limits.memory for: app"),
        ),
        (
            json!({"cpu": "2", "memory": "1Gi"}),
            json!({"cpu": "0", "memory": "0"}),
            json!({}),
            json!({}),
            Err("failed quota: q: must specify cpu for: app; memory for: app"),
        ),
        (
            json!({"pods": "2"}),
            json!({}),
            json!({}),
            json!({}),
            Err("status unknown for quota: q, resource: pods"),
        ),
        // A quota on what a pod does not use does not constrain it.
        (json!({"services": "1"}), json!({"services": "1"}), json!({}), json!({}), Ok(None)),
    ];
    for (hard, used, requests, limits, want) in cases {
        let q = quota(hard.clone(), used);
        let p = pod(requests, limits);
        let got = evaluate(&q, pods(), &p, &quota::usage(pods(), &p))
            .map(|c| c.map(|u| quota::pretty(&u)));
        let want = want.map(|o| o.map(str::to_string)).map_err(str::to_string);
        assert_eq!(got, want, "quota {hard}");
    }
}

#[test]
fn object_counts_and_scopes() {
    let services = bosun::resources::by_name("services").unwrap();
    let svc = json!({"metadata": {"name": "s"}, "spec": {"type": "NodePort", "ports": [{"port": 80}, {"port": 81}]}});
    let q = quota(
        json!({"services": "5", "services.nodeports": "1"}),
        json!({"services": "0", "services.nodeports": "0"}),
    );
    assert_eq!(
        evaluate(&q, services, &svc, &quota::usage(services, &svc)),
        Err("exceeded quota: q, requested: services.nodeports=2, used: services.nodeports=0, limited: services.nodeports=1".into())
    );
    let deploys = bosun::resources::by_name("deployments").unwrap();
    let d = json!({"metadata": {"name": "d"}});
    let q = quota(
        json!({"count/deployments.apps": "1"}),
        json!({"count/deployments.apps": "1"}),
    );
    assert_eq!(
        evaluate(&q, deploys, &d, &quota::usage(deploys, &d)),
        Err("exceeded quota: q, requested: count/deployments.apps=1, used: count/deployments.apps=1, limited: count/deployments.apps=1".into())
    );
    // A BestEffort quota counts only pods without requests or limits.
    let mut scoped = quota(json!({"pods": "1"}), json!({"pods": "1"}));
    scoped["spec"]["scopes"] = json!(["BestEffort"]);
    let burstable = pod(json!({"cpu": "100m"}), json!({}));
    assert_eq!(
        evaluate(
            &scoped,
            pods(),
            &burstable,
            &quota::usage(pods(), &burstable)
        ),
        Ok(None)
    );
    let best_effort = pod(json!({}), json!({}));
    assert!(evaluate(
        &scoped,
        pods(),
        &best_effort,
        &quota::usage(pods(), &best_effort)
    )
    .is_err());
    // Scoped quotas never track other kinds.
    assert_eq!(
        evaluate(&scoped, services, &svc, &quota::usage(services, &svc)),
        Ok(None)
    );
}
