//! Kubernetes' remote command protocol over WebSocket, as kubectl and
//! kube-rs speak it for `exec` and `attach`: subprotocols
//! `v4.channel.k8s.io` and `v5.channel.k8s.io`. Every binary message starts
//! with its channel: 0 stdin, 1 stdout, 2 stderr, 3 error (one `Status`
//! JSON when the process ends, carrying its exit code), 4 resize (JSON
//! `{"Width":w,"Height":h}`); v5 adds 255, "close channel N" (the client's
//! way to say stdin ended).

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket};
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use crate::runtime::{ContainerRuntime, Output, Session, SessionId, StreamFlags};

use super::close_normally;

pub const V4: &str = "v4.channel.k8s.io";
pub const V5: &str = "v5.channel.k8s.io";
/// The subprotocols served, preferred first.
pub const PROTOCOLS: [&str; 2] = [V5, V4];

pub const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
pub const ERROR: u8 = 3;
pub const RESIZE: u8 = 4;
/// v5: the rest of the message names a channel the client closed.
pub const CLOSE: u8 = 255;

/// A message from the client, decoded.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientFrame {
    Stdin(Bytes),
    Resize {
        width: u16,
        height: u16,
    },
    /// The client will send no more on this channel.
    Close(u8),
    /// A channel this protocol does not have (or an empty message).
    Ignored,
}

/// Decodes one binary message from the client.
pub fn decode(data: &[u8], v5: bool) -> ClientFrame {
    let Some((&channel, rest)) = data.split_first() else {
        return ClientFrame::Ignored;
    };
    match channel {
        STDIN => ClientFrame::Stdin(Bytes::copy_from_slice(rest)),
        RESIZE => match serde_json::from_slice::<Value>(rest) {
            Ok(v) => {
                let dim = |a: &str, b: &str| {
                    v.get(a)
                        .or_else(|| v.get(b))
                        .and_then(Value::as_u64)
                        .and_then(|n| u16::try_from(n).ok())
                };
                match (dim("Width", "width"), dim("Height", "height")) {
                    (Some(width), Some(height)) => ClientFrame::Resize { width, height },
                    _ => ClientFrame::Ignored,
                }
            }
            Err(_) => ClientFrame::Ignored,
        },
        CLOSE if v5 => match rest.first() {
            Some(&c) => ClientFrame::Close(c),
            None => ClientFrame::Ignored,
        },
        _ => ClientFrame::Ignored,
    }
}

/// A message on `channel`.
pub fn frame(channel: u8, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 1);
    out.push(channel);
    out.extend_from_slice(data);
    out
}

/// The `Status` the error channel carries when a command ended with
/// `exit_code` (kubectl turns a NonZeroExitCode into its own exit code).
pub fn exit_status(command: &[String], exit_code: Option<i64>) -> Value {
    match exit_code {
        Some(0) | None => json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
        }),
        Some(code) => json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": format!(
                "command terminated with non-zero exit code: error executing command {command:?}, exit code {code}"
            ),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
        }),
    }
}

/// The `Status` for a session that failed inside the runtime.
pub fn internal_status(message: &str) -> Value {
    bosun::serving::failure_status(500, "InternalError", message)
}

/// Runs `session` over `ws` until its output ends (the process exited, or
/// the attached container stopped) or the client goes away.
pub async fn serve(
    ws: WebSocket,
    v5: bool,
    rt: Arc<dyn ContainerRuntime>,
    session: Session,
    flags: StreamFlags,
    command: Vec<String>,
) {
    let Session {
        id,
        mut output,
        mut input,
    } = session;
    let (mut tx, mut rx) = ws.split();

    // Tell the client the streams are up, as the kubelet does: an empty
    // message on the lowest channel it reads.
    let first = if flags.stdout {
        STDOUT
    } else if flags.stderr {
        STDERR
    } else {
        ERROR
    };
    if tx
        .send(Message::Binary(Bytes::from(vec![first])))
        .await
        .is_err()
    {
        return;
    }

    let send_output = async {
        let mut failure = None;
        while let Some(chunk) = output.next().await {
            let message = match chunk {
                Ok(Output::Stdout(b)) => frame(STDOUT, &b),
                Ok(Output::Stderr(b)) => frame(if flags.tty { STDOUT } else { STDERR }, &b),
                Err(e) => {
                    failure = Some(e.to_string());
                    break;
                }
            };
            if tx
                .send(Message::Binary(Bytes::from(message)))
                .await
                .is_err()
            {
                return;
            }
        }
        let status = match failure {
            Some(message) => internal_status(&message),
            None => match rt.session_exit_code(&id).await {
                Ok(code) => exit_status(&command, code),
                Err(e) => internal_status(&e.to_string()),
            },
        };
        let body = serde_json::to_vec(&status).unwrap_or_default();
        let _ = tx
            .send(Message::Binary(Bytes::from(frame(ERROR, &body))))
            .await;
        close_normally(&mut tx).await;
    };

    let read_input = async {
        let mut stdin_open = flags.stdin;
        while let Some(Ok(message)) = rx.next().await {
            let data = match message {
                Message::Binary(b) => b,
                Message::Close(_) => break,
                _ => continue,
            };
            match decode(&data, v5) {
                ClientFrame::Stdin(b) if stdin_open => {
                    let written = async {
                        input.write_all(&b).await?;
                        input.flush().await
                    };
                    // The process closed its stdin: drop what else comes.
                    stdin_open = written.await.is_ok();
                }
                ClientFrame::Close(STDIN) if stdin_open => {
                    stdin_open = false;
                    let _ = input.shutdown().await;
                }
                ClientFrame::Resize { width, height } if flags.tty => {
                    if let Err(e) = rt.resize_session(&id, width, height).await {
                        tracing::debug!(error = %e, "resizing a terminal");
                    }
                }
                _ => {}
            }
        }
    };

    tokio::select! {
        _ = send_output => {}
        _ = read_input => {
            tracing::debug!(session = ?id, "the client left");
        }
    }
    if let SessionId::Exec(exec) = &id {
        tracing::debug!(exec = %exec, "exec session ended");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_messages_decode_by_channel() {
        assert_eq!(
            decode(b"\x00hi\n", false),
            ClientFrame::Stdin(Bytes::from_static(b"hi\n"))
        );
        assert_eq!(
            decode(b"\x04{\"Width\":120,\"Height\":40}", true),
            ClientFrame::Resize {
                width: 120,
                height: 40
            }
        );
        assert_eq!(decode(&[CLOSE, STDIN], true), ClientFrame::Close(STDIN));
        // v4 has no close channel.
        assert_eq!(decode(&[CLOSE, STDIN], false), ClientFrame::Ignored);
        assert_eq!(decode(b"", true), ClientFrame::Ignored);
        assert_eq!(decode(b"\x04not json", true), ClientFrame::Ignored);
    }

    #[test]
    fn exit_codes_become_the_status_kubectl_reads() {
        let cmd = vec!["sh".to_string(), "-c".to_string(), "exit 3".to_string()];
        let failed = exit_status(&cmd, Some(3));
        assert_eq!(failed["status"], "Failure");
        assert_eq!(failed["reason"], "NonZeroExitCode");
        assert_eq!(failed["details"]["causes"][0]["reason"], "ExitCode");
        assert_eq!(failed["details"]["causes"][0]["message"], "3");
        assert_eq!(exit_status(&cmd, Some(0))["status"], "Success");
        assert_eq!(frame(STDERR, b"x"), vec![2, b'x']);
    }
}
