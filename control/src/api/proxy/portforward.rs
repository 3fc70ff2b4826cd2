//! `pods/portforward` over SPDY, plain or tunnelled through a WebSocket:
//! answered by the control plane, which opens one WebSocket to the agent's
//! `/portForward/{ns}/{pod}` per forwarded connection (see
//! [`crate::api::spdy::portforward`]) and ends the session when the pod is
//! deleted. A WebSocket of the agent's own protocol is passed through by
//! [`super::serve`] like exec.

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use http::request::Parts;
use http::StatusCode;
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::{agent_get, connect, wants_websocket, websocket_key, AgentEndpoint};
use crate::api::error::{ApiError, ApiResult};
use crate::api::{spdy, ApiState};

/// The agent's port-forward subprotocol.
const AGENT_PORT_FORWARD: &str = "v4.channel.k8s.io";

/// Answers a port-forward over SPDY, plain or tunnelled through a
/// WebSocket; `None` for a WebSocket of the agent's own protocol, which is
/// passed through.
pub(super) fn serve_port_forward(
    state: &Arc<ApiState>,
    ns: &str,
    pod_name: &str,
    pod: &Value,
    endpoint: &AgentEndpoint,
    parts: &mut Parts,
) -> ApiResult<Option<Response>> {
    use spdy::portforward::PROTOCOL;
    let websocket = wants_websocket(parts);
    let tunnelled = websocket && spdy::tunnel::offered(&parts.headers, PROTOCOL);
    if websocket && !tunnelled {
        return Ok(None);
    }
    if !tunnelled {
        if !spdy::wants_spdy(&parts.headers) {
            return Err(ApiError::bad_request(format!(
                "Upgrade request required: pods/portforward is served over WebSocket (subprotocol {AGENT_PORT_FORWARD} or {}{PROTOCOL}) or SPDY/3.1 ({PROTOCOL})",
                spdy::tunnel::PREFIX
            )));
        }
        spdy::require(&parts.headers, PROTOCOL).map_err(ApiError::forbidden)?;
    }
    if pod_has_ended(pod, pod["metadata"]["uid"].as_str().unwrap_or_default()) {
        return Err(ApiError::bad_request(format!(
            "pod {pod_name} is being deleted"
        )));
    }
    let mut response = Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(http::header::CONNECTION, "Upgrade");
    if tunnelled {
        let key = parts
            .headers
            .get(http::header::SEC_WEBSOCKET_KEY)
            .ok_or_else(|| ApiError::bad_request("missing Sec-WebSocket-Key"))?;
        let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
        response = response
            .header(http::header::UPGRADE, "websocket")
            .header(http::header::SEC_WEBSOCKET_ACCEPT, accept)
            .header(
                http::header::SEC_WEBSOCKET_PROTOCOL,
                format!("{}{PROTOCOL}", spdy::tunnel::PREFIX),
            );
    } else {
        response = response
            .header(http::header::UPGRADE, spdy::UPGRADE)
            .header(spdy::PROTOCOL_HEADER, PROTOCOL);
    }
    let client_upgrade = parts
        .extensions
        .remove::<hyper::upgrade::OnUpgrade>()
        .ok_or_else(|| ApiError::bad_request("this connection cannot be upgraded"))?;
    let dial = agent_dialer(state, endpoint, ns, pod_name);
    let res = bosun::resources::by_name("pods").expect("a served resource");
    let ended = pod_ended(
        state.clone(),
        res.storage_key(Some(ns), pod_name),
        pod["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .unwrap_or(0),
        pod["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    );
    tokio::spawn(async move {
        let client = match client_upgrade.await {
            Ok(c) => TokioIo::new(c),
            Err(e) => {
                tracing::debug!(error = %e, "a port-forward upgrade failed");
                return;
            }
        };
        if tunnelled {
            let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
                client,
                tokio_tungstenite::tungstenite::protocol::Role::Server,
                None,
            )
            .await;
            spdy::portforward::serve(spdy::tunnel::byte_stream(ws), dial, ended).await;
        } else {
            spdy::portforward::serve(client, dial, ended).await;
        }
    });
    response
        .body(Body::empty())
        .map(Some)
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// Whether a pod a port-forward was opened to is gone: another pod by the
/// name, deleting, or finished.
fn pod_has_ended(pod: &Value, uid: &str) -> bool {
    pod["metadata"]["uid"].as_str() != Some(uid)
        || !pod["metadata"]["deletionTimestamp"].is_null()
        || matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        )
}

/// Resolves when the pod at `key` (seen at `revision` with `uid`) ends,
/// its watch fails, or the server shuts down.
async fn pod_ended(state: Arc<ApiState>, key: String, revision: u64, uid: String) {
    use futures::StreamExt;
    let mut shutdown = state.shutdown.clone();
    let Ok(mut events) = state.store.watch(&key, revision).await else {
        return;
    };
    loop {
        let event = tokio::select! {
            e = events.next() => e,
            _ = shutdown.changed() => return,
        };
        match event {
            // The prefix also matches longer names.
            Some(Ok(e)) if e.key != key => {}
            Some(Ok(e)) => {
                let gone = e.kind == crate::store::EventType::Deleted
                    || serde_json::from_slice::<Value>(&e.value)
                        .map_or(true, |p| pod_has_ended(&p, &uid));
                if gone {
                    return;
                }
            }
            _ => return,
        }
    }
}

/// Opens, per forwarded connection, a WebSocket to the agent's
/// `/portForward/{ns}/{pod}?ports=P`; a refusal is the agent's message.
fn agent_dialer(
    state: &Arc<ApiState>,
    endpoint: &AgentEndpoint,
    ns: &str,
    pod: &str,
) -> spdy::portforward::Dial {
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let path = format!("/portForward/{}/{}", enc(ns), enc(pod));
    let (state, endpoint) = (state.clone(), endpoint.clone());
    Arc::new(move |port| {
        let uri = format!("{path}?ports={port}");
        let (state, endpoint) = (state.clone(), endpoint.clone());
        Box::pin(async move {
            let message = |e: ApiError| {
                e.status()["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            };
            let mut sender = connect(&state, &endpoint).await.map_err(message)?;
            let req = agent_get(&endpoint, &uri)
                .header(http::header::CONNECTION, "Upgrade")
                .header(http::header::UPGRADE, "websocket")
                .header(http::header::SEC_WEBSOCKET_VERSION, "13")
                .header(http::header::SEC_WEBSOCKET_KEY, websocket_key())
                .header(http::header::SEC_WEBSOCKET_PROTOCOL, AGENT_PORT_FORWARD)
                .body(Body::empty())
                .map_err(|e| e.to_string())?;
            let mut resp = sender
                .send_request(req)
                .await
                .map_err(|e| format!("error talking to the agent: {e}"))?;
            if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
                let status = resp.status();
                let body = axum::body::to_bytes(Body::new(resp.into_body()), 64 * 1024)
                    .await
                    .unwrap_or_default();
                let text = serde_json::from_slice::<Value>(&body)
                    .ok()
                    .and_then(|s| s["message"].as_str().map(String::from))
                    .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
                return Err(format!("the agent refused ({status}): {text}"));
            }
            let upgraded = hyper::upgrade::on(&mut resp)
                .await
                .map_err(|e| format!("upgrading the agent connection: {e}"))?;
            let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
                TokioIo::new(upgraded),
                tokio_tungstenite::tungstenite::protocol::Role::Client,
                None,
            )
            .await;
            Ok(Box::new(ws) as Box<dyn spdy::portforward::AgentSocket>)
        })
    })
}
