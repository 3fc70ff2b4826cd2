//! Upstream's LimitRanger cases (`admission_test.go`), on JSON.

use serde_json::{json, Value};

use super::*;

fn range(items: Value) -> Value {
    json!({"metadata": {"name": "limits"}, "spec": {"limits": items}})
}

fn pod(resources: &[Value]) -> Value {
    let containers: Vec<Value> = resources
        .iter()
        .enumerate()
        .map(|(i, r)| json!({"name": format!("c{i}"), "image": "busybox", "resources": r}))
        .collect();
    json!({"metadata": {"name": "p"}, "spec": {"containers": containers}})
}

#[test]
fn defaults_fill_only_what_a_container_leaves_out_and_are_noted() {
    let lr = range(json!([{"type": "Container",
        "default": {"cpu": "500m", "memory": "128Mi"},
        "defaultRequest": {"cpu": "100m", "memory": "64Mi"}}]));
    let mut p = pod(&[
        json!({}),
        json!({"requests": {"cpu": "200m"}, "limits": {"cpu": "1"}}),
    ]);
    assert!(limit_pod(&lr, &mut p).is_empty());
    assert_eq!(
        p["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}})
    );
    assert_eq!(
        p["spec"]["containers"][1]["resources"],
        json!({"requests": {"cpu": "200m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}})
    );
    assert_eq!(
        p["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container c0; cpu, memory limit for container c0; memory request for container c1; memory limit for container c1"
    );
}

#[test]
fn min_max_and_ratio_refuse_in_upstreams_words() {
    // (item, container resources, expected errors)
    let cases: Vec<(Value, Value, Vec<&str>)> = vec![
        (
            json!({"type": "Container", "min": {"cpu": "100m"}}),
            json!({"requests": {"cpu": "50m"}}),
            vec!["minimum cpu usage per Container is 100m, but request is 50m"],
        ),
        (
            json!({"type": "Container", "min": {"cpu": "100m"}}),
            json!({}),
            vec!["minimum cpu usage per Container is 100m.  No request is specified"],
        ),
        (
            json!({"type": "Container", "min": {"memory": "64Mi"}}),
            json!({"requests": {"memory": "64Mi"}, "limits": {"memory": "32Mi"}}),
            vec!["minimum memory usage per Container is 64Mi, but limit is 32Mi"],
        ),
        (
            json!({"type": "Container", "max": {"cpu": "1"}}),
            json!({"requests": {"cpu": "500m"}, "limits": {"cpu": "2"}}),
            vec!["maximum cpu usage per Container is 1, but limit is 2"],
        ),
        (
            json!({"type": "Container", "max": {"memory": "1Gi"}}),
            json!({"requests": {"memory": "100Mi"}}),
            vec!["maximum memory usage per Container is 1Gi.  No limit is specified"],
        ),
        (
            json!({"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}}),
            json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "300m"}}),
            vec!["cpu max limit to request ratio per Container is 2, but provided ratio is 3.000000"],
        ),
        (
            json!({"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}}),
            json!({"limits": {"cpu": "300m"}}),
            vec!["cpu max limit to request ratio per Container is 2, but no request is specified or request is 0"],
        ),
        (
            json!({"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "1"}}),
            json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}),
            vec![],
        ),
    ];
    for (item, resources, want) in cases {
        let lr = range(json!([item.clone()]));
        let mut p = pod(std::slice::from_ref(&resources));
        assert_eq!(limit_pod(&lr, &mut p), want, "{item} on {resources}");
    }
}

#[test]
fn pod_items_check_the_sum_of_the_containers() {
    let lr = range(json!([{"type": "Pod", "max": {"cpu": "1"}}]));
    let mut p = pod(&[
        json!({"requests": {"cpu": "600m"}, "limits": {"cpu": "600m"}}),
        json!({"requests": {"cpu": "600m"}, "limits": {"cpu": "600m"}}),
    ]);
    assert_eq!(
        limit_pod(&lr, &mut p),
        vec!["maximum cpu usage per Pod is 1, but limit is 1200m"]
    );
}

#[test]
fn claims_are_checked_against_their_storage_request() {
    let lr = range(
        json!([{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "2Gi"}}]),
    );
    let claim = |s: &str| json!({"spec": {"resources": {"requests": {"storage": s}}}});
    assert!(limit_claim(&lr, &claim("1Gi")).is_empty());
    assert_eq!(
        limit_claim(&lr, &claim("5Gi")),
        vec!["maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 5Gi"]
    );
    assert_eq!(
        limit_claim(&lr, &claim("500Mi")),
        vec!["minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"]
    );
}

#[test]
fn several_errors_aggregate_as_go_prints_them() {
    assert_eq!(aggregate(&["a".into()]), "a");
    assert_eq!(aggregate(&["a".into(), "b".into()]), "[a, b]");
}
