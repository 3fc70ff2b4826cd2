//! Admission webhooks on real Docker, as policy engines use them: the
//! agent's `webhook_server` example runs in a Deployment behind a Service
//! (TLS with a serving certificate for `webhook.default.svc` from a test
//! CA, in a Secret volume); a MutatingWebhookConfiguration and a
//! ValidatingWebhookConfiguration name it by Service with the CA as
//! `caBundle`. With kubectl: a ConfigMap labelled `deny: "true"` is
//! refused with the webhook's message, another gets the label
//! `mutated: "true"` and the webhook's warning; with the webhook's pod
//! gone, `failurePolicy: Fail` refuses writes in upstream's words and
//! `Ignore` lets them through. A CRD's conversion webhook (the same
//! server's `/convert`) serves a Widget in v1 and v2 alike, until its pod
//! is gone.

mod cluster;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use cluster::{ok, run, Cluster};
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(120);
/// The namespace whose ConfigMaps the webhooks see.
const NS: &str = "hooked";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The image of the agent's `webhook_server` example, (re)built by
/// `scripts/build-images.sh --webhook-server` when the binary changed.
fn webhook_server_image() -> &'static str {
    let status = Command::new("bash")
        .arg(repo_root().join("scripts/build-images.sh"))
        .arg("--webhook-server")
        .env("CARGO", env!("CARGO"))
        .status()
        .expect("scripts/build-images.sh");
    assert!(status.success(), "building the webhook server image");
    "bosun.local/webhook-server:1"
}

/// kubectl with `args`: (success, stdout, stderr).
fn kubectl(c: &Cluster, args: &[&str]) -> (bool, String, String) {
    let out = run(c.kubectl().arg("--request-timeout=60s").args(args));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn apply(c: &Cluster, name: &str, yaml: &str) -> (bool, String, String) {
    let path = c.dir.path().join(name);
    std::fs::write(&path, yaml).unwrap();
    kubectl(c, &["apply", "-f", path.to_str().unwrap()])
}

fn config_map(name: &str, labels: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {NS}\n  labels: {labels}\ndata:\n  k: v\n"
    )
}

/// A CA and a serving certificate for `webhook.default.svc` signed by it:
/// (CA PEM, certificate PEM, key PEM).
fn certificates() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "webhook-e2e-ca");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["webhook.default.svc".to_string()]).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

fn server_manifest(image: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: webhook
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {{app: webhook}}
  template:
    metadata:
      labels: {{app: webhook}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: server
        image: {image}
        ports:
        - {{name: https, containerPort: 8443}}
        readinessProbe:
          tcpSocket: {{port: 8443}}
          periodSeconds: 1
        volumeMounts:
        - {{name: tls, mountPath: /tls, readOnly: true}}
      volumes:
      - name: tls
        secret: {{secretName: webhook-tls}}
---
apiVersion: v1
kind: Service
metadata:
  name: webhook
  namespace: default
spec:
  selector: {{app: webhook}}
  ports:
  - {{port: 443, targetPort: https}}
"#
    )
}

fn configs_manifest(ca_bundle: &str, failure_policy: &str) -> String {
    let hook = |name: &str, path: &str| {
        format!(
            r#"- name: {name}
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: {failure_policy}
  timeoutSeconds: 5
  namespaceSelector:
    matchLabels: {{webhook-e2e: "on"}}
  rules:
  - operations: [CREATE, UPDATE]
    apiGroups: [""]
    apiVersions: [v1]
    resources: [configmaps]
  clientConfig:
    caBundle: {ca_bundle}
    service: {{namespace: default, name: webhook, path: {path}}}
"#
        )
    };
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata:\n  name: e2e-mutate\nwebhooks:\n{}---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: e2e-validate\nwebhooks:\n{}",
        hook("mutate.e2e.bosun.dev", "/mutate"),
        hook("validate.e2e.bosun.dev", "/validate"),
    )
}

/// The ready addresses of the `webhook` Service's Endpoints.
fn endpoint_ips(c: &Cluster) -> String {
    let (_, out, _) = kubectl(
        c,
        &[
            "get",
            "endpoints",
            "webhook",
            "-o",
            "jsonpath={.subsets[*].addresses[*].ip}",
        ],
    );
    out.trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_refuse_mutate_warn_and_follow_their_failure_policy() {
    let image = webhook_server_image();
    let c = Cluster::start();
    let (ca, cert, key) = certificates();
    let cert_path = c.dir.path().join("tls.crt");
    let key_path = c.dir.path().join("tls.key");
    std::fs::write(&cert_path, &cert).unwrap();
    std::fs::write(&key_path, &key).unwrap();
    ok(c.kubectl()
        .args(["create", "secret", "tls", "webhook-tls", "--cert"])
        .arg(&cert_path)
        .arg("--key")
        .arg(&key_path));
    let (applied, _, err) = apply(&c, "server.yaml", &server_manifest(image));
    assert!(applied, "{err}");
    ok(c.kubectl().args(["create", "namespace", NS]));
    ok(c.kubectl()
        .args(["label", "namespace", NS, "webhook-e2e=on"]));
    c.poll("the webhook server's endpoint", UP, || async {
        (!endpoint_ips(&c).is_empty()).then_some(())
    })
    .await;

    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&ca);
    let (applied, _, err) = apply(&c, "configs.yaml", &configs_manifest(&ca_bundle, "Fail"));
    assert!(applied, "{err}");
    let (_, table, _) = kubectl(
        &c,
        &["get", "validatingwebhookconfigurations", "e2e-validate"],
    );
    assert!(
        table
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .eq(["NAME", "WEBHOOKS", "AGE"])
            && table.contains("e2e-validate   1"),
        "{table}"
    );

    // The configurations reach the API server's cache from a watch: until
    // they do, a labelled ConfigMap is still let in (and removed again).
    let denied = config_map("denied", "{deny: \"true\"}");
    let refusal = c
        .poll(
            "the validating webhook to refuse",
            Duration::from_secs(60),
            || async {
                let (created, _, err) = apply(&c, "denied.yaml", &denied);
                if created {
                    kubectl(&c, &["delete", "configmap", "-n", NS, "denied"]);
                    return None;
                }
                Some(err)
            },
        )
        .await;
    assert!(
        refusal.contains(
            "admission webhook \"validate.e2e.bosun.dev\" denied the request: objects labelled deny=true are refused by webhook-server"
        ),
        "{refusal}\ncontrol log:\n{}",
        cluster::tail(&c.control_log(), 30)
    );

    let (created, _, err) = apply(&c, "plain.yaml", &config_map("plain", "{app: demo}"));
    assert!(created, "{err}");
    assert!(err.contains("Warning: webhook-server saw plain"), "{err}");
    let (_, labels, _) = kubectl(
        &c,
        &[
            "get",
            "configmap",
            "-n",
            NS,
            "plain",
            "-o",
            "jsonpath={.metadata.labels}",
        ],
    );
    assert!(
        labels.contains(r#""mutated":"true""#) && labels.contains(r#""app":"demo""#),
        "{labels}"
    );

    // The webhook's pod gone: Fail refuses, in upstream's words.
    ok(c.kubectl()
        .args(["scale", "deployment", "webhook", "--replicas=0"]));
    c.poll("the webhook's endpoints to empty", UP, || async {
        endpoint_ips(&c).is_empty().then_some(())
    })
    .await;
    let (created, _, err) = apply(&c, "down.yaml", &config_map("while-down", "{app: demo}"));
    assert!(
        !created,
        "a write got through a failing webhook with failurePolicy Fail"
    );
    assert!(
        err.contains("Internal error occurred: failed calling webhook \"mutate.e2e.bosun.dev\": failed to call webhook: Post \"https://webhook.default.svc:443/mutate?timeout=5s\"")
            && err.contains("no endpoints available for service \"webhook\""),
        "{err}"
    );

    // Ignore: the same write goes through, unmutated.
    let (applied, _, err) = apply(&c, "configs.yaml", &configs_manifest(&ca_bundle, "Ignore"));
    assert!(applied, "{err}");
    c.poll(
        "failurePolicy Ignore to let the write in",
        Duration::from_secs(60),
        || async {
            let (created, _, _) = apply(&c, "down.yaml", &config_map("while-down", "{app: demo}"));
            created.then_some(())
        },
    )
    .await;
    let (_, labels, _) = kubectl(
        &c,
        &[
            "get",
            "configmap",
            "-n",
            NS,
            "while-down",
            "-o",
            "jsonpath={.metadata.labels}",
        ],
    );
    assert!(!labels.contains("mutated"), "{labels}");
}

/// A Widget CRD serving v1 (stored; `spec.size`, a string) and v2
/// (`spec.replicas`, a number), converted by the webhook server's
/// `/convert`; `ca_bundle` as the manifest gives it.
fn widget_crd(ca_bundle: &str) -> String {
    let version = |name: &str, storage: bool, field: &str, type_: &str| {
        format!(
            r#"  - name: {name}
    served: true
    storage: {storage}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              {field}: {{type: {type_}}}
"#
        )
    };
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget}}
  versions:
{}{}  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        service: {{namespace: default, name: webhook, path: /convert}}
        caBundle: |
{ca_bundle}
"#,
        version("v1", true, "size", "string"),
        version("v2", false, "replicas", "integer"),
    )
}

/// `kubectl get` of a Widget in `version`, printing `jsonpath`.
fn widget(c: &Cluster, version: &str, name: &str, jsonpath: &str) -> (bool, String, String) {
    let resource = format!("widgets.{version}.example.com");
    let jsonpath = format!("jsonpath={jsonpath}");
    kubectl(c, &["get", &resource, name, "-o", &jsonpath])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversion_webhook_serves_every_version_of_a_custom_resource() {
    let image = webhook_server_image();
    let c = Cluster::start();
    let (ca, cert, key) = certificates();
    let cert_path = c.dir.path().join("tls.crt");
    let key_path = c.dir.path().join("tls.key");
    std::fs::write(&cert_path, &cert).unwrap();
    std::fs::write(&key_path, &key).unwrap();
    ok(c.kubectl()
        .args(["create", "secret", "tls", "webhook-tls", "--cert"])
        .arg(&cert_path)
        .arg("--key")
        .arg(&key_path));
    let (applied, _, err) = apply(&c, "server.yaml", &server_manifest(image));
    assert!(applied, "{err}");
    c.poll("the webhook server's endpoint", UP, || async {
        (!endpoint_ips(&c).is_empty()).then_some(())
    })
    .await;

    // The caBundle wrapped over lines, as `base64` prints it: Go's
    // decoder skips the line breaks, so does bosun's.
    let flat = base64::engine::general_purpose::STANDARD.encode(&ca);
    let wrapped: Vec<String> = flat
        .as_bytes()
        .chunks(76)
        .map(|l| format!("          {}", std::str::from_utf8(l).unwrap()))
        .collect();
    let (applied, _, err) = apply(&c, "crd.yaml", &widget_crd(&wrapped.join("\n")));
    assert!(applied, "{err}");
    ok(c.kubectl().args([
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/widgets.example.com",
    ]));

    // Created in v1 (stored as it is), read in v2 through the webhook.
    let small = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: small\nspec:\n  size: \"3\"\n";
    let (created, _, err) = apply(&c, "small.yaml", small);
    assert!(created, "{err}");
    let (read, out, err) = widget(&c, "v2", "small", "{.apiVersion} {.spec.replicas}");
    assert!(
        read && out == "example.com/v2 3",
        "{out}\n{err}\ncontrol log:\n{}",
        cluster::tail(&c.control_log(), 30)
    );

    // Created in v2 (converted to v1 to be stored), read in v1.
    let big =
        "apiVersion: example.com/v2\nkind: Widget\nmetadata:\n  name: big\nspec:\n  replicas: 5\n";
    let (created, _, err) = apply(&c, "big.yaml", big);
    assert!(created, "{err}");
    let (read, out, err) = widget(&c, "v1", "big", "{.apiVersion} {.spec.size}");
    assert!(read && out == "example.com/v1 5", "{out}\n{err}");
    // A list in v2 is converted in one review; a watch's events too.
    let (_, out, err) = kubectl(
        &c,
        &[
            "get",
            "widgets.v2.example.com",
            "-o",
            "jsonpath={.items[*].spec.replicas}",
        ],
    );
    assert_eq!(out, "5 3", "{err}");
    let (_, events, err) = kubectl(
        &c,
        &[
            "get",
            "--raw",
            "/apis/example.com/v2/namespaces/default/widgets?watch=true&timeoutSeconds=2",
        ],
    );
    let replicas: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|e| e["object"]["spec"]["replicas"].clone())
        .collect();
    assert_eq!(replicas, vec![json!(5), json!(3)], "{events}\n{err}");

    // The webhook's pod gone: a read in v2 fails in upstream's words,
    // the stored version still reads.
    ok(c.kubectl()
        .args(["scale", "deployment", "webhook", "--replicas=0"]));
    c.poll("the webhook's endpoints to empty", UP, || async {
        endpoint_ips(&c).is_empty().then_some(())
    })
    .await;
    let (read, _, err) = widget(&c, "v2", "small", "{.spec.replicas}");
    assert!(!read, "a v2 read with no conversion webhook");
    assert!(
        err.contains("Error from server: conversion webhook for example.com/v1, Kind=Widget failed: Post \"https://webhook.default.svc:443/convert?timeout=30s\": no endpoints available for service \"webhook\""),
        "{err}"
    );
    let (read, out, err) = widget(&c, "v1", "small", "{.spec.size}");
    assert!(read && out == "3", "{out}\n{err}");
}
