//! The API's door: who a request comes from ([`crate::auth::Identity`],
//! from its client certificate or bearer token) and whether it may do
//! what it asks ([`crate::auth::authorize`]); and the one endpoint a
//! bootstrap token is good for, trading it for a node certificate.

use axum::body::Bytes;
use bosun::bootstrap::{self as bt, BootstrapToken};
use http::{HeaderMap, Method};
use serde_json::Value;

use super::error::{ApiError, ApiResult};
use super::{token, ApiState, Target};
use crate::auth::{self, Attributes, Identity, PeerCert, UserInfo};

/// Who sent the request: a node by its client certificate, else by its
/// bearer token (the admin's, a bootstrap token, a service account's);
/// anonymous with neither. A bearer token that is none of these is a 401.
pub async fn authenticate(
    state: &ApiState,
    headers: &HeaderMap,
    peer: Option<&PeerCert>,
    in_process: Option<&InProcessUser>,
) -> ApiResult<Identity> {
    if let Some(u) = in_process {
        return Ok(Identity::User(u.0.clone()));
    }
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
    if let Some(user) = token::service_account_authenticated(state, headers).await {
        return Ok(Identity::ServiceAccount(user));
    }
    Err(ApiError::unauthorized())
}

/// The user of a request made in process (the scheduler's, a
/// controller's): a request extension, which no request from the network
/// can carry.
#[derive(Debug, Clone)]
pub struct InProcessUser(pub UserInfo);

/// The identity a request acts as: its sender's, or the one its
/// `Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid` and
/// `Impersonate-Extra-<key>` headers name, each of which the sender must
/// be allowed to `impersonate` (as kube-apiserver's impersonation filter).
pub async fn impersonate(
    state: &ApiState,
    who: Identity,
    headers: &HeaderMap,
) -> ApiResult<Identity> {
    let all = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok().map(String::from))
            .collect()
    };
    let user = all("impersonate-user").into_iter().next();
    let groups = all("impersonate-group");
    let uid = all("impersonate-uid").into_iter().next();
    let mut extra: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (k, v) in headers {
        if let Some(key) = k.as_str().strip_prefix("impersonate-extra-") {
            let key = percent_decode(key);
            extra
                .entry(key)
                .or_default()
                .push(v.to_str().unwrap_or("").to_string());
        }
    }
    let Some(user) = user else {
        if groups.is_empty() && uid.is_none() && extra.is_empty() {
            return Ok(who);
        }
        return Err(ApiError::bad_request(
            "requested impersonation of groups, uid or extra without impersonating a user",
        ));
    };
    let sender = who.user_info();
    // What the sender must be allowed to impersonate: (group, resource,
    // namespace, name, subresource), each with the verb `impersonate`.
    type Ask = (
        &'static str,
        &'static str,
        Option<String>,
        Option<String>,
        Option<String>,
    );
    let mut asks: Vec<Ask> = Vec::new();
    match crate::auth::user::split_service_account(&user) {
        Some((ns, name)) => asks.push((
            "",
            "serviceaccounts",
            Some(ns.to_string()),
            Some(name.to_string()),
            None,
        )),
        None => asks.push(("", "users", None, Some(user.clone()), None)),
    }
    for g in &groups {
        asks.push(("", "groups", None, Some(g.clone()), None));
    }
    if let Some(u) = &uid {
        asks.push(("authentication.k8s.io", "uids", None, Some(u.clone()), None));
    }
    for (key, values) in &extra {
        for v in values {
            let (v, key) = (Some(v.clone()), Some(key.clone()));
            asks.push(("authentication.k8s.io", "userextras", None, v, key));
        }
    }
    for (group, resource, namespace, name, sub) in &asks {
        let attrs = Attributes {
            user: sender.name.clone(),
            verb: "impersonate",
            group,
            resource,
            subresource: sub.as_deref(),
            namespace: namespace.as_deref(),
            name: name.as_deref(),
            created_name: None,
        };
        auth::authorize(
            state.store.as_ref(),
            &state.rbac,
            &state.node_graph,
            &who,
            &attrs,
        )
        .await
        .map_err(|_| ApiError::forbidden(attrs.forbidden("")))?;
    }
    let mut info = UserInfo {
        name: user.clone(),
        uid: uid.unwrap_or_default(),
        groups,
        extra,
    };
    if let Some((ns, _)) = crate::auth::user::split_service_account(&user) {
        if info.groups.is_empty() {
            info.groups = vec![
                crate::auth::user::SERVICE_ACCOUNTS.into(),
                format!("{}:{ns}", crate::auth::user::SERVICE_ACCOUNTS),
            ];
        }
    }
    if user == crate::auth::user::ANONYMOUS {
        if !info.in_group(crate::auth::user::ALL_UNAUTHENTICATED) {
            info.groups
                .push(crate::auth::user::ALL_UNAUTHENTICATED.into());
        }
    } else if !info.in_group(crate::auth::user::ALL_AUTHENTICATED) {
        info.groups
            .push(crate::auth::user::ALL_AUTHENTICATED.into());
    }
    let node = user
        .strip_prefix(bt::NODE_USER_PREFIX)
        .filter(|_| info.in_group(bt::NODES_GROUP));
    Ok(match node {
        Some(n) => Identity::Node(n.to_string()),
        None => Identity::User(info),
    })
}

/// `Impersonate-Extra-` keys are percent-encoded.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
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

/// The name a list or watch asks for by its field selector
/// (`metadata.name=NAME` or `==`), which names the object as upstream's
/// RequestInfo takes it (a node may watch one referenced Secret so).
pub fn selected_name(query: &[(String, String)]) -> Option<String> {
    let (_, selector) = query.iter().find(|(k, _)| k == "fieldSelector")?;
    // Upstream's RequestInfo: the selector as the list will parse it, and
    // its exact match on metadata.name (RequiresExactMatch).
    let selector = bosun::selector::FieldSelector::parse(selector).ok()?;
    selector
        .terms()
        .iter()
        .find(|t| t.field == "metadata.name" && !t.negated)
        .map(|t| t.value.clone())
}

/// A 403 unless `who` may do what the request asks of `target` (`body`:
/// what it sends, whose name a create is judged by; `selected`: the name
/// a list or watch selects, see [`selected_name`]).
pub async fn authorize(
    state: &ApiState,
    who: &Identity,
    method: &Method,
    target: &Target,
    watch: bool,
    selected: Option<&str>,
    body: Option<&Bytes>,
) -> ApiResult<()> {
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
    // The name a create asks for, which only RBAC looks at (a master's
    // request is allowed before it, so its body is not parsed here).
    let created: Option<String> = match (method, &target.name, body) {
        _ if who.user_info().is_master() => None,
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
        name: target.name.as_deref().or(selected),
        created_name: created.as_deref(),
    };
    authorize_attributes(state, who, &attrs).await
}

/// A 403 unless `who` may do what `attrs` describe: the authorizer
/// chain of [`authorize`] for a request bosun does not serve itself (an
/// aggregated API's resources).
pub async fn authorize_attributes(
    state: &ApiState,
    who: &Identity,
    attrs: &auth::Attributes<'_>,
) -> ApiResult<()> {
    auth::authorize(
        state.store.as_ref(),
        &state.rbac,
        &state.node_graph,
        who,
        attrs,
    )
    .await
    .map_err(|message| {
        // The in-process components are held to their roles: a
        // refusal of theirs is a missing rule, worth seeing.
        if matches!(who, Identity::User(_)) {
            tracing::warn!(user = %attrs.user, %message, "forbidden");
        } else {
            tracing::debug!(user = %attrs.user, %message, "forbidden");
        }
        ApiError::forbidden(message)
    })
}

/// A 403 if the request would grant, through the role or binding `obj`,
/// more than its sender holds (RBAC's escalation prevention).
pub async fn no_escalation(
    state: &ApiState,
    req: &super::ApiRequest,
    obj: &Value,
) -> ApiResult<()> {
    if req.target.res.group != auth::rbac::GROUP {
        return Ok(());
    }
    auth::rbac::escalation::check(&state.rbac, &req.who.user_info(), req.target.res.kind, obj)
        .await
        .map_err(ApiError::forbidden)
}

#[cfg(test)]
mod tests {
    use super::selected_name;

    fn selected(selector: &str) -> Option<String> {
        selected_name(&[("fieldSelector".to_string(), selector.to_string())])
    }

    #[test]
    fn the_selected_name_is_the_exact_match_on_metadata_name() {
        assert_eq!(selected("metadata.name=web").as_deref(), Some("web"));
        assert_eq!(selected("metadata.name==web,").as_deref(), Some("web"));
        assert_eq!(
            selected("type=Opaque,metadata.name=web").as_deref(),
            Some("web")
        );
        // As the list parses it: nothing trimmed, no negation, no bad selector.
        assert_eq!(selected(" metadata.name=web"), None);
        assert_eq!(selected("metadata.name!=web"), None);
        assert_eq!(selected("metadata.name=a=b"), None);
        assert_eq!(selected("type=Opaque"), None);
        assert_eq!(selected_name(&[]), None);
    }
}
