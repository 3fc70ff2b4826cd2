//! `kubectl port-forward` and `bosun port-forward` end to end: the real
//! kubectl (WebSocket-tunnelled SPDY first, as 1.31+ does, and plain SPDY
//! with `KUBECTL_PORT_FORWARD_WEBSOCKETS=false`) and the bosun CLI (kube-rs's
//! WebSocket port-forward), through the control plane to the agent, into
//! `bosun.local/web` pods on real Docker.

mod cluster;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster::Cluster;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const UP: Duration = Duration::from_secs(60);
const WEB: &str = "bosun.local/web:1";

/// A running `port-forward`, killed when dropped.
struct Forward {
    child: Child,
    /// The local port it printed.
    port: u16,
    stderr: Arc<Mutex<String>>,
}

impl Forward {
    /// Starts `cmd` and waits for its first "Forwarding from 127.0.0.1:P".
    fn start(mut cmd: Command) -> Forward {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let what = format!("{cmd:?}");
        let mut child = cmd.spawn().expect("spawning port-forward");
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("Forwarding from 127.0.0.1:") {
                    let port = rest.split(' ').next().unwrap().parse::<u16>().unwrap();
                    let _ = tx.send(port);
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let port = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(p) => p,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{what} printed no \"Forwarding from\" line in 30s; stderr: {}",
                    stderr.lock().unwrap()
                );
            }
        };
        Forward {
            child,
            port,
            stderr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits for the process to end by itself within `deadline`.
    fn wait_exit(&mut self, deadline: Duration) -> std::process::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                start.elapsed() < deadline,
                "port-forward still running after {deadline:?}; stderr: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP/1.0 GET of `/` on 127.0.0.1:`port`: the whole response, or
/// what came before the connection ended. Fails after 20 s.
fn http_get(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connecting to the forward");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\nHost: web\r\n\r\n").unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out)
        .expect("the response ends within 20 s");
    String::from_utf8_lossy(&out).into_owned()
}

async fn web_pod(c: &Cluster, client: &Client, name: &str, labels: serde_json::Value) {
    c.create_pod(
        client,
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                "name": "web", "image": WEB,
                "ports": [{"name": "http", "containerPort": 80}]}, {
                // An echo server: a connection answers as soon as it is up.
                "name": "echo", "image": WEB,
                "command": ["nc", "-ll", "-p", "7000", "-e", "cat"]}]}}),
    )
    .await;
    c.wait_pod(client, name, "running", UP, |p| {
        p["status"]["phase"] == "Running"
    })
    .await;
}

fn kubectl_forward(c: &Cluster, target: &str, spec: &str, websockets: bool) -> Forward {
    let mut cmd = c.kubectl();
    cmd.args(["port-forward", target, spec]);
    if !websockets {
        cmd.env("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false");
    }
    Forward::start(cmd)
}

fn bosun_forward(c: &Cluster, target: &str, spec: &str) -> Forward {
    let mut cmd = c.bosun();
    cmd.args(["port-forward", target, spec]);
    Forward::start(cmd)
}

/// Sends `line` and reads it back from the echo server.
fn echo(conn: &mut TcpStream, line: &str) {
    conn.write_all(line.as_bytes()).unwrap();
    let mut back = vec![0u8; line.len()];
    conn.read_exact(&mut back)
        .unwrap_or_else(|e| panic!("echo of {line:?}: {e}"));
    assert_eq!(String::from_utf8_lossy(&back), line);
}

/// Two connections open at once over one forward to the echo port (the
/// first proven up before the second opens), then eight HTTP GETs in
/// parallel over the forward to `port`.
fn concurrent_connections_work(port: u16, echo_port: u16) {
    let open = || {
        let c = TcpStream::connect(("127.0.0.1", echo_port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c
    };
    let mut first = open();
    echo(&mut first, "first\n");
    let mut second = open();
    echo(&mut second, "second\n");
    echo(&mut first, "first again\n");
    drop((first, second));
    let threads: Vec<_> = (0..8)
        .map(|_| std::thread::spawn(move || http_get(port)))
        .collect();
    for t in threads {
        let body = t.join().unwrap();
        assert!(body.contains("web v1"), "{body:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_port_forward_reaches_the_pod_over_both_of_its_protocols() {
    let c = Cluster::start();
    let client = c.client().await;
    web_pod(&c, &client, "web", json!({"app": "web"})).await;
    for websockets in [true, false] {
        let f = kubectl_forward(&c, "pod/web", ":80", websockets);
        let body = http_get(f.port);
        assert!(
            body.contains(" 200 OK") && body.contains("web v1"),
            "websockets={websockets}: {body:?}; kubectl: {}",
            f.stderr()
        );
        let e = kubectl_forward(&c, "pod/web", ":7000", websockets);
        concurrent_connections_work(f.port, e.port);
    }
    // The pass-through WebSocket path (kube-rs, as `bosun` uses it).
    let f = bosun_forward(&c, "pod/web", ":80");
    assert!(http_get(f.port).contains("web v1"), "{}", f.stderr());
    let e = bosun_forward(&c, "pod/web", ":7000");
    concurrent_connections_work(f.port, e.port);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_nothing_listens_on_is_an_error_and_does_not_hang() {
    let c = Cluster::start();
    let client = c.client().await;
    web_pod(&c, &client, "web", json!({"app": "web"})).await;
    for websockets in [true, false] {
        let mut f = kubectl_forward(&c, "pod/web", ":81", websockets);
        let body = http_get(f.port);
        assert_eq!(body, "", "nothing comes back from a closed port");
        let expected = "error forwarding port 81 to pod web, uid ";
        let deadline = Instant::now() + Duration::from_secs(10);
        while !f.stderr().contains(expected) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        let stderr = f.stderr();
        assert!(
            stderr.contains(expected) && stderr.to_lowercase().contains("connection refused"),
            "websockets={websockets}: {stderr}"
        );
        // kubectl 1.32 then stops the whole forward, as against Kubernetes.
        f.wait_exit(Duration::from_secs(10));
    }
    let f = bosun_forward(&c, "pod/web", ":81");
    assert_eq!(http_get(f.port), "");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f.stderr().contains("error forwarding port 81") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        f.stderr().contains("an error occurred forwarding"),
        "{}",
        f.stderr()
    );
    // bosun goes on forwarding.
    assert_eq!(http_get(f.port), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bosun_port_forward_to_a_service_uses_its_target_port() {
    let c = Cluster::start();
    let client = c.client().await;
    web_pod(&c, &client, "web-1", json!({"app": "web"})).await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [
            {"name": "web", "port": 8080, "targetPort": "http"},
            {"name": "direct", "port": 9090, "targetPort": 80}]}}))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    // Named target port, then a numeric one; service port 8080 is not the pod's.
    for spec in [":8080", ":9090", ":web"] {
        let f = bosun_forward(&c, "svc/web", spec);
        let body = http_get(f.port);
        assert!(body.contains("web v1"), "{spec}: {body:?}; {}", f.stderr());
    }
    let mut cmd = c.bosun();
    cmd.args(["port-forward", "svc/web", "7070"]);
    let out = cmd.output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("does not have a service port 7070"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // kubectl resolves the service too.
    let f = kubectl_forward(&c, "svc/web", ":8080", true);
    assert!(http_get(f.port).contains("web v1"), "{}", f.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_listening_only_on_loopback_is_reached_inside_the_pod() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lo"},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                "name": "web", "image": WEB,
                "command": ["httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/usr/share/nginx/html"]}]}}),
    )
    .await;
    let pod = c
        .wait_pod(&client, "lo", "running", UP, |p| {
            p["status"]["phase"] == "Running"
        })
        .await;
    let ip = pod["status"]["podIP"].as_str().unwrap().to_string();
    // Listening (the forward below works) but not on the pod's IP.
    let f = kubectl_forward(&c, "pod/lo", ":8080", true);
    assert!(http_get(f.port).contains("web v1"), "{}", f.stderr());
    let f = bosun_forward(&c, "pod/lo", ":8080");
    assert!(http_get(f.port).contains("web v1"), "{}", f.stderr());
    let direct = TcpStream::connect_timeout(
        &format!("{ip}:8080").parse().unwrap(),
        Duration::from_secs(3),
    );
    assert!(
        direct.is_err(),
        "the app must not listen on the pod IP {ip}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forward_ends_when_the_pod_is_deleted() {
    let c = Cluster::start();
    let client = c.client().await;
    web_pod(&c, &client, "web", json!({"app": "web"})).await;
    let mut tunnelled = kubectl_forward(&c, "pod/web", ":80", true);
    let mut spdy = kubectl_forward(&c, "pod/web", ":80", false);
    let mut bosun = bosun_forward(&c, "pod/web", ":80");
    for f in [&tunnelled, &spdy, &bosun] {
        assert!(http_get(f.port).contains("web v1"), "{}", f.stderr());
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.delete("web", &DeleteParams::default()).await.unwrap();
    for f in [&mut tunnelled, &mut spdy, &mut bosun] {
        let status = f.wait_exit(Duration::from_secs(30));
        assert!(!status.success(), "the forward fails, as kubectl's does");
        assert!(
            f.stderr().contains("lost connection to pod"),
            "{}",
            f.stderr()
        );
    }
}
