//! `pods/portforward` over SPDY/3.1 (protocol `portforward.k8s.io`), as
//! kubectl speaks it, plainly upgraded or tunnelled through a WebSocket
//! (see [`super::tunnel`]), translated onto the agent's WebSocket
//! port-forward protocol (the agent's `streams::portforward`).
//!
//! - Streams, as kubelet's cri/streaming/portforward/httpstream.go reads
//!   them: for each local connection the client opens an `error` stream and
//!   a `data` stream with the same `requestID` and `port` headers. Once both
//!   are there the pair is forwarded: one WebSocket to the agent for that
//!   port (`?ports=P`), whose data channel is the data stream and whose
//!   error channel is the error stream (the kubelet's message, which kubectl
//!   prints as "an error occurred forwarding L -> P: ...").
//! - When the agent's side ends, both streams get their FIN. When the
//!   client's data stream ends (FIN), the agent has a second to finish
//!   answering, then its WebSocket is closed (containerd's grace).
//! - The session ends when the client goes, or when `ended` resolves (the
//!   pod was deleted): then the client gets a GOAWAY and the connection
//!   closes, which kubectl reports as "lost connection to pod" and exits.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{Sink, SinkExt, Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::frame::{header, Frame, FLAG_FIN, GOAWAY_OK, RST_PROTOCOL_ERROR};
use super::remotecommand::{read_frames, write_frames};

/// The one port-forward protocol SPDY clients offer.
pub const PROTOCOL: &str = "portforward.k8s.io";

/// How long the agent may go on answering after the client's data stream
/// ended (containerd's).
const HALF_CLOSE_GRACE: Duration = Duration::from_secs(1);
/// How long the client has to read the GOAWAY and close.
const LINGER: Duration = Duration::from_secs(5);

/// A WebSocket to the agent.
pub trait AgentSocket:
    Stream<Item = Result<Message, WsError>> + Sink<Message, Error = WsError> + Send + Unpin
{
}
impl<T> AgentSocket for T where
    T: Stream<Item = Result<Message, WsError>> + Sink<Message, Error = WsError> + Send + Unpin
{
}

/// Opens the agent's port-forward WebSocket for one port, or says why not.
pub type Dial =
    Arc<dyn Fn(u16) -> BoxFuture<'static, Result<Box<dyn AgentSocket>, String>> + Send + Sync>;

/// What the client sends on a pair's data stream.
#[derive(Debug)]
enum Incoming {
    Data(Bytes),
    /// The client's half ended.
    Fin,
}

/// One requestID's streams as they arrive.
#[derive(Debug, Default)]
struct Pending {
    port: u16,
    error: Option<u32>,
    data: Option<u32>,
}

/// A stream the client opened, as its headers describe it.
#[derive(Debug, PartialEq, Eq)]
struct Opened {
    kind: StreamKind,
    port: u16,
    request_id: String,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum StreamKind {
    Error,
    Data,
}

/// Reads a new stream's headers as the kubelet does: `streamType` error or
/// data, a `port`, and the `requestID` pairing them (older clients send
/// none: the error stream's id is then the pair's, the data stream's minus
/// two).
fn opened(stream_id: u32, headers: &super::frame::Headers) -> Result<Opened, String> {
    let kind = match header(headers, "streamtype") {
        Some("error") => StreamKind::Error,
        Some("data") => StreamKind::Data,
        other => return Err(format!("invalid stream type {other:?}")),
    };
    let port = header(headers, "port").ok_or_else(|| "\"port\" header is required".to_string())?;
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("unable to parse {port:?} as a port"))?;
    let request_id = match header(headers, "requestid") {
        Some(id) => id.to_string(),
        None if kind == StreamKind::Data => stream_id.saturating_sub(2).to_string(),
        None => stream_id.to_string(),
    };
    Ok(Opened {
        kind,
        port,
        request_id,
    })
}

fn data(stream_id: u32, flags: u8, bytes: Bytes) -> Frame {
    Frame::Data {
        stream_id,
        flags,
        data: bytes,
    }
}

/// Forwards one pair: the client's data stream to a fresh agent WebSocket
/// for `port` and back; errors onto the error stream.
async fn forward_pair(
    port: u16,
    (error_id, data_id): (u32, u32),
    out: mpsc::Sender<Frame>,
    mut input: mpsc::Receiver<Incoming>,
    dial: Dial,
) {
    let finish = |out: mpsc::Sender<Frame>| async move {
        for id in [data_id, error_id] {
            let _ = out.send(data(id, FLAG_FIN, Bytes::new())).await;
        }
    };
    let agent = match dial(port).await {
        Ok(a) => a,
        Err(message) => {
            let _ = out.send(data(error_id, 0, Bytes::from(message))).await;
            finish(out).await;
            return;
        }
    };
    let (mut agent_tx, mut agent_rx) = agent.split();
    let client_left = {
        let to_agent = async {
            loop {
                match input.recv().await {
                    Some(Incoming::Data(b)) => {
                        let message = [&[0u8][..], &b].concat();
                        if agent_tx
                            .send(Message::Binary(message.into()))
                            .await
                            .is_err()
                        {
                            return false;
                        }
                    }
                    Some(Incoming::Fin) => return false,
                    // The client reset the stream or left.
                    None => return true,
                }
            }
        };
        let from_agent = async {
            // The first message of each channel is the port.
            let mut started = [false; 2];
            while let Some(Ok(message)) = agent_rx.next().await {
                let bytes = match message {
                    Message::Binary(b) => b,
                    Message::Close(_) => break,
                    _ => continue,
                };
                let Some((&channel, rest)) = bytes.split_first() else {
                    continue;
                };
                let Some(seen) = started.get_mut(usize::from(channel)) else {
                    continue;
                };
                if !*seen {
                    *seen = true;
                    continue;
                }
                if rest.is_empty() {
                    continue;
                }
                let id = if channel == 0 { data_id } else { error_id };
                if out.send(data(id, 0, bytes.slice(1..))).await.is_err() {
                    break;
                }
            }
        };
        tokio::pin!(to_agent, from_agent);
        tokio::select! {
            _ = &mut from_agent => false,
            left = &mut to_agent => {
                if !left {
                    let _ = tokio::time::timeout(HALF_CLOSE_GRACE, &mut from_agent).await;
                }
                left
            }
        }
    };
    let _ = agent_tx.send(Message::Close(None)).await;
    if !client_left {
        finish(out).await;
    }
}

/// Serves one port-forward session on `client` (the upgraded connection or
/// the tunnel's byte stream) until the client leaves or `ended` resolves.
pub async fn serve<C, E>(client: C, dial: Dial, ended: E)
where
    C: AsyncRead + AsyncWrite + Send + 'static,
    E: Future<Output = ()>,
{
    let (read_half, write_half) = tokio::io::split(client);
    let (frames_tx, mut frames) = mpsc::channel(64);
    let reader = tokio::spawn(read_frames(read_half, frames_tx));
    let (out, out_rx) = mpsc::channel(64);
    let writer = tokio::spawn(write_frames(write_half, out_rx));
    let mut pending: HashMap<String, Pending> = HashMap::new();
    // The client's data streams being forwarded, by stream id.
    let mut routes: HashMap<u32, mpsc::Sender<Incoming>> = HashMap::new();
    let mut last = 0;
    tokio::pin!(ended);
    let pod_ended = loop {
        let frame = tokio::select! {
            f = frames.recv() => f,
            _ = &mut ended => break true,
        };
        let frame = match frame {
            Some(Ok(f)) => f,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "SPDY port-forward client sent a bad frame");
                break false;
            }
            None => break false,
        };
        match frame {
            Frame::SynStream {
                stream_id, headers, ..
            } => {
                last = last.max(stream_id);
                let stream = match opened(stream_id, &headers) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::debug!(error = %e, "refusing a port-forward stream");
                        let rst = Frame::RstStream {
                            stream_id,
                            status: RST_PROTOCOL_ERROR,
                        };
                        if out.send(rst).await.is_err() {
                            break false;
                        }
                        continue;
                    }
                };
                let reply = Frame::SynReply {
                    stream_id,
                    flags: 0,
                    headers: Vec::new(),
                };
                if out.send(reply).await.is_err() {
                    break false;
                }
                let entry = pending.entry(stream.request_id.clone()).or_default();
                entry.port = stream.port;
                match stream.kind {
                    StreamKind::Error => entry.error = Some(stream_id),
                    StreamKind::Data => entry.data = Some(stream_id),
                }
                if let (Some(error_id), Some(data_id)) = (entry.error, entry.data) {
                    let port = entry.port;
                    pending.remove(&stream.request_id);
                    let (tx, rx) = mpsc::channel(16);
                    routes.insert(data_id, tx);
                    tokio::spawn(forward_pair(
                        port,
                        (error_id, data_id),
                        out.clone(),
                        rx,
                        dial.clone(),
                    ));
                }
            }
            Frame::Data {
                stream_id,
                flags,
                data,
            } => {
                if let Some(route) = routes.get(&stream_id) {
                    if !data.is_empty() {
                        let _ = route.send(Incoming::Data(data)).await;
                    }
                    if flags & FLAG_FIN != 0 {
                        let _ = route.send(Incoming::Fin).await;
                        routes.remove(&stream_id);
                    }
                }
            }
            Frame::RstStream { stream_id, .. } => {
                // Dropping the route ends that pair's forward.
                routes.remove(&stream_id);
            }
            Frame::Ping { id } if out.send(Frame::Ping { id }).await.is_err() => break false,
            Frame::GoAway { .. } => break false,
            // Flow control is not enforced (as spdystream); the client
            // opens every stream, so replies are not ours to read.
            _ => {}
        }
    };
    // Every pair still running ends with its route.
    routes.clear();
    if pod_ended {
        let goaway = Frame::GoAway {
            last_good_stream_id: last,
            status: GOAWAY_OK,
        };
        let _ = out.send(goaway).await;
    }
    drop(out);
    let _ = tokio::time::timeout(LINGER, writer).await;
    reader.abort();
}

#[cfg(test)]
mod tests {
    use super::super::fake_kubectl::Kubectl;
    use super::*;

    use tokio_tungstenite::tungstenite::protocol::Role;
    use tokio_tungstenite::WebSocketStream;

    /// kubectl's side, opening a port-forward stream.
    async fn open(k: &mut Kubectl, stream_id: u32, kind: &str, port: u16, request: u32) {
        let headers = [
            ("streamtype", kind.to_string()),
            ("port", port.to_string()),
            ("requestid", request.to_string()),
        ];
        k.open(stream_id, &headers).await;
    }

    /// A dial whose agents are the far ends handed to `agents`.
    fn fake_dial(
        agents: mpsc::UnboundedSender<(u16, WebSocketStream<tokio::io::DuplexStream>)>,
    ) -> Dial {
        Arc::new(move |port| {
            let agents = agents.clone();
            Box::pin(async move {
                if port == 81 {
                    return Err("error forwarding port 81 to pod web, uid u1: refused".to_string());
                }
                let (ours, theirs) = tokio::io::duplex(1 << 16);
                let ours = WebSocketStream::from_raw_socket(ours, Role::Client, None).await;
                let theirs = WebSocketStream::from_raw_socket(theirs, Role::Server, None).await;
                agents.send((port, theirs)).unwrap();
                Ok(Box::new(ours) as Box<dyn AgentSocket>)
            })
        })
    }

    fn binary(b: &[u8]) -> Message {
        Message::Binary(b.to_vec().into())
    }

    #[test]
    fn streams_pair_by_request_id_or_by_stream_id() {
        let h = |pairs: &[(&str, &str)]| -> super::super::frame::Headers {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let s = opened(
            5,
            &h(&[("streamtype", "data"), ("port", "80"), ("requestid", "7")]),
        );
        assert_eq!(
            s,
            Ok(Opened {
                kind: StreamKind::Data,
                port: 80,
                request_id: "7".into()
            })
        );
        // Without requestID: error stream 1 and data stream 3 are a pair.
        let e = opened(1, &h(&[("streamtype", "error"), ("port", "80")])).unwrap();
        let d = opened(3, &h(&[("streamtype", "data"), ("port", "80")])).unwrap();
        assert_eq!(e.request_id, d.request_id);
        assert!(opened(1, &h(&[("streamtype", "data")]))
            .unwrap_err()
            .contains("\"port\" header is required"));
        assert!(opened(1, &h(&[("streamtype", "data"), ("port", "0")])).is_err());
        assert!(opened(1, &h(&[("streamtype", "stdin"), ("port", "80")])).is_err());
    }

    #[tokio::test]
    async fn pairs_are_forwarded_to_their_own_agent_socket_and_errors_reach_the_error_stream() {
        let (client_end, kubectl_end) = tokio::io::duplex(1 << 16);
        let (agents_tx, mut agents) = mpsc::unbounded_channel();
        let (end_tx, end_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve(client_end, fake_dial(agents_tx), async {
            let _ = end_rx.await;
        }));
        let mut k = Kubectl::new(kubectl_end);
        // Connection 1 to port 80.
        open(&mut k, 1, "error", 80, 0).await;
        open(&mut k, 3, "data", 80, 0).await;
        for id in [1, 3] {
            assert!(
                matches!(k.next().await, Some(Frame::SynReply { stream_id, .. }) if stream_id == id)
            );
        }
        let (port, mut agent) = agents.recv().await.unwrap();
        assert_eq!(port, 80);
        agent.send(binary(&[0, 80, 0])).await.unwrap();
        agent.send(binary(&[1, 80, 0])).await.unwrap();
        k.send(data(3, 0, Bytes::from_static(b"GET /"))).await;
        match agent.next().await {
            Some(Ok(Message::Binary(b))) => assert_eq!(&b[..], b"\x00GET /"),
            other => panic!("want the request on channel 0, got {other:?}"),
        }
        agent.send(binary(b"\x00web v1\n")).await.unwrap();
        assert_eq!(
            k.next().await,
            Some(data(3, 0, Bytes::from_static(b"web v1\n"))),
            "the port announcements are not passed on"
        );
        agent.close(None).await.unwrap();
        assert_eq!(k.next().await, Some(data(3, FLAG_FIN, Bytes::new())));
        assert_eq!(k.next().await, Some(data(1, FLAG_FIN, Bytes::new())));

        // Connection 2 to a port the agent refuses.
        open(&mut k, 5, "error", 81, 1).await;
        open(&mut k, 7, "data", 81, 1).await;
        for _ in 0..2 {
            assert!(matches!(k.next().await, Some(Frame::SynReply { .. })));
        }
        match k.next().await {
            Some(Frame::Data {
                stream_id: 5,
                flags: 0,
                data,
            }) => assert!(data.starts_with(b"error forwarding port 81 to pod web")),
            other => panic!("want the error on stream 5, got {other:?}"),
        }
        assert_eq!(k.next().await, Some(data(7, FLAG_FIN, Bytes::new())));
        assert_eq!(k.next().await, Some(data(5, FLAG_FIN, Bytes::new())));

        // Connection 3 stays open until the pod goes: a GOAWAY ends all.
        open(&mut k, 9, "error", 80, 2).await;
        open(&mut k, 11, "data", 80, 2).await;
        for _ in 0..2 {
            assert!(matches!(k.next().await, Some(Frame::SynReply { .. })));
        }
        let (_, mut agent) = agents.recv().await.unwrap();
        end_tx.send(()).unwrap();
        assert_eq!(
            k.next().await,
            Some(Frame::GoAway {
                last_good_stream_id: 11,
                status: GOAWAY_OK
            })
        );
        match tokio::time::timeout(Duration::from_secs(5), agent.next()).await {
            Ok(Some(Ok(Message::Close(_))) | None | Some(Err(_))) => {}
            other => panic!("want the agent's socket closed, got {other:?}"),
        }
        assert_eq!(k.next().await, None, "the connection closes");
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn the_clients_fin_closes_the_agent_socket_after_its_answer() {
        let (client_end, kubectl_end) = tokio::io::duplex(1 << 16);
        let (agents_tx, mut agents) = mpsc::unbounded_channel();
        tokio::spawn(serve(
            client_end,
            fake_dial(agents_tx),
            futures::future::pending(),
        ));
        let mut k = Kubectl::new(kubectl_end);
        open(&mut k, 1, "error", 80, 0).await;
        open(&mut k, 3, "data", 80, 0).await;
        for _ in 0..2 {
            assert!(matches!(k.next().await, Some(Frame::SynReply { .. })));
        }
        let (_, mut agent) = agents.recv().await.unwrap();
        agent.send(binary(&[0, 80, 0])).await.unwrap();
        k.send(data(3, FLAG_FIN, Bytes::from_static(b"ask"))).await;
        assert!(matches!(agent.next().await, Some(Ok(Message::Binary(b))) if &b[..] == b"\x00ask"));
        // The answer within the grace still arrives, then both FINs.
        agent.send(binary(b"\x00answer")).await.unwrap();
        assert_eq!(
            k.next().await,
            Some(data(3, 0, Bytes::from_static(b"answer")))
        );
        assert_eq!(k.next().await, Some(data(3, FLAG_FIN, Bytes::new())));
        assert_eq!(k.next().await, Some(data(1, FLAG_FIN, Bytes::new())));
        match agent.next().await {
            Some(Ok(Message::Close(_))) | None => {}
            other => panic!("want the agent's socket closed, got {other:?}"),
        }
    }
}
