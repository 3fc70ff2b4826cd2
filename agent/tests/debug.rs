//! Ephemeral containers end to end: `kubectl debug --target` adds one to a
//! running pod through `pods/ephemeralcontainers`; the agent starts it once
//! in the pod's network namespace and the target's PID namespace; its log,
//! status and the pod's readiness are what a user checks; changing it
//! afterwards is refused as upstream refuses it.

mod cluster;

use std::process::Output;
use std::time::Duration;

use cluster::{Cluster, BUSYBOX};
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(90);

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn kubectl(c: &Cluster, args: &[&str]) -> Output {
    let mut cmd = c.kubectl();
    cmd.args(args);
    cluster::run(&mut cmd)
}

fn ready(p: &Value) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn ephemeral_status<'a>(p: &'a Value, name: &str) -> Option<&'a Value> {
    p["status"]["ephemeralContainerStatuses"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_debug_runs_an_ephemeral_container_beside_the_target() {
    let c = Cluster::start();
    let client = c.client().await;
    // An app that answers on 8080, under a process name the debugger looks for.
    let app = json!({"name": "app", "image": BUSYBOX,
        "command": ["sh", "-c",
            "mkdir -p /www && echo hello-from-app > /www/index.html && exec httpd -f -p 8080 -h /www"],
        "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1}});
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [app]}});
    c.create_pod(&client, pod).await;
    c.wait_pod(&client, "web", "Ready", UP, ready).await;

    let script = "ps; printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 127.0.0.1 8080";
    let out = kubectl(
        &c,
        &[
            "debug",
            "web",
            &format!("--image={BUSYBOX}"),
            "--image-pull-policy=IfNotPresent",
            "--target=app",
            "-c",
            "dbg",
            "--",
            "sh",
            "-c",
            script,
        ],
    );
    assert!(
        out.status.success(),
        "kubectl debug failed: {}\ncontrol log:\n{}",
        text(&out.stderr),
        cluster::tail(&c.control_log(), 30)
    );

    let p = c
        .wait_pod(&client, "web", "dbg terminated", UP, |p| {
            ephemeral_status(p, "dbg").is_some_and(|s| s["state"]["terminated"].is_object())
        })
        .await;
    let s = ephemeral_status(&p, "dbg").unwrap();
    assert_eq!(s["state"]["terminated"]["exitCode"], 0, "{s}");
    assert_eq!(s["image"], BUSYBOX);
    assert!(s["containerID"].as_str().unwrap().starts_with("docker://"));
    assert!(s["imageID"].as_str().is_some_and(|i| !i.is_empty()), "{s}");
    assert_eq!(s["ready"], false);

    // Shared PID namespace: the target's httpd is listed; shared network:
    // the app answered on localhost.
    let out = kubectl(&c, &["logs", "web", "-c", "dbg"]);
    let log = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        log.contains("httpd -f -p 8080"),
        "no target process in:\n{log}"
    );
    assert!(
        log.contains("hello-from-app"),
        "no answer from the app in:\n{log}"
    );

    // The pod stays Ready and Running, its app not restarted.
    let p = c.wait_pod(&client, "web", "still Ready", UP, ready).await;
    assert_eq!(p["status"]["phase"], "Running");
    assert_eq!(p["status"]["containerStatuses"][0]["restartCount"], 0);

    // Changing the ephemeral container is refused, through the subresource
    // and through a regular update.
    let mut changed = p.clone();
    changed["spec"]["ephemeralContainers"][0]["image"] = json!("other:1");
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), changed.to_string()).unwrap();
    let path = file.path().to_str().unwrap();
    let out = kubectl(
        &c,
        &[
            "replace",
            "--raw",
            "/api/v1/namespaces/default/pods/web/ephemeralcontainers",
            "-f",
            path,
        ],
    );
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("spec.ephemeralContainers[dbg]: Forbidden: existing ephemeral containers \\\"dbg\\\" may not be changed")
            || err.contains("spec.ephemeralContainers[dbg]: Forbidden: existing ephemeral containers \"dbg\" may not be changed"),
        "{err}"
    );
    let out = kubectl(&c, &["replace", "-f", path]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("pod updates may not change fields other than"),
        "{}",
        text(&out.stderr)
    );
    let image = kubectl(
        &c,
        &[
            "get",
            "pod",
            "web",
            "-o",
            "jsonpath={.spec.ephemeralContainers[0].image}",
        ],
    );
    assert_eq!(text(&image.stdout), BUSYBOX);
}
