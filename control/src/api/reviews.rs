//! The review kinds, created and answered, never stored:
//! `authorization.k8s.io/v1` SelfSubjectAccessReview (`kubectl auth
//! can-i`), SubjectAccessReview, LocalSubjectAccessReview and
//! SelfSubjectRulesReview (`kubectl auth can-i --list`), and
//! `authentication.k8s.io/v1` SelfSubjectReview (`kubectl auth whoami`)
//! and TokenReview. Each answers with what it was sent plus `status`.

use axum::response::Response;
use http::StatusCode;
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{json, Value};

use super::decode::decode_body;
use super::error::{ApiError, ApiResult};
use super::{object_response, ApiRequest, ApiState};
use crate::auth::{self, rbac::rule, Attributes, Identity, UserInfo};

pub(super) async fn create(state: &ApiState, req: &ApiRequest) -> ApiResult<Response> {
    if req.method != http::Method::POST || req.target.name.is_some() {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({})",
            req.target.res.plural
        )));
    }
    let mut review = decode_body(req)?;
    let kind = req.target.res.kind;
    review["apiVersion"] = json!(req.target.res.api_version());
    review["kind"] = json!(kind);
    let spec = review["spec"].clone();
    let status = match kind {
        "SelfSubjectReview" => json!({"userInfo": user_json(&req.who.user_info())}),
        "TokenReview" => token_review(state, &spec).await,
        "SelfSubjectRulesReview" => {
            let ns = spec["namespace"].as_str().unwrap_or("");
            rules_review(state, &req.who.user_info(), ns)
        }
        "SelfSubjectAccessReview" => access_review(state, &req.who, &spec).await?,
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            if kind == "LocalSubjectAccessReview" {
                let url_ns = req.target.namespace.as_deref().unwrap_or("");
                let ns = spec["resourceAttributes"]["namespace"]
                    .as_str()
                    .unwrap_or("");
                if ns != url_ns {
                    return Err(ApiError::bad_request(format!(
                        "spec.resourceAttributes.namespace must match namespace: {url_ns}"
                    )));
                }
            }
            let who = subject(&spec)?;
            access_review(state, &who, &spec).await?
        }
        _ => return Err(ApiError::not_found_path(req.target.res.plural)),
    };
    review["status"] = status;
    Ok(object_response(&req.headers, StatusCode::CREATED, &review))
}

fn user_json(u: &UserInfo) -> Value {
    let mut out = json!({"username": u.name, "groups": u.groups});
    if !u.uid.is_empty() {
        out["uid"] = json!(u.uid);
    }
    if !u.extra.is_empty() {
        out["extra"] = json!(u.extra);
    }
    out
}

/// The identity a SubjectAccessReview asks about: a node's is judged by
/// the Node authorizer too, as upstream's recognises nodes by their
/// user and group.
fn subject(spec: &Value) -> ApiResult<Identity> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let user = UserInfo {
        name: spec["user"].as_str().unwrap_or("").to_string(),
        uid: spec["uid"].as_str().unwrap_or("").to_string(),
        groups: strings(&spec["groups"]),
        extra: spec["extra"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
            .unwrap_or_default(),
    };
    if user.name.is_empty() && user.groups.is_empty() {
        return Err(invalid(
            "spec.user",
            "at least one of user or group must be specified",
        ));
    }
    let node = user
        .name
        .strip_prefix(bosun::bootstrap::NODE_USER_PREFIX)
        .filter(|_| user.in_group(bosun::bootstrap::NODES_GROUP));
    Ok(match node {
        Some(n) => Identity::Node(n.to_string()),
        None => Identity::User(user),
    })
}

async fn access_review(state: &ApiState, who: &Identity, spec: &Value) -> ApiResult<Value> {
    let res = &spec["resourceAttributes"];
    let non = &spec["nonResourceAttributes"];
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or("").to_string();
    if res.is_object() == non.is_object() {
        return Err(invalid(
            "spec.resourceAttributes",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    let user = who.user_info();
    if non.is_object() {
        let (verb, path) = (s(non, "verb"), s(non, "path"));
        let request = rule::Request::NonResource {
            verb: &verb,
            path: &path,
        };
        let allowed = user.is_master() || state.rbac.allows(&user, &request, None).await;
        return Ok(decision(allowed, ""));
    }
    let (verb, group, resource) = (s(res, "verb"), s(res, "group"), s(res, "resource"));
    let (subresource, name, namespace) =
        (s(res, "subresource"), s(res, "name"), s(res, "namespace"));
    let attrs = Attributes {
        user: user.name.clone(),
        verb: &verb,
        group: &group,
        resource: &resource,
        subresource: Some(subresource.as_str()).filter(|s| !s.is_empty()),
        namespace: Some(namespace.as_str()).filter(|s| !s.is_empty()),
        name: Some(name.as_str()).filter(|s| !s.is_empty()),
        created_name: None,
    };
    Ok(
        match auth::authorize(
            state.store.as_ref(),
            &state.rbac,
            &state.node_graph,
            who,
            &attrs,
        )
        .await
        {
            Ok(()) => decision(true, ""),
            Err(_) => decision(false, ""),
        },
    )
}

fn invalid(field: &str, detail: &str) -> ApiError {
    let res = bosun::resources::by_path("authorization.k8s.io", "v1", "subjectaccessreviews")
        .expect("served");
    let error = bosun::validation::FieldError::invalid(field, "", detail);
    ApiError::invalid(res, "", &[error])
}

fn decision(allowed: bool, reason: &str) -> Value {
    let mut status = json!({"allowed": allowed});
    if !reason.is_empty() {
        status["reason"] = json!(reason);
    }
    status
}

fn strings(v: &Option<Vec<String>>) -> Vec<String> {
    v.clone().unwrap_or_default()
}

/// What `user` may do in `namespace`: upstream's `RulesFor`, rules on
/// resources and on URLs apart.
fn rules_review(state: &ApiState, user: &UserInfo, namespace: &str) -> Value {
    let rules: Vec<PolicyRule> = state
        .rbac
        .index()
        .rules_for(user, Some(namespace).filter(|n| !n.is_empty()));
    let mut resource_rules = Vec::new();
    let mut url_rules = Vec::new();
    for r in &rules {
        if r.non_resource_urls.as_ref().is_some_and(|u| !u.is_empty()) {
            url_rules
                .push(json!({"verbs": r.verbs, "nonResourceURLs": strings(&r.non_resource_urls)}));
        } else {
            let mut rr = json!({
                "verbs": r.verbs,
                "apiGroups": strings(&r.api_groups),
                "resources": strings(&r.resources),
            });
            if r.resource_names.as_ref().is_some_and(|n| !n.is_empty()) {
                rr["resourceNames"] = json!(strings(&r.resource_names));
            }
            resource_rules.push(rr);
        }
    }
    json!({
        "resourceRules": resource_rules,
        "nonResourceRules": url_rules,
        "incomplete": false,
    })
}

/// Whether `spec.token` is one this server accepts, and whose.
async fn token_review(state: &ApiState, spec: &Value) -> Value {
    let token = spec["token"].as_str().unwrap_or("");
    // Every byte compared, so the time taken does not reveal a prefix.
    let is_admin = !token.is_empty()
        && token.len() == state.token.len()
        && token
            .bytes()
            .zip(state.token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    let user = if is_admin {
        Some(Identity::Admin.user_info())
    } else {
        super::token::service_account_user(state, token).await
    };
    match user {
        Some(u) => json!({
            "authenticated": true,
            "user": user_json(&u),
            "audiences": spec["audiences"].as_array().cloned().unwrap_or_default(),
        }),
        None => json!({"authenticated": false, "error": "invalid bearer token"}),
    }
}
