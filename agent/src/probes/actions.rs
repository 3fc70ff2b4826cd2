//! How a probe or a lifecycle hook reaches a container: an [`Action`]
//! (`exec`, `httpGet`, `tcpSocket`, `sleep`) run once against a [`Target`],
//! answering with an [`Outcome`].
//!
//! `exec` goes through the container runtime; `httpGet` and `tcpSocket`
//! go over the pod network from the agent, with a minimal HTTP/1.1 client
//! on a tokio `TcpStream`. Failure messages are worded like the kubelet's.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerPort, HTTPGetAction, LifecycleHandler, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::runtime::{ContainerRuntime, RuntimeError};

const USER_AGENT: &str = "kube-probe/1.35";

/// What a probe or a hook does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Exec(Vec<String>),
    HttpGet(HTTPGetAction),
    TcpSocket(TCPSocketAction),
    Sleep(Duration),
    /// A kind bosun cannot run (gRPC, an empty handler); it fails with this message.
    Unsupported(String),
}

impl Action {
    pub fn of_probe(p: &Probe) -> Action {
        if let Some(e) = &p.exec {
            Action::Exec(e.command.clone().unwrap_or_default())
        } else if let Some(h) = &p.http_get {
            Action::HttpGet(h.clone())
        } else if let Some(t) = &p.tcp_socket {
            Action::TcpSocket(t.clone())
        } else if p.grpc.is_some() {
            Action::Unsupported("gRPC probes are not supported by bosun".into())
        } else {
            Action::Unsupported("the probe has no handler".into())
        }
    }

    pub fn of_hook(h: &LifecycleHandler) -> Action {
        if let Some(e) = &h.exec {
            Action::Exec(e.command.clone().unwrap_or_default())
        } else if let Some(g) = &h.http_get {
            Action::HttpGet(g.clone())
        } else if let Some(s) = &h.sleep {
            Action::Sleep(Duration::from_secs(s.seconds.max(0) as u64))
        } else if let Some(t) = &h.tcp_socket {
            // Deprecated and never implemented by the kubelet either.
            let _ = t;
            Action::Unsupported("tcpSocket lifecycle hooks are not supported".into())
        } else {
            Action::Unsupported("the lifecycle hook has no handler".into())
        }
    }

    /// How a hook is named in its failure event, like the kubelet's
    /// `Exec lifecycle hook ([sh -c ...])`.
    pub(super) fn hook_description(&self) -> String {
        match self {
            Action::Exec(cmd) => format!("Exec lifecycle hook ([{}])", cmd.join(" ")),
            Action::HttpGet(h) => format!(
                "HTTP lifecycle hook ({})",
                h.path.clone().unwrap_or_default()
            ),
            Action::Sleep(d) => format!("Sleep lifecycle hook ({})", d.as_secs()),
            Action::TcpSocket(_) | Action::Unsupported(_) => "Lifecycle hook".into(),
        }
    }
}

/// A probe's or hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Why it failed: the command's output, the HTTP status, the dial error.
    Failure(String),
}

/// Where probes and hooks of one container instance go.
#[derive(Clone)]
pub struct Target {
    pub rt: Arc<dyn ContainerRuntime>,
    pub container_id: String,
    /// The pod's IP (the node's with hostNetwork): the default host for
    /// httpGet and tcpSocket.
    pub pod_ip: Option<String>,
    /// The container's ports, to resolve a port given by name.
    pub ports: Vec<ContainerPort>,
}

/// A port given by number or by the name of one of the container's ports.
fn resolve_port(port: &IntOrString, ports: &[ContainerPort]) -> Result<u16, String> {
    let n = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(s) => match ports.iter().find(|p| p.name.as_deref() == Some(s)) {
            Some(p) => i64::from(p.container_port),
            None => s
                .parse::<i64>()
                .map_err(|_| format!("port {s:?} is not a port of the container"))?,
        },
    };
    u16::try_from(n)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("invalid port number {n}"))
}

/// A dial error the way Go (and so the kubelet's messages) words it.
fn dial_error(addr: &str, e: &std::io::Error) -> String {
    let what = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_string(),
        std::io::ErrorKind::TimedOut => "i/o timeout".to_string(),
        _ => format!("connect: {e}"),
    };
    format!("dial tcp {addr}: {what}")
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

impl Target {
    /// `host:port` of an httpGet or tcpSocket: its host, else the pod's IP;
    /// its port by number or by the name of one of the container's ports.
    fn address(&self, host: Option<&String>, port: &IntOrString) -> Result<String, String> {
        let host = host
            .filter(|h| !h.is_empty())
            .cloned()
            .or_else(|| self.pod_ip.clone())
            .ok_or_else(|| "the pod has no IP yet".to_string())?;
        Ok(host_port(&host, resolve_port(port, &self.ports)?))
    }

    /// Runs `action` once, bounded by `timeout`.
    pub async fn run(&self, action: &Action, timeout: Duration) -> Outcome {
        match action {
            Action::Exec(cmd) => self.exec(cmd, timeout).await,
            Action::HttpGet(h) => self.http_get(h, timeout).await,
            Action::TcpSocket(t) => self.tcp_socket(t, timeout).await,
            Action::Sleep(d) => {
                tokio::time::sleep((*d).min(timeout)).await;
                Outcome::Success
            }
            Action::Unsupported(why) => Outcome::Failure(why.clone()),
        }
    }

    async fn exec(&self, cmd: &[String], timeout: Duration) -> Outcome {
        if cmd.is_empty() {
            return Outcome::Failure("exec has no command".into());
        }
        let run = self.rt.exec(&self.container_id, cmd, timeout);
        // The runtime bounds the call itself; this bounds a runtime that does not.
        let result = match tokio::time::timeout(timeout + Duration::from_secs(1), run).await {
            Ok(r) => r,
            Err(_) => Err(RuntimeError::Timeout(timeout)),
        };
        match result {
            Ok(out) if out.exit_code == 0 => Outcome::Success,
            Ok(out) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&out.stderr));
                let text = text.trim();
                if text.is_empty() {
                    Outcome::Failure(format!(
                        "command {:?} exited with {}",
                        cmd.join(" "),
                        out.exit_code
                    ))
                } else {
                    Outcome::Failure(text.to_string())
                }
            }
            Err(RuntimeError::Timeout(_)) => {
                Outcome::Failure(format!("command {:?} timed out", cmd.join(" ")))
            }
            Err(e) => Outcome::Failure(e.to_string()),
        }
    }

    async fn tcp_socket(&self, t: &TCPSocketAction, timeout: Duration) -> Outcome {
        let addr = match self.address(t.host.as_ref(), &t.port) {
            Ok(a) => a,
            Err(e) => return Outcome::Failure(e),
        };
        match tokio::time::timeout(timeout, TcpStream::connect(&addr)).await {
            Ok(Ok(_)) => Outcome::Success,
            Ok(Err(e)) => Outcome::Failure(dial_error(&addr, &e)),
            Err(_) => Outcome::Failure(format!("dial tcp {addr}: i/o timeout")),
        }
    }

    async fn http_get(&self, h: &HTTPGetAction, timeout: Duration) -> Outcome {
        let scheme = h.scheme.as_deref().unwrap_or("HTTP");
        if !scheme.eq_ignore_ascii_case("HTTP") {
            return Outcome::Failure(format!(
                "{scheme} probes are not supported by bosun (only HTTP)"
            ));
        }
        let addr = match self.address(h.host.as_ref(), &h.port) {
            Ok(a) => a,
            Err(e) => return Outcome::Failure(e),
        };
        let mut path = h.path.clone().unwrap_or_default();
        if !path.starts_with('/') {
            path.insert(0, '/');
        }
        let url = format!("http://{addr}{path}");
        match tokio::time::timeout(timeout, http_status(&addr, &path, h)).await {
            Ok(Ok(code)) if (200..400).contains(&code) => Outcome::Success,
            Ok(Ok(code)) => Outcome::Failure(format!("HTTP probe failed with statuscode: {code}")),
            Ok(Err(e)) => Outcome::Failure(format!("Get \"{url}\": {e}")),
            Err(_) => Outcome::Failure(format!(
                "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
            )),
        }
    }
}

/// Sends `GET path` to `addr` and returns the response's status code.
async fn http_status(addr: &str, path: &str, h: &HTTPGetAction) -> Result<u16, String> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| dial_error(addr, &e))?;
    let mut headers: Vec<(String, String)> = vec![
        ("Host".into(), addr.to_string()),
        ("User-Agent".into(), USER_AGENT.into()),
        ("Accept".into(), "*/*".into()),
    ];
    let custom = h.http_headers.clone().unwrap_or_default();
    // A header the user sets replaces the default of that name.
    headers.retain(|(n, _)| !custom.iter().any(|c| c.name.eq_ignore_ascii_case(n)));
    headers.extend(custom.into_iter().map(|c| (c.name, c.value)));
    let mut request = format!("GET {path} HTTP/1.1\r\n");
    for (n, v) in headers {
        if n.contains(['\r', '\n']) || v.contains(['\r', '\n']) {
            return Err(format!("invalid header {n:?}"));
        }
        request.push_str(&format!("{n}: {v}\r\n"));
    }
    request.push_str("Connection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    while !buf.windows(2).any(|w| w == b"\r\n") && buf.len() < 8192 {
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&buf);
    let line = line.lines().next().unwrap_or_default();
    let mut parts = line.split_whitespace();
    match (
        parts.next(),
        parts.next().and_then(|c| c.parse::<u16>().ok()),
    ) {
        (Some(v), Some(code)) if v.starts_with("HTTP/") => Ok(code),
        _ => Err(format!("malformed HTTP response {line:?}")),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Instant;

    use super::*;
    use crate::probes::testing::target;
    use crate::runtime::fake::FakeRuntime;
    use k8s_openapi::api::core::v1::HTTPHeader;
    use serde_json::json;
    use tokio::net::TcpListener;

    /// A one-request-at-a-time HTTP server answering `code`; returns its
    /// port and the requests it saw.
    async fn server(code: u16) -> (u16, Arc<Mutex<Vec<String>>>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap();
                log.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&buf[..n]).into_owned());
                let _ = s
                    .write_all(format!("HTTP/1.1 {code} X\r\nContent-Length: 0\r\n\r\n").as_bytes())
                    .await;
            }
        });
        (port, seen)
    }

    fn http(port: Value, path: &str) -> Action {
        Action::HttpGet(serde_json::from_value(json!({"port": port, "path": path})).unwrap())
    }

    use serde_json::Value;

    #[tokio::test]
    async fn http_get_succeeds_on_2xx_3xx_and_fails_otherwise() {
        let rt = Arc::new(FakeRuntime::new());
        for (code, ok) in [(200, true), (302, true), (404, false), (503, false)] {
            let (port, seen) = server(code).await;
            let out = target(rt.clone(), "127.0.0.1")
                .run(&http(json!(port), "healthz"), Duration::from_secs(1))
                .await;
            assert_eq!(out == Outcome::Success, ok, "{code}: {out:?}");
            if !ok {
                assert_eq!(
                    out,
                    Outcome::Failure(format!("HTTP probe failed with statuscode: {code}"))
                );
            }
            let req = seen.lock().unwrap()[0].clone();
            assert!(req.starts_with("GET /healthz HTTP/1.1\r\n"), "{req}");
            assert!(
                req.contains(&format!("Host: 127.0.0.1:{port}\r\n")),
                "{req}"
            );
            assert!(req.contains("User-Agent: kube-probe/"), "{req}");
        }
    }

    #[tokio::test]
    async fn http_get_resolves_named_ports_and_sends_headers() {
        let rt = Arc::new(FakeRuntime::new());
        let (port, seen) = server(200).await;
        let mut t = target(rt, "127.0.0.1");
        t.ports =
            vec![serde_json::from_value(json!({"name": "web", "containerPort": port})).unwrap()];
        let mut action: HTTPGetAction =
            serde_json::from_value(json!({"port": "web", "path": "/x"})).unwrap();
        action.http_headers = Some(vec![
            HTTPHeader {
                name: "X-Probe".into(),
                value: "yes".into(),
            },
            HTTPHeader {
                name: "host".into(),
                value: "example.test".into(),
            },
        ]);
        let out = t
            .run(&Action::HttpGet(action), Duration::from_secs(1))
            .await;
        assert_eq!(out, Outcome::Success);
        let req = seen.lock().unwrap()[0].clone();
        assert!(req.contains("X-Probe: yes\r\n"), "{req}");
        assert!(req.contains("host: example.test\r\n"), "{req}");
        assert!(
            !req.contains("Host: 127.0.0.1"),
            "the user's Host wins: {req}"
        );
        // A name the container does not have is a failure, not a panic.
        let out = t
            .run(&http(json!("nope"), "/"), Duration::from_secs(1))
            .await;
        assert!(matches!(out, Outcome::Failure(m) if m.contains("nope")));
    }

    #[tokio::test]
    async fn http_get_and_tcp_fail_on_a_closed_port_and_on_silence() {
        let rt = Arc::new(FakeRuntime::new());
        // A port nobody listens on.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let closed = l.local_addr().unwrap().port();
        drop(l);
        let t = target(rt, "127.0.0.1");
        let out = t
            .run(&http(json!(closed), "/"), Duration::from_secs(1))
            .await;
        assert!(
            matches!(&out, Outcome::Failure(m) if m.contains("connection refused")),
            "{out:?}"
        );
        let tcp =
            |port: u16| Action::TcpSocket(serde_json::from_value(json!({"port": port})).unwrap());
        assert!(matches!(
            t.run(&tcp(closed), Duration::from_secs(1)).await,
            Outcome::Failure(_)
        ));
        // A server that accepts but never answers: the timeout bounds the probe.
        let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = silent.local_addr().unwrap().port();
        assert_eq!(
            t.run(&tcp(port), Duration::from_secs(1)).await,
            Outcome::Success
        );
        let started = Instant::now();
        let out = t
            .run(&http(json!(port), "/"), Duration::from_millis(300))
            .await;
        assert!(
            matches!(&out, Outcome::Failure(m) if m.contains("deadline")),
            "{out:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(1));
        // HTTPS and gRPC say plainly that they are not supported.
        let https = Action::HttpGet(
            serde_json::from_value(json!({"port": port, "scheme": "HTTPS"})).unwrap(),
        );
        assert!(matches!(t.run(&https, Duration::from_secs(1)).await,
            Outcome::Failure(m) if m.contains("not supported")));
        let grpc: Probe = serde_json::from_value(json!({"grpc": {"port": 9000}})).unwrap();
        assert!(matches!(Action::of_probe(&grpc), Action::Unsupported(_)));
    }

    #[tokio::test]
    async fn exec_uses_the_exit_code() {
        let rt = Arc::new(FakeRuntime::new());
        let t = target(rt.clone(), "127.0.0.1");
        let cmd = Action::Exec(vec!["cat".into(), "/tmp/healthy".into()]);
        assert_eq!(t.run(&cmd, Duration::from_secs(1)).await, Outcome::Success);
        rt.set_exec_result("c1", 1);
        assert!(matches!(
            t.run(&cmd, Duration::from_secs(1)).await,
            Outcome::Failure(m) if m.contains("cat /tmp/healthy")
        ));
        assert_eq!(rt.calls(), ["exec c1 cat /tmp/healthy"; 2]);
    }
}
