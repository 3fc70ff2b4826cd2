//! ValidatingAdmissionPolicy, as kube-apiserver's plugin of that name
//! (run just before ValidatingAdmissionWebhook): each binding whose
//! policy matches a write ([`matching`]: the policy's
//! `matchConstraints`, narrowed by the binding's `matchResources`) has
//! the policy evaluated ([`evaluate`]) once per param its `paramRef`
//! selects, with the CEL variables `object`, `oldObject`, `request`,
//! `params`, `namespaceObject` and `variables` (`authorizer` is not
//! offered: an expression naming it does not compile). Policies and
//! bindings are compiled once per version and follow the store
//! ([`configs`]).
//!
//! A validation that fails is enforced by the binding's
//! `validationActions`: Deny refuses the write with upstream's
//! `ValidatingAdmissionPolicy 'NAME' with binding 'BINDING' denied
//! request: MESSAGE` (the validation's reason and its HTTP code: Invalid
//! 422, Forbidden 403, Unauthorized 401, RequestEntityTooLarge 413);
//! Warn answers a `Warning:`; Audit logs upstream's audit annotation
//! `validation.policy.admission.k8s.io/validation_failure` (bosun keeps
//! no audit log; info, target `bosun_control::api::admission::policy`),
//! as it logs each audit annotation (`POLICY/KEY`). An expression that
//! fails to evaluate, or params that cannot be found under
//! `parameterNotFoundAction: Deny`, are failures: a denial under
//! `failurePolicy: Fail`, nothing under Ignore. Policy status
//! (`typeChecking`) is not written.

pub mod configs;
pub mod evaluate;
pub mod matching;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use bosun::resources::ResourceInfo;
use bosun::selector::LabelSelector;
use serde_json::{json, Value};

pub use configs::Policies;
use configs::{Binding, Policy};
use evaluate::{Denial, Inputs};

use crate::api::admission::webhook::matching::{labels_of, Attributes};
use crate::api::admission::webhook::review;
use crate::api::error::{ApiError, ApiResult};
use crate::api::object::{from_storage_version, meta_str};
use crate::api::request::{dry_run, namespace_of};
use crate::api::{ApiRequest, ApiState};

/// The reasons a validation may give, with their HTTP codes.
const REASONS: [(&str, u16); 4] = [
    ("Invalid", 422),
    ("Forbidden", 403),
    ("Unauthorized", 401),
    ("RequestEntityTooLarge", 413),
];

const VALIDATION_FAILURE: &str = "validation.policy.admission.k8s.io/validation_failure";

/// What one write is, for every policy it may reach.
struct Write<'a> {
    state: &'a ApiState,
    req: &'a ApiRequest,
    operation: &'static str,
    name: String,
    namespace: String,
    is_namespace: bool,
    /// The request's Namespace, read once when needed (None: not yet).
    namespace_object: Option<Value>,
}

impl Write<'_> {
    /// The Namespace object of a namespaced request (Null for
    /// cluster-scoped ones and Namespaces themselves).
    async fn namespace_object(&mut self) -> ApiResult<&Value> {
        if self.namespace_object.is_none() {
            let found = if self.namespace.is_empty() || self.is_namespace {
                Value::Null
            } else {
                super::stored_namespace(self.state, &self.namespace)
                    .await?
                    .unwrap_or(Value::Null)
            };
            self.namespace_object = Some(found);
        }
        Ok(self.namespace_object.get_or_insert(Value::Null))
    }

    /// The labels a namespace selector is matched against (None: a
    /// cluster-scoped object other than a Namespace, which always passes).
    async fn selector_labels(
        &mut self,
        selector: &LabelSelector,
        obj: Option<&Value>,
    ) -> ApiResult<Option<BTreeMap<String, String>>> {
        if selector.is_empty() {
            return Ok(None);
        }
        if self.is_namespace {
            return Ok(Some(labels_of(obj)));
        }
        if self.namespace.is_empty() {
            return Ok(None);
        }
        Ok(Some(labels_of(Some(self.namespace_object().await?))))
    }
}

/// Evaluates the bound policies that match a write (`obj` None: a delete
/// of `old`; both in storage version); their warnings, or the first
/// denial.
pub async fn validate(
    state: &ApiState,
    req: &ApiRequest,
    obj: Option<&Value>,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    let snapshot = state.policies.snapshot();
    // Upstream's IsExemptAdmissionConfigurationResource.
    if snapshot.hooks.is_empty() || req.target.res.group == "admissionregistration.k8s.io" {
        return Ok(Vec::new());
    }
    let res = req.target.res;
    let is_namespace = res.group.is_empty() && res.plural == "namespaces";
    let name = obj
        .or(old)
        .and_then(|o| meta_str(o, "name"))
        .or(req.target.name.as_deref())
        .unwrap_or_default()
        .to_string();
    let namespace = if is_namespace {
        name.clone()
    } else {
        namespace_of(req)
            .or_else(|| obj.or(old).and_then(|o| meta_str(o, "namespace")))
            .unwrap_or_default()
            .to_string()
    };
    let mut write = Write {
        state,
        req,
        operation: match (obj, old) {
            (None, _) => "DELETE",
            (Some(_), None) => "CREATE",
            (Some(_), Some(_)) => "UPDATE",
        },
        name,
        namespace,
        is_namespace,
        namespace_object: None,
    };
    let mut warnings = Vec::new();
    let mut denied: Option<(String, String, Denial)> = None;
    for hook in &snapshot.hooks {
        let policy = &hook.policy;
        let labels = write
            .selector_labels(&policy.matcher.namespace_selector, obj.or(old))
            .await?;
        let attrs = attributes(&write, obj, old);
        let Some(matched) =
            matching::matches(&policy.matcher, &attrs, &write.name, labels.as_ref(), false)
        else {
            continue;
        };
        for binding in &hook.bindings {
            if let Some(m) = &binding.matcher {
                let labels = write
                    .selector_labels(&m.namespace_selector, obj.or(old))
                    .await?;
                let attrs = attributes(&write, obj, old);
                if matching::matches(m, &attrs, &write.name, labels.as_ref(), true).is_none() {
                    continue;
                }
            }
            let denials = match params(state, policy, binding, &write.namespace).await {
                Ok(params) => {
                    evaluate_binding(&mut write, policy, matched, obj, old, &params).await?
                }
                Err(why) if policy.ignore_failures => {
                    tracing::debug!(policy = %policy.name, binding = %binding.name, error = %why, "policy binding ignored");
                    Vec::new()
                }
                Err(why) => vec![Denial {
                    message: format!("failed to configure binding: {why}"),
                    reason: None,
                    index: 0,
                }],
            };
            for d in denials {
                act(&write, policy, binding, d, &mut warnings, &mut denied);
            }
        }
    }
    match denied {
        Some((policy, binding, d)) => Err(refusal(req, &write.name, &policy, &binding, &d)),
        None => Ok(warnings),
    }
}

fn attributes<'a>(
    write: &'a Write<'_>,
    obj: Option<&'a Value>,
    old: Option<&'a Value>,
) -> Attributes<'a> {
    Attributes {
        operation: write.operation,
        res: write.req.target.res,
        subresource: write.req.target.subresource.as_deref().unwrap_or_default(),
        namespace: &write.namespace,
        object: obj,
        old_object: old,
    }
}

/// The policy evaluated once per param, on the objects in the version
/// its rules matched; the denials.
async fn evaluate_binding(
    write: &mut Write<'_>,
    policy: &Policy,
    matched: &'static ResourceInfo,
    obj: Option<&Value>,
    old: Option<&Value>,
    params: &[Value],
) -> ApiResult<Vec<Denial>> {
    let object = obj.map_or(Value::Null, |o| from_storage_version(matched, o.clone()));
    let old_object = old.map_or(Value::Null, |o| from_storage_version(matched, o.clone()));
    let mut request = review::review(&review::Review {
        uid: &uuid::Uuid::new_v4().to_string(),
        req: write.req,
        operation: write.operation,
        matched,
        subresource: write.req.target.subresource.as_deref().unwrap_or_default(),
        name: &write.name,
        namespace: &write.namespace,
        object: None,
        old_object: None,
        dry_run: dry_run(write.req),
    })["request"]
        .take();
    if let Some(r) = request.as_object_mut() {
        r.remove("object");
        r.remove("oldObject");
    }
    let namespace_object = write.namespace_object().await?.clone();
    let mut denials = Vec::new();
    for param in params {
        let outcome = evaluate::evaluate(
            policy,
            &Inputs {
                object: &object,
                old_object: &old_object,
                request: &request,
                params: param,
                namespace_object: &namespace_object,
            },
        );
        for (key, value) in outcome.annotations {
            tracing::info!(
                annotation = %format!("{}/{key}", policy.name),
                value = %value,
                resource = write.req.target.res.plural,
                namespace = %write.namespace,
                name = %write.name,
                "validating admission policy audit annotation"
            );
        }
        denials.extend(outcome.denials);
    }
    Ok(denials)
}

/// A denial enforced by the binding's validation actions.
fn act(
    write: &Write<'_>,
    policy: &Policy,
    binding: &Binding,
    d: Denial,
    warnings: &mut Vec<String>,
    denied: &mut Option<(String, String, Denial)>,
) {
    for action in &binding.actions {
        match action.as_str() {
            "Deny" if denied.is_none() => {
                *denied = Some((policy.name.clone(), binding.name.clone(), d.clone()));
            }
            "Warn" => warnings.push(format!(
                "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                policy.name, binding.name, d.message
            )),
            "Audit" => {
                let value = json!([{
                    "message": d.message,
                    "policy": policy.name,
                    "binding": binding.name,
                    "expressionIndex": d.index,
                    "validationActions": binding.actions,
                }]);
                tracing::info!(
                    annotation = VALIDATION_FAILURE,
                    value = %value,
                    resource = write.req.target.res.plural,
                    namespace = %write.namespace,
                    name = %write.name,
                    "validating admission policy audit"
                );
            }
            _ => {}
        }
    }
}

/// Upstream's refusal: admission.NewForbidden's message, the
/// validation's reason (Invalid by default) and its code, the message
/// again as the one cause (kubectl prints `The deployments "x" is
/// invalid: : ValidatingAdmissionPolicy ...`).
pub fn refusal(req: &ApiRequest, name: &str, policy: &str, binding: &str, d: &Denial) -> ApiError {
    let message = format!(
        "ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {}",
        d.message
    );
    let (reason, code) = REASONS
        .iter()
        .find(|(r, _)| Some(*r) == d.reason.as_deref())
        .copied()
        .unwrap_or(REASONS[0]);
    let res = crate::api::storage_resource(req.target.res);
    let mut details = json!({"name": name, "kind": res.plural, "causes": [{"message": message}]});
    if !res.group.is_empty() {
        details["group"] = json!(res.group);
    }
    ApiError {
        code,
        reason,
        message: format!("{} \"{name}\" is forbidden: {message}", res.plural_group()),
        details: Some(details),
    }
}

/// Go's rendering of a ParamKind (`&ParamKind{APIVersion:v1,Kind:ConfigMap,}`).
fn param_kind_string(api_version: &str, kind: &str) -> String {
    format!("&ParamKind{{APIVersion:{api_version},Kind:{kind},}}")
}

/// The params a binding selects for its policy, as upstream's
/// CollectParams: one Null when the policy takes none (or the binding
/// names none); an error is the binding's misconfiguration.
async fn params(
    state: &ApiState,
    policy: &Policy,
    binding: &Binding,
    namespace: &str,
) -> Result<Vec<Value>, String> {
    let (Some((api_version, kind)), Some(pr)) = (&policy.param_kind, &binding.param_ref) else {
        return Ok(vec![Value::Null]);
    };
    let res = bosun::resources::by_kind(api_version, kind)
        .or_else(|| state.custom.by_kind(api_version, kind).map(|v| v.res))
        .ok_or_else(|| {
            format!(
                "paramKind kind `{}` not known",
                param_kind_string(api_version, kind)
            )
        })?;
    let ref_namespace = pr.namespace.as_deref().unwrap_or_default();
    let scope = if res.namespaced {
        if !ref_namespace.is_empty() {
            Some(ref_namespace)
        } else if !namespace.is_empty() {
            Some(namespace)
        } else {
            return Err(
                "cannot use namespaced paramRef in policy binding that matches \
                        cluster-scoped resources"
                    .to_string(),
            );
        }
    } else if !ref_namespace.is_empty() {
        return Err(
            "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
        );
    } else {
        None
    };
    let stored = crate::api::storage_resource(res);
    let read = |kv: &crate::store::KeyValue| {
        crate::api::object::from_store(kv)
            .map(|o| from_storage_version(res, o))
            .map_err(|e| e.message)
    };
    let mut found = Vec::new();
    match (pr.name.as_deref().filter(|n| !n.is_empty()), &pr.selector) {
        (Some(_), Some(_)) => {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".into())
        }
        (Some(name), None) => {
            let kv = state
                .store
                .get(&stored.storage_key(scope, name))
                .await
                .map_err(|e| e.to_string())?;
            if let Some(kv) = kv {
                found.push(read(&kv)?);
            }
        }
        (None, Some(sel)) => {
            let selector = LabelSelector::from_label_selector(sel).map_err(|e| e.to_string())?;
            let prefix = match scope {
                Some(ns) => format!("{}{ns}/", stored.storage_prefix()),
                None => stored.storage_prefix(),
            };
            let (kvs, _) = state.store.list(&prefix).await.map_err(|e| e.to_string())?;
            for kv in &kvs {
                let obj = read(kv)?;
                if selector.matches(&labels_of(Some(&obj))) {
                    found.push(obj);
                }
            }
        }
        (None, None) => return Err("one of name or selector must be provided".into()),
    }
    if found.is_empty() && pr.parameter_not_found_action.as_deref() == Some("Deny") {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        );
    }
    Ok(found)
}
