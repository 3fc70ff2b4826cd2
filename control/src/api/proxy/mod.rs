//! `pods/log`, `pods/exec`, `pods/attach` and `pods/portforward`: the control plane finds the
//! pod's node and hands the request on to that node's agent, like the
//! kube-apiserver does to the kubelet.
//!
//! - Addressing: the agent publishes its stream API on its Node: the
//!   `InternalIP` (else `Hostname`) address in `status.addresses`, the port
//!   in `status.daemonEndpoints.kubeletEndpoint.Port`.
//! - Trust: the agent's certificate is self-signed and published on the
//!   Node (annotation `bosun.io/serving-certificate`, written by the agent
//!   through the authenticated API); the control plane accepts that exact
//!   certificate and no other.
//! - Authentication: the control plane presents its client certificate
//!   (CN `kube-apiserver-kubelet-client`, O `system:masters`, signed by
//!   the cluster CA, see [`crate::auth::kubelet_client`]), as
//!   kube-apiserver does with `--kubelet-client-certificate`; the agent
//!   checks it against the cluster CA it trusts. No bearer token of the
//!   control plane is sent to any agent (a joined host never sees the
//!   admin token).
//!
//! Logs are streamed back as they come (chunked `text/plain`). Exec and
//! attach are WebSocket upgrades: the client's handshake (key, version,
//! subprotocols `v5.channel.k8s.io` / `v4.channel.k8s.io`) goes to the
//! agent, the agent's answer comes back, and from then on the bytes of both
//! upgraded connections are copied as they are, so the control plane needs
//! no knowledge of the channel protocol. A SPDY/3.1 upgrade (kubectl's
//! fallback) is answered by the control plane itself, which opens a
//! WebSocket to the agent and translates between the two (see
//! [`super::spdy`]).
//!
//! Port-forward: a WebSocket asking for `v4.channel.k8s.io` (kube-rs) is
//! passed through to the agent's `/portForward/{ns}/{pod}` like exec. SPDY
//! (`portforward.k8s.io`, plainly upgraded or tunnelled through a WebSocket
//! as `SPDY/3.1+portforward.k8s.io`, which kubectl 1.31+ tries first) is
//! answered here: each forwarded connection gets a WebSocket of its own to
//! the agent, and the session ends when the pod is deleted.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{HeaderValue, Method, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;

pub mod backend;
mod portforward;

use super::error::{ApiError, ApiResult};
use super::{object, spdy, ApiState, Target};

/// The Node annotation the agent publishes its serving certificate in.
pub const SERVING_CERT_ANNOTATION: &str = "bosun.io/serving-certificate";

/// The subresources handed on to the agent.
pub fn is_proxied(target: &Target) -> bool {
    target.res.plural == "pods"
        && target.res.group.is_empty()
        && target.name.is_some()
        && matches!(
            target.subresource.as_deref(),
            Some("log" | "exec" | "attach" | "portforward")
        )
}

/// Where a node's agent serves, and the certificate it presents.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct AgentEndpoint {
    pub(super) host: String,
    pub(super) port: u16,
    cert_pem: String,
}

pub(super) fn agent_endpoint(node_name: &str, node: &Value) -> ApiResult<AgentEndpoint> {
    let status = &node["status"];
    let port = status["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "node {node_name} publishes no agent endpoint (status.daemonEndpoints.kubeletEndpoint.Port)"
            ))
        })?;
    let addresses = status["addresses"].as_array().cloned().unwrap_or_default();
    let address_of = |kind: &str| {
        addresses
            .iter()
            .find(|a| a["type"] == kind)
            .and_then(|a| a["address"].as_str())
            .filter(|a| !a.is_empty())
            .map(String::from)
    };
    let host = address_of("InternalIP")
        .or_else(|| address_of("ExternalIP"))
        .or_else(|| address_of("Hostname"))
        .ok_or_else(|| ApiError::bad_request(format!("node {node_name} has no address")))?;
    let cert_pem = node["metadata"]["annotations"][SERVING_CERT_ANNOTATION]
        .as_str()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "node {node_name} publishes no serving certificate (annotation {SERVING_CERT_ANNOTATION})"
            ))
        })?
        .to_string();
    Ok(AgentEndpoint {
        host,
        port,
        cert_pem,
    })
}

/// The containers of a pod spec, app containers first.
fn container_names(spec: &Value, field: &str) -> Vec<String> {
    spec[field]
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The container a request names, or the pod's only one.
fn pick_container(pod_name: &str, spec: &Value, asked: Option<&str>) -> ApiResult<String> {
    let apps = container_names(spec, "containers");
    let inits = container_names(spec, "initContainers");
    let ephemeral = container_names(spec, "ephemeralContainers");
    match asked.filter(|c| !c.is_empty()) {
        Some(c) => {
            if apps.iter().chain(&inits).chain(&ephemeral).any(|n| n == c) {
                Ok(c.to_string())
            } else {
                Err(ApiError::bad_request(format!(
                    "container {c} is not valid for pod {pod_name}"
                )))
            }
        }
        None if apps.len() == 1 => Ok(apps[0].clone()),
        None => {
            let mut message = format!(
                "a container name must be specified for pod {pod_name}, choose one of: [{}]",
                apps.join(" ")
            );
            if !inits.is_empty() {
                message.push_str(&format!(
                    " or one of the init containers: [{}]",
                    inits.join(" ")
                ));
            }
            Err(ApiError::bad_request(message))
        }
    }
}

/// The query handed to the agent: the client's, without `container`
/// (which is in the path), repeated keys kept.
fn agent_query(pairs: &[(String, String)]) -> String {
    let mut out = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs.iter().filter(|(k, _)| k != "container") {
        out.append_pair(k, v);
    }
    out.finish()
}

fn wants_websocket(parts: &Parts) -> bool {
    parts
        .headers
        .get_all(http::header::UPGRADE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .any(|p| p.trim().eq_ignore_ascii_case("websocket"))
        })
}

async fn load(state: &ApiState, kind: &str, ns: Option<&str>, name: &str) -> ApiResult<Value> {
    let res = bosun::resources::by_name(kind).expect("a served resource");
    let kv = state
        .store
        .get(&res.storage_key(ns, name))
        .await
        .map_err(|e| ApiError::from_store(e, res, name))?
        .ok_or_else(|| ApiError::not_found(res, name))?;
    object::from_store(&kv)
}

/// A GET of `uri` on an agent's API (the connection authenticates it).
pub(super) fn agent_get(endpoint: &AgentEndpoint, uri: &str) -> http::request::Builder {
    http::Request::builder()
        .method(Method::GET)
        .uri(uri)
        .header(
            http::header::HOST,
            format!("{}:{}", endpoint.host, endpoint.port),
        )
}

/// Opens an HTTP/1.1 connection to the agent, trusting only its
/// published certificate and presenting the control plane's client
/// certificate.
pub(super) async fn connect(
    state: &ApiState,
    endpoint: &AgentEndpoint,
) -> ApiResult<hyper::client::conn::http1::SendRequest<Body>> {
    let der = CertificateDer::from_pem_slice(endpoint.cert_pem.as_bytes())
        .map_err(|e| ApiError::internal(format!("the node's serving certificate: {e}")))?;
    let mut config = bosun::serving::pinned_client_config(
        der.as_ref(),
        "the agent's certificate is not the one its Node publishes",
    )
    .map_err(|e| ApiError::internal(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Unit tests' servers have no CA and reach no agent.
    if let Some(signer) = &state.node_signer {
        config.client_auth_cert_resolver = signer.kubelet_client();
    }
    let unreachable = |e: &dyn std::fmt::Display| {
        ApiError::internal(format!(
            "error dialing the agent at {}:{}: {e}",
            endpoint.host, endpoint.port
        ))
    };
    let tcp = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::net::TcpStream::connect((endpoint.host.as_str(), endpoint.port)),
    )
    .await
    .map_err(|_| unreachable(&"timed out"))?
    .map_err(|e| unreachable(&e))?;
    let _ = tcp.set_nodelay(true);
    let server_name = ServerName::try_from(endpoint.host.clone())
        .map_err(|e| ApiError::internal(format!("agent address {}: {e}", endpoint.host)))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(server_name, tcp)
        .await
        .map_err(|e| unreachable(&e))?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| unreachable(&e))?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "agent connection ended with an error");
        }
    });
    Ok(sender)
}

/// The headers of a WebSocket handshake that pass through unchanged.
const HANDSHAKE_REQUEST: [http::header::HeaderName; 4] = [
    http::header::SEC_WEBSOCKET_KEY,
    http::header::SEC_WEBSOCKET_VERSION,
    http::header::SEC_WEBSOCKET_PROTOCOL,
    http::header::SEC_WEBSOCKET_EXTENSIONS,
];
const HANDSHAKE_RESPONSE: [http::header::HeaderName; 4] = [
    http::header::UPGRADE,
    http::header::CONNECTION,
    http::header::SEC_WEBSOCKET_ACCEPT,
    http::header::SEC_WEBSOCKET_PROTOCOL,
];

/// Serves `pods/{log,exec,attach}` by way of the pod's agent.
pub async fn serve(
    state: &Arc<ApiState>,
    target: &Target,
    query: Vec<(String, String)>,
    mut parts: Parts,
) -> ApiResult<Response> {
    let sub = target.subresource.as_deref().unwrap_or_default();
    let streaming = sub != "log";
    match (&parts.method, streaming) {
        (&Method::GET, _) => {}
        (&Method::POST, true) => {}
        _ => {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({} pods/{sub})",
                parts.method
            )))
        }
    }
    let ns = target.namespace.as_deref();
    let pod_name = target.name.as_deref().unwrap_or_default();
    let pod = load(state, "pods", ns, pod_name).await?;
    let asked = query
        .iter()
        .find(|(k, _)| k == "container")
        .map(|(_, v)| v.as_str());
    let port_forward = sub == "portforward";
    let container = if port_forward {
        None
    } else {
        Some(pick_container(pod_name, &pod["spec"], asked)?)
    };
    if streaming {
        let phase = pod["status"]["phase"].as_str().unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            return Err(ApiError::bad_request(format!(
                "cannot {sub} into a container in a completed pod; current phase is {phase}"
            )));
        }
    }
    let node_name = pod["spec"]["nodeName"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(format!("pod {pod_name} does not have a host assigned"))
        })?;
    let node = load(state, "nodes", None, node_name).await?;
    let endpoint = agent_endpoint(node_name, &node)?;
    if port_forward {
        let ns = ns.unwrap_or("default");
        if let Some(resp) =
            portforward::serve_port_forward(state, ns, pod_name, &pod, &endpoint, &mut parts)?
        {
            return Ok(resp);
        }
    }
    // Checked last: kubectl retries with SPDY when the WebSocket upgrade is
    // refused for any reason, so the errors above must be the answer to
    // its SPDY request too.
    let spdy = if streaming && !wants_websocket(&parts) {
        if !spdy::wants_spdy(&parts.headers) {
            return Err(ApiError::bad_request(format!(
                "Upgrade request required: pods/{sub} is served over WebSocket (subprotocol v5.channel.k8s.io or v4.channel.k8s.io) or SPDY/3.1"
            )));
        }
        Some(spdy::negotiate(&parts.headers).map_err(ApiError::forbidden)?)
    } else {
        None
    };

    let verb = if streaming { sub } else { "containerLogs" };
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let ns = enc(ns.unwrap_or("default"));
    let mut uri = match &container {
        Some(c) => format!("/{verb}/{ns}/{}/{}", enc(pod_name), enc(c)),
        None => format!("/portForward/{ns}/{}", enc(pod_name)),
    };
    let q = agent_query(&query);
    if !q.is_empty() {
        uri.push('?');
        uri.push_str(&q);
    }
    let mut sender = connect(state, &endpoint).await?;
    let mut req = agent_get(&endpoint, &uri);
    if streaming {
        req = req
            .header(http::header::CONNECTION, "Upgrade")
            .header(http::header::UPGRADE, "websocket");
        if spdy.is_some() {
            // The control plane is the agent's WebSocket client.
            req = req
                .header(http::header::SEC_WEBSOCKET_VERSION, "13")
                .header(http::header::SEC_WEBSOCKET_KEY, websocket_key())
                .header(http::header::SEC_WEBSOCKET_PROTOCOL, AGENT_PROTOCOLS);
        } else {
            for name in HANDSHAKE_REQUEST {
                for value in parts.headers.get_all(&name) {
                    req = req.header(&name, value);
                }
            }
        }
    }
    let req = req
        .body(Body::empty())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut resp = sender.send_request(req).await.map_err(|e| {
        ApiError::internal(format!(
            "error talking to the agent of node {node_name}: {e}"
        ))
    })?;

    if let (Some(protocol), StatusCode::SWITCHING_PROTOCOLS) = (spdy, resp.status()) {
        return serve_spdy(&query, &mut parts, &mut resp, protocol);
    }
    if streaming && resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        let client_upgrade = parts
            .extensions
            .remove::<hyper::upgrade::OnUpgrade>()
            .ok_or_else(|| ApiError::bad_request("this connection cannot be upgraded"))?;
        let mut out = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
        for name in HANDSHAKE_RESPONSE {
            for value in resp.headers().get_all(&name) {
                out = out.header(&name, value);
            }
        }
        let agent_upgrade = hyper::upgrade::on(&mut resp);
        tokio::spawn(async move {
            let (client, agent) = match tokio::join!(client_upgrade, agent_upgrade) {
                (Ok(c), Ok(a)) => (c, a),
                (c, a) => {
                    tracing::debug!(client = ?c.err(), agent = ?a.err(), "an upgrade failed");
                    return;
                }
            };
            let mut client = TokioIo::new(client);
            let mut agent = TokioIo::new(agent);
            if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut agent).await {
                tracing::debug!(error = %e, "stream relay ended with an error");
            }
        });
        return out
            .body(Body::empty())
            .map_err(|e| ApiError::internal(e.to_string()));
    }

    // Logs, or the agent's refusal: its status and body as they are (they
    // are Kubernetes Status objects when they are errors).
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .cloned()
        .unwrap_or_else(|| HeaderValue::from_static("text/plain"));
    let body = Body::new(resp.into_body());
    Ok((status, [(http::header::CONTENT_TYPE, content_type)], body).into_response())
}

/// The subprotocols the control plane offers an agent, preferred first.
const AGENT_PROTOCOLS: &str = "v5.channel.k8s.io, v4.channel.k8s.io";
fn websocket_key() -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 16]>())
}

/// Answers a SPDY upgrade whose WebSocket to the agent is up: 101 with the
/// negotiated protocol, then the translation runs on its own task.
fn serve_spdy(
    query: &[(String, String)],
    parts: &mut Parts,
    agent_resp: &mut http::Response<hyper::body::Incoming>,
    protocol: spdy::Protocol,
) -> ApiResult<Response> {
    let agent_v5 = agent_resp
        .headers()
        .get(http::header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|p| p.to_str().ok())
        == Some("v5.channel.k8s.io");
    let flag = |name: &str| {
        query
            .iter()
            .any(|(k, v)| k == name && (v == "true" || v == "1"))
    };
    let flags = spdy::remotecommand::Flags {
        stdin: flag("stdin"),
        stdout: flag("stdout"),
        stderr: flag("stderr"),
        tty: flag("tty"),
    };
    let client_upgrade = parts
        .extensions
        .remove::<hyper::upgrade::OnUpgrade>()
        .ok_or_else(|| ApiError::bad_request("this connection cannot be upgraded"))?;
    let agent_upgrade = hyper::upgrade::on(agent_resp);
    tokio::spawn(async move {
        let (client, agent) = match tokio::join!(client_upgrade, agent_upgrade) {
            (Ok(c), Ok(a)) => (c, a),
            (c, a) => {
                tracing::debug!(client = ?c.err(), agent = ?a.err(), "an upgrade failed");
                return;
            }
        };
        let agent = tokio_tungstenite::WebSocketStream::from_raw_socket(
            TokioIo::new(agent),
            tokio_tungstenite::tungstenite::protocol::Role::Client,
            None,
        )
        .await;
        spdy::remotecommand::bridge(TokioIo::new(client), agent, agent_v5, protocol, flags).await;
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(http::header::CONNECTION, "Upgrade")
        .header(http::header::UPGRADE, spdy::UPGRADE)
        .header(spdy::PROTOCOL_HEADER, protocol.name())
        .body(Body::empty())
        .map_err(|e| ApiError::internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_only_container_is_the_default() {
        let spec = json!({"containers": [{"name": "app"}]});
        assert_eq!(pick_container("web", &spec, None).unwrap(), "app");
        assert_eq!(pick_container("web", &spec, Some("")).unwrap(), "app");
        let spec = json!({
            "containers": [{"name": "app"}, {"name": "shell"}],
            "initContainers": [{"name": "setup"}],
        });
        let e = pick_container("web", &spec, None).unwrap_err();
        assert!(e.status()["message"]
            .as_str()
            .unwrap()
            .contains("choose one of: [app shell] or one of the init containers: [setup]"));
        assert_eq!(
            pick_container("web", &spec, Some("setup")).unwrap(),
            "setup"
        );
        assert!(pick_container("web", &spec, Some("db")).is_err());
    }

    #[test]
    fn the_agent_is_found_from_its_node() {
        let node = json!({
            "metadata": {"annotations": {SERVING_CERT_ANNOTATION: "PEM"}},
            "status": {
                "addresses": [
                    {"type": "Hostname", "address": "n1"},
                    {"type": "InternalIP", "address": "10.0.0.5"},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            },
        });
        assert_eq!(
            agent_endpoint("n1", &node).unwrap(),
            AgentEndpoint {
                host: "10.0.0.5".into(),
                port: 10250,
                cert_pem: "PEM".into()
            }
        );
        let mut no_port = node.clone();
        no_port["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] = json!(0);
        assert!(agent_endpoint("n1", &no_port).is_err());
        let mut no_cert = node;
        no_cert["metadata"]["annotations"] = json!({});
        assert!(agent_endpoint("n1", &no_cert).is_err());
    }

    #[test]
    fn the_agent_query_keeps_repeated_commands_and_drops_container() {
        let pairs: Vec<(String, String)> = [
            ("command", "sh"),
            ("command", "-c"),
            ("command", "echo a&b"),
            ("container", "app"),
            ("stdout", "true"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            agent_query(&pairs),
            "command=sh&command=-c&command=echo+a%26b&stdout=true"
        );
    }
}
