//! The seeds' pod examples (`examples/`) on real Docker, reaching the
//! state the seeds describe. Pods are bound to the test node directly, as
//! the seeds do for testing until the scheduler exists.

mod cluster;

use std::time::Duration;

use cluster::Cluster;
use serde_json::Value;

const UP: Duration = Duration::from_secs(60);

fn example(file: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

/// The body of a plain HTTP/1.0 GET, if the server answered 200.
fn http_get(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(conn, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut response = String::new();
    conn.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200")
        .then(|| body.to_string())
        .or_else(|| head.starts_with("HTTP/1.1 200").then(|| body.to_string()))
}

/// A TCP port of this machine that nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn running_and_ready(p: &Value) -> bool {
    p["status"]["phase"] == "Running"
        && p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_process_namespace_example_shows_every_process() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(&client, example("share-process-namespace.yaml"))
        .await;
    c.wait_pod(&client, "nginx", "Running", UP, running_and_ready)
        .await;
    let ps = c.exec("nginx", "shell", &["ps", "ax"]);
    assert!(ps.contains("/pause"), "the pause process is visible:\n{ps}");
    assert!(
        ps.contains("httpd -f -p 80"),
        "the web container's process is visible:\n{ps}"
    );
    let page = c.exec("nginx", "shell", &["wget", "-qO-", "http://127.0.0.1/"]);
    assert!(page.contains("web v1"), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javaweb_init_container_fills_the_volume_the_server_serves_on_the_host_port() {
    let c = Cluster::start();
    let client = c.client().await;
    // The example's host port 8001 may be taken on this machine (or by a
    // test running beside this one): the same pod on a free port.
    let host_port = free_port();
    let mut pod = example("javaweb-2.yaml");
    assert_eq!(pod["spec"]["containers"][0]["ports"][0]["hostPort"], 8001);
    pod["spec"]["containers"][0]["ports"][0]["hostPort"] = host_port.into();
    c.create_pod(&client, pod).await;
    let p = c
        .wait_pod(&client, "javaweb-2", "Running", UP, running_and_ready)
        .await;
    assert_eq!(
        p["status"]["initContainerStatuses"][0]["state"]["terminated"]["reason"],
        "Completed"
    );
    // Through the pod's own network...
    let served = c.exec(
        "javaweb-2",
        "tomcat",
        &["wget", "-qO-", "http://127.0.0.1:8080/sample.war"],
    );
    assert_eq!(served.trim(), "sample");
    // ...and through the host port published on the sandbox.
    let from_host = cluster::wait_for("the host port to answer", Duration::from_secs(20), || {
        http_get(&format!("127.0.0.1:{host_port}"), "/sample.war")
    });
    assert_eq!(from_host.trim(), "sample");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_example_flips_ready_both_ways_without_restarts() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(&client, example("readiness-http.yaml")).await;
    let not_ready = |p: &Value| p["status"]["phase"] == "Running" && !running_and_ready(p);
    c.wait_pod(
        &client,
        "readiness-http",
        "Running, not Ready",
        UP,
        not_ready,
    )
    .await;
    c.exec("readiness-http", "web", &["touch", "/www/ready"]);
    c.wait_pod(&client, "readiness-http", "Ready", UP, running_and_ready)
        .await;
    c.exec("readiness-http", "web", &["rm", "/www/ready"]);
    let p = c
        .wait_pod(&client, "readiness-http", "not Ready again", UP, not_ready)
        .await;
    assert_eq!(
        p["status"]["containerStatuses"][0]["restartCount"], 0,
        "readiness never restarts"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostpath_example_writes_to_the_node() {
    let c = Cluster::start();
    let client = c.client().await;
    // The example's directory, moved into this test's temp dir.
    let dir = c.dir.path().join("hostpath-demo");
    let mut pod = example("hostpath.yaml");
    pod["spec"]["volumes"][0]["hostPath"]["path"] = Value::String(dir.display().to_string());
    c.create_pod(&client, pod).await;
    c.wait_pod(&client, "hostpath-demo", "Succeeded", UP, |p| {
        p["status"]["phase"] == "Succeeded"
    })
    .await;
    let visitors = std::fs::read_to_string(dir.join("visitors")).expect("the file the pod wrote");
    assert_eq!(
        visitors.trim(),
        "hostpath-demo",
        "the pod's hostname, written on the node"
    );
}
