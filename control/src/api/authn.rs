//! The API's door: who a request comes from ([`crate::auth::Identity`],
//! from its client certificate or bearer token) and whether it may do
//! what it asks ([`crate::auth::authorize`]); and the one endpoint a
//! bootstrap token is good for, trading it for a node certificate.

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use bosun::bootstrap::{self as bt, BootstrapToken};
use http::{HeaderMap, Method, StatusCode};
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use super::{token, ApiState, Target};
use crate::auth::{self, Attributes, Identity, PeerCert};

/// Who sent the request: a node by its client certificate, else by its
/// bearer token (the admin's, a bootstrap token, a service account's);
/// anonymous with neither. A bearer token that is none of these is a 401.
pub async fn authenticate(
    state: &ApiState,
    headers: &HeaderMap,
    peer: Option<&PeerCert>,
) -> ApiResult<Identity> {
    if let Some(p) = peer {
        return Ok(Identity::of_certificate(p));
    }
    let Some(presented) = bosun::serving::bearer_token(headers) else {
        return Ok(Identity::Anonymous);
    };
    if bosun::serving::bearer_token_matches(&state.token, headers) {
        return Ok(Identity::Admin);
    }
    if let Ok(t) = BootstrapToken::parse(presented) {
        return match auth::bootstrap::authenticate(state.store.as_ref(), &t, chrono::Utc::now())
            .await
        {
            Ok(id) => Ok(Identity::Bootstrap(id)),
            Err(why) => {
                tracing::info!(%why, "bootstrap token refused");
                Err(ApiError::unauthorized())
            }
        };
    }
    if token::service_account_authenticated(state, headers).await {
        return Ok(Identity::ServiceAccount);
    }
    Err(ApiError::unauthorized())
}

/// Whether an anonymous request may go on: only to read cluster-info.
pub fn anonymous_allowed(method: &Method, path: &str) -> bool {
    method == Method::GET
        && path
            == format!(
                "/api/v1/namespaces/{}/configmaps/{}",
                bt::CLUSTER_INFO_NAMESPACE,
                bt::CLUSTER_INFO
            )
}

/// A 403 unless `who` may do what the request asks of `target` (`body`:
/// what it sends, whose name a create is judged by).
pub async fn authorize(
    state: &ApiState,
    who: &Identity,
    method: &Method,
    target: &Target,
    watch: bool,
    body: Option<&Bytes>,
) -> ApiResult<()> {
    if matches!(who, Identity::Admin | Identity::ServiceAccount) {
        return Ok(());
    }
    if *who == Identity::Anonymous {
        // Only cluster-info gets this far (see anonymous_allowed).
        return Ok(());
    }
    // What anybody may read, anybody authenticated may read too (a node
    // reads the service range there).
    if method == Method::GET
        && !watch
        && target.res.plural == "configmaps"
        && target.namespace.as_deref() == Some(bt::CLUSTER_INFO_NAMESPACE)
        && target.name.as_deref() == Some(bt::CLUSTER_INFO)
        && target.subresource.is_none()
    {
        return Ok(());
    }
    let created: Option<String> = match (method, &target.name, body) {
        (&Method::POST, None, Some(b)) => serde_json::from_slice::<Value>(b)
            .ok()
            .and_then(|v| v["metadata"]["name"].as_str().map(String::from)),
        _ => None,
    };
    let attrs = Attributes {
        user: who.user(),
        verb: auth::verb(method, target.name.is_some(), watch),
        group: target.res.group,
        resource: target.res.plural,
        subresource: target.subresource.as_deref(),
        namespace: target.namespace.as_deref(),
        name: target.name.as_deref(),
        created_name: created.as_deref(),
    };
    auth::authorize(state.store.as_ref(), who, &attrs)
        .await
        .map_err(|message| {
            tracing::debug!(user = %attrs.user, %message, "forbidden");
            ApiError::forbidden(message)
        })
}

/// `POST /bootstrap/node-credential` with `{"request": "<PEM CSR>"}`:
/// the node's certificate, signed by the cluster CA, as
/// `{"nodeName": ..., "certificate": "<PEM>"}`, valid for the optional
/// `expirationSeconds` of the request. For a bootstrap token (or the
/// admin), and for a node renewing its own certificate.
pub async fn node_credential(
    state: &ApiState,
    who: &Identity,
    method: &Method,
    body: &Bytes,
) -> ApiResult<Response> {
    if method != Method::POST {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on {}",
            bt::NODE_CREDENTIAL_PATH
        )));
    }
    if *who == Identity::Anonymous {
        return Err(ApiError::unauthorized());
    }
    let signer = state
        .node_signer
        .as_ref()
        .ok_or_else(|| ApiError::internal("this server signs no node certificates"))?;
    let request: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))?;
    let csr = request["request"]
        .as_str()
        .ok_or_else(|| ApiError::bad_request("request: required (a PEM certificate request)"))?;
    let expiration = match &request["expirationSeconds"] {
        Value::Null => None,
        v => Some(v.as_i64().ok_or_else(|| {
            ApiError::bad_request("expirationSeconds: must be an integer number of seconds")
        })?),
    };
    let asked = auth::credential::requested_node(csr)
        .map_err(|e| ApiError::bad_request(format!("request: {e}")))?;
    auth::credential::may_request(who, &asked).map_err(ApiError::forbidden)?;
    let (node, certificate) = signer
        .sign(csr, expiration)
        .map_err(|e| ApiError::bad_request(format!("request: {e}")))?;
    tracing::info!(%node, by = %who.user(), "signed a node certificate");
    Ok((
        StatusCode::CREATED,
        [(http::header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(&json!({"nodeName": node, "certificate": certificate}))
            .unwrap_or_default(),
    )
        .into_response())
}
