//! Port forwarding into a pod over WebSocket, as the kubelet serves
//! `/portForward/{namespace}/{pod}?ports=80,443` (cri/streaming/portforward
//! websocket.go) and kube-rs's `Api::<Pod>::portforward` speaks it:
//!
//! - Subprotocol `v4.channel.k8s.io` (or none). Each requested port has two
//!   channels: `2i` data (both ways) and `2i+1` error (server to client).
//!   The first message on each channel is the port, little-endian u16.
//! - One TCP connection per port per WebSocket: the data channel's bytes go
//!   to it and its bytes come back. Nothing listening is reported on the
//!   error channel with the kubelet's message ("error forwarding port 81 to
//!   pod web, uid ...: failed to connect to localhost:81 inside ...").
//! - The connection is made INSIDE the pod's network namespace to
//!   localhost, as containerd does: a dedicated thread enters the pause
//!   container's namespace (`/proc/PID/ns/net`), connects, hands the socket
//!   back and ends. So an app listening only on 127.0.0.1 is reachable. An
//!   engine on another host gives no PID; then the pod's IP is used.
//! - When every port's connection has ended (the app closed it, or the
//!   connect failed) the WebSocket is closed normally; when the client
//!   goes, every connection is closed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::close_normally;

pub const V4: &str = "v4.channel.k8s.io";

/// How long a connect inside the pod may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The ports a request asks for: every `ports` parameter, each a
/// comma-separated list, as the kubelet parses them.
pub fn parse_ports(pairs: &[(String, String)]) -> Result<Vec<u16>, String> {
    let values: Vec<&str> = pairs
        .iter()
        .filter(|(k, _)| k == "ports")
        .map(|(_, v)| v.as_str())
        .collect();
    if values.is_empty() {
        return Err("query parameter \"ports\" is required".into());
    }
    let mut ports = Vec::new();
    for value in values {
        if value.is_empty() {
            return Err("query parameter \"ports\" cannot be empty".into());
        }
        for p in value.split(',') {
            let port: u16 = p
                .trim()
                .parse()
                .map_err(|_| format!("unable to parse {value:?} as a port"))?;
            if port == 0 {
                return Err(format!("port {value:?} must be > 0"));
            }
            ports.push(port);
        }
    }
    Ok(ports)
}

/// Where a pod's ports are reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodNetwork {
    /// Inside the network namespace of this host process (the sandbox's).
    Namespace { pid: u32 },
    /// At the pod's IP (the engine is remote).
    Address(IpAddr),
}

/// Connects to 127.0.0.1 (else ::1) inside `pid`'s network namespace.
/// Moves the calling thread into that namespace: call it only on a thread
/// of its own that ends afterwards, so no thread of the agent is ever left
/// in a pod's namespace.
fn connect_in_namespace(pid: u32, port: u16) -> Result<std::net::TcpStream, String> {
    let ns_path = format!("/proc/{pid}/ns/net");
    let ns = std::fs::File::open(&ns_path).map_err(|e| format!("opening {ns_path}: {e}"))?;
    nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("entering {ns_path}: {e}"))?;
    let v4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
    let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port);
    std::net::TcpStream::connect_timeout(&v4, CONNECT_TIMEOUT).or_else(|e4| {
        std::net::TcpStream::connect_timeout(&v6, CONNECT_TIMEOUT).map_err(|e6| {
            format!(
                "failed to connect to localhost:{port} inside namespace {ns_path:?}, IPv4: dial tcp4 {v4}: {e4} IPv6 dial tcp6 {v6}: {e6}"
            )
        })
    })
}

/// A connection to `port` of the pod, or the reason there is none.
pub async fn connect(network: &PodNetwork, port: u16) -> Result<TcpStream, String> {
    let stream = match network {
        PodNetwork::Namespace { pid } => {
            let pid = *pid;
            let (tx, rx) = tokio::sync::oneshot::channel();
            // A plain thread, not the blocking pool: its namespace changes,
            // and it ends with the connect.
            std::thread::Builder::new()
                .name(format!("portforward-{port}"))
                .spawn(move || {
                    let _ = tx.send(connect_in_namespace(pid, port));
                })
                .map_err(|e| format!("starting a thread: {e}"))?;
            let std_stream = rx
                .await
                .map_err(|_| "the connecting thread went away".to_string())??;
            std_stream
                .set_nonblocking(true)
                .map_err(|e| e.to_string())?;
            TcpStream::from_std(std_stream).map_err(|e| e.to_string())?
        }
        PodNetwork::Address(ip) => {
            let addr = SocketAddr::new(*ip, port);
            tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
                .await
                .map_err(|_| format!("failed to connect to {addr}: timed out"))?
                .map_err(|e| format!("failed to connect to {addr}: {e}"))?
        }
    };
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// A message on `channel`.
pub fn frame(channel: u8, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 1);
    out.push(channel);
    out.extend_from_slice(data);
    out
}

/// The first message of each of port `index`'s two channels.
pub fn init_frames(index: usize, port: u16) -> [Vec<u8>; 2] {
    let data = (2 * index) as u8;
    let le = port.to_le_bytes();
    [frame(data, &le), frame(data + 1, &le)]
}

/// The error channel's text for a failed forward, in the kubelet's words.
pub fn forward_error(port: u16, pod: &str, uid: &str, cause: &str) -> String {
    format!("error forwarding port {port} to pod {pod}, uid {uid}: {cause}")
}

/// One port's connection: client bytes from `input` go to the pod, the
/// pod's bytes go out on the data channel. Ends when the pod closes the
/// connection or the client goes (`input` ends).
async fn forward_port(
    index: usize,
    port: u16,
    network: PodNetwork,
    who: (String, String),
    out: mpsc::Sender<Vec<u8>>,
    mut input: mpsc::Receiver<Bytes>,
) {
    let data = (2 * index) as u8;
    let stream = match connect(&network, port).await {
        Ok(s) => s,
        Err(cause) => {
            let message = forward_error(port, &who.0, &who.1, &cause);
            tracing::debug!(%message, "port-forward failed");
            let _ = out.send(frame(data + 1, message.as_bytes())).await;
            return;
        }
    };
    let (mut read, mut write) = stream.into_split();
    let to_pod = async {
        while let Some(chunk) = input.recv().await {
            if write.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = write.shutdown().await;
    };
    let from_pod = async {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if out.send(frame(data, &buf[..n])).await.is_err() {
                        break;
                    }
                }
            }
        }
    };
    // Either end closing ends the forward (v4 has no half-close).
    tokio::select! {
        _ = to_pod => {}
        _ = from_pod => {}
    }
}

/// Serves one port-forward WebSocket for `ports` of the pod `who` (name,
/// uid) until every port's connection has ended or the client leaves.
pub async fn serve(ws: WebSocket, ports: Vec<u16>, network: PodNetwork, who: (String, String)) {
    let (mut tx, mut rx) = ws.split();
    for (i, port) in ports.iter().enumerate() {
        for m in init_frames(i, *port) {
            if tx.send(Message::Binary(Bytes::from(m))).await.is_err() {
                return;
            }
        }
    }
    let (out, mut out_rx) = mpsc::channel::<Vec<u8>>(64);
    let mut inputs = Vec::with_capacity(ports.len());
    for (i, port) in ports.iter().enumerate() {
        let (in_tx, in_rx) = mpsc::channel(16);
        inputs.push(in_tx);
        tokio::spawn(forward_port(
            i,
            *port,
            network.clone(),
            who.clone(),
            out.clone(),
            in_rx,
        ));
    }
    drop(out);
    // Ends when every port's task has dropped its sender.
    let mut writer = tokio::spawn(async move {
        while let Some(m) = out_rx.recv().await {
            if tx.send(Message::Binary(Bytes::from(m))).await.is_err() {
                return;
            }
        }
        close_normally(&mut tx).await;
    });
    let reader = async move {
        while let Some(Ok(message)) = rx.next().await {
            let data = match message {
                Message::Binary(b) => b,
                Message::Close(_) => break,
                _ => continue,
            };
            let Some((&channel, rest)) = data.split_first() else {
                continue;
            };
            let index = usize::from(channel / 2);
            if channel % 2 == 0 && !rest.is_empty() {
                if let Some(input) = inputs.get(index) {
                    // A port whose connection ended drops what comes.
                    let _ = input.send(data.slice(1..)).await;
                }
            }
        }
        // Dropping `inputs` ends every port's connection.
    };
    tokio::pin!(reader);
    tokio::select! {
        _ = &mut reader => {
            let _ = tokio::time::timeout(Duration::from_secs(5), &mut writer).await;
            writer.abort();
        }
        _ = &mut writer => {
            // The close handshake: read (and drop) what the client still
            // sends until its Close. Closing the socket with its data
            // unread would reset the connection, and the reset can discard
            // the frames just sent (a refused port's error) before the
            // client has read them.
            let _ = tokio::time::timeout(Duration::from_secs(5), &mut reader).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(q: &[(&str, &str)]) -> Vec<(String, String)> {
        q.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn ports_come_from_every_parameter_and_list() {
        assert_eq!(
            parse_ports(&pairs(&[("ports", "80,443"), ("ports", "8080")])),
            Ok(vec![80, 443, 8080])
        );
        assert_eq!(
            parse_ports(&[]),
            Err("query parameter \"ports\" is required".into())
        );
        assert!(parse_ports(&pairs(&[("ports", "")])).is_err());
        assert!(parse_ports(&pairs(&[("ports", "0")]))
            .unwrap_err()
            .contains("must be > 0"));
        assert!(parse_ports(&pairs(&[("ports", "http")]))
            .unwrap_err()
            .contains("unable to parse"));
        assert!(parse_ports(&pairs(&[("ports", "70000")])).is_err());
    }

    #[test]
    fn each_port_opens_its_two_channels_with_its_number() {
        assert_eq!(init_frames(0, 80), [vec![0, 80, 0], vec![1, 80, 0]]);
        assert_eq!(
            init_frames(1, 8080),
            [vec![2, 0x90, 0x1f], vec![3, 0x90, 0x1f]]
        );
        assert_eq!(frame(2, b"GET"), b"\x02GET");
    }

    #[tokio::test]
    async fn a_closed_port_says_so_in_the_kubelets_words() {
        // A port of this host's loopback nothing listens on.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let network = PodNetwork::Address(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let cause = connect(&network, port).await.unwrap_err();
        let message = forward_error(port, "web", "u1", &cause);
        assert!(
            message.starts_with(&format!(
                "error forwarding port {port} to pod web, uid u1: failed to connect to 127.0.0.1:{port}"
            )),
            "{message}"
        );
    }

    #[tokio::test]
    async fn the_namespace_path_reaches_a_loopback_listener() {
        // Our own namespace stands in for a pod's.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let network = PodNetwork::Namespace {
            pid: std::process::id(),
        };
        let (connected, accepted) = tokio::join!(connect(&network, port), l.accept());
        let mut c = connected.unwrap();
        let (mut a, _) = accepted.unwrap();
        c.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        a.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
    }
}
