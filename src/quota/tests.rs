//! Upstream's evaluator cases (`pkg/quota/v1/evaluator/core/pods_test.go`).

use serde_json::json;

use super::*;
use crate::resources::by_name;

#[test]
fn pod_usage_sums_containers_and_takes_the_larger_init_container() {
    let pod = json!({"spec": {
    "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}],
    "containers": [
        {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "100Mi"}, "limits": {"cpu": "1", "memory": "200Mi"}}},
        {"name": "b", "resources": {"requests": {"cpu": "250m", "memory": "28Mi"}}},
    ]}});
    let u = pod_usage(&pod);
    let want: Vec<(&str, &str)> = vec![
        ("count/pods", "1"),
        ("cpu", "2"),
        ("limits.cpu", "2"),
        ("limits.memory", "200Mi"),
        ("memory", "128Mi"),
        ("pods", "1"),
        ("requests.cpu", "2"),
        ("requests.memory", "128Mi"),
    ];
    let got: Vec<(String, String)> = u.iter().map(|(k, v)| (k.clone(), format(k, *v))).collect();
    let want: Vec<(String, String)> = want
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn terminal_and_expired_pods_do_not_count() {
    let now = 1_700_000_000;
    let cases = [
        (json!({"status": {"phase": "Running"}}), true),
        (json!({"status": {"phase": "Succeeded"}}), false),
        (json!({"status": {"phase": "Failed"}}), false),
        (
            json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:30Z", "deletionGracePeriodSeconds": 30}}),
            true,
        ),
        (
            json!({"metadata": {"deletionTimestamp": "2023-11-14T22:12:00Z", "deletionGracePeriodSeconds": 30}}),
            false,
        ),
    ];
    for (pod, want) in cases {
        assert_eq!(pod_counts(&pod, now), want, "{pod}");
    }
}

#[test]
fn counts_of_other_kinds() {
    let svc = json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}});
    let u = usage(by_name("services").unwrap(), &svc);
    assert_eq!(
        pretty(&u),
        "count/services=1,services=1,services.loadbalancers=1,services.nodeports=1"
    );
    let pvc = json!({"spec": {"resources": {"requests": {"storage": "1Gi"}}}});
    assert_eq!(
        pretty(&usage(by_name("persistentvolumeclaims").unwrap(), &pvc)),
        "count/persistentvolumeclaims=1,persistentvolumeclaims=1,requests.storage=1Gi"
    );
    assert_eq!(
        pretty(&usage(by_name("deployments").unwrap(), &json!({}))),
        "count/deployments.apps=1"
    );
}

#[test]
fn integer_resources() {
    for (name, want) in [
        ("pods", true),
        ("count/jobs.batch", true),
        ("services.nodeports", true),
        ("requests.cpu", false),
        ("memory", false),
    ] {
        assert_eq!(is_integer_resource(name), want, "{name}");
    }
}
