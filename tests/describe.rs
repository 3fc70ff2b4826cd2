//! End-to-end: `bosun describe` of persistent volumes and claims prints what
//! `kubectl describe` prints for the same objects, against a real `bosun-control`.

mod common;

use common::{example, wait_for, Cluster};
use std::time::Duration;

const CLAIM_AND_POD: &str = "\
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, labels: {app: db}}
spec:
  storageClassName: \"\"
  volumeName: pv1
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 500Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: db-0}
spec:
  nodeName: nowhere
  containers: [{name: db, image: bosun.local/busybox}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]
";

#[test]
fn describe_pv_and_pvc_print_what_kubectl_prints() {
    let c = Cluster::start();
    c.bosun(&["apply", "-f", &example("pv.yaml")]).ok();
    let file = c.write("claim.yaml", CLAIM_AND_POD);
    c.bosun(&["apply", "-f", &file]).ok();
    wait_for("the claim to bind", Duration::from_secs(20), || {
        c.kubectl(&["get", "pvc", "data", "-o", "jsonpath={.status.phase}"])
            .stdout
            == "Bound"
    });
    wait_for("the volume to bind", Duration::from_secs(20), || {
        c.kubectl(&["get", "pv", "pv1", "-o", "jsonpath={.status.phase}"])
            .stdout
            == "Bound"
    });

    for (kind, name, want) in [
        (
            "pv",
            "pv1",
            &[
                "Claim:           default/data\n",
                "Status:          Bound\n",
            ][..],
        ),
        (
            "pv",
            "pv2",
            &["Claim:           \n", "    Path:          /tmp/pv2\n"][..],
        ),
        (
            "pvc",
            "data",
            &["Volume:        pv1\n", "Used By:       db-0\n"][..],
        ),
    ] {
        let ours = c.bosun(&["describe", kind, name]).ok().to_string();
        let theirs = c.kubectl(&["describe", kind, name]).ok().to_string();
        assert_eq!(ours, theirs, "bosun describe {kind} {name}");
        for w in want {
            assert!(ours.contains(w), "no {w:?} in:\n{ours}");
        }
    }
}

const POLICIES: &str = "\
apiVersion: v1
kind: Namespace
metadata: {name: team, labels: {tier: shared}}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: compute, namespace: team}
spec:
  hard: {pods: \"10\", configmaps: \"5\", requests.memory: 1Gi, limits.cpu: \"4\"}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: besteffort, namespace: team}
spec:
  hard: {pods: \"3\"}
  scopes: [BestEffort, NotTerminating]
---
apiVersion: v1
kind: LimitRange
metadata: {name: limits, namespace: team}
spec:
  limits:
  - {type: Container, default: {cpu: 500m}}
  - {type: Pod, max: {memory: 2Gi}}
  - {type: PersistentVolumeClaim, min: {storage: 1Gi}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: team}
spec:
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: team, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- {addresses: [10.0.0.5], conditions: {ready: true}}
- {addresses: [10.0.0.6], conditions: {ready: false}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: site, namespace: team, labels: {app: site}, annotations: {note: hello}}
spec:
  defaultBackend: {service: {name: web, port: {name: http}}}
  tls: [{hosts: [a.example, b.example], secretName: site-tls}, {hosts: [c.example]}]
  rules:
  - host: a.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
      - {path: /gone, pathType: Exact, backend: {service: {name: missing, port: {number: 81}}}}
  - http:
      paths:
      - {path: /api, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: special, labels: {a: b}}
spec:
  controller: example.com/ingress
  parameters: {apiGroup: example.com, kind: Params, name: p, scope: Namespace, namespace: team}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db, namespace: team}
spec:
  podSelector: {matchLabels: {app: db}}
  policyTypes: [Ingress, Egress]
  ingress:
  - from:
    - podSelector: {matchLabels: {app: api}}
      namespaceSelector: {matchLabels: {tier: shared}}
    - ipBlock: {cidr: 10.0.0.0/16, except: [10.0.1.0/24, 10.0.2.0/24]}
    ports: [{port: 5432}, {port: metrics, protocol: UDP}, {port: 9000, endPort: 9010}]
  - {}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: open, namespace: team}
spec:
  podSelector: {}
  policyTypes: [Egress]
  egress:
  - to: [{namespaceSelector: {matchExpressions: [{key: tier, operator: In, values: [shared]}]}}]
";

/// kubectl prints a limit item's resources in Go map order, so the limit
/// range's lines are compared as a set.
fn sorted_lines(s: &str) -> Vec<&str> {
    let mut v: Vec<&str> = s.lines().collect();
    v.sort();
    v
}

#[test]
fn describe_of_quotas_limits_ingresses_and_policies_prints_what_kubectl_prints() {
    let c = Cluster::start();
    let file = c.write("policies.yaml", POLICIES);
    c.kubectl(&["apply", "-f", &file]).ok();
    // The quota controller fills status.hard and status.used.
    wait_for("the quotas' status", Duration::from_secs(30), || {
        let used = |q: &str| {
            c.kubectl(&[
                "get",
                "quota",
                q,
                "-n",
                "team",
                "-o",
                "jsonpath={.status.used.pods}",
            ])
            .stdout
        };
        used("compute") == "0" && used("besteffort") == "0"
    });

    for (kind, name, want) in [
        (
            "namespace",
            "team",
            &["Resource Quotas\n", "PersistentVolumeClaim"][..],
        ),
        ("quota", "compute", &["requests.memory  0     1Gi\n"][..]),
        (
            "quota",
            "besteffort",
            &["Scopes:     BestEffort, NotTerminating\n"][..],
        ),
        ("limits", "limits", &["Pod                    memory"][..]),
        (
            "ingress",
            "site",
            &[
                "Default backend:  web:http (10.0.0.5:8080)\n",
                "/gone   missing:81 (<error: services \"missing\" not found>)\n",
                "site-tls terminates a.example,b.example\n",
            ][..],
        ),
        (
            "netpol",
            "db",
            &[
                "Except: 10.0.1.0/24, 10.0.2.0/24\n",
                "To Port Range: 9000-9010/TCP\n",
            ][..],
        ),
        (
            "netpol",
            "open",
            &["<none> (Allowing the specific traffic"][..],
        ),
    ] {
        let ours = c
            .bosun(&["describe", kind, name, "-n", "team"])
            .ok()
            .to_string();
        let theirs = c
            .kubectl(&["describe", kind, name, "-n", "team"])
            .ok()
            .to_string();
        if kind == "limits" || kind == "namespace" {
            assert_eq!(
                sorted_lines(&ours),
                sorted_lines(&theirs),
                "bosun describe {kind} {name}:\n{ours}\nkubectl:\n{theirs}"
            );
        } else {
            assert_eq!(ours, theirs, "bosun describe {kind} {name}");
        }
        for w in want {
            assert!(ours.contains(w), "no {w:?} in:\n{ours}");
        }
    }
}
