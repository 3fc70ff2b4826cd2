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

fn pv() -> Value {
    json!({
        "metadata": {"name": "pv1", "labels": {"type": "local"},
            "finalizers": ["kubernetes.io/pv-protection"]},
        "spec": {"storageClassName": "manual", "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem",
            "hostPath": {"path": "/tmp/data1"},
            "claimRef": {"namespace": "default", "name": "www-web-0"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1", "n2"]},
                    {"key": "disk", "operator": "Exists"}]},
                {"matchExpressions": []}]}}},
        "status": {"phase": "Bound"}
    })
}

#[test]
fn persistent_volume_layout() {
    // Field for field, in kubectl's order and alignment (describePersistentVolume).
    let text = storage::describe_persistent_volume(&pv()).finish();
    let want = "\
Name:              pv1
Labels:            type=local
Annotations:       <none>
Finalizers:        [kubernetes.io/pv-protection]
StorageClass:      manual
Status:            Bound
Claim:             default/www-web-0
Reclaim Policy:    Retain
Access Modes:      RWO,RWX
VolumeMode:        Filesystem
Capacity:          1Gi
Node Affinity:     
  Required Terms:  
    Term 0:        kubernetes.io/hostname in [n1, n2]
                   disk exists
    Term 1:        <none>
Message:           
Source:
    Type:          HostPath (bare host directory volume)
    Path:          /tmp/data1
    HostPathType:  <none>
";
    assert_eq!(text, want, "\n{text}");
}

#[test]
fn persistent_volume_unbound_without_affinity() {
    let mut pv = pv();
    let spec = pv["spec"].as_object_mut().unwrap();
    spec.remove("claimRef");
    spec.remove("nodeAffinity");
    spec.remove("storageClassName");
    spec.insert(
        "hostPath".into(),
        json!({"path": "/d", "type": "DirectoryOrCreate"}),
    );
    pv["metadata"]["annotations"] = json!({"volume.beta.kubernetes.io/storage-class": "old"});
    pv["status"] = json!({"phase": "Available"});
    let text = storage::describe_persistent_volume(&pv).finish();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.contains(&"Claim:           "), "{text}");
    assert!(lines.contains(&"Node Affinity:   <none>"), "{text}");
    assert!(lines.contains(&"StorageClass:    old"), "{text}");
    assert!(lines.contains(&"Status:          Available"), "{text}");
    assert!(
        lines.contains(&"    HostPathType:  DirectoryOrCreate"),
        "{text}"
    );
}

#[test]
fn persistent_volume_claim_layout() {
    let pvc = json!({
        "metadata": {"name": "www-web-0", "namespace": "default", "labels": {"app": "nginx"},
            "finalizers": ["kubernetes.io/pvc-protection"],
            "ownerReferences": [{"kind": "Pod", "name": "owner", "uid": "u-owner"}]},
        "spec": {"storageClassName": "local-path", "volumeName": "pvc-1",
            "accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
            "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound", "capacity": {"storage": "2Gi"},
            "accessModes": ["ReadWriteOnce"]}
    });
    let pod = |name: &str, uid: &str, claim: &str| {
        json!({"metadata": {"name": name, "uid": uid},
               "spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]}})
    };
    let pods = vec![
        pod("web-0", "u0", "www-web-0"),
        pod("other", "u1", "www-web-1"),
        pod("owner", "u-owner", "x"),
        pod("a-web", "u2", "www-web-0"),
    ];
    let text = storage::describe_persistent_volume_claim(&pvc, &pods).finish();
    let want = "\
Name:          www-web-0
Namespace:     default
StorageClass:  local-path
Status:        Bound
Volume:        pvc-1
Labels:        app=nginx
Annotations:   <none>
Finalizers:    [kubernetes.io/pvc-protection]
Capacity:      2Gi
Access Modes:  RWO
VolumeMode:    Filesystem
Used By:       a-web
               owner
               web-0
";
    assert_eq!(text, want, "\n{text}");

    // Unbound: no capacity or access modes yet (the request is not shown), nobody uses it.
    let mut pending = pvc.clone();
    pending["spec"]
        .as_object_mut()
        .unwrap()
        .remove("volumeName");
    pending["status"] = json!({"phase": "Pending"});
    pending["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("ownerReferences");
    let text = storage::describe_persistent_volume_claim(&pending, &pods[1..2]).finish();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.contains(&"Volume:        "), "{text}");
    assert!(lines.contains(&"Capacity:      "), "{text}");
    assert!(lines.contains(&"Access Modes:  "), "{text}");
    assert!(lines.contains(&"Used By:       <none>"), "{text}");
}
