//! The agent's own HTTPS API, which the control plane proxies `pods/log`,
//! `pods/exec` and `pods/attach` to (the kubelet's port 10250 API):
//!
//! - `GET /containerLogs/{namespace}/{pod}/{container}` with `follow`,
//!   `previous`, `tailLines`, `timestamps`, `sinceSeconds`, `sinceTime`,
//!   `limitBytes`: the log as chunked `text/plain`;
//! - `GET /exec/{namespace}/{pod}/{container}?command=..&stdin&stdout&stderr&tty`
//!   and `GET /attach/{namespace}/{pod}/{container}?..`: WebSocket upgrades
//!   speaking [`remotecommand`]'s protocol;
//! - `GET /portForward/{namespace}/{pod}?ports=80,443`: a WebSocket
//!   upgrade speaking [`portforward`]'s protocol;
//! - `GET /stats/summary`: the latest resource readings of the node and
//!   its pods (a subset of the kubelet's stats Summary, see
//!   [`bosun::metrics::Summary`]); 503 when metrics collection is off;
//! - `GET /metrics`: the agent's Prometheus metrics ([`crate::observe`]);
//! - `GET /healthz`.
//!
//! Every request but `/healthz` must be authenticated, as the kubelet's
//! (`--client-ca-file`, `--anonymous-auth=false`):
//!
//! - by a client certificate chaining to the cluster CA the agent trusts
//!   (the CA of its kubeconfig, which a joined host pinned at join, or
//!   `--client-ca-file`); rustls checks the chain during the handshake, a
//!   certificate of another CA does not get a connection. Of those, only
//!   group `system:masters` may use the API (the control plane's
//!   `kube-apiserver-kubelet-client` certificate, and admins): a node's
//!   certificate (`system:nodes`) is the same CA's, but one node may not
//!   exec into another's pods, so it gets 403;
//! - or, without a certificate, by `Authorization: Bearer <token>` with
//!   the token the agent was configured with, when it has one: the first
//!   host's agent accepts its kubeconfig's (the admin) token, which
//!   scrapers of `/metrics` use; a joined agent has none.
//!
//! Errors are Kubernetes `Status` objects, so the control plane hands them
//! on as they are.

pub mod portforward;
pub mod remotecommand;
pub mod tls;

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request, State};
use axum::response::{IntoResponse, Response};
use axum::Router;
use bytes::Bytes;
use futures::stream::SplitSink;
use futures::{SinkExt, StreamExt};
use http::StatusCode;

use crate::runtime::{
    ContainerInfo, ContainerRuntime, ContainerState, LogOptions, Role, RuntimeError, StreamFlags,
};

/// What the stream server needs.
pub struct NodeServer {
    pub rt: Arc<dyn ContainerRuntime>,
    pub node: String,
    /// The bearer token callers without a client certificate may present
    /// (none: certificates only).
    pub token: Option<String>,
    /// Resource metrics, unless collection is off.
    pub metrics: Option<Arc<crate::metrics::MetricsCollector>>,
}

/// An error as a Kubernetes `Status` with its HTTP code.
#[derive(Debug)]
pub struct StatusError {
    pub code: StatusCode,
    pub reason: &'static str,
    pub message: String,
}

impl StatusError {
    fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        StatusError {
            code,
            reason,
            message: message.into(),
        }
    }

    fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "NotFound", message)
    }

    fn runtime(e: RuntimeError) -> Self {
        match e {
            RuntimeError::NotFound(what) => Self::not_found(format!("container {what} not found")),
            e => Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                e.to_string(),
            ),
        }
    }
}

impl IntoResponse for StatusError {
    fn into_response(self) -> Response {
        let body = bosun::serving::failure_status(self.code.as_u16(), self.reason, &self.message);
        (
            self.code,
            [(http::header::CONTENT_TYPE, "application/json")],
            serde_json::to_vec(&body).unwrap_or_default(),
        )
            .into_response()
    }
}

type Result<T, E = StatusError> = std::result::Result<T, E>;

/// The group whose client certificates may use the stream API.
pub const MASTERS_GROUP: &str = "system:masters";

/// The subject of the client certificate a connection presented, which
/// rustls checked against the trusted CA during the handshake.
pub use bosun::serving::PeerSubject;

/// Whether a request may use the stream API: a certificate of group
/// `system:masters`, or without one the configured bearer token.
pub fn authorize(
    peer: Option<&PeerSubject>,
    token: Option<&str>,
    headers: &http::HeaderMap,
    path: &str,
) -> Result<()> {
    match peer {
        Some(p) if p.organizations.iter().any(|o| o == MASTERS_GROUP) => Ok(()),
        // The kubelet's words when its authorizer says no.
        Some(p) => Err(StatusError::new(
            StatusCode::FORBIDDEN,
            "Forbidden",
            format!(
                "Forbidden (user={}, verb=get, resource=nodes, subresource(s)=[proxy]): {path} is for group {MASTERS_GROUP}",
                p.common_name
            ),
        )),
        None if token.is_some_and(|t| bosun::serving::bearer_token_matches(t, headers)) => Ok(()),
        None => Err(StatusError::new(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "Unauthorized",
        )),
    }
}

fn flag(query: &HashMap<String, String>, name: &str) -> bool {
    matches!(query.get(name).map(String::as_str), Some("true" | "1"))
}

impl NodeServer {
    /// The instances of a pod's container, newest first.
    async fn instances(&self, ns: &str, pod: &str, container: &str) -> Result<Vec<ContainerInfo>> {
        let mut found: Vec<ContainerInfo> = self
            .rt
            .list_containers(&self.node)
            .await
            .map_err(StatusError::runtime)?
            .into_iter()
            .filter(|c| {
                c.role != Role::Sandbox
                    && c.pod.namespace == ns
                    && c.pod.name == pod
                    && c.name == container
            })
            .collect();
        found.sort_by_key(|c| std::cmp::Reverse((c.restart_count, c.created_at)));
        Ok(found)
    }

    /// The pod's running sandbox (the newest, should there be two).
    async fn sandbox(&self, ns: &str, pod: &str) -> Result<ContainerInfo> {
        self.rt
            .list_containers(&self.node)
            .await
            .map_err(StatusError::runtime)?
            .into_iter()
            .filter(|c| {
                c.role == Role::Sandbox
                    && c.pod.namespace == ns
                    && c.pod.name == pod
                    && c.state == ContainerState::Running
            })
            .max_by_key(|c| c.created_at)
            .ok_or_else(|| {
                StatusError::not_found(format!(
                    "pod {ns}/{pod} has no running sandbox on this node"
                ))
            })
    }

    /// The container's current instance, which must be running.
    async fn running(&self, ns: &str, pod: &str, container: &str) -> Result<ContainerInfo> {
        let newest = self.instances(ns, pod, container).await?.into_iter().next();
        match newest {
            Some(c) if c.state == ContainerState::Running => Ok(c),
            Some(_) => Err(StatusError::bad_request(format!(
                "container {container} is not running in pod {pod}"
            ))),
            None => Err(StatusError::bad_request(format!(
                "container {container} in pod {pod} is waiting to start"
            ))),
        }
    }
}

async fn handle(State(server): State<Arc<NodeServer>>, req: Request) -> Response {
    match route(server, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn route(server: Arc<NodeServer>, req: Request) -> Result<Response> {
    let path = req.uri().path().to_string();
    if path == "/healthz" {
        return Ok((StatusCode::OK, "ok").into_response());
    }
    authorize(
        req.extensions().get::<PeerSubject>(),
        server.token.as_deref(),
        req.headers(),
        &path,
    )?;
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if segments == ["stats", "summary"] {
        return stats_summary(&server);
    }
    if segments == ["metrics"] {
        let text = crate::observe::render(server.rt.as_ref(), &server.node).await;
        let text = text.map_err(StatusError::runtime)?;
        let content_type = [(http::header::CONTENT_TYPE, bosun::observe::CONTENT_TYPE)];
        return Ok((content_type, text).into_response());
    }
    if let ["portForward", ns, pod] = segments.as_slice() {
        let (ns, pod) = (ns.to_string(), pod.to_string());
        return port_forward(&server, &ns, &pod, req).await;
    }
    let (verb, ns, pod, container) = match segments.as_slice() {
        [verb, ns, pod, container] => (*verb, *ns, *pod, *container),
        _ => return Err(StatusError::not_found(format!("no such path {path}"))),
    };
    let (ns, pod, container) = (ns.to_string(), pod.to_string(), container.to_string());
    let pairs = bosun::serving::query_pairs(req.uri());
    let query: HashMap<String, String> = pairs.iter().cloned().collect();
    match verb {
        "containerLogs" => logs(&server, &ns, &pod, &container, &query).await,
        "exec" | "attach" => {
            let command: Vec<String> = pairs
                .iter()
                .filter(|(k, _)| k == "command")
                .map(|(_, v)| v.clone())
                .collect();
            let flags = StreamFlags {
                stdin: flag(&query, "stdin"),
                stdout: flag(&query, "stdout"),
                stderr: flag(&query, "stderr"),
                tty: flag(&query, "tty"),
            };
            if verb == "exec" && command.is_empty() {
                return Err(StatusError::bad_request(
                    "you must specify at least 1 command",
                ));
            }
            if !(flags.stdin || flags.stdout || flags.stderr) {
                return Err(StatusError::bad_request(
                    "you must specify at least 1 of stdin, stdout, stderr",
                ));
            }
            let (mut parts, _body) = req.into_parts();
            let upgrade = WebSocketUpgrade::from_request_parts(&mut parts, &())
                .await
                .map_err(|e| {
                    StatusError::bad_request(format!(
                        "{verb} needs a WebSocket upgrade with subprotocol {} or {}: {}",
                        remotecommand::V5,
                        remotecommand::V4,
                        e.body_text()
                    ))
                })?;
            let upgrade = upgrade.protocols(remotecommand::PROTOCOLS);
            let v5 = match upgrade.selected_protocol().and_then(|p| p.to_str().ok()) {
                Some(remotecommand::V5) => true,
                Some(remotecommand::V4) => false,
                _ => {
                    return Err(StatusError::bad_request(format!(
                        "no supported subprotocol requested (want {} or {})",
                        remotecommand::V5,
                        remotecommand::V4
                    )))
                }
            };
            let target = server.running(&ns, &pod, &container).await?;
            let session = if verb == "exec" {
                server
                    .rt
                    .exec_session(&target.id, &command, flags)
                    .await
                    .map_err(StatusError::runtime)?
            } else {
                let session = server
                    .rt
                    .attach_session(&target.id, flags)
                    .await
                    .map_err(StatusError::runtime)?;
                // Docker attaches to a container that has just exited and
                // hands back an empty stream; what it printed would be lost
                // (`kubectl run -i -- echo hello` against a fast start). As
                // CRI's attach, refuse a container that is no longer running
                // once attached: kubectl then falls back to its logs.
                server.running(&ns, &pod, &container).await?;
                session
            };
            tracing::debug!(verb, pod = %pod, container = %container, v5, "session started");
            let rt = server.rt.clone();
            Ok(upgrade
                .on_upgrade(move |ws| remotecommand::serve(ws, v5, rt, session, flags, command)))
        }
        _ => Err(StatusError::not_found(format!("no such path {path}"))),
    }
}

/// `/portForward/{ns}/{pod}`: a WebSocket whose channels carry one
/// connection per requested port into the pod's network namespace.
async fn port_forward(server: &NodeServer, ns: &str, pod: &str, req: Request) -> Result<Response> {
    let pairs = bosun::serving::query_pairs(req.uri());
    let ports = portforward::parse_ports(&pairs).map_err(StatusError::bad_request)?;
    let (mut parts, _body) = req.into_parts();
    let upgrade = WebSocketUpgrade::from_request_parts(&mut parts, &())
        .await
        .map_err(|e| {
            StatusError::bad_request(format!(
                "portforward needs a WebSocket upgrade with subprotocol {}: {}",
                portforward::V4,
                e.body_text()
            ))
        })?;
    let offered = parts
        .headers
        .contains_key(http::header::SEC_WEBSOCKET_PROTOCOL);
    let upgrade = upgrade.protocols([portforward::V4]);
    if offered && upgrade.selected_protocol().is_none() {
        return Err(StatusError::bad_request(format!(
            "no supported subprotocol requested (want {})",
            portforward::V4
        )));
    }
    let sandbox = server.sandbox(ns, pod).await?;
    let network = match server
        .rt
        .container_pid(&sandbox.id)
        .await
        .map_err(StatusError::runtime)?
    {
        Some(pid) => portforward::PodNetwork::Namespace { pid },
        None => {
            let ip = sandbox
                .ip
                .as_deref()
                .and_then(|ip| ip.parse().ok())
                .ok_or_else(|| StatusError::bad_request(format!("pod {pod} has no IP")))?;
            portforward::PodNetwork::Address(ip)
        }
    };
    tracing::debug!(pod, ?ports, ?network, "port-forward started");
    let who = (pod.to_string(), sandbox.pod.uid.clone());
    Ok(upgrade.on_upgrade(move |ws| portforward::serve(ws, ports, network, who)))
}

fn stats_summary(server: &NodeServer) -> Result<Response> {
    let metrics = server.metrics.as_ref().ok_or_else(|| {
        StatusError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            format!(
                "node {} does not collect resource metrics (--metrics-interval=0)",
                server.node
            ),
        )
    })?;
    let body = serde_json::to_vec(&metrics.summary()).unwrap_or_default();
    Ok((
        StatusCode::OK,
        [(http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

fn number(query: &HashMap<String, String>, name: &str) -> Result<Option<i64>> {
    query
        .get(name)
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| StatusError::bad_request(format!("{name}: not a number: {v:?}")))
        })
        .transpose()
}

async fn logs(
    server: &NodeServer,
    ns: &str,
    pod: &str,
    container: &str,
    query: &HashMap<String, String>,
) -> Result<Response> {
    let instances = server.instances(ns, pod, container).await?;
    let previous = flag(query, "previous");
    let chosen = if previous {
        instances.get(1).ok_or_else(|| {
            StatusError::bad_request(format!(
                "previous terminated container \"{container}\" in pod \"{pod}\" not found"
            ))
        })?
    } else {
        instances.first().ok_or_else(|| {
            StatusError::bad_request(format!(
                "container \"{container}\" in pod \"{pod}\" is waiting to start: ContainerCreating"
            ))
        })?
    };
    let since_unix = match (number(query, "sinceSeconds")?, query.get("sinceTime")) {
        (Some(s), _) => Some(chrono::Utc::now().timestamp() - s.max(0)),
        (None, Some(t)) => Some(
            chrono::DateTime::parse_from_rfc3339(t)
                .map_err(|_| StatusError::bad_request(format!("sinceTime: not RFC 3339: {t:?}")))?
                .timestamp(),
        ),
        (None, None) => None,
    };
    let options = LogOptions {
        // A finished instance has nothing more to say.
        follow: flag(query, "follow") && !previous,
        tail_lines: number(query, "tailLines")?.map(|n| n.max(0) as u64),
        timestamps: flag(query, "timestamps"),
        since_unix,
    };
    let limit = number(query, "limitBytes")?.map(|n| n.max(0) as usize);
    let stream = server
        .rt
        .logs_stream(&chosen.id, &options)
        .await
        .map_err(StatusError::runtime)?;
    let body = match limit {
        None => Body::from_stream(stream),
        Some(limit) => Body::from_stream(limit_bytes(stream, limit)),
    };
    Ok((
        StatusCode::OK,
        [(http::header::CONTENT_TYPE, "text/plain")],
        body,
    )
        .into_response())
}

/// Passes on at most `limit` bytes of `stream`, then ends it.
fn limit_bytes(
    stream: crate::runtime::ByteStream,
    limit: usize,
) -> impl futures::Stream<Item = Result<Bytes, RuntimeError>> + Send {
    futures::stream::unfold((stream, limit), |(mut stream, left)| async move {
        if left == 0 {
            return None;
        }
        match stream.next().await? {
            Ok(mut chunk) => {
                chunk.truncate(left);
                let left = left - chunk.len();
                Some((Ok(chunk), (stream, left)))
            }
            Err(e) => Some((Err(e), (stream, 0))),
        }
    })
}

/// The stream API as an axum router.
pub fn router(server: Arc<NodeServer>) -> Router {
    Router::new().fallback(handle).with_state(server)
}

/// Serves the stream API over TLS on `listener` within `limits` until
/// `shutdown` flips; open streams go on until the process ends.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    server: Arc<NodeServer>,
    limits: bosun::serving::connections::Limits,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let stop = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    bosun::serving::connections::serve(listener, tls, router(server), limits, stop).await;
}

/// Ends a stream's WebSocket with a normal closure (1000): client-go reads
/// any other, even a bare close frame (1005), as a broken stream.
async fn close_normally(tx: &mut SplitSink<WebSocket, Message>) {
    let _ = tx
        .send(Message::Close(Some(CloseFrame {
            code: close_code::NORMAL,
            reason: "".into(),
        })))
        .await;
    let _ = tx.flush().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_command_parameters_keep_their_order() {
        let uri: http::Uri =
            "/exec/default/web/app?command=sh&command=-c&command=echo%20hi&stdout=true"
                .parse()
                .unwrap();
        let command: Vec<String> = bosun::serving::query_pairs(&uri)
            .into_iter()
            .filter(|(k, _)| k == "command")
            .map(|(_, v)| v)
            .collect();
        assert_eq!(command, ["sh", "-c", "echo hi"]);
    }

    #[tokio::test]
    async fn limit_bytes_cuts_the_stream() {
        let chunks: Vec<Result<Bytes, RuntimeError>> = vec![
            Ok(Bytes::from_static(b"hello\n")),
            Ok(Bytes::from_static(b"world\n")),
        ];
        let stream: crate::runtime::ByteStream = Box::pin(futures::stream::iter(chunks));
        let out: Vec<Bytes> = limit_bytes(stream, 8).map(|c| c.unwrap()).collect().await;
        assert_eq!(out.concat(), b"hello\nwo");
    }

    #[tokio::test]
    async fn logs_pick_the_current_or_previous_instance() {
        use crate::runtime::fake::FakeRuntime;
        use crate::runtime::{ContainerConfig, PodRef};
        let fake = Arc::new(FakeRuntime::new());
        fake.add_image("busybox");
        let pod = PodRef {
            namespace: "default".into(),
            name: "web".into(),
            uid: "u1".into(),
        };
        let mut ids = Vec::new();
        for restart_count in 0..2 {
            let config = ContainerConfig {
                name: "app".into(),
                image: "busybox".into(),
                restart_count,
                ..Default::default()
            };
            let id = fake
                .create_container("n1", &pod, Role::App, "sb", &config)
                .await
                .unwrap();
            fake.set_logs(&id, &format!("run {restart_count}\nbye {restart_count}\n"));
            ids.push(id);
        }
        let server = NodeServer {
            rt: fake.clone(),
            node: "n1".into(),
            token: Some("t".into()),
            metrics: None,
        };
        let read = |query: &[(&str, &str)]| {
            let query: HashMap<String, String> = query
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let server = &server;
            async move {
                let resp = logs(server, "default", "web", "app", &query).await.unwrap();
                let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
                    .await
                    .unwrap();
                String::from_utf8(body.to_vec()).unwrap()
            }
        };
        assert_eq!(read(&[]).await, "run 1\nbye 1\n");
        assert_eq!(read(&[("previous", "true")]).await, "run 0\nbye 0\n");
        assert_eq!(read(&[("tailLines", "1")]).await, "bye 1\n");
        assert_eq!(read(&[("limitBytes", "3")]).await, "run");
        let missing = logs(&server, "default", "web", "db", &HashMap::new())
            .await
            .unwrap_err();
        assert_eq!(missing.code, StatusCode::BAD_REQUEST);
    }
}
