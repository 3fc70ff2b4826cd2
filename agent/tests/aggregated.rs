//! An aggregated API on real Docker: the agent's `aggregated_server`
//! example runs in a pod behind a Service, registered by an APIService
//! whose caBundle is a CA this test makes. The control plane checks it
//! (Available=True), proxies `kubectl get --raw` to it with the caller's
//! user name in `X-Remote-User` and its front-proxy client certificate
//! (the server refuses any other), lists its `widgets` in `kubectl
//! api-resources`, refuses a user without RBAC on them with a 403 of its
//! own, and turns Available False (MissingEndpoints) once the server's
//! Deployment is scaled to 0.

mod cluster;

use std::time::Duration;

use base64::Engine;
use cluster::{ok, repo_root, run, Cluster};
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(120);
const IMAGE: &str = "bosun.local/aggregated-server:1";
const API_SERVICE: &str = "v1.demo.bosun.dev";
const WIDGETS: &str = "/apis/demo.bosun.dev/v1/namespaces/default/widgets";

/// The image of the agent's `aggregated_server` example, (re)built by
/// `scripts/build-images.sh --aggregated-server` when the binary changed.
fn aggregated_server_image() -> &'static str {
    let status = std::process::Command::new("bash")
        .arg(repo_root().join("scripts/build-images.sh"))
        .arg("--aggregated-server")
        .env("CARGO", env!("CARGO"))
        .status()
        .expect("scripts/build-images.sh");
    assert!(status.success(), "building the aggregated server image");
    IMAGE
}

/// A CA and a serving certificate it signed for `aggregated.default.svc`:
/// (CA PEM, certificate PEM, key PEM).
fn serving_certificate() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(DnType::CommonName, "demo-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["aggregated.default.svc".to_string()]).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

fn apply(c: &Cluster, name: &str, obj: &Value) {
    let path = c.dir.path().join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_vec(obj).unwrap()).unwrap();
    ok(c.kubectl().arg("apply").arg("-f").arg(&path));
}

/// `kubectl get --raw PATH [extra]`: (success, stdout, stderr).
fn raw(c: &Cluster, path: &str, extra: &[&str]) -> (bool, String, String) {
    let out = run(c
        .kubectl()
        .args(["--request-timeout=60s", "get", "--raw", path])
        .args(extra));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The APIService's Available condition: (status, reason).
fn available(c: &Cluster) -> Option<(String, String)> {
    let out = run(c
        .kubectl()
        .args(["get", "apiservice", API_SERVICE, "-o", "json"]));
    let obj: Value = serde_json::from_slice(&out.stdout).ok()?;
    let cond = obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")?
        .clone();
    Some((
        cond["status"].as_str()?.to_string(),
        cond["reason"].as_str()?.to_string(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apiservice_backed_by_a_pod_answers_through_kubectl() {
    let image = aggregated_server_image();
    let c = Cluster::start();

    // What kube-apiserver publishes for extension servers.
    let auth: Value = serde_json::from_str(&ok(c.kubectl().args([
        "get",
        "configmap",
        "-n",
        "kube-system",
        "extension-apiserver-authentication",
        "-o",
        "json",
    ])))
    .unwrap();
    let requestheader_ca = auth["data"]["requestheader-client-ca-file"]
        .as_str()
        .expect("requestheader-client-ca-file")
        .to_string();
    assert!(requestheader_ca.contains("BEGIN CERTIFICATE"));
    assert_eq!(
        auth["data"]["requestheader-username-headers"],
        "[\"X-Remote-User\"]"
    );
    assert!(auth["data"]["client-ca-file"]
        .as_str()
        .is_some_and(|ca| ca.contains("BEGIN CERTIFICATE")));
    // bosun's own group versions are Local APIServices.
    let listed = ok(c.kubectl().args(["get", "apiservices"]));
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("v1.apps ") && l.contains("Local") && l.contains("True")),
        "{listed}"
    );

    let (ca, cert, key) = serving_certificate();
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    apply(
        &c,
        "secret",
        &json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "aggregated-tls", "namespace": "default"},
            "data": {"tls.crt": b64(&cert), "tls.key": b64(&key),
                     "requestheader-ca.crt": b64(&requestheader_ca)}}),
    );
    apply(
        &c,
        "deployment",
        &json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "aggregated", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "aggregated"}},
                "template": {"metadata": {"labels": {"app": "aggregated"}},
                    "spec": {"terminationGracePeriodSeconds": 1,
                        "containers": [{"name": "server", "image": image,
                            "args": ["/tls/tls.crt", "/tls/tls.key", "/tls/requestheader-ca.crt", "8443"],
                            "ports": [{"name": "https", "containerPort": 8443}],
                            "readinessProbe": {"tcpSocket": {"port": 8443}, "periodSeconds": 1},
                            "volumeMounts": [{"name": "tls", "mountPath": "/tls"}]}],
                        "volumes": [{"name": "tls", "secret": {"secretName": "aggregated-tls"}}]}}}}),
    );
    apply(
        &c,
        "service",
        &json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "aggregated", "namespace": "default"},
            "spec": {"selector": {"app": "aggregated"},
                "ports": [{"name": "https", "port": 443, "targetPort": "https"}]}}),
    );
    apply(
        &c,
        "apiservice",
        &json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": API_SERVICE},
            "spec": {"group": "demo.bosun.dev", "version": "v1",
                "groupPriorityMinimum": 1000, "versionPriority": 15,
                "caBundle": b64(&ca),
                "service": {"namespace": "default", "name": "aggregated"}}}),
    );

    c.poll("the APIService to be Available", UP, || async {
        (available(&c) == Some(("True".into(), "Passed".into()))).then_some(())
    })
    .await;
    let listed = ok(c.kubectl().args(["get", "apiservice", API_SERVICE]));
    assert!(
        listed.contains("default/aggregated") && listed.contains("True"),
        "{listed}"
    );

    // Proxied, with the caller's name: the server echoes X-Remote-User.
    let (success, out, err) = raw(&c, WIDGETS, &[]);
    assert!(
        success,
        "{err}\ncontrol log:\n{}",
        cluster::tail(&c.control_log(), 30)
    );
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["kind"], "WidgetList");
    assert_eq!(list["items"][0]["spec"]["user"], "bosun-admin");
    assert!(list["items"][0]["spec"]["groups"]
        .as_array()
        .unwrap()
        .contains(&json!("system:masters")));

    // Discovery merged: kubectl finds the resource and lists it.
    let resources = c
        .poll("kubectl api-resources to list widgets", UP, || async {
            let out = run(c
                .kubectl()
                .args(["api-resources", "--api-group=demo.bosun.dev"]));
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.lines()
                .any(|l| l.starts_with("widgets ") && l.contains("demo.bosun.dev/v1"))
                .then_some(text)
        })
        .await;
    assert!(resources.contains("Widget"), "{resources}");
    let got = ok(c.kubectl().args(["get", "widgets", "-n", "default"]));
    assert!(got.contains("for-bosun-admin"), "{got}");

    // A user without RBAC on widgets is refused by bosun itself.
    let (success, out, err) = raw(&c, WIDGETS, &["--as=alice"]);
    assert!(!success, "{out}");
    assert!(
        err.contains(
            "widgets.demo.bosun.dev is forbidden: User \"alice\" cannot list resource \"widgets\" in API group \"demo.bosun.dev\" in the namespace \"default\""
        ),
        "{err}"
    );

    // No endpoints: Available turns False and requests get a 503.
    ok(c.kubectl()
        .args(["scale", "deployment", "aggregated", "--replicas=0"]));
    c.poll("the APIService to lose its endpoints", UP, || async {
        (available(&c) == Some(("False".into(), "MissingEndpoints".into()))).then_some(())
    })
    .await;
    let listed = ok(c.kubectl().args(["get", "apiservice", API_SERVICE]));
    assert!(listed.contains("False (MissingEndpoints)"), "{listed}");
    let (success, _, err) = raw(&c, WIDGETS, &[]);
    assert!(!success && err.contains("service unavailable"), "{err}");
}
