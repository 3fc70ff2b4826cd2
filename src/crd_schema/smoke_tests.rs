//! Real operators' CRDs, reduced: cert-manager's Certificate and the
//! Prometheus operator's ServiceMonitor go through `validate_crd`, and objects
//! as their users write them through prune → defaults → validate.

use serde_json::{json, Value};

use super::{validate_crd, Structural};

fn certificate_crd() -> Value {
    let spec = json!({
        "type": "object",
        "required": ["issuerRef", "secretName"],
        "properties": {
            "commonName": {"type": "string"},
            "dnsNames": {"type": "array", "items": {"type": "string"}},
            "duration": {"type": "string"},
            "renewBefore": {"type": "string"},
            "isCA": {"type": "boolean"},
            "usages": {"type": "array", "items": {"type": "string", "enum": [
                "signing", "digital signature", "content commitment", "key encipherment",
                "server auth", "client auth"]}},
            "issuerRef": {
                "type": "object", "required": ["name"],
                "properties": {"group": {"type": "string"}, "kind": {"type": "string"},
                    "name": {"type": "string"}},
            },
            "privateKey": {"type": "object", "properties": {
                "algorithm": {"type": "string", "enum": ["RSA", "ECDSA", "Ed25519"]},
                "size": {"type": "integer"},
                "rotationPolicy": {"type": "string", "enum": ["Never", "Always"]},
            }},
            "secretName": {"type": "string"},
            "secretTemplate": {"type": "object", "properties": {
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            }},
            "revisionHistoryLimit": {"type": "integer", "format": "int32"},
        },
    });
    let status = json!({"type": "object", "properties": {
        "conditions": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {"type": "object", "required": ["status", "type"], "properties": {
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "message": {"type": "string"},
                "reason": {"type": "string"},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "type": {"type": "string"},
                "observedGeneration": {"type": "integer", "format": "int64"},
            }},
        },
        "notAfter": {"type": "string", "format": "date-time"},
        "revision": {"type": "integer"},
    }});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "certificates.cert-manager.io"},
        "spec": {
            "group": "cert-manager.io",
            "names": {"kind": "Certificate", "listKind": "CertificateList", "plural": "certificates",
                "singular": "certificate", "shortNames": ["cert", "certs"], "categories": ["cert-manager"]},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Secret", "type": "string", "jsonPath": ".spec.secretName"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {"openAPIV3Schema": {
                    "description": "A Certificate resource should be created to ensure an up to date and signed X.509 certificate is stored in the Kubernetes Secret resource named in `spec.secretName`.",
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": spec,
                        "status": status,
                    },
                }},
            }],
        },
    })
}

fn service_monitor_crd() -> Value {
    let selector = json!({"type": "object", "x-kubernetes-map-type": "atomic", "properties": {
        "matchExpressions": {"type": "array", "items": {"type": "object",
            "required": ["key", "operator"], "properties": {
                "key": {"type": "string"}, "operator": {"type": "string"},
                "values": {"type": "array", "items": {"type": "string"},
                    "x-kubernetes-list-type": "atomic"},
            }}, "x-kubernetes-list-type": "atomic"},
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
    }});
    let endpoints = json!({"type": "array", "items": {"type": "object", "properties": {
        "port": {"type": "string"},
        "targetPort": {"anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": true},
        "path": {"type": "string"},
        "scheme": {"type": "string", "enum": ["http", "https"]},
        "interval": {"type": "string", "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"},
        "honorLabels": {"type": "boolean", "default": false},
        "relabelings": {"type": "array", "items": {"type": "object", "properties": {
            "action": {"type": "string", "default": "replace",
                "enum": ["replace", "Replace", "keep", "Keep", "drop", "Drop", "labelmap", "LabelMap"]},
            "sourceLabels": {"type": "array", "items": {"type": "string",
                "pattern": "^[a-zA-Z_][a-zA-Z0-9_]*$"}},
            "targetLabel": {"type": "string"},
        }}},
    }}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList", "plural": "servicemonitors",
                "singular": "servicemonitor", "shortNames": ["smon"], "categories": ["prometheus-operator"]},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object", "required": ["spec"],
                    "properties": {
                        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                        "spec": {"type": "object", "required": ["selector"], "properties": {
                            "endpoints": endpoints,
                            "jobLabel": {"type": "string"},
                            "namespaceSelector": {"type": "object", "properties": {
                                "any": {"type": "boolean"},
                                "matchNames": {"type": "array", "items": {"type": "string"}},
                            }},
                            "sampleLimit": {"type": "integer", "format": "int64", "minimum": 0},
                            "selector": selector,
                        },
                        "x-kubernetes-validations": [{
                            "rule": "!has(self.sampleLimit) || self.sampleLimit < 100000",
                            "message": "sampleLimit must stay below 100000",
                        }]},
                    },
                }},
            }],
        },
    })
}

fn compile(crd: &Value) -> Structural {
    Structural::new(
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
        "spec.versions[0].schema.openAPIV3Schema",
    )
    .unwrap()
}

/// What the server does on a write: prune, default, validate.
fn admit(s: &Structural, mut obj: Value, old: Option<&Value>) -> (Value, Vec<String>) {
    s.prune(&mut obj);
    s.apply_defaults(&mut obj);
    let errs = s.validate(&obj, old).iter().map(|e| e.message()).collect();
    (obj, errs)
}

#[test]
fn cert_manager_certificate() {
    let crd = certificate_crd();
    assert!(
        validate_crd(&crd, None).is_empty(),
        "{:?}",
        validate_crd(&crd, None)
    );
    let s = compile(&crd);
    let cert = json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"secretName": "web-tls", "dnsNames": ["web.example.com"], "duration": "2160h",
            "issuerRef": {"name": "ca", "kind": "ClusterIssuer"}, "privateKey": {"algorithm": "ECDSA", "size": 256},
            "usages": ["server auth"], "legacyField": true},
        "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-05-01T10:00:00Z"}]},
    });
    let (stored, errs) = admit(&s, cert.clone(), None);
    assert!(errs.is_empty(), "{errs:?}");
    assert!(stored["spec"].get("legacyField").is_none(), "pruned");
    let mut bad = cert;
    bad["spec"]["issuerRef"] = json!({"kind": "Issuer"});
    bad["spec"]["privateKey"]["algorithm"] = json!("DSA");
    bad["status"]["conditions"][0]["status"] = json!("Maybe");
    let (_, errs) = admit(&s, bad, None);
    assert_eq!(
        errs,
        vec![
            "spec.issuerRef.name: Required value",
            "spec.privateKey.algorithm: Unsupported value: \"DSA\": supported values: \"RSA\", \"ECDSA\", \"Ed25519\"",
            "status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\"",
        ]
    );
}

#[test]
fn prometheus_service_monitor() {
    let crd = service_monitor_crd();
    assert!(
        validate_crd(&crd, None).is_empty(),
        "{:?}",
        validate_crd(&crd, None)
    );
    let s = compile(&crd);
    let sm = json!({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": {"name": "api", "labels": {"release": "prom"}},
        "spec": {"selector": {"matchLabels": {"app": "api"}},
            "endpoints": [{"port": "metrics", "interval": "30s", "targetPort": 8080,
                "relabelings": [{"sourceLabels": ["__meta_pod_name"], "targetLabel": "pod"}]}]},
    });
    let (stored, errs) = admit(&s, sm.clone(), None);
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(stored["spec"]["endpoints"][0]["honorLabels"], json!(false));
    assert_eq!(
        stored["spec"]["endpoints"][0]["relabelings"][0]["action"],
        json!("replace")
    );
    let mut bad = sm;
    bad["spec"]["endpoints"][0]["interval"] = json!("30 seconds");
    bad["spec"]["endpoints"][0]["targetPort"] = json!(1.5);
    bad["spec"]["sampleLimit"] = json!(500000);
    let (_, errs) = admit(&s, bad, None);
    assert_eq!(
        errs,
        vec![
            "spec.endpoints[0].interval: Invalid value: \"30 seconds\": spec.endpoints[0].interval in body should match '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'",
            "spec.endpoints[0].targetPort: Invalid value: \"\": spec.endpoints[0].targetPort must validate at least one schema (anyOf)",
            "spec.endpoints[0].targetPort: Invalid value: \"number\": spec.endpoints[0].targetPort in body must be of type integer: \"number\"",
            "spec: Invalid value: \"object\": sampleLimit must stay below 100000",
        ]
    );
}
