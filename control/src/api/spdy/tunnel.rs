//! SPDY tunnelled through a WebSocket, as kubectl 1.31+ first tries for
//! port-forward (client-go's tunneling dialer, feature
//! PortForwardWebsockets): the WebSocket subprotocol is the SPDY protocol
//! with the prefix `SPDY/3.1+` (`SPDY/3.1+portforward.k8s.io`) and every
//! binary message carries the next bytes of the SPDY connection. There is
//! no SPDY handshake inside: the client starts with its streams.

use futures::{Sink, SinkExt, Stream, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

/// The prefix of a tunnelled protocol's WebSocket subprotocol.
pub const PREFIX: &str = "SPDY/3.1+";

/// Whether a WebSocket handshake's offered subprotocols include
/// `PREFIX` + `protocol`.
pub fn offered(headers: &http::HeaderMap, protocol: &str) -> bool {
    headers
        .get_all(http::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| {
            p.trim()
                .strip_prefix(PREFIX)
                .is_some_and(|rest| rest == protocol)
        })
}

/// The tunnel as a byte stream: what is written goes out as binary
/// messages, what arrives in them is read. A task copies until either side
/// ends; the WebSocket is then closed normally.
pub fn byte_stream<S>(ws: S) -> DuplexStream
where
    S: Stream<Item = Result<Message, WsError>> + Sink<Message, Error = WsError> + Send + 'static,
{
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let (mut ws_tx, mut ws_rx) = ws.split();
        let (mut read, mut write) = tokio::io::split(theirs);
        let outgoing = async {
            let mut buf = vec![0u8; 32 * 1024];
            loop {
                match read.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let message = Message::Binary(buf[..n].to_vec().into());
                        if ws_tx.send(message).await.is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = ws_tx
                .send(Message::Close(Some(CloseFrame {
                    code: CloseCode::Normal,
                    reason: "".into(),
                })))
                .await;
        };
        let incoming = async {
            while let Some(Ok(message)) = ws_rx.next().await {
                match message {
                    Message::Binary(b) if write.write_all(&b).await.is_err() => break,
                    Message::Close(_) => break,
                    _ => {}
                }
            }
            let _ = write.shutdown().await;
        };
        tokio::select! {
            _ = outgoing => {}
            _ = incoming => {}
        }
    });
    ours
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_tungstenite::tungstenite::protocol::Role;
    use tokio_tungstenite::WebSocketStream;

    #[test]
    fn the_tunnelled_protocol_is_recognised() {
        let mut h = http::HeaderMap::new();
        h.insert(
            http::header::SEC_WEBSOCKET_PROTOCOL,
            "SPDY/3.1+portforward.k8s.io".parse().unwrap(),
        );
        assert!(offered(&h, "portforward.k8s.io"));
        h.insert(
            http::header::SEC_WEBSOCKET_PROTOCOL,
            "v5.channel.k8s.io, v4.channel.k8s.io".parse().unwrap(),
        );
        assert!(!offered(&h, "portforward.k8s.io"));
    }

    #[tokio::test]
    async fn bytes_cross_as_binary_messages_both_ways() {
        let (server_end, client_end) = tokio::io::duplex(1 << 16);
        let server = WebSocketStream::from_raw_socket(server_end, Role::Server, None).await;
        let mut client = WebSocketStream::from_raw_socket(client_end, Role::Client, None).await;
        let mut bytes = byte_stream(server);
        // Messages arrive as one stream of bytes, however they are cut.
        for part in [&b"SYN"[..], b"_STREAM"] {
            client
                .send(Message::Binary(part.to_vec().into()))
                .await
                .unwrap();
        }
        let mut got = [0u8; 10];
        bytes.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"SYN_STREAM");
        bytes.write_all(b"SYN_REPLY").await.unwrap();
        match client.next().await {
            Some(Ok(Message::Binary(b))) => assert_eq!(&b[..], b"SYN_REPLY"),
            other => panic!("want a binary message, got {other:?}"),
        }
        // Our end closing closes the WebSocket normally.
        drop(bytes);
        match client.next().await {
            Some(Ok(Message::Close(Some(f)))) => assert_eq!(f.code, CloseCode::Normal),
            other => panic!("want a normal close, got {other:?}"),
        }
    }
}
