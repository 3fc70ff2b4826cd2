//! The Kubernetes-shaped HTTP API: routing, authentication, discovery and
//! the verbs on every served resource.

pub mod admission;
pub mod aggregator;
pub mod allocate;
mod attrs;
pub mod authn;
mod binding;
mod component_status;
pub mod compression;
mod create;
pub mod custom;
mod decode;
mod delete;
pub(crate) mod discovery;
pub mod error;
mod eviction;
mod filter;
pub mod flowcontrol;
mod get;
pub(crate) mod items;
mod list;
mod managed;
mod metrics;
pub mod negotiate;
pub mod object;
mod openapi;
mod patch;
pub mod protobuf;
pub mod proxy;
mod request;
mod respond;
mod reviews;
mod scale;
mod snapshot;
mod spdy;
pub(crate) mod strategy;
mod table;
mod token;
pub mod ui;
mod update;
mod watch;
pub mod webhook_client;

use respond::json_response;
pub use respond::{encoded_response, object_response, prefers_protobuf};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use bosun::resources::{self, ResourceInfo, RESOURCES};
use http::{HeaderMap, Method, StatusCode};

use crate::store::Store;
use error::{ApiError, ApiResult};

/// Tunables of the API server.
#[derive(Debug, Clone)]
pub struct ApiOptions {
    /// Largest accepted request body.
    pub body_limit: usize,
    /// How often an idle watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// The tolerationSeconds of the `not-ready` and `unreachable`
    /// NoExecute tolerations every new pod gets unless it has its own
    /// (kube-apiserver's DefaultTolerationSeconds admission).
    pub default_not_ready_toleration_seconds: i64,
    pub default_unreachable_toleration_seconds: i64,
    /// Where Services' cluster IPs come from (`--service-cluster-ip-range`).
    pub service_range: allocate::ServiceRange,
    /// The Pod Security policy of namespaces without labels of their own
    /// (`--pod-security-default`; privileged in every mode by default).
    pub pod_security: admission::pod_security::Policy,
    /// The cluster's pod network (`--cluster-cidr`): every Node's
    /// `spec.podCIDRs` must lie inside it.
    pub cluster_cidr: ipnet::Ipv4Net,
    /// The longest lifetime a TokenRequest gets
    /// (`--service-account-max-token-expiration`, seconds; 0: no maximum
    /// but validation's 2^32).
    pub max_token_expiration_seconds: i64,
    /// kube-apiserver's `--min-request-timeout`: a watch without
    /// `timeoutSeconds` lasts between this and twice this, and none lasts
    /// longer (see [`watch::timeout`]).
    pub min_request_timeout: Duration,
    /// Whether `/ui/` serves the web view (`--ui`).
    pub ui: bool,
    /// `--max-requests-inflight` + `--max-mutating-requests-inflight`:
    /// the seats API Priority and Fairness shares out among the levels.
    pub max_requests_inflight: usize,
}

/// `--cluster-cidr`'s default.
pub const DEFAULT_CLUSTER_CIDR: &str = "10.244.0.0/16";

/// `--service-account-max-token-expiration`'s default: a day. (Upstream
/// has no maximum by default; bosun bounds it.)
pub const DEFAULT_MAX_TOKEN_EXPIRATION_SECONDS: i64 = 24 * 3600;

impl Default for ApiOptions {
    fn default() -> Self {
        ApiOptions {
            body_limit: 3 * 1024 * 1024,
            bookmark_interval: Duration::from_secs(30),
            default_not_ready_toleration_seconds: 300,
            default_unreachable_toleration_seconds: 300,
            service_range: allocate::ServiceRange::default(),
            pod_security: Default::default(),
            cluster_cidr: DEFAULT_CLUSTER_CIDR.parse().expect("a valid CIDR"),
            max_token_expiration_seconds: DEFAULT_MAX_TOKEN_EXPIRATION_SECONDS,
            min_request_timeout: Duration::from_secs(1800),
            ui: true,
            max_requests_inflight: flowcontrol::DEFAULT_MAX_REQUESTS_INFLIGHT
                + flowcontrol::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
        }
    }
}

pub struct ApiState {
    pub store: Arc<dyn Store>,
    /// The admin's bearer token.
    pub token: String,
    /// Signs and checks service account tokens, the other bearer tokens
    /// the API accepts.
    pub tokens: Arc<crate::tokens::TokenIssuer>,
    pub options: ApiOptions,
    /// Flips to true when the server shuts down, ending open watches.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// Signs the certificates of joining nodes (none in unit tests).
    pub node_signer: Option<Arc<crate::auth::credential::NodeSigner>>,
    /// Takes snapshots of the store and data dir (none in memory).
    pub snapshots: Option<Arc<crate::snapshot::Snapshotter>>,
    /// The RBAC authorizer's view of roles and bindings.
    pub rbac: Arc<crate::auth::rbac::Rbac>,
    /// The Node authorizer's graph of what each node's pods reference
    /// (followed from the store by a task started with the server).
    pub node_graph: Arc<crate::auth::NodeGraph>,
    /// The APIServices, and the client identity toward extension servers.
    pub aggregator: Arc<crate::api::aggregator::Aggregator>,
    /// The custom resources this server serves, from the CRDs in its
    /// store (followed by a task started with the server).
    pub custom: Arc<custom::CustomResources>,
    /// The admission webhooks of the webhook configurations (followed
    /// from the store by a task started with the server).
    pub webhooks: Arc<admission::webhook::Webhooks>,
    /// The bound ValidatingAdmissionPolicies, compiled (followed from the
    /// store by a task started with the server).
    pub policies: Arc<admission::policy::Policies>,
    /// API Priority and Fairness: the configuration (followed from the
    /// store by a task started with the server) and the levels' seats.
    pub flowcontrol: Arc<flowcontrol::FlowControl>,
}

/// The API as an axum router.
pub fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .fallback(dispatch)
        .with_state(state)
        .layer(middleware::from_fn(compression::gzip))
        .layer(middleware::from_fn(log_request))
}

/// One line per request at debug; failures of the server itself at warn.
async fn log_request(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let uri = req.uri().clone();
    let started = Instant::now();
    let response = next.run(req).await;
    let status = response.status();
    let micros = started.elapsed().as_micros() as u64;
    if status.is_server_error() {
        tracing::warn!(%method, %uri, status = status.as_u16(), micros, "request failed");
    } else {
        tracing::debug!(%method, %uri, status = status.as_u16(), micros, "request");
    }
    response
}

/// What a resource URL names.
#[derive(Debug, Clone)]
pub struct Target {
    pub res: &'static ResourceInfo,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// What the CRD says of a custom resource's version (None for
    /// built-in resources).
    pub custom: Option<Arc<custom::CustomVersion>>,
}

/// The resource served at `group`/`version` under `plural`: a built-in
/// one, else one of `custom`.
fn resource_at(
    custom: &custom::CustomResources,
    group: &str,
    version: &str,
    plural: &str,
) -> Option<(&'static ResourceInfo, Option<Arc<custom::CustomVersion>>)> {
    if let Some(r) = resources::by_path(group, version, plural) {
        return Some((r, None));
    }
    let v = custom.by_path(group, version, plural)?;
    Some((v.res, Some(v)))
}

/// Parses the part of a resource URL after `/api/v1` or `/apis/<g>/<v>`.
fn parse_target(
    custom: &custom::CustomResources,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Option<Target> {
    let is_namespaced_plural = |plural: &str| {
        resource_at(custom, group, version, plural).is_some_and(|(r, _)| r.namespaced)
    };
    let (namespace, rest): (Option<String>, &[&str]) = match rest {
        ["namespaces", ns, plural, tail @ ..] if is_namespaced_plural(plural) => {
            (Some(ns.to_string()), &rest[2..][..1 + tail.len()])
        }
        _ => (None, rest),
    };
    let (plural, name, sub) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(name.to_string()), None),
        [plural, name, sub] => (*plural, Some(name.to_string()), Some(sub.to_string())),
        _ => return None,
    };
    let (res, custom) = resource_at(custom, group, version, plural)?;
    if res.namespaced && namespace.is_none() && name.is_some() {
        return None;
    }
    Some(Target {
        res,
        namespace,
        name,
        subresource: sub,
        custom,
    })
}

/// Everything a verb handler needs of the request.
pub struct ApiRequest {
    /// Who sent it (after impersonation).
    pub who: crate::auth::Identity,
    pub method: Method,
    pub target: Target,
    pub query: HashMap<String, String>,
    pub headers: HeaderMap,
    /// The form of the answer its Accept header asks for.
    pub output: negotiate::Output,
    pub body: Bytes,
    /// The most a body may decode to (`--max-body-bytes`): YAML whose
    /// aliases expand past it is refused.
    pub body_limit: usize,
}

impl ApiRequest {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }

    pub fn flag(&self, name: &str) -> bool {
        matches!(self.param(name), Some("true") | Some("1"))
    }
}

async fn dispatch(State(state): State<Arc<ApiState>>, req: Request) -> Response {
    match route(state, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn route(state: Arc<ApiState>, req: Request) -> ApiResult<Response> {
    let (parts, body) = req.into_parts();
    let (method, uri, headers) = (
        parts.method.clone(),
        parts.uri.clone(),
        parts.headers.clone(),
    );
    let path = uri.path().trim_end_matches('/');
    match path {
        "/healthz" | "/readyz" | "/livez" => {
            return Ok((StatusCode::OK, "ok").into_response());
        }
        "/version" => return Ok(json_response(StatusCode::OK, &discovery::version())),
        _ => {}
    }
    // The web view's files hold no data: served before authentication.
    if state.options.ui && ui::is_ui(uri.path()) {
        return Ok(ui::serve(&method, uri.path(), &headers));
    }
    let peer = parts.extensions.get::<crate::auth::PeerCert>().cloned();
    let in_process = parts.extensions.get::<authn::InProcessUser>();
    let who = authn::authenticate(&state, &headers, peer.as_ref(), in_process).await?;
    let who = authn::impersonate(&state, who, &headers).await?;
    // API Priority and Fairness: the request waits for a seat of its
    // level (or is refused) and its answer names its schema and level.
    let digest = flow_digest(&who, &method, &uri);
    if digest.is_long_running() {
        return serve_authenticated(state, parts, body, who).await;
    }
    let admitted = match state.flowcontrol.admit(&digest).await {
        Ok(admitted) => admitted,
        Err(rejected) => {
            let mut response = ApiError::too_many_requests().into_response();
            rejected.annotate(response.headers_mut());
            return Ok(response);
        }
    };
    let mut response = match serve_authenticated(state, parts, body, who).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    if let Some(admitted) = &admitted {
        admitted.annotate(response.headers_mut());
    }
    // A watch's seat is given back here, once its answer has started.
    drop(admitted);
    Ok(response)
}

/// What flow control looks at of a request: who sent it and what it asks.
fn flow_digest(
    who: &crate::auth::Identity,
    method: &Method,
    uri: &http::Uri,
) -> flowcontrol::matching::RequestDigest {
    let user = who.user_info();
    let watch = bosun::serving::query_pairs(uri)
        .iter()
        .any(|(k, v)| k == "watch" && (v == "true" || v == "1"));
    let what = flowcontrol::matching::resource_request(method.as_str(), uri.path(), watch)
        .unwrap_or_else(|| flowcontrol::Asked::NonResource {
            verb: method.as_str().to_ascii_lowercase(),
            path: uri.path().to_string(),
        });
    flowcontrol::matching::RequestDigest {
        user: user.name,
        groups: user.groups,
        what,
    }
}

/// Everything after authentication (and flow control): the verb on the
/// resource a URL names, discovery, OpenAPI, proxies.
async fn serve_authenticated(
    state: Arc<ApiState>,
    parts: http::request::Parts,
    body: Body,
    who: crate::auth::Identity,
) -> ApiResult<Response> {
    let (method, uri, headers) = (
        parts.method.clone(),
        parts.uri.clone(),
        parts.headers.clone(),
    );
    let path = uri.path().trim_end_matches('/');
    if path == bosun::snapshot::PATH {
        return snapshot::serve(&state, &who, &method).await;
    }
    if who == crate::auth::Identity::Anonymous && !authn::anonymous_allowed(&method, path) {
        return Err(ApiError::unauthorized());
    }
    if let Some((target, rest)) = proxy::backend::parse(uri.path()) {
        authn::authorize(&state, &who, &method, &target, false, None, None).await?;
        return proxy::backend::serve(&state, &target, &rest, parts, body).await;
    }
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // A group version an APIService hands to an extension server.
    if let ["apis", group, version, rest @ ..] = segments.as_slice() {
        if let Some(remote) = state.aggregator.remote(group, version) {
            return crate::api::aggregator::proxy::serve(&state, &who, remote, rest, parts, body)
                .await;
        }
    }
    let (group, version, rest): (&str, &str, &[&str]) = match segments.as_slice() {
        ["api"] => {
            return Ok(discovery::serve_root(
                &custom::resources(&state.custom),
                true,
                &headers,
            ))
        }
        ["apis"] => {
            state.custom.caught_up().await;
            return Ok(crate::api::aggregator::discovery::serve_apis(
                &state.aggregator,
                &custom::resources(&state.custom),
                &headers,
            ));
        }
        ["apis", group] => {
            return crate::api::aggregator::discovery::group(
                &state.aggregator,
                &custom::resources(&state.custom),
                group,
            )
            .map(|d| json_response(StatusCode::OK, &d))
            .ok_or_else(|| ApiError::not_found_path(path));
        }
        ["api", version] => {
            return discovery::resource_list(&custom::resources(&state.custom), "", version)
                .map(|d| json_response(StatusCode::OK, &d))
                .ok_or_else(|| ApiError::not_found_path(path));
        }
        ["apis", group, version] => {
            return discovery::resource_list(&custom::resources(&state.custom), group, version)
                .map(|d| json_response(StatusCode::OK, &d))
                .ok_or_else(|| ApiError::not_found_path(path));
        }
        ["openapi", rest @ ..] => {
            // A CRD established a moment ago is in the documents.
            state.custom.caught_up().await;
            return openapi::serve(&state.custom, rest, &headers, uri.query())
                .ok_or_else(|| ApiError::not_found_path(path));
        }
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(ApiError::not_found_path(path)),
    };
    let mut target = parse_target(&state.custom, group, version, rest);
    if target.is_none() {
        // A CRD established a moment ago may not be followed yet.
        state.custom.caught_up().await;
        target = parse_target(&state.custom, group, version, rest);
    }
    let target = target.ok_or_else(|| ApiError::not_found_path(path))?;
    let watch = bosun::serving::query_pairs(&uri)
        .iter()
        .any(|(k, v)| k == "watch" && (v == "true" || v == "1"));
    let selected = authn::selected_name(&bosun::serving::query_pairs(&uri));
    let selected = selected.as_deref().filter(|_| target.name.is_none());
    if proxy::is_proxied(&target) {
        authn::authorize(&state, &who, &method, &target, watch, selected, None).await?;
        let pairs = bosun::serving::query_pairs(&uri);
        return proxy::serve(&state, &target, pairs, parts).await;
    }
    let body = read_body(body, state.options.body_limit).await?;
    authn::authorize(&state, &who, &method, &target, watch, selected, Some(&body)).await?;
    let output = negotiate::negotiate(&headers, target.custom.is_some())?;
    let req = ApiRequest {
        who,
        method,
        output,
        query: bosun::serving::query_pairs(&uri).into_iter().collect(),
        target,
        headers,
        body,
        body_limit: state.options.body_limit,
    };
    if metrics::is_metrics(&req.target) {
        return metrics::serve(&state, req).await;
    }
    if component_status::is_component_status(&req.target) {
        return component_status::serve(&state, req).await;
    }
    handle(&state, req).await
}

/// Reads a request body of at most `limit` bytes. A larger one is read to
/// its end (up to a bound) and discarded, so the client gets the 413
/// instead of a connection cut in the middle of its upload.
async fn read_body(body: Body, limit: usize) -> ApiResult<Bytes> {
    const DRAIN_LIMIT: usize = 64 * 1024 * 1024;
    let mut stream = body.into_data_stream();
    let mut buf = Vec::new();
    let mut seen = 0usize;
    while let Some(chunk) = futures::StreamExt::next(&mut stream).await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(format!("reading the body: {e}")))?;
        seen += chunk.len();
        if seen <= limit {
            buf.extend_from_slice(&chunk);
        } else if seen > DRAIN_LIMIT {
            break;
        }
    }
    if seen > limit {
        return Err(ApiError::too_large(limit));
    }
    Ok(Bytes::from(buf))
}

/// The entry of `res`'s resource that objects are stored in.
pub fn storage_resource(res: &'static ResourceInfo) -> &'static ResourceInfo {
    if !res.is_builtin() {
        return custom::intern::storage_entry(res);
    }
    RESOURCES
        .iter()
        .find(|r| r.group == res.group && r.plural == res.plural && r.is_storage_version())
        .unwrap_or(res)
}

/// Runs the verb a request asks for on its resource.
async fn handle(state: &Arc<ApiState>, req: ApiRequest) -> ApiResult<Response> {
    let t = &req.target;
    if let Some(sub) = &t.subresource {
        let known = t.res.has_subresource(sub);
        if !known {
            return Err(ApiError::not_found_path(&format!(
                "{}/{}",
                t.res.plural, sub
            )));
        }
    }
    if t.res.is_create_only() {
        if t.res.group.is_empty() && t.res.plural == "bindings" {
            return match req.method {
                Method::POST if t.name.is_none() => binding::create_binding(state, &req).await,
                _ => Err(ApiError::method_not_allowed(
                    "the server does not allow this method on the requested resource (bindings)",
                )),
            };
        }
        return reviews::create(state, &req).await;
    }
    if let Some(v) = &t.custom {
        custom::serve::check(v, &req)?;
    }
    // The metadata-only form asked for must fit the answer: a list's for
    // list and deletecollection, one object's for the rest (a watch sends
    // single objects). Refused before anything is done.
    let list = matches!(req.method, Method::GET | Method::DELETE)
        && t.name.is_none()
        && !req.flag("watch");
    let what = if list {
        format!("{}List", t.res.kind)
    } else {
        t.res.kind.to_string()
    };
    negotiate::check_shape(&req.output, list, &what)?;
    let sub = t.subresource.as_deref();
    match (&req.method, t.name.is_some(), sub) {
        (&Method::GET, false, None) => {
            if req.flag("watch") {
                watch::serve(state, &req).await
            } else {
                list::list(state, &req).await
            }
        }
        (&Method::POST, false, None) => create::create(state, &req).await,
        (&Method::DELETE, false, None) => delete::delete_collection(state, &req).await,
        (&Method::POST, true, Some("binding")) => binding::bind(state, &req).await,
        (_, true, Some("binding")) => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource (pods/binding)",
        )),
        (&Method::POST, true, Some("eviction")) => eviction::evict(state, &req).await,
        (&Method::POST, true, Some("token")) => token::create_token(state, &req).await,
        (_, true, Some("token")) => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource (serviceaccounts/token)",
        )),
        (_, true, Some("eviction")) => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource (pods/eviction)",
        )),
        (&Method::GET, true, Some("scale")) => scale::get_scale(state, &req).await,
        (&Method::PUT | &Method::PATCH, true, Some("scale")) => {
            scale::write_scale(state, &req).await
        }
        (&Method::GET, true, _) => get::get(state, &req).await,
        (&Method::PUT, true, _) => update::update(state, &req).await,
        (&Method::PATCH, true, _) => patch::patch(state, &req).await,
        (&Method::DELETE, true, None) => delete::delete(state, &req).await,
        _ => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({} {})",
            req.method, t.res.plural
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_their_targets() {
        let custom = custom::CustomResources::new(Arc::new(
            crate::store::EmbeddedStore::in_memory(Default::default()).unwrap(),
        ));
        let parse_target = |g, v, rest: &[&str]| parse_target(&custom, g, v, rest);
        let t = parse_target(
            "",
            "v1",
            &["namespaces", "default", "pods", "web", "status"],
        )
        .unwrap();
        assert_eq!(t.res.kind, "Pod");
        assert_eq!(t.namespace.as_deref(), Some("default"));
        assert_eq!(t.name.as_deref(), Some("web"));
        assert_eq!(t.subresource.as_deref(), Some("status"));

        let t = parse_target("", "v1", &["namespaces", "default"]).unwrap();
        assert_eq!(t.res.kind, "Namespace");
        assert_eq!(t.name.as_deref(), Some("default"));

        let t = parse_target("", "v1", &["namespaces", "kube-system", "status"]).unwrap();
        assert_eq!(t.res.kind, "Namespace");
        assert_eq!(t.subresource.as_deref(), Some("status"));

        let t = parse_target("apps", "v1", &["deployments"]).unwrap();
        assert!(t.namespace.is_none() && t.name.is_none());

        assert!(parse_target("", "v1", &["pods", "web"]).is_none());
        assert!(parse_target("", "v1", &["widgets"]).is_none());
        assert!(parse_target("apps", "v1", &["pods"]).is_none());
    }
}
