use super::special_types::{go_duration, parse_go_duration};
use super::wire::{put_len, put_tag, put_varint, VARINT};
use super::*;
use serde_json::json;

fn round_trip(obj: Value) {
    let bytes = encode_object(&obj).unwrap_or_else(|e| panic!("encoding {obj}: {e}"));
    assert!(bytes.starts_with(MAGIC));
    let back = decode_object(&bytes).unwrap_or_else(|e| panic!("decoding {obj}: {e}"));
    let mut diffs = Vec::new();
    diff(&obj, &back, "", &mut diffs);
    assert!(
        diffs.is_empty(),
        "round trip of {}: {diffs:#?}",
        obj["kind"]
    );
}

/// Paths where two values differ (sent, read back).
fn diff(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let p = format!("{path}.{k}");
                diff(
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    &p,
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                diff(u, v, &format!("{path}[{i}]"), out);
            }
        }
        _ if a != b => out.push(format!("{path}: sent {a}, read back {b}")),
        _ => {}
    }
}

fn meta(name: &str) -> Value {
    json!({"name": name, "namespace": "default", "uid": "0b5e9d1c-1111-4222-8333-944445555666",
        "resourceVersion": "42", "generation": 3,
        "creationTimestamp": "2026-01-02T03:04:05Z",
        "labels": {"app": name, "tier": "fe"}, "annotations": {"note": "a=b"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
            "uid": "u", "controller": true, "blockOwnerDeletion": true}],
        "finalizers": ["kubernetes.io/pvc-protection"],
        "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
            "time": "2026-01-02T03:04:05Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}}}]})
}

fn pod_spec() -> Value {
    json!({"containers": [{"name": "app", "image": "bosun.local/web:1",
        "command": ["sleep", "3600"], "args": ["-v"],
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": "A", "value": "1"},
                {"name": "B", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m"}},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
            "initialDelaySeconds": 3, "periodSeconds": 10, "timeoutSeconds": 1,
            "successThreshold": 1, "failureThreshold": 3},
        "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 5},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
        "securityContext": {"runAsUser": 0, "privileged": false}}],
        "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
                    {"name": "cfg", "configMap": {"name": "c", "defaultMode": 420}}],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": false, "dnsPolicy": "ClusterFirst",
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
            "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
            "effect": "NoExecute", "tolerationSeconds": 0}],
        "schedulerName": "default-scheduler", "securityContext": {}})
}

fn template() -> Value {
    json!({"metadata": {"labels": {"app": "web"}}, "spec": pod_spec()})
}

#[test]
fn every_served_kind_round_trips() {
    let selector = json!({"matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe", "be"]}]});
    let t = "2026-01-02T03:04:05Z";
    let objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": meta("ns"),
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": meta("n1"),
            "spec": {"podCIDR": "10.244.1.0/24", "unschedulable": true,
                "taints": [{"key": "k", "value": "v", "effect": "NoSchedule", "timeAdded": t}]},
            "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": t,
                    "lastTransitionTime": t, "reason": "KubeletReady"}],
                "addresses": [{"type": "InternalIP", "address": "172.17.0.2"}],
                "nodeInfo": {"kubeletVersion": "bosun", "architecture": "amd64"}}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta("p"), "spec": pod_spec(),
            "status": {"phase": "Running", "podIP": "10.244.1.5", "startTime": t,
                "containerStatuses": [{"name": "app", "ready": true, "restartCount": 2,
                    "image": "x", "started": true,
                    "state": {"running": {"startedAt": t}},
                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                        "startedAt": t, "finishedAt": t}}}]}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": meta("s"),
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                "selector": {"app": "web"}, "sessionAffinity": "None",
                "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                          {"name": "named", "port": 81, "targetPort": "http", "nodePort": 30001}]}}),
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": meta("s"),
            "subsets": [{"addresses": [{"ip": "10.244.1.5", "targetRef": {"kind": "Pod", "name": "p"}}],
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]}),
        json!({"apiVersion": "v1", "kind": "Event", "metadata": meta("e"),
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Pulled", "message": "pulled", "type": "Normal", "count": 3,
            "firstTimestamp": t, "lastTimestamp": t, "source": {"component": "bosun-agent"},
            "eventTime": "2026-01-02T03:04:05.123456Z", "reportingComponent": "agent"}),
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta("pv"),
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/tmp/pv"}, "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": "local-path",
                "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "c"}},
            "status": {"phase": "Bound"}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta("c"),
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"},
            "status": {"phase": "Pending"}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("web"),
            "spec": {"replicas": 0, "selector": selector, "template": template(),
                "strategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}},
                "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600},
            "status": {"replicas": 3, "readyReplicas": 2, "observedGeneration": 3,
                "conditions": [{"type": "Available", "status": "True",
                    "lastUpdateTime": t, "lastTransitionTime": t}]}}),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta("rs"),
            "spec": {"replicas": 2, "selector": selector, "template": template()},
            "status": {"replicas": 2, "fullyLabeledReplicas": 2}}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("sts"),
            "spec": {"replicas": 1, "selector": selector, "template": template(),
                "serviceName": "nginx", "podManagementPolicy": "OrderedReady",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}}}]}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta("ds"),
            "spec": {"selector": selector, "template": template(),
                "updateStrategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "10%"}}},
            "status": {"desiredNumberScheduled": 2, "numberReady": 1}}),
        json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": meta("cr"),
            "data": {"spec": {"template": {"$patch": "replace", "spec": {"containers": []}}}},
            "revision": 2}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("j"),
            "spec": {"backoffLimit": 0, "completions": 3, "parallelism": 2,
                "ttlSecondsAfterFinished": 0, "template": template(),
                "podFailurePolicy": {"rules": [{"action": "FailJob",
                    "onExitCodes": {"operator": "In", "values": [42, -1]}}]}},
            "status": {"succeeded": 1, "startTime": t, "active": 1}}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta("cj"),
            "spec": {"schedule": "*/1 * * * *", "timeZone": "Europe/Paris",
                "concurrencyPolicy": "Forbid", "suspend": true,
                "successfulJobsHistoryLimit": 0,
                "jobTemplate": {"metadata": {"labels": {"a": "b"}},
                    "spec": {"template": template()}}},
            "status": {"lastScheduleTime": t, "active": [{"kind": "Job", "name": "j"}]}}),
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta("sc"),
            "provisioner": "bosun.io/local-path", "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer", "parameters": {"dir": "/x"},
            "allowVolumeExpansion": true}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": meta("es"),
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.244.1.5"],
                "conditions": {"ready": false, "serving": true, "terminating": false},
                "nodeName": "n1", "targetRef": {"kind": "Pod", "name": "p"}}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}),
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta("l"),
            "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40,
                "renewTime": "2026-01-02T03:04:05.500000Z", "acquireTime": "2026-01-02T03:04:05.000001Z"}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta("np"),
            "spec": {"podSelector": {"matchLabels": {"app": "web"}},
                "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "a"}},
                    "podSelector": {}}, {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}],
                    "ports": [{"protocol": "TCP", "port": "http"}, {"protocol": "UDP", "port": 1000, "endPort": 2000}]}],
                "egress": [{"to": [{"podSelector": {"matchLabels": {"app": "db"}}}]}],
                "policyTypes": ["Ingress", "Egress"]}}),
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta("h"),
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 1, "maxReplicas": 5,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 50}}},
                    {"type": "Pods", "pods": {"metric": {"name": "qps"},
                        "target": {"type": "AverageValue", "averageValue": "1k"}}}],
                "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0},
                    "scaleDown": {"stabilizationWindowSeconds": 300,
                    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}},
            "status": {"currentReplicas": 1, "desiredReplicas": 2, "lastScaleTime": t}}),
        json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": meta("h"),
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "maxReplicas": 3, "targetCPUUtilizationPercentage": 80},
            "status": {"currentReplicas": 1, "desiredReplicas": 1}}),
        json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": "p", "namespace": "default"},
            "deleteOptions": {"gracePeriodSeconds": 0, "propagationPolicy": "Background"}}),
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600,
                "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": "u"}},
            "status": {"token": "a.b.c", "expirationTimestamp": t}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta("rb"),
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}}),
        json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": meta("jane"),
            "spec": {"request": "LS0tLS1CRUdJTg==", "signerName": "kubernetes.io/kube-apiserver-client",
                "expirationSeconds": 86400, "usages": ["client auth"], "username": "bosun-admin",
                "groups": ["system:masters", "system:authenticated"]},
            "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "KubectlApprove",
                "lastUpdateTime": t, "lastTransitionTime": t}], "certificate": "Y2VydA=="}}),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "metadata": {}, "spec": {"resourceAttributes": {"verb": "list", "resource": "secrets",
                "namespace": "default"}}, "status": {"allowed": true}}),
        json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "namespace": "default"},
            "target": {"kind": "Node", "name": "n1"}}),
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": meta("web"),
            "spec": {"replicas": 0}, "status": {"replicas": 2, "selector": "app=web"}}),
        json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 30,
            "preconditions": {"uid": "u"}, "dryRun": ["All"]}),
        json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
            "message": "pods \"x\" not found", "reason": "NotFound", "code": 404,
            "details": {"name": "x", "kind": "pods"}}),
        json!({"apiVersion": "apps/v1", "kind": "DeploymentList",
            "metadata": {"resourceVersion": "7", "continue": "default/a", "remainingItemCount": 2},
            "items": [{"metadata": meta("a"), "spec": {"replicas": 1, "selector": selector,
                "template": template()}}]}),
    ];
    for obj in objects {
        round_trip(obj);
    }
}

#[test]
fn every_served_resource_has_a_message() {
    for r in bosun::resources::RESOURCES {
        // Not vendored yet (control/proto has no apiextensions nor
        // apiregistration): CRDs and APIServices are served in JSON only
        // for now.
        if r.group == "apiextensions.k8s.io" || r.group == "apiregistration.k8s.io" {
            continue;
        }
        assert!(
            message_name(&r.api_version(), r.kind).is_some(),
            "{} {}",
            r.api_version(),
            r.kind
        );
        assert!(
            message_name(&r.api_version(), &format!("{}List", r.kind)).is_some(),
            "{} {}List",
            r.api_version(),
            r.kind
        );
    }
    assert_eq!(
        message_name("autoscaling/v1", "Scale").as_deref(),
        Some("api.autoscaling.v1.Scale")
    );
    assert_eq!(
        message_name("v1", "Status").as_deref(),
        Some("apimachinery.pkg.apis.meta.v1.Status")
    );
}

/// Go writes every non-pointer field, zeros included; those zeros are
/// dropped as JSON's omitempty would, while a pointer's explicit zero stays.
#[test]
fn wire_zeros_of_plain_fields_are_dropped_and_pointer_zeros_kept() {
    let mut spec = Vec::new();
    put_tag(&mut spec, 1, VARINT); // replicas (a pointer): 0
    put_varint(&mut spec, 0);
    put_tag(&mut spec, 5, VARINT); // minReadySeconds (plain): 0
    put_varint(&mut spec, 0);
    put_tag(&mut spec, 7, VARINT); // paused (plain): false
    put_varint(&mut spec, 0);
    let mut md = Vec::new();
    put_len(&mut md, 1, b"web");
    put_len(&mut md, 2, b""); // generateName ""
    put_len(&mut md, 8, b""); // creationTimestamp: the zero Time
    let mut rolling = Vec::new();
    put_len(&mut rolling, 1, &[0x08, 0x00, 0x10, 0x00]); // maxUnavailable: int 0
    let mut strategy = Vec::new();
    put_len(&mut strategy, 2, &rolling);
    put_len(&mut spec, 4, &strategy);
    let mut dep = Vec::new();
    put_len(&mut dep, 1, &md);
    put_len(&mut dep, 2, &spec);
    let v = decode_message(&dep, "api.apps.v1.Deployment", "").unwrap();
    assert_eq!(
        v,
        json!({"metadata": {"name": "web"}, "spec": {"replicas": 0,
            "strategy": {"rollingUpdate": {"maxUnavailable": 0}}}})
    );
}

#[test]
fn malformed_bodies_are_refused_with_a_reason() {
    let good = encode_object(&json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "n"}}))
    .unwrap();
    let e = decode_object(b"{\"kind\": \"Namespace\"}").unwrap_err();
    assert!(e.0.contains("magic"), "{e}");
    let e = decode_object(&good[..good.len() - 2]).unwrap_err();
    assert!(e.0.contains("truncated"), "{e}");
    let e = decode_object(&encode_object_unchecked("v1", "Widget", &[])).unwrap_err();
    assert!(e.0.contains("no kind \"Widget\""), "{e}");
    // A Namespace whose metadata (field 1) is a varint, not a message.
    let e = decode_object(&encode_object_unchecked("v1", "Namespace", &[0x08, 0x01])).unwrap_err();
    assert!(e.0.contains("metadata: wire type 0"), "{e}");
}

fn encode_object_unchecked(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut tm = Vec::new();
    put_len(&mut tm, 1, api_version.as_bytes());
    put_len(&mut tm, 2, kind.as_bytes());
    let mut out = MAGIC.to_vec();
    put_len(&mut out, 1, &tm);
    put_len(&mut out, 2, raw);
    out
}

#[test]
fn durations_read_and_write_as_go_prints_them() {
    for (n, s) in [
        (0, "0s"),
        (1_500_000_000, "1.5s"),
        (90_000_000_000, "1m30s"),
        (3_600_000_000_000, "1h0m0s"),
        (2_000_000, "2ms"),
    ] {
        assert_eq!(go_duration(n), s);
        assert_eq!(parse_go_duration(s), Some(n), "{s}");
    }
}

#[test]
fn byte_fields_are_base64_in_json() {
    // Secret.data is map<string, bytes>.
    round_trip(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "data": {"password": "aHVudGVyMg==", "bin": "AAEC/w=="}, "type": "Opaque"}),
    );
}

#[test]
fn webhook_configurations_round_trip() {
    round_trip(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "m"},
        "webhooks": [{"name": "m.example.com", "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 10,
            "reinvocationPolicy": "IfNeeded", "matchPolicy": "Equivalent",
            "namespaceSelector": {"matchLabels": {"a": "b"}}, "objectSelector": {},
            "matchConditions": [{"name": "c", "expression": "true"}],
            "clientConfig": {"caBundle": "Y2E=",
                "service": {"namespace": "ns", "name": "s", "path": "/m", "port": 443}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"], "scope": "*"}]}]
    }));
    round_trip(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "v"},
        "webhooks": [{"name": "v.example.com", "admissionReviewVersions": ["v1"],
            "sideEffects": "NoneOnDryRun", "clientConfig": {"url": "https://x.example.com/v"},
            "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                "resources": ["*/*"]}]}]
    }));
}

#[test]
fn validating_admission_policies_round_trip() {
    round_trip(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "p"},
        "spec": {"failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"matchPolicy": "Equivalent",
                "namespaceSelector": {"matchLabels": {"a": "b"}}, "objectSelector": {},
                "resourceRules": [{"resourceNames": ["x"], "operations": ["CREATE", "UPDATE"],
                    "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"],
                    "scope": "*"}],
                "excludeResourceRules": [{"operations": ["DELETE"], "apiGroups": [""],
                    "apiVersions": ["v1"], "resources": ["pods"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5", "message": "m",
                "reason": "Forbidden", "messageExpression": "'x'"}],
            "auditAnnotations": [{"key": "k", "valueExpression": "'v'"}],
            "matchConditions": [{"name": "c", "expression": "true"}],
            "variables": [{"name": "v", "expression": "1"}]},
        "status": {"observedGeneration": 1,
            "typeChecking": {"expressionWarnings": [{"fieldRef": "spec.validations[0]",
                "warning": "w"}]}}
    }));
    round_trip(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "b"},
        "spec": {"policyName": "p", "validationActions": ["Deny", "Audit"],
            "paramRef": {"name": "limits", "namespace": "ns",
                "parameterNotFoundAction": "Deny"},
            "matchResources": {"namespaceSelector": {"matchLabels": {"env": "test"}}}}
    }));
}

/// The policy kinds, as kubectl sends and reads them in protobuf.
#[test]
fn policy_kinds_round_trip() {
    let t = "2026-01-02T03:04:05Z";
    round_trip(
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": meta("pdb"),
        "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow"},
        "status": {"currentHealthy": 3, "desiredHealthy": 2, "disruptionsAllowed": 1,
            "expectedPods": 3, "observedGeneration": 1,
            "disruptedPods": {"web-1": t},
            "conditions": [{"type": "DisruptionAllowed", "status": "True",
                "reason": "SufficientPods", "message": "ok", "lastTransitionTime": t}]}}),
    );
    round_trip(
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": meta("ing"),
        "spec": {"ingressClassName": "bosun",
            "defaultBackend": {"service": {"name": "web", "port": {"name": "http"}}},
            "tls": [{"hosts": ["a.example"], "secretName": "tls"}],
            "rules": [{"host": "a.example", "http": {"paths": [
                {"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "web", "port": {"number": 80}}}},
                {"path": "/r", "pathType": "Exact", "backend": {"resource":
                    {"apiGroup": "example.com", "kind": "Bucket", "name": "b"}}}]}}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1",
            "ports": [{"port": 443, "protocol": "TCP"}]}]}}}),
    );
    round_trip(
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": meta("bosun"),
        "spec": {"controller": "bosun.dev/ingress", "parameters":
            {"apiGroup": "example.com", "kind": "Params", "name": "p", "scope": "Cluster"}}}),
    );
    round_trip(
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta("q"),
        "spec": {"hard": {"pods": "10", "requests.memory": "1Gi", "count/deployments.apps": "2"},
            "scopes": ["NotTerminating"],
            "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass",
                "operator": "In", "values": ["high"]}]}},
        "status": {"hard": {"pods": "10"}, "used": {"pods": "2"}}}),
    );
    round_trip(
        json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": meta("lr"),
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"},
            "defaultRequest": {"cpu": "100m"}, "max": {"memory": "1Gi"},
            "min": {"memory": "4Mi"}, "maxLimitRequestRatio": {"cpu": "10"}}]}}),
    );
    round_trip(
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": meta("high"), "value": 1000, "globalDefault": true,
        "description": "important", "preemptionPolicy": "Never"}),
    );
}
