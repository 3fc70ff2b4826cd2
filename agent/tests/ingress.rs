//! The built-in ingress controller on real Docker, as a user checks it
//! with kubectl and curl from the host: two Deployments (`alpha` on
//! bosun.local/web:1, `beta` on web:2; each pod serves its own name at
//! `/name`, `/beta/name` and `/betax/name`, and its request headers at
//! `/cgi-bin/env`) behind Services, and one Ingress with no class:
//!
//! - the agent made IngressClass `bosun` (the default) and admission gave
//!   the Ingress `spec.ingressClassName: bosun`;
//! - host `a.test` routes `/` to alpha and `/beta` (by path element:
//!   not `/betax`) to beta; `*.b.test` routes to beta (by the Service's
//!   port name, to the pods' port 80 behind Service port 8080); another
//!   host gets 404;
//! - over HTTPS the certificate of the TLS Secret is presented by SNI
//!   for `a.test` and `x.b.test` (curl checks it against the test's own
//!   CA-less self-signed certificate);
//! - the backends see `X-Forwarded-For`, `-Proto` and `-Host`;
//! - `status.loadBalancer.ingress` holds the node's address, and
//!   `kubectl get ingress` prints kubectl's columns with it;
//! - `kubectl explain` and `kubectl describe` know the kind;
//! - a changed Ingress routes anew within seconds.
//!
//! The ingress listens on free ports of the host (`--ingress-http-port`,
//! `--ingress-https-port`), never on 80/443.

mod cluster;

use std::process::Command;
use std::time::Duration;

use cluster::{kubectl_stdout, run, Cluster};

const UP: Duration = Duration::from_secs(120);

fn free_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

const WEB_SCRIPT: &str = r#"mkdir -p /www/beta /www/betax /www/cgi-bin
hostname >/www/name; hostname >/www/beta/name; hostname >/www/betax/name
printf '#!/bin/sh\necho Content-Type: text/plain\necho\nenv\n' >/www/cgi-bin/env
chmod 755 /www/cgi-bin/env
exec httpd -f -p 80 -h /www"#;

fn manifest() -> String {
    let deploy = |name: &str, image: &str| {
        format!(
            r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: {image}
        command: ["sh", "-c", {script}]
---
"#,
            script = serde_json::to_string(WEB_SCRIPT).unwrap()
        )
    };
    let mut out = deploy("alpha", "bosun.local/web:1");
    out.push_str(&deploy("beta", "bosun.local/web:2"));
    out.push_str(
        r#"apiVersion: v1
kind: Service
metadata: {name: alpha}
spec:
  selector: {app: alpha}
  ports: [{port: 80, targetPort: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: beta}
spec:
  selector: {app: beta}
  ports: [{name: http, port: 8080, targetPort: 80}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  tls:
  - hosts: [a.test, "*.b.test"]
    secretName: tls-ab
  rules:
  - host: a.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: alpha, port: {number: 80}}}}
      - {path: /beta, pathType: Prefix, backend: {service: {name: beta, port: {name: http}}}}
  - host: "*.b.test"
    http:
      paths:
      - {path: /, pathType: ImplementationSpecific, backend: {service: {name: beta, port: {name: http}}}}
"#,
    );
    out
}

/// `curl` of `scheme://host:port/path` sent to 127.0.0.1: (status, body).
fn curl(scheme: &str, host: &str, port: u16, path: &str, cacert: Option<&str>) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "--max-time", "5", "-w", "\n%{http_code}"])
        .arg("--resolve")
        .arg(format!("{host}:{port}:127.0.0.1"))
        .arg(format!("{scheme}://{host}:{port}{path}"));
    if let Some(ca) = cacert {
        cmd.args(["--cacert", ca]);
    }
    let out = run(&mut cmd);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.trim().to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ingress_routes_hosts_and_paths_over_http_and_https() {
    let (http, https) = (free_port(), free_port());
    let c = Cluster::start_with(&[
        "--ingress-http-port",
        &http.to_string(),
        "--ingress-https-port",
        &https.to_string(),
    ]);
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let kubectl = |args: &[&str]| {
        kubectl_stdout(run(c.kubectl().args(args)), args, || {
            format!(
                "agent log:\n{}\ncontrol log:\n{}",
                cluster::tail(&c.agent_log(), 40),
                cluster::tail(&c.control_log(), 20)
            )
        })
    };

    // The agent's IngressClass, the default, before the Ingress is made.
    c.poll("IngressClass bosun", UP, || async {
        let out = run(c
            .kubectl()
            .args(["get", "ingressclass", "bosun", "--no-headers"]));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.contains("bosun.dev/ingress").then_some(())
    })
    .await;
    let annotations = kubectl(&[
        "get",
        "ingressclass",
        "bosun",
        "-o",
        "jsonpath={.metadata.annotations}",
    ]);
    assert!(
        annotations.contains(r#""ingressclass.kubernetes.io/is-default-class":"true""#),
        "{annotations}"
    );

    // A self-signed certificate for both hosts, in a TLS Secret.
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["a.test".to_string(), "*.b.test".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let cert_path = c.dir.path().join("tls.crt");
    let key_path = c.dir.path().join("tls.key");
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let cert_path = cert_path.to_str().unwrap().to_string();
    let key_path = key_path.to_str().unwrap().to_string();
    kubectl(&[
        "create", "secret", "tls", "tls-ab", "--cert", &cert_path, "--key", &key_path,
    ]);
    let manifest_path = c.dir.path().join("ingress.yaml");
    std::fs::write(&manifest_path, manifest()).unwrap();
    kubectl(&["apply", "-f", manifest_path.to_str().unwrap()]);

    // The class was given at admission.
    let class = kubectl(&[
        "get",
        "ingress",
        "web",
        "-o",
        "jsonpath={.spec.ingressClassName}",
    ]);
    assert_eq!(class, "bosun");

    // Routing, once both pods are ready behind it.
    c.poll("a.test/name to reach alpha", UP, || async {
        let (code, body) = curl("http", "a.test", http, "/name", None);
        (code == 200 && body.starts_with("alpha-")).then_some(())
    })
    .await;
    c.poll("a.test/beta/name to reach beta", UP, || async {
        let (code, body) = curl("http", "a.test", http, "/beta/name", None);
        (code == 200 && body.starts_with("beta-")).then_some(())
    })
    .await;
    let (code, body) = curl("http", "a.test", http, "/betax/name", None);
    assert_eq!((code, body.starts_with("alpha-")), (200, true), "{body}");
    let (code, body) = curl("http", "x.b.test", http, "/name", None);
    assert_eq!((code, body.starts_with("beta-")), (200, true), "{body}");
    let (code, body) = curl("http", "a.test", http, "/", None);
    assert_eq!((code, body.as_str()), (200, "web v1"));
    let (code, body) = curl("http", "x.b.test", http, "/", None);
    assert_eq!((code, body.as_str()), (200, "web v2"));
    // Wildcards match one label only, and other hosts match nothing.
    for host in ["other.test", "b.test", "y.x.b.test"] {
        let (code, _) = curl("http", host, http, "/name", None);
        assert_eq!(code, 404, "{host}");
    }

    // HTTPS with the Secret's certificate, chosen by SNI.
    let (code, body) = curl("https", "a.test", https, "/name", Some(&cert_path));
    assert_eq!((code, body.starts_with("alpha-")), (200, true), "{body}");
    let (code, body) = curl("https", "x.b.test", https, "/beta/name", Some(&cert_path));
    assert_eq!((code, body.starts_with("beta-")), (200, true), "{body}");

    // What the backends are told.
    let (_, env) = curl("http", "a.test", http, "/cgi-bin/env", None);
    assert!(env.contains("HTTP_X_FORWARDED_FOR=127.0.0.1"), "{env}");
    assert!(
        env.lines().any(|l| l == "HTTP_X_FORWARDED_PROTO=http"),
        "{env}"
    );
    assert!(
        env.contains(&format!("HTTP_X_FORWARDED_HOST=a.test:{http}")),
        "{env}"
    );
    assert!(env.contains(&format!("HTTP_HOST=a.test:{http}")), "{env}");
    let (_, env) = curl("https", "a.test", https, "/cgi-bin/env", Some(&cert_path));
    assert!(env.contains("HTTP_X_FORWARDED_PROTO=https"), "{env}");

    // The node's address in the status, as kubectl shows it.
    c.poll("status.loadBalancer to list the node", UP, || async {
        let out = run(c.kubectl().args([
            "get",
            "ingress",
            "web",
            "-o",
            "jsonpath={.status.loadBalancer.ingress[*].ip}",
        ]));
        (String::from_utf8_lossy(&out.stdout) == "127.0.0.1").then_some(())
    })
    .await;
    let table = kubectl(&["get", "ingress"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]
    );
    let row = lines.next().unwrap();
    assert!(
        row.starts_with("web") && row.contains("bosun   a.test,*.b.test   127.0.0.1   80, 443"),
        "{table}"
    );
    let classes = kubectl(&["get", "ingressclass"]);
    assert!(classes.starts_with("NAME"), "{classes}");
    assert!(
        classes.contains("CONTROLLER") && classes.contains("PARAMETERS"),
        "{classes}"
    );

    // kubectl explain (OpenAPI) and describe know the kind.
    let explain = kubectl(&["explain", "ingress.spec.rules.http.paths.pathType"]);
    assert!(explain.contains("pathType"), "{explain}");
    let describe = kubectl(&["describe", "ingress", "web"]);
    assert!(
        describe.contains("Ingress Class:")
            && describe.contains("bosun")
            && describe.contains("a.test"),
        "{describe}"
    );

    // A changed Ingress: a.test's `/` now goes to beta.
    kubectl(&[
        "patch",
        "ingress",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/rules/0/http/paths/0/backend/service","value":{"name":"beta","port":{"number":8080}}}]"#,
    ]);
    c.poll(
        "a.test/name to reach beta after the change",
        Duration::from_secs(10),
        || async {
            let (code, body) = curl("http", "a.test", http, "/name", None);
            (code == 200 && body.starts_with("beta-")).then_some(())
        },
    )
    .await;
}
