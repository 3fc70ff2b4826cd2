//! The API server's proxy subresources on real Docker, as `kubectl get
//! --raw`, `kubectl proxy` and dashboards use them: `pods/NAME[:PORT]/proxy`,
//! `services/NAME:PORT/proxy` (by port number and by name) and
//! `nodes/NAME/proxy` reach a real pod's web server, a Service's endpoint
//! and the node's agent; a pod that records what it receives shows the
//! path and query arrive unchanged, a POST body streams through and the
//! caller's bearer token does not.

mod cluster;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use cluster::{ok, run, Cluster};
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(90);

fn web_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "web",
                "image": "bosun.local/web:1",
                "ports": [{"name": "http", "containerPort": 80}]
            }]
        }
    })
}

/// A pod that answers every request on 8080 with `ok` once it has read
/// it, and appends the request (line, headers and body) to /tmp/requests.
fn recorder_pod() -> Value {
    let handler = r#"#!/bin/sh
len=0
chunked=0
while IFS= read -r line; do
  l=$(printf %s "$line" | tr -d '\r')
  echo "$l" >>/tmp/requests
  case "$l" in
    [Cc]ontent-[Ll]ength:*) len=${l#*: } ;;
    [Tt]ransfer-[Ee]ncoding:*chunked*) chunked=1 ;;
    "") break ;;
  esac
done
if [ "$chunked" = 1 ]; then
  while IFS= read -r size; do
    n=$((0x$(printf %s "$size" | tr -d '\r')))
    [ "$n" -eq 0 ] && break
    dd bs=1 count="$n" 2>/dev/null >>/tmp/requests
    IFS= read -r _
  done
  echo >>/tmp/requests
elif [ "$len" -gt 0 ]; then
  head -c "$len" >>/tmp/requests && echo >>/tmp/requests
fi
printf 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok'
"#;
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "recorder", "namespace": "default"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "rec",
                "image": cluster::BUSYBOX,
                "env": [{"name": "HANDLER", "value": handler}],
                "command": ["sh", "-c",
                    "printf '%s' \"$HANDLER\" >/h && chmod +x /h && touch /tmp/requests && exec nc -ll -p 8080 -e /h"],
                "ports": [{"containerPort": 8080}]
            }]
        }
    })
}

/// `kubectl get --raw PATH`: (success, stdout, stderr).
fn raw(c: &Cluster, path: &str) -> (bool, String, String) {
    let out = run(c
        .kubectl()
        .args(["--request-timeout=60s", "get", "--raw", path]));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn raw_ok(c: &Cluster, path: &str) -> String {
    let (success, out, err) = raw(c, path);
    assert!(
        success,
        "kubectl get --raw {path} failed: {err}\ncontrol log:\n{}",
        cluster::tail(&c.control_log(), 30)
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_subresources_reach_pods_services_and_nodes() {
    let c = Cluster::start();
    let client = c.client().await;
    let manifest = c.dir.path().join("web-svc.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector:\n    app: web\n  ports:\n  - name: http\n    port: 8080\n    targetPort: http\n",
    )
    .unwrap();
    ok(c.kubectl().arg("apply").arg("-f").arg(&manifest));
    c.create_pod(&client, web_pod()).await;
    c.create_pod(&client, recorder_pod()).await;
    for name in ["web", "recorder"] {
        c.wait_pod(&client, name, "Ready", UP, |p| {
            p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
        .await;
    }

    // A pod: by its first container port, and by an explicit one.
    let ns = "/api/v1/namespaces/default";
    assert!(raw_ok(&c, &format!("{ns}/pods/web/proxy/")).contains("web v1"));
    assert!(raw_ok(&c, &format!("{ns}/pods/web:80/proxy/index.html")).contains("web v1"));
    // Nothing listens on 81: a 503 naming the address.
    let (success, _, err) = raw(&c, &format!("{ns}/pods/web:81/proxy/"));
    assert!(!success && err.contains("error trying to reach"), "{err}");

    // A Service, by its port number and by its port's name, once its
    // endpoint is there.
    let by_number = c
        .poll("services/web:8080/proxy to answer", UP, || async {
            let (success, out, _) = raw(&c, &format!("{ns}/services/web:8080/proxy/"));
            success.then_some(out)
        })
        .await;
    assert!(by_number.contains("web v1"), "{by_number}");
    assert!(raw_ok(&c, &format!("{ns}/services/web:http/proxy/")).contains("web v1"));
    let (success, _, err) = raw(&c, &format!("{ns}/services/web:9999/proxy/"));
    assert!(
        !success && err.contains("no service port 9999 found for service \"web\""),
        "{err}"
    );

    // The node's agent.
    let node = format!("/api/v1/nodes/{}/proxy", c.node);
    assert_eq!(raw_ok(&c, &format!("{node}/healthz")).trim(), "ok");
    let summary: Value = serde_json::from_str(&raw_ok(&c, &format!("{node}/stats/summary")))
        .expect("stats/summary is JSON");
    assert!(summary["pods"].is_array(), "{summary}");

    // What the pod receives: the path and query as asked, a POST's body,
    // and not the caller's token.
    let got = raw_ok(
        &c,
        &format!("{ns}/pods/recorder:8080/proxy/some/path?x=1&y=two"),
    );
    assert_eq!(got, "ok");
    let body = c.dir.path().join("body.json");
    std::fs::write(&body, "{\"hello\":\"proxy\"}").unwrap();
    let posted = ok(c
        .kubectl()
        .args(["--request-timeout=60s", "create", "--raw"])
        .arg(format!("{ns}/pods/recorder:8080/proxy/post"))
        .arg("-f")
        .arg(&body));
    assert_eq!(posted, "ok");
    let seen = c
        .poll("the recorder to have both requests", UP, || async {
            let seen = c.exec("recorder", "rec", &["cat", "/tmp/requests"]);
            seen.contains("{\"hello\":\"proxy\"}").then_some(seen)
        })
        .await;
    // (kubectl adds its own `timeout=` to the query; it passes on too.)
    assert!(
        seen.lines()
            .any(|l| l.starts_with("GET /some/path?") && l.ends_with("x=1&y=two HTTP/1.1")),
        "{seen}"
    );
    assert!(seen.contains("POST /post?timeout=1m0s HTTP/1.1"), "{seen}");
    let lower = seen.to_ascii_lowercase();
    assert!(
        !lower.contains("authorization"),
        "the token was passed on:\n{seen}"
    );
    assert!(
        !lower.contains("bearer"),
        "the token was passed on:\n{seen}"
    );

    // kubectl proxy in front of it, as a browser would use it; `.../proxy`
    // without a slash redirects to `.../proxy/`.
    let mut proxy = Command::new(cluster::kubectl_binary())
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args(["proxy", "--port=0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl proxy starts");
    let pid = proxy.id();
    let mut line = String::new();
    BufReader::new(proxy.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_string();
    let addr = format!("127.0.0.1:{port}");
    // (kubectl proxy refuses a Host other than localhost: curl sends it.)
    let page = Command::new("curl")
        .args(["-sf", "--max-time", "60"])
        .arg(format!(
            "http://{addr}/api/v1/namespaces/default/services/web:http/proxy/"
        ))
        .output()
        .unwrap();
    let redirect = Command::new("curl")
        .args(["-s", "--max-time", "60", "-o", "/dev/null"])
        .args(["-w", "%{http_code} %{redirect_url}"])
        .arg(format!(
            "http://{addr}/api/v1/namespaces/default/pods/web/proxy"
        ))
        .output()
        .unwrap();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = proxy.wait();
    let page = String::from_utf8_lossy(&page.stdout).into_owned();
    assert!(page.contains("web v1"), "{page}");
    let redirect = String::from_utf8_lossy(&redirect.stdout).into_owned();
    assert!(
        redirect.starts_with("301 ") && redirect.ends_with("/pods/web/proxy/"),
        "{redirect}"
    );
}
