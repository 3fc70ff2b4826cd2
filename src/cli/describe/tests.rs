//! Unit tests of `describe`'s writer and layouts.

use super::*;
use crate::cli::apply::LAST_APPLIED;
use serde_json::json;

#[test]
fn tabwriter_blocks_like_go() {
    // "IPs:" has no tab, so it ends the first block; "  IP:" and
    // "Controlled By:" form the next one, exactly as kubectl prints them.
    let text =
        "Name:\tnginx\nNamespace:\tdefault\nIPs:\n  IP:\t10.0.0.1\nControlled By:\tReplicaSet/x\n";
    assert_eq!(
        tabwrite(text, 0, 2),
        "Name:       nginx\nNamespace:  default\nIPs:\n  IP:           10.0.0.1\nControlled By:  ReplicaSet/x\n"
    );
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment", "namespace": "default", "uid": "d1",
            "creationTimestamp": "2024-12-02T15:00:00Z",
            "labels": {"app": "nginx"},
            "annotations": {"deployment.kubernetes.io/revision": "2", LAST_APPLIED: "{}"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9",
                    "ports": [{"containerPort": 80}]}]}}},
        "status": {"replicas": 3, "updatedReplicas": 3, "availableReplicas": 3,
            "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}
    })
}

#[test]
fn deployment_layout() {
    // The new set is the one with the deployment's template (but for the hash label).
    let rs = |name: &str, rev: &str, replicas: i64, image: &str| {
        json!({"metadata": {"name": name, "annotations": {"deployment.kubernetes.io/revision": rev}},
               "spec": {"replicas": replicas,
                   "template": {"metadata": {"labels": {"app": "nginx", "pod-template-hash": name}},
                       "spec": {"containers": [{"name": "nginx", "image": image,
                           "ports": [{"containerPort": 80}]}]}}},
               "status": {"replicas": replicas}})
    };
    let owned = vec![
        rs("nginx-old", "1", 1, "nginx:1.7.8"),
        rs("nginx-new", "2", 3, "nginx:1.7.9"),
        rs("nginx-older", "0", 0, "nginx:1.7.7"),
    ];
    let text = describe_deployment(&deployment(), &owned).finish();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Name:                   nginx-deployment");
    assert!(
        lines.contains(&"Annotations:            deployment.kubernetes.io/revision: 2"),
        "{text}"
    );
    assert!(!text.contains(LAST_APPLIED));
    assert!(
        lines.contains(&"Selector:               app=nginx"),
        "{text}"
    );
    assert!(lines.contains(
        &"Replicas:               3 desired | 3 updated | 3 total | 3 available | 0 unavailable"
    ), "{text}");
    assert!(lines.contains(&"StrategyType:           RollingUpdate"));
    assert!(lines.contains(&"RollingUpdateStrategy:  25% max unavailable, 25% max surge"));
    assert!(lines.contains(&"    Image:         nginx:1.7.9"), "{text}");
    assert!(lines.contains(&"    Port:          80/TCP"), "{text}");
    assert!(lines.contains(&"  Node-Selectors:  <none>"), "{text}");
    assert!(
        lines.contains(&"  Available      True    MinimumReplicasAvailable"),
        "{text}"
    );
    assert!(
        lines.contains(&"OldReplicaSets:  nginx-old (1/1 replicas created), nginx-older (0/0 replicas created)"),
        "{text}"
    );
    assert!(
        lines.contains(&"NewReplicaSet:   nginx-new (3/3 replicas created)"),
        "{text}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("CreationTimestamp:"))
            .count(),
        1
    );
    assert!(text.contains("Mon, 02 Dec 2024 15:00:00 +0000"));
}

#[test]
fn pod_layout() {
    let pod = json!({
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "nginx", "tier": "fe"}},
        "spec": {"nodeName": "node1", "containers": [{"name": "nginx", "image": "nginx:1.7.9"}],
                 "volumes": [{"name": "data", "emptyDir": {}}]},
        "status": {"phase": "Running", "podIP": "10.1.0.5", "hostIP": "192.168.1.2",
            "containerStatuses": [{"name": "nginx", "ready": true, "restartCount": 2,
                "state": {"running": {"startedAt": "2024-12-02T15:00:00Z"}}}],
            "conditions": [{"type": "Ready", "status": "True"}]}
    });
    let text = describe_pod(&pod).finish();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.contains(&"Node:             node1/192.168.1.2"),
        "{text}"
    );
    assert!(lines.contains(&"Labels:           app=nginx"), "{text}");
    assert!(lines.contains(&"                  tier=fe"), "{text}");
    assert!(lines.contains(&"Status:           Running"), "{text}");
    assert!(lines.contains(&"IP:               10.1.0.5"), "{text}");
    assert!(lines
        .iter()
        .any(|l| l.trim_start().starts_with("State:") && l.ends_with("Running")));
    assert!(
        lines.iter().any(|l| l.trim() == "Ready:          True"),
        "{text}"
    );
    assert!(
        lines.iter().any(|l| l.trim() == "Restart Count:  2"),
        "{text}"
    );
    assert!(text.contains("EmptyDir (a temporary directory that shares a pod's lifetime)"));
}
