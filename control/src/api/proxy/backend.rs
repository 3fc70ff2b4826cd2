//! The `proxy` subresources, as kube-apiserver's `ProxyREST`s: an HTTP
//! request to `.../pods/[SCHEME:]NAME[:PORT]/proxy/PATH`,
//! `.../services/[SCHEME:]NAME[:PORT]/proxy/PATH` or
//! `/api/v1/nodes/NAME/proxy/PATH` is sent on to `PATH` of the pod, of one
//! ready endpoint of the Service, or of the node's agent, and the answer
//! streamed back. This is what `kubectl proxy`, dashboards and client
//! libraries use to reach in-cluster HTTP.
//!
//! - Where: a pod at its IP and the port asked for (else the first
//!   container port, else 80); a Service's port by number or name (the one
//!   unnamed port when none is given) mapped to an address of its Endpoints
//!   picked at random; a node at its agent's published endpoint, with the
//!   control plane's client certificate (as kube-apiserver's
//!   `--kubelet-client-certificate`).
//! - Scheme `https:` reaches a pod or endpoint over TLS without checking
//!   its certificate, as upstream's proxy transport does.
//! - The caller's credentials (`Authorization`, `Impersonate-*`) and
//!   hop-by-hop headers are not passed on; the body is streamed both ways;
//!   an `Upgrade` (WebSocket) is relayed.
//! - `.../proxy` without a trailing slash answers 301 to `.../proxy/`, as
//!   upstream does so relative links in a page resolve.
//! - An unreachable backend is a 503 naming the address, as upstream's
//!   "error trying to reach service".
//!
//! The control plane connects to pod addresses itself, as kube-apiserver
//! does: its host must reach the pod network (it does when it also runs an
//! agent, as `bosun up` sets it up; host-gw routes reach other nodes' pods).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::header::{self, HeaderMap, HeaderValue};
use http::request::Parts;
use http::StatusCode;
use hyper_util::rt::TokioIo;
use rand::Rng;
use rustls::pki_types::ServerName;
use serde_json::Value;

use super::{agent_endpoint, connect, load};
use crate::api::error::{ApiError, ApiResult};
use crate::api::{ApiState, Target};

/// A proxy URL's target (what is authorized: `pods/proxy`,
/// `services/proxy`, `nodes/proxy` with the name as written, port
/// included) and the path after `proxy` (empty, or starting with `/`).
pub fn parse(path: &str) -> Option<(Target, String)> {
    let p = path.strip_prefix("/api/v1/")?;
    let (plural, namespace, after) = match p.strip_prefix("namespaces/") {
        Some(r) => {
            let (ns, r) = r.split_once('/')?;
            let (plural, r) = r.split_once('/')?;
            if ns.is_empty() || !matches!(plural, "pods" | "services") {
                return None;
            }
            (plural, Some(ns.to_string()), r)
        }
        None => {
            let (plural, r) = p.split_once('/')?;
            if plural != "nodes" {
                return None;
            }
            (plural, None, r)
        }
    };
    let (name, r) = after.split_once('/').unwrap_or((after, ""));
    let rest = match r {
        "proxy" => String::new(),
        r => format!("/{}", r.strip_prefix("proxy/")?),
    };
    if name.is_empty() {
        return None;
    }
    let res = bosun::resources::by_path("", "v1", plural)?;
    let target = Target {
        res,
        namespace,
        name: Some(name.to_string()),
        subresource: Some("proxy".to_string()),
        custom: None,
    };
    Some((target, rest))
}

/// `[scheme:]name[:port]` as upstream's `SplitSchemeNamePort`: the scheme
/// is `http`, `https` or empty, the name is not.
fn split_scheme_name_port(id: &str) -> Option<(&str, &str, &str)> {
    let parts: Vec<&str> = id.split(':').collect();
    let (scheme, name, port) = match parts.as_slice() {
        [name] => ("", *name, ""),
        [name, port] => ("", *name, *port),
        [scheme, name, port] => (*scheme, *name, *port),
        _ => return None,
    };
    (!name.is_empty() && matches!(scheme, "" | "http" | "https")).then_some((scheme, name, port))
}

/// Where a proxied request goes.
#[derive(Debug, Clone, PartialEq)]
enum Backend {
    /// A pod's address, over TLS when `tls`.
    Pod { host: String, port: u16, tls: bool },
    /// A node's agent.
    Agent(super::AgentEndpoint),
}

/// A pod's location: its IP and the port asked for, else its first
/// container port, else 80 (`pod.ResourceLocation`).
fn pod_location(name: &str, pod: &Value, port: &str, tls: bool) -> ApiResult<Backend> {
    let ip = pod["status"]["podIP"].as_str().unwrap_or_default();
    if ip.is_empty() {
        return Err(ApiError::service_unavailable(format!(
            "pod {name} has no IP address yet"
        )));
    }
    let port = if port.is_empty() {
        pod["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|c| c["ports"][0]["containerPort"].as_u64())
            .unwrap_or(if tls { 443 } else { 80 })
    } else {
        port.parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid port {port:?} for pod {name}")))?
    };
    let port = u16::try_from(port)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| ApiError::bad_request(format!("invalid port {port} for pod {name}")))?;
    Ok(Backend::Pod {
        host: ip.to_string(),
        port,
        tls,
    })
}

/// A Service's location (`service.ResourceLocation`): a port given by
/// number is the Service port of that number, by name (or none: the one
/// unnamed port) the endpoint port of that name; the address is one of
/// the Endpoints' ready addresses with that port, at random.
fn service_location(
    name: &str,
    service: &Value,
    endpoints: Option<&Value>,
    port: &str,
    tls: bool,
) -> ApiResult<Backend> {
    let port_name = match port.parse::<i64>() {
        Ok(number) => service["spec"]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["port"].as_i64() == Some(number))
            .map(|p| p["name"].as_str().unwrap_or_default().to_string())
            .ok_or_else(|| {
                ApiError::service_unavailable(format!(
                    "no service port {number} found for service \"{name}\""
                ))
            })?,
        Err(_) => port.to_string(),
    };
    let no_endpoints =
        || ApiError::service_unavailable(format!("no endpoints available for service \"{name}\""));
    let subsets = endpoints
        .and_then(|e| e["subsets"].as_array())
        .filter(|s| !s.is_empty())
        .ok_or_else(no_endpoints)?;
    let mut candidates = Vec::new();
    for subset in subsets {
        let addresses = subset["addresses"].as_array().into_iter().flatten();
        let port = subset["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str().unwrap_or_default() == port_name)
            .and_then(|p| p["port"].as_u64())
            .and_then(|p| u16::try_from(p).ok());
        if let Some(port) = port {
            for a in addresses {
                if let Some(ip) = a["ip"].as_str().filter(|ip| !ip.is_empty()) {
                    candidates.push((ip.to_string(), port));
                }
            }
        }
    }
    if candidates.is_empty() {
        return Err(no_endpoints());
    }
    let (host, port) = candidates.swap_remove(rand::rng().random_range(0..candidates.len()));
    Ok(Backend::Pod { host, port, tls })
}

/// One ready endpoint (address, port) of the Service `ns/name` for its
/// port `port`, picked as `services/NAME:PORT/proxy` picks it: what a
/// webhook's `clientConfig.service` is dialed at.
pub(crate) async fn service_endpoint(
    state: &ApiState,
    ns: &str,
    name: &str,
    port: u16,
) -> ApiResult<(String, u16)> {
    let service = load(state, "services", Some(ns), name).await?;
    let endpoints = match load(state, "endpoints", Some(ns), name).await {
        Ok(e) => Some(e),
        Err(e) if e.code == 404 => None,
        Err(e) => return Err(e),
    };
    match service_location(name, &service, endpoints.as_ref(), &port.to_string(), true)? {
        Backend::Pod { host, port, .. } => Ok((host, port)),
        Backend::Agent(_) => Err(ApiError::internal("a Service resolved to a node")),
    }
}

async fn locate(state: &ApiState, target: &Target) -> ApiResult<Backend> {
    let id = target.name.as_deref().unwrap_or_default();
    let plural = target.res.plural;
    let (scheme, name, port) = split_scheme_name_port(id).ok_or_else(|| {
        ApiError::bad_request(format!("invalid {} request {id:?}", target.res.singular))
    })?;
    let tls = scheme == "https";
    let ns = target.namespace.as_deref();
    match plural {
        "pods" => pod_location(name, &load(state, "pods", ns, name).await?, port, tls),
        "services" => {
            let service = load(state, "services", ns, name).await?;
            let endpoints = match load(state, "endpoints", ns, name).await {
                Ok(e) => Some(e),
                Err(e) if e.code == 404 => None,
                Err(e) => return Err(e),
            };
            service_location(name, &service, endpoints.as_ref(), port, tls)
        }
        _ => {
            let node = load(state, "nodes", None, name).await?;
            let endpoint = agent_endpoint(name, &node)?;
            if !port.is_empty() && port != endpoint.port.to_string() || scheme == "http" {
                return Err(ApiError::bad_request(format!(
                    "node {name}: bosun proxies to the node's agent only (https on port {})",
                    endpoint.port
                )));
            }
            Ok(Backend::Agent(endpoint))
        }
    }
}

/// Headers that describe one connection, not the request (RFC 9110 7.6.1),
/// and the caller's credentials, which the backend must never see
/// (kube-apiserver drops `Authorization` once it has authenticated).
pub(crate) fn forwarded_headers(headers: &HeaderMap, upgrade: bool) -> HeaderMap {
    let named_by_connection: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        let n = name.as_str();
        let hop = matches!(
            n,
            "keep-alive"
                | "proxy-authenticate"
                | "proxy-authorization"
                | "proxy-connection"
                | "te"
                | "trailer"
                | "transfer-encoding"
                | "host"
        ) || ((n == "connection" || n == "upgrade") && !upgrade)
            || (!upgrade && named_by_connection.iter().any(|c| c == n));
        let credential = n == "authorization" || n.starts_with("impersonate-");
        if !hop && !credential {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

fn wants_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
}

/// Sends the request on to the backend and streams its answer back.
pub async fn serve(
    state: &Arc<ApiState>,
    target: &Target,
    rest: &str,
    parts: Parts,
    body: Body,
) -> ApiResult<Response> {
    if rest.is_empty() {
        let query = parts
            .uri
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        let location = format!("{}/{query}", parts.uri.path());
        return Response::builder()
            .status(StatusCode::MOVED_PERMANENTLY)
            .header(header::LOCATION, location)
            .body(Body::empty())
            .map_err(|e| ApiError::internal(e.to_string()));
    }
    let backend = locate(state, target).await?;
    let upgrade = wants_upgrade(&parts.headers);
    let uri = match parts.uri.query() {
        Some(q) => format!("{rest}?{q}"),
        None => rest.to_string(),
    };
    let (mut sender, authority) = match &backend {
        Backend::Agent(endpoint) => (
            connect(state, endpoint).await?,
            format!("{}:{}", endpoint.host, endpoint.port),
        ),
        Backend::Pod { host, port, tls } => (dial(host, *port, *tls).await?, join(host, *port)),
    };
    let mut out = http::Request::builder()
        .method(parts.method.clone())
        .uri(uri)
        .body(body)
        .map_err(|e| ApiError::bad_request(format!("proxy request: {e}")))?;
    *out.headers_mut() = forwarded_headers(&parts.headers, upgrade);
    let host = HeaderValue::from_str(&authority).map_err(|e| ApiError::internal(e.to_string()))?;
    out.headers_mut().insert(header::HOST, host);
    let resp = sender
        .send_request(out)
        .await
        .map_err(|e| unreachable(&authority, &e))?;
    if upgrade && resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        return relay_upgrade(parts, resp);
    }
    let (mut head, body) = resp.into_parts();
    head.headers = forwarded_headers(&head.headers, false);
    Ok(Response::from_parts(head, Body::new(body)))
}

fn join(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn unreachable(authority: &str, e: &dyn std::fmt::Display) -> ApiError {
    ApiError::service_unavailable(format!("error trying to reach {authority}: {e}"))
}

/// An HTTP/1.1 connection to a pod's address, plain or TLS.
async fn dial(
    host: &str,
    port: u16,
    tls: bool,
) -> ApiResult<hyper::client::conn::http1::SendRequest<Body>> {
    let authority = join(host, port);
    let tcp = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::net::TcpStream::connect((host, port)),
    )
    .await
    .map_err(|_| unreachable(&authority, &"dial timed out"))?
    .map_err(|e| unreachable(&authority, &e))?;
    let _ = tcp.set_nodelay(true);
    if !tls {
        return handshake(TokioIo::new(tcp), &authority).await;
    }
    let mut config = bosun::serving::any_certificate_client_config()
        .map_err(|e| ApiError::internal(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let server_name = ServerName::try_from(host.to_string())
        .map_err(|e| ApiError::internal(format!("address {host}: {e}")))?;
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(server_name, tcp)
        .await
        .map_err(|e| unreachable(&authority, &e))?;
    handshake(TokioIo::new(stream), &authority).await
}

async fn handshake<T>(
    io: TokioIo<T>,
    authority: &str,
) -> ApiResult<hyper::client::conn::http1::SendRequest<Body>>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| unreachable(authority, &e))?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "proxied connection ended with an error");
        }
    });
    Ok(sender)
}

/// A 101 from the backend: answer the client's upgrade with the backend's
/// headers and copy bytes both ways.
pub(crate) fn relay_upgrade(
    mut parts: Parts,
    mut resp: http::Response<hyper::body::Incoming>,
) -> ApiResult<Response> {
    let client_upgrade = parts
        .extensions
        .remove::<hyper::upgrade::OnUpgrade>()
        .ok_or_else(|| ApiError::bad_request("this connection cannot be upgraded"))?;
    let mut out = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
    for (name, value) in resp.headers() {
        out = out.header(name, value);
    }
    let backend_upgrade = hyper::upgrade::on(&mut resp);
    tokio::spawn(async move {
        let (client, backend) = match tokio::join!(client_upgrade, backend_upgrade) {
            (Ok(c), Ok(b)) => (c, b),
            (c, b) => {
                tracing::debug!(client = ?c.err(), backend = ?b.err(), "a proxied upgrade failed");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        let mut backend = TokioIo::new(backend);
        if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut backend).await {
            tracing::debug!(error = %e, "proxied stream ended with an error");
        }
    });
    out.body(Body::empty())
        .map_err(|e| ApiError::internal(e.to_string()))
        .map(IntoResponse::into_response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_the_three_proxy_urls() {
        let (t, rest) = parse("/api/v1/namespaces/ns/pods/web:8080/proxy/a/b/").unwrap();
        assert_eq!(t.res.plural, "pods");
        assert_eq!(t.namespace.as_deref(), Some("ns"));
        assert_eq!(t.name.as_deref(), Some("web:8080"));
        assert_eq!(t.subresource.as_deref(), Some("proxy"));
        assert_eq!(rest, "/a/b/");
        let (t, rest) = parse("/api/v1/namespaces/ns/services/https:web:443/proxy").unwrap();
        assert_eq!(t.res.plural, "services");
        assert_eq!(rest, "");
        let (t, rest) = parse("/api/v1/nodes/n1/proxy/metrics").unwrap();
        assert_eq!((t.res.plural, t.namespace), ("nodes", None));
        assert_eq!(rest, "/metrics");
        assert_eq!(
            parse("/api/v1/namespaces/ns/pods/web/proxy/").unwrap().1,
            "/"
        );
        for not_proxy in [
            "/api/v1/namespaces/ns/pods/web",
            "/api/v1/namespaces/ns/pods/web/log",
            "/api/v1/namespaces/ns/pods/web/proxyx/a",
            "/api/v1/namespaces/ns/configmaps/web/proxy/",
            "/api/v1/namespaces/ns/pods//proxy/",
            "/apis/apps/v1/namespaces/ns/deployments/web/proxy/",
            "/api/v1/pods/web/proxy/",
        ] {
            assert!(parse(not_proxy).is_none(), "{not_proxy}");
        }
    }

    #[test]
    fn splits_scheme_name_and_port_as_upstream() {
        assert_eq!(split_scheme_name_port("web"), Some(("", "web", "")));
        assert_eq!(split_scheme_name_port("web:80"), Some(("", "web", "80")));
        assert_eq!(
            split_scheme_name_port("web:http"),
            Some(("", "web", "http"))
        );
        assert_eq!(
            split_scheme_name_port("https:web:"),
            Some(("https", "web", ""))
        );
        assert_eq!(
            split_scheme_name_port("http:web:80"),
            Some(("http", "web", "80"))
        );
        assert_eq!(split_scheme_name_port("ftp:web:80"), None);
        assert_eq!(split_scheme_name_port(":80"), None);
        assert_eq!(split_scheme_name_port("a:b:c:d"), None);
    }

    #[test]
    fn a_pod_is_reached_at_its_ip_and_first_container_port() {
        let pod = json!({
            "spec": {"containers": [{"name": "a"}, {"name": "b", "ports": [{"containerPort": 8080}]}]},
            "status": {"podIP": "10.1.0.5"}
        });
        let at = |port: &str, tls| pod_location("p", &pod, port, tls).unwrap();
        assert_eq!(
            at("", false),
            Backend::Pod {
                host: "10.1.0.5".into(),
                port: 8080,
                tls: false
            }
        );
        assert_eq!(
            at("9000", true),
            Backend::Pod {
                host: "10.1.0.5".into(),
                port: 9000,
                tls: true
            }
        );
        let e = pod_location("p", &pod, "http", false).unwrap_err();
        assert_eq!(e.code, 400);
        let pending = json!({"spec": {"containers": []}, "status": {}});
        assert_eq!(
            pod_location("p", &pending, "", false).unwrap_err().code,
            503
        );
    }

    #[test]
    fn a_service_port_maps_to_an_endpoint_port_by_name() {
        let svc = json!({"spec": {"ports": [
            {"name": "http", "port": 80, "targetPort": 8080},
            {"name": "admin", "port": 9000, "targetPort": 9090}
        ]}});
        let eps = json!({"subsets": [{
            "addresses": [{"ip": "10.1.0.7"}],
            "ports": [{"name": "http", "port": 8080}, {"name": "admin", "port": 9090}]
        }]});
        let at = |port: &str| service_location("s", &svc, Some(&eps), port, false);
        let want = |port| Backend::Pod {
            host: "10.1.0.7".into(),
            port,
            tls: false,
        };
        assert_eq!(at("80").unwrap(), want(8080));
        assert_eq!(at("http").unwrap(), want(8080));
        assert_eq!(at("9000").unwrap(), want(9090));
        assert_eq!(at("admin").unwrap(), want(9090));
        let e = at("81").unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (503, "no service port 81 found for service \"s\"")
        );
        // No port on a Service whose ports are all named: none matches "".
        assert_eq!(at("").unwrap_err().code, 503);
        let none = service_location("s", &svc, None, "80", false).unwrap_err();
        assert_eq!(none.message, "no endpoints available for service \"s\"");
        let unnamed = json!({"spec": {"ports": [{"port": 80}]}});
        let eps =
            json!({"subsets": [{"addresses": [{"ip": "10.1.0.8"}], "ports": [{"port": 8080}]}]});
        let found = service_location("s", &unnamed, Some(&eps), "", false).unwrap();
        assert_eq!(
            found,
            Backend::Pod {
                host: "10.1.0.8".into(),
                port: 8080,
                tls: false
            }
        );
    }

    #[test]
    fn credentials_and_hop_by_hop_headers_stay_behind() {
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_static("Bearer secret"));
        h.insert("impersonate-user", HeaderValue::from_static("admin"));
        h.insert(
            "connection",
            HeaderValue::from_static("keep-alive, x-private"),
        );
        h.insert("x-private", HeaderValue::from_static("1"));
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("host", HeaderValue::from_static("api:6443"));
        h.insert("accept", HeaderValue::from_static("text/html"));
        h.insert("upgrade", HeaderValue::from_static("websocket"));
        let out = forwarded_headers(&h, false);
        let names: Vec<&str> = out.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["accept"]);
        let upgraded = forwarded_headers(&h, true);
        assert!(upgraded.contains_key("upgrade") && upgraded.contains_key("connection"));
        assert!(!upgraded.contains_key("authorization"));
    }
}
