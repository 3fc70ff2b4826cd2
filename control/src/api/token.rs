//! Service account tokens on the API: the `serviceaccounts/token`
//! subresource (TokenRequest, what the kubelet asks for a pod's projected
//! token) and accepting those tokens as bearer tokens, as
//! kube-apiserver's service account authenticator does: signed by this
//! control plane, for the API's audience, not expired, and the service
//! account (and the pod it is bound to) still the same object, by uid.

use axum::response::Response;
use bosun::resources;
use http::{HeaderMap, StatusCode};
use serde_json::{json, Value};

use super::decode::decode_body;
use super::error::{ApiError, ApiResult};
use super::object::meta_str;
use super::request::stored_core;
use super::{ApiRequest, ApiState};
use crate::tokens::{Claims, Ref, ISSUER};
use bosun::validation::FieldError;

/// Shortest and default lifetime of a requested token (TokenRequest's
/// `expirationSeconds`), and the longest validation takes; the server's
/// `--service-account-max-token-expiration` shortens longer ones.
const MIN_SECONDS: i64 = 600;
const DEFAULT_SECONDS: i64 = 3600;
const MAX_SECONDS: i64 = 1 << 32;

/// The lifetime a token gets for `requested` seconds under the server's
/// maximum `max` (0: none), and the warning kube-apiserver gives when it
/// shortens one.
pub fn clamp_expiration(requested: i64, max: i64) -> (i64, Option<String>) {
    if max > 0 && requested > max {
        (
            max,
            Some(format!(
                "requested expiration of {requested} seconds shortened to {max} seconds"
            )),
        )
    } else {
        (requested, None)
    }
}

/// Whether the request's bearer token is a valid service account token.
pub async fn service_account_authenticated(
    state: &ApiState,
    headers: &HeaderMap,
) -> Option<crate::auth::UserInfo> {
    let token = bosun::serving::bearer_token(headers)?;
    service_account_user(state, token).await
}

/// The service account user a token is for, if it is valid and its
/// service account (and pod, for a bound token) still exist.
pub async fn service_account_user(state: &ApiState, token: &str) -> Option<crate::auth::UserInfo> {
    let claims = match state
        .tokens
        .verify(token, ISSUER, chrono::Utc::now().timestamp())
    {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(error = %e, "bearer token refused");
            return None;
        }
    };
    let k = &claims.kubernetes;
    let same = |obj: Option<Value>, r: &Ref| {
        obj.is_some_and(|o| meta_str(&o, "uid") == Some(r.uid.as_str()))
    };
    let sa = stored_core(
        state,
        "ServiceAccount",
        &k.namespace,
        &k.serviceaccount.name,
    )
    .await;
    if !same(sa.ok().flatten(), &k.serviceaccount) {
        tracing::debug!(sub = %claims.sub, "token's service account is gone");
        return None;
    }
    let mut user = crate::auth::UserInfo::service_account(
        &k.namespace,
        &k.serviceaccount.name,
        &k.serviceaccount.uid,
    );
    if let Some(pod) = &k.pod {
        let p = stored_core(state, "Pod", &k.namespace, &pod.name).await;
        if !same(p.ok().flatten(), pod) {
            tracing::debug!(sub = %claims.sub, pod = %pod.name, "token's pod is gone");
            return None;
        }
        // As upstream's service account authenticator records them.
        user.extra.insert(
            "authentication.kubernetes.io/pod-name".into(),
            vec![pod.name.clone()],
        );
        user.extra.insert(
            "authentication.kubernetes.io/pod-uid".into(),
            vec![pod.uid.clone()],
        );
    }
    Some(user)
}

fn invalid(name: &str, errors: Vec<FieldError>) -> ApiError {
    ApiError::invalid(
        resources::by_kind("v1", "ServiceAccount").expect("served"),
        name,
        &errors,
    )
}

/// `POST .../serviceaccounts/<name>/token`: a signed token for the
/// service account, bound to the object the request names.
pub async fn create_token(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    let ns = req.target.namespace.as_deref().unwrap_or("default");
    let name = req.target.name.as_deref().unwrap_or("");
    let body = decode_body(req)?;
    let spec = &body["spec"];
    let requested = spec["expirationSeconds"]
        .as_i64()
        .unwrap_or(DEFAULT_SECONDS);
    let seconds = requested;
    if !(MIN_SECONDS..=MAX_SECONDS).contains(&seconds) {
        return Err(invalid(
            name,
            vec![FieldError::invalid(
                "spec.expirationSeconds",
                seconds,
                if seconds < MIN_SECONDS {
                    "may not specify a duration less than 10 minutes"
                } else {
                    "may not specify a duration larger than 2^32 seconds"
                },
            )],
        ));
    }
    let (seconds, warning) = clamp_expiration(seconds, state.options.max_token_expiration_seconds);
    let audiences: Vec<String> = match spec["audiences"].as_array() {
        Some(a) if !a.is_empty() => a
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        _ => vec![ISSUER.to_string()],
    };
    let sa = stored_core(state, "ServiceAccount", ns, name)
        .await?
        .ok_or_else(|| {
            ApiError::not_found(
                resources::by_kind("v1", "ServiceAccount").expect("served"),
                name,
            )
        })?;
    let sa_ref = Ref {
        name: name.to_string(),
        uid: meta_str(&sa, "uid").unwrap_or_default().to_string(),
    };
    let bound = &spec["boundObjectRef"];
    if let crate::auth::Identity::Node(node) = &req.who {
        node_may_bind(state, node, ns, name, bound).await?;
    }
    let pod = match bound["kind"].as_str() {
        None => None,
        Some("Pod") => {
            let pod_name = bound["name"].as_str().unwrap_or_default();
            let pod = bound_pod(state, ns, bound).await?;
            if pod["spec"]["serviceAccountName"]
                .as_str()
                .unwrap_or("default")
                != name
            {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token for serviceaccount {name:?} to pod running with different serviceaccount name."
                )));
            }
            let uid = meta_str(&pod, "uid").unwrap_or_default();
            if let Some(want) = bound["uid"].as_str().filter(|u| !u.is_empty()) {
                if want != uid {
                    return Err(ApiError::conflict(
                        resources::by_kind("v1", "Pod").expect("served"),
                        pod_name,
                        &format!(
                            "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
                        ),
                    ));
                }
            }
            Some(Ref {
                name: pod_name.to_string(),
                uid: uid.to_string(),
            })
        }
        Some(other) => {
            return Err(invalid(
                name,
                vec![FieldError::not_supported(
                    "spec.boundObjectRef.kind",
                    other,
                    &["Pod"],
                )],
            ))
        }
    };
    let now = chrono::Utc::now().timestamp();
    let claims = Claims::new(ns, sa_ref, pod, audiences.clone(), now, seconds);
    let token = state.tokens.sign(&claims);
    let expires = chrono::DateTime::from_timestamp(claims.exp, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let out = json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": null},
        "spec": {
            "audiences": audiences,
            "expirationSeconds": seconds,
            "boundObjectRef": if bound.is_object() { bound.clone() } else { Value::Null },
        },
        "status": {"token": token, "expirationTimestamp": expires},
    });
    let mut response = super::object_response(&req.headers, StatusCode::CREATED, &out);
    if let Some(w) = warning {
        if let Ok(v) = http::HeaderValue::from_str(&format!("299 - \"{w}\"")) {
            response.headers_mut().append("Warning", v);
        }
    }
    Ok(response)
}

/// NodeRestriction for a node's TokenRequest: bound to a pod of its own
/// ([`crate::auth::node::admission::admit_token`]); the named pod missing
/// is a 404, as upstream.
async fn node_may_bind(
    state: &ApiState,
    node: &str,
    ns: &str,
    name: &str,
    bound: &Value,
) -> ApiResult<()> {
    use crate::auth::node::admission::{admit_token, token_binding};
    let forbidden = |why: String| {
        ApiError::forbidden(format!("serviceaccounts \"{name}\" is forbidden: {why}"))
    };
    token_binding(bound).map_err(forbidden)?;
    let pod = bound_pod(state, ns, bound).await?;
    admit_token(node, bound, &pod).map_err(forbidden)
}

/// The pod a TokenRequest's `boundObjectRef` names, or a 404.
async fn bound_pod(state: &ApiState, ns: &str, bound: &Value) -> ApiResult<Value> {
    let pod_name = bound["name"].as_str().unwrap_or_default();
    stored_core(state, "Pod", ns, pod_name)
        .await?
        .ok_or_else(|| {
            ApiError::not_found(resources::by_kind("v1", "Pod").expect("served"), pod_name)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_requests_are_shortened_to_the_servers_maximum() {
        assert_eq!(clamp_expiration(3600, 86400), (3600, None));
        assert_eq!(
            clamp_expiration(172800, 86400),
            (
                86400,
                Some("requested expiration of 172800 seconds shortened to 86400 seconds".into())
            )
        );
        // 0: no maximum beyond validation's.
        assert_eq!(clamp_expiration(MAX_SECONDS, 0), (MAX_SECONDS, None));
    }
}
