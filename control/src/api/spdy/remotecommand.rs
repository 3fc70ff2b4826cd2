//! A SPDY remote command session translated onto the agent's WebSocket
//! channel protocol (see the agent's `streams::remotecommand`): client
//! streams `stdin` and `resize` become channels 0 and 4, the agent's
//! channels 1, 2 and 3 become the client's `stdout`, `stderr` and `error`
//! streams. stdin's FIN becomes v5's "close channel 0". When the agent
//! ends the session every stream gets its FIN and the connection a
//! GOAWAY; when the client goes, the agent's WebSocket is closed.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::{Sink, SinkExt, Stream, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::frame::{
    header, Frame, FrameError, FrameReader, FrameWriter, FLAG_FIN, GOAWAY_OK, RST_PROTOCOL_ERROR,
};
use super::Protocol;

/// How long the client has to open every stream it asked for (the
/// kubelet's default stream creation timeout).
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the client has to close the connection after the session ended.
const LINGER: Duration = Duration::from_secs(10);

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

/// What the request asked for (its `stdin`, `stdout`, `stderr`, `tty`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

/// The client's streams by type.
#[derive(Debug, Default, Clone, Copy)]
struct Streams {
    /// The highest stream id the client opened.
    last: u32,
    error: Option<u32>,
    stdin: Option<u32>,
    stdout: Option<u32>,
    stderr: Option<u32>,
    resize: Option<u32>,
}

impl Streams {
    /// Every stream the kubelet waits for before it starts.
    fn complete(&self, flags: Flags, protocol: Protocol) -> bool {
        self.error.is_some()
            && (!flags.stdin || self.stdin.is_some())
            && (!flags.stdout || self.stdout.is_some())
            && (!flags.stderr || flags.tty || self.stderr.is_some())
            && (!flags.tty || protocol == Protocol::V2 || self.resize.is_some())
    }

    fn all(&self) -> impl Iterator<Item = u32> {
        [
            self.error,
            self.stdin,
            self.stdout,
            self.stderr,
            self.resize,
        ]
        .into_iter()
        .flatten()
    }
}

/// Writes frames to the client.
struct ClientWriter<W> {
    io: W,
    frames: FrameWriter,
    buf: BytesMut,
}

impl<W: AsyncWrite + Unpin> ClientWriter<W> {
    async fn send(&mut self, frame: Frame) -> std::io::Result<()> {
        self.buf.clear();
        self.frames
            .encode(&frame, &mut self.buf)
            .map_err(std::io::Error::other)?;
        self.io.write_all(&self.buf).await?;
        self.io.flush().await
    }
}

/// Reads the client's frames onto `tx` until the connection or `tx` ends.
pub(super) async fn read_frames<R: AsyncRead + Unpin>(
    mut io: R,
    tx: mpsc::Sender<Result<Frame, FrameError>>,
) {
    let mut reader = FrameReader::default();
    let mut buf = BytesMut::with_capacity(16 * 1024);
    loop {
        loop {
            match reader.decode(&mut buf) {
                Ok(Some(frame)) => {
                    if tx.send(Ok(frame)).await.is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            }
        }
        match io.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// The error stream's bytes for the agent's `Status`: v4 sends it as it
/// is; v2 and v3 send a failure's message and nothing on success.
pub fn error_stream_bytes(protocol: Protocol, status_json: &[u8]) -> Vec<u8> {
    if protocol == Protocol::V4 {
        return status_json.to_vec();
    }
    match serde_json::from_slice::<Value>(status_json) {
        Ok(status) if status["status"] == "Success" => Vec::new(),
        Ok(status) => status["message"]
            .as_str()
            .unwrap_or("error executing remote command")
            .as_bytes()
            .to_vec(),
        Err(_) => status_json.to_vec(),
    }
}

/// Why a session ended.
enum End {
    /// The agent finished (or failed), or the client never opened its
    /// streams: tell the client and let it close.
    Agent,
    /// The client went away or broke the protocol.
    Client,
}

/// Writes queued frames to the client until every sender is gone.
pub(super) async fn write_frames<W: AsyncWrite + Unpin>(io: W, mut rx: mpsc::Receiver<Frame>) {
    let mut out = ClientWriter {
        io,
        frames: FrameWriter::default(),
        buf: BytesMut::new(),
    };
    while let Some(frame) = rx.recv().await {
        if let Err(e) = out.send(frame).await {
            tracing::debug!(error = %e, "writing to the SPDY client");
            break;
        }
    }
    let _ = out.io.shutdown().await;
}

/// The client's frames: streams are replied to and recorded in `streams`,
/// stdin and resize go to the agent. Returns when the client is done.
async fn client_to_agent<S>(
    frames: &mut mpsc::Receiver<Result<Frame, FrameError>>,
    agent_tx: &mut S,
    out: &mpsc::Sender<Frame>,
    streams: &watch::Sender<Streams>,
    protocol: Protocol,
    agent_v5: bool,
) where
    S: Sink<Message, Error = WsError> + Unpin,
{
    let mut resize_line = Vec::new();
    let mut stdin_open = true;
    loop {
        let frame = match frames.recv().await {
            Some(Ok(f)) => f,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "SPDY client sent a bad frame");
                return;
            }
            None => return,
        };
        let mut to_agent: Vec<Vec<u8>> = Vec::new();
        let known = *streams.borrow();
        match frame {
            Frame::SynStream {
                stream_id, headers, ..
            } => {
                let kind = header(&headers, "streamtype")
                    .unwrap_or_default()
                    .to_string();
                let mut accepted = true;
                streams.send_modify(|s| {
                    s.last = s.last.max(stream_id);
                    match kind.as_str() {
                        "error" => s.error = Some(stream_id),
                        "stdin" => s.stdin = Some(stream_id),
                        "stdout" => s.stdout = Some(stream_id),
                        "stderr" => s.stderr = Some(stream_id),
                        "resize" if protocol != Protocol::V2 => s.resize = Some(stream_id),
                        _ => accepted = false,
                    }
                });
                let answer = if accepted {
                    Frame::SynReply {
                        stream_id,
                        flags: 0,
                        headers: Vec::new(),
                    }
                } else {
                    tracing::debug!(kind, "SPDY stream of no known type");
                    Frame::RstStream {
                        stream_id,
                        status: RST_PROTOCOL_ERROR,
                    }
                };
                if out.send(answer).await.is_err() {
                    return;
                }
            }
            Frame::Data {
                stream_id,
                flags,
                data,
            } => {
                if Some(stream_id) == known.stdin && stdin_open {
                    if !data.is_empty() {
                        to_agent.push([&[STDIN][..], &data].concat());
                    }
                    if flags & FLAG_FIN != 0 {
                        stdin_open = false;
                        if agent_v5 {
                            to_agent.push(vec![CLOSE, STDIN]);
                        }
                    }
                } else if Some(stream_id) == known.resize {
                    // client-go writes one JSON object per line.
                    resize_line.extend_from_slice(&data);
                    while let Some(end) = resize_line.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = resize_line.drain(..=end).collect();
                        to_agent.push([&[RESIZE][..], line.trim_ascii()].concat());
                    }
                }
            }
            Frame::RstStream { stream_id, .. } if Some(stream_id) == known.stdin && stdin_open => {
                stdin_open = false;
                if agent_v5 {
                    to_agent.push(vec![CLOSE, STDIN]);
                }
            }
            Frame::Ping { id } if out.send(Frame::Ping { id }).await.is_err() => return,
            Frame::GoAway { .. } => return,
            // Flow control is not enforced (as spdystream); the client
            // opens every stream, so replies are not ours to read.
            _ => {}
        }
        for message in to_agent {
            if agent_tx
                .send(Message::Binary(message.into()))
                .await
                .is_err()
            {
                // The agent is gone: its side ends the session.
                break;
            }
        }
    }
}

/// The agent's channels onto the client's streams, once the client has
/// opened every stream it asked for.
async fn agent_to_client<S>(
    agent_rx: &mut S,
    out: &mpsc::Sender<Frame>,
    mut streams: watch::Receiver<Streams>,
    protocol: Protocol,
    flags: Flags,
) where
    S: Stream<Item = Result<Message, WsError>> + Unpin,
{
    let opened = tokio::time::timeout(STREAM_CREATION_TIMEOUT, async {
        streams
            .wait_for(|s| s.complete(flags, protocol))
            .await
            .map(|s| *s)
    })
    .await;
    let known = match opened {
        Ok(Ok(s)) => s,
        _ => {
            tracing::debug!("SPDY client did not open its streams in time");
            return;
        }
    };
    let data = |stream_id: Option<u32>, data: &[u8]| {
        stream_id
            .filter(|_| !data.is_empty())
            .map(|stream_id| Frame::Data {
                stream_id,
                flags: 0,
                data: Bytes::copy_from_slice(data),
            })
    };
    loop {
        let message = match agent_rx.next().await {
            Some(Ok(Message::Binary(b))) => b,
            Some(Ok(Message::Close(_))) | None => return,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "agent WebSocket failed");
                return;
            }
            Some(Ok(_)) => continue,
        };
        let Some((&channel, rest)) = message.split_first() else {
            continue;
        };
        let frame = match channel {
            STDOUT => data(known.stdout, rest),
            // With a terminal everything is on stdout already.
            STDERR => data(known.stderr.or(known.stdout), rest),
            ERROR => data(known.error, &error_stream_bytes(protocol, rest)),
            _ => None,
        };
        if let Some(frame) = frame {
            if out.send(frame).await.is_err() {
                return;
            }
        }
    }
}

/// Runs one session between `client` (the upgraded SPDY connection) and
/// `agent` (the WebSocket to the agent, `agent_v5` when it chose
/// `v5.channel.k8s.io`) until either ends. The two directions run apart,
/// so a full pipe one way never stalls the other.
pub async fn bridge<C, A>(client: C, agent: A, agent_v5: bool, protocol: Protocol, flags: Flags)
where
    C: AsyncRead + AsyncWrite + Send + 'static,
    A: Stream<Item = Result<Message, WsError>> + Sink<Message, Error = WsError> + Unpin,
{
    let (read_half, write_half) = tokio::io::split(client);
    let (frames_tx, mut frames) = mpsc::channel(64);
    let reader = tokio::spawn(read_frames(read_half, frames_tx));
    let (out, out_rx) = mpsc::channel(64);
    let writer = tokio::spawn(write_frames(write_half, out_rx));
    let (mut agent_tx, mut agent_rx) = agent.split();
    let (streams, streams_rx) = watch::channel(Streams::default());

    let end = tokio::select! {
        _ = client_to_agent(&mut frames, &mut agent_tx, &out, &streams, protocol, agent_v5) => End::Client,
        _ = agent_to_client(&mut agent_rx, &out, streams_rx, protocol, flags) => End::Agent,
    };
    let _ = agent_tx.send(Message::Close(None)).await;
    if let End::Agent = end {
        // Every stream ends from our side, then the connection: the
        // client reads stdout, stderr and error to their ends, then
        // closes. Wait for that (reading on, so it never sees a reset).
        let known = *streams.borrow();
        for stream_id in known.all() {
            let fin = Frame::Data {
                stream_id,
                flags: FLAG_FIN,
                data: Bytes::new(),
            };
            let _ = out.send(fin).await;
        }
        let _ = out
            .send(Frame::GoAway {
                last_good_stream_id: known.last,
                status: GOAWAY_OK,
            })
            .await;
        let _ = tokio::time::timeout(LINGER, async {
            while let Some(Ok(_)) = frames.recv().await {}
        })
        .await;
    }
    drop(out);
    let _ = writer.await;
    reader.abort();
}

#[cfg(test)]
mod tests {
    use super::super::fake_kubectl::Kubectl;
    use super::*;
    use tokio_tungstenite::tungstenite::protocol::Role;
    use tokio_tungstenite::WebSocketStream;

    async fn session(
        protocol: Protocol,
        flags: Flags,
    ) -> (
        Kubectl,
        WebSocketStream<tokio::io::DuplexStream>,
        tokio::task::JoinHandle<()>,
    ) {
        let (client_end, kubectl_end) = tokio::io::duplex(1 << 16);
        let (agent_end, fake_agent_end) = tokio::io::duplex(1 << 16);
        let agent = WebSocketStream::from_raw_socket(agent_end, Role::Client, None).await;
        let fake_agent = WebSocketStream::from_raw_socket(fake_agent_end, Role::Server, None).await;
        let task = tokio::spawn(bridge(client_end, agent, true, protocol, flags));
        let kubectl = Kubectl::new(kubectl_end);
        (kubectl, fake_agent, task)
    }

    fn binary(m: Option<Result<Message, WsError>>) -> Vec<u8> {
        match m {
            Some(Ok(Message::Binary(b))) => b.to_vec(),
            other => panic!("want a binary message, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn streams_map_to_channels_and_the_session_ends_cleanly() {
        let flags = Flags {
            stdin: true,
            stdout: true,
            stderr: true,
            tty: false,
        };
        let (mut k, mut agent, task) = session(Protocol::V4, flags).await;
        for (id, kind) in [(1, "error"), (3, "stdin"), (5, "stdout"), (7, "stderr")] {
            k.open(id, &[("streamtype", kind.to_string())]).await;
            match k.next().await {
                Some(Frame::SynReply { stream_id, .. }) => assert_eq!(stream_id, id),
                other => panic!("want a reply to {kind}, got {other:?}"),
            }
        }
        k.send(Frame::Data {
            stream_id: 3,
            flags: FLAG_FIN,
            data: Bytes::from_static(b"abc"),
        })
        .await;
        assert_eq!(binary(agent.next().await), b"\x00abc");
        assert_eq!(
            binary(agent.next().await),
            [CLOSE, STDIN],
            "stdin's FIN is v5's close"
        );

        let status = br#"{"status":"Failure","reason":"NonZeroExitCode"}"#;
        for m in [
            &b"\x01"[..],
            b"\x01out",
            b"\x02err",
            &[&[ERROR][..], status].concat(),
        ] {
            agent
                .send(Message::Binary(m.to_vec().into()))
                .await
                .unwrap();
        }
        agent.close(None).await.unwrap();
        let mut got = Vec::new();
        while let Some(f) = k.next().await {
            let end = matches!(f, Frame::GoAway { .. });
            got.push(f);
            if end {
                break;
            }
        }
        let data = |stream_id: u32, flags: u8, d: &[u8]| Frame::Data {
            stream_id,
            flags,
            data: Bytes::copy_from_slice(d),
        };
        assert_eq!(
            got,
            vec![
                // The agent's empty "streams are up" message is not passed on.
                data(5, 0, b"out"),
                data(7, 0, b"err"),
                data(1, 0, status),
                data(1, FLAG_FIN, b""),
                data(3, FLAG_FIN, b""),
                data(5, FLAG_FIN, b""),
                data(7, FLAG_FIN, b""),
                Frame::GoAway {
                    last_good_stream_id: 7,
                    status: GOAWAY_OK
                },
            ]
        );
        drop(k);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the session ends when the client closes")
            .unwrap();
    }

    #[tokio::test]
    async fn resize_lines_become_channel_4_and_a_client_leaving_closes_the_agent() {
        let flags = Flags {
            stdin: true,
            stdout: true,
            stderr: false,
            tty: true,
        };
        let (mut k, mut agent, task) = session(Protocol::V4, flags).await;
        for (id, kind) in [(1, "error"), (3, "stdin"), (5, "stdout"), (7, "resize")] {
            k.open(id, &[("streamtype", kind.to_string())]).await;
            assert!(matches!(k.next().await, Some(Frame::SynReply { .. })));
        }
        // Two sizes, the second split across frames.
        for part in [
            &br#"{"Width":80,"Height":24}"#[..],
            b"\n{\"Width\":1",
            b"20,\"Height\":40}\n",
        ] {
            k.send(Frame::Data {
                stream_id: 7,
                flags: 0,
                data: Bytes::copy_from_slice(part),
            })
            .await;
        }
        assert_eq!(
            binary(agent.next().await),
            b"\x04{\"Width\":80,\"Height\":24}"
        );
        assert_eq!(
            binary(agent.next().await),
            b"\x04{\"Width\":120,\"Height\":40}"
        );
        // A ping is answered.
        k.send(Frame::Ping { id: 1 }).await;
        assert_eq!(k.next().await, Some(Frame::Ping { id: 1 }));
        drop(k);
        match agent.next().await {
            Some(Ok(Message::Close(_))) | None => {}
            other => panic!("want the agent's WebSocket closed, got {other:?}"),
        }
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
    }

    #[test]
    fn older_protocols_get_the_message_and_nothing_on_success() {
        let failed =
            br#"{"status":"Failure","message":"command terminated with non-zero exit code"}"#;
        assert_eq!(error_stream_bytes(Protocol::V4, failed), failed.to_vec());
        assert_eq!(
            error_stream_bytes(Protocol::V3, failed),
            b"command terminated with non-zero exit code".to_vec()
        );
        assert!(error_stream_bytes(Protocol::V2, br#"{"status":"Success"}"#).is_empty());
    }
}
