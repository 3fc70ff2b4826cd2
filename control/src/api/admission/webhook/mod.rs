//! Admission webhooks, as kube-apiserver's MutatingAdmissionWebhook and
//! ValidatingAdmissionWebhook plugins: the webhooks of the
//! Mutating-/ValidatingWebhookConfigurations ([`configs`], kept from a
//! watch) whose rules, selectors and conditions match a write
//! ([`matching`]) are sent an AdmissionReview ([`review`]) over HTTPS
//! ([`client`]).
//!
//! - Mutating webhooks run after bosun's own mutating admission,
//!   configurations by name and webhooks in order, one at a time; each
//!   JSONPatch is applied before the next is called. A webhook with
//!   `reinvocationPolicy: IfNeeded` is called once more when a later one
//!   changed the object after it.
//! - Validating webhooks run after validation, all at once.
//! - A refusal is the webhook's status (`admission webhook "NAME" denied
//!   the request: ...`); a call that fails is a 500 (`failed calling
//!   webhook "NAME": ...`) under `failurePolicy: Fail`, and is logged and
//!   skipped under `Ignore`. Warnings go back to the client.
//! - A dry run reaching a webhook whose `sideEffects` is not None or
//!   NoneOnDryRun is refused (400), as upstream.
//! - Writes of the admissionregistration.k8s.io kinds themselves are
//!   never sent to webhooks (upstream's exemption, so a broken webhook
//!   can always be removed).

pub mod client;
pub mod configs;
pub mod matching;
pub mod review;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use configs::Hook;
pub use configs::Webhooks;
use matching::Attributes;

use crate::api::error::{ApiError, ApiResult};
use crate::api::object::{from_storage_version, meta_str, to_storage_version};
use crate::api::request::{dry_run, namespace_of};
use crate::api::{ApiRequest, ApiState};

/// What one write is, for every webhook it may reach.
struct Write<'a> {
    state: &'a ApiState,
    req: &'a ApiRequest,
    operation: &'static str,
    name: String,
    namespace: String,
    /// The namespace's labels, read once when a selector needs them.
    namespace_labels: Option<BTreeMap<String, String>>,
}

fn is_namespace(req: &ApiRequest) -> bool {
    let res = req.target.res;
    res.group.is_empty() && res.plural == "namespaces"
}

impl<'a> Write<'a> {
    fn new(
        state: &'a ApiState,
        req: &'a ApiRequest,
        obj: Option<&Value>,
        old: Option<&Value>,
    ) -> Option<Write<'a>> {
        // Upstream's IsExemptAdmissionConfigurationResource.
        if req.target.res.group == "admissionregistration.k8s.io" {
            return None;
        }
        let operation = match (obj, old) {
            (None, _) => "DELETE",
            (Some(_), None) => "CREATE",
            (Some(_), Some(_)) => "UPDATE",
        };
        let name = obj
            .or(old)
            .and_then(|o| meta_str(o, "name"))
            .or(req.target.name.as_deref())
            .unwrap_or_default()
            .to_string();
        let namespace = if is_namespace(req) {
            name.clone()
        } else {
            namespace_of(req)
                .or_else(|| obj.or(old).and_then(|o| meta_str(o, "namespace")))
                .unwrap_or_default()
                .to_string()
        };
        Some(Write {
            state,
            req,
            operation,
            name,
            namespace,
            namespace_labels: None,
        })
    }

    fn attributes<'b>(&'b self, obj: Option<&'b Value>, old: Option<&'b Value>) -> Attributes<'b> {
        Attributes {
            operation: self.operation,
            res: self.req.target.res,
            subresource: self.req.target.subresource.as_deref().unwrap_or_default(),
            namespace: &self.namespace,
            object: obj,
            old_object: old,
        }
    }

    async fn labels_of_namespace(&mut self) -> ApiResult<&BTreeMap<String, String>> {
        if self.namespace_labels.is_none() {
            let found = super::stored_namespace(self.state, &self.namespace).await?;
            let labels = matching::labels_of(found.as_ref());
            self.namespace_labels = Some(labels);
        }
        Ok(self.namespace_labels.get_or_insert_with(BTreeMap::new))
    }

    /// The version `hook` is called in, when it applies to this write.
    async fn applies(
        &mut self,
        hook: &Hook,
        obj: Option<&Value>,
        old: Option<&Value>,
    ) -> ApiResult<Option<&'static bosun::resources::ResourceInfo>> {
        let attrs = self.attributes(obj, old);
        let Some(matched) = matching::matching_version(hook, &attrs) else {
            return Ok(None);
        };
        if !matching::object_selected(hook, &attrs) {
            return Ok(None);
        }
        let needs_labels = matching::needs_namespace_labels(hook, &attrs);
        let own_labels = is_namespace(self.req).then(|| matching::labels_of(obj.or(old)));
        let conditions = matching::match_conditions_allow(hook, &attrs);
        if !hook.namespace_selector.is_empty() {
            let selected = match own_labels {
                Some(labels) => matching::namespace_selected(hook, &labels),
                None if needs_labels => {
                    matching::namespace_selected(hook, self.labels_of_namespace().await?)
                }
                None => true,
            };
            if !selected {
                return Ok(None);
            }
        }
        match conditions {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(_) if hook.ignore_failures => return Ok(None),
            Err(why) => {
                return Err(ApiError::internal(format!(
                    "failed calling webhook {:?}: {why}",
                    hook.name
                )))
            }
        }
        if dry_run(self.req) && !hook.dry_run_safe {
            return Err(ApiError::bad_request(format!(
                "admission webhook {:?} does not support dry run",
                hook.name
            )));
        }
        Ok(Some(matched))
    }

    /// Calls `hook` about `obj` (storage version) in version `matched`;
    /// `Ok(None)`: the call failed and the failure policy ignores it.
    async fn call(
        &self,
        hook: &Hook,
        mutating: bool,
        matched: &'static bosun::resources::ResourceInfo,
        obj: Option<&Value>,
        old: Option<&Value>,
    ) -> ApiResult<Option<review::Answer>> {
        let object = obj.map(|o| from_storage_version(matched, o.clone()));
        let old_object = old.map(|o| from_storage_version(matched, o.clone()));
        let uid = uuid::Uuid::new_v4().to_string();
        let body = review::review(&review::Review {
            uid: &uid,
            req: self.req,
            operation: self.operation,
            matched,
            subresource: self.req.target.subresource.as_deref().unwrap_or_default(),
            name: &self.name,
            namespace: &self.namespace,
            object: object.as_ref(),
            old_object: old_object.as_ref(),
            dry_run: dry_run(self.req),
        });
        let outcome = match client::call(self.state, hook, &body).await {
            Ok(answer) => review::answer(&uid, mutating, &answer),
            Err(why) => Err(why),
        };
        match outcome {
            Ok(answer) => Ok(Some(answer)),
            Err(why) if hook.ignore_failures => {
                tracing::warn!(webhook = %hook.name, error = %why, "failed calling webhook, failing open");
                Ok(None)
            }
            Err(why) => Err(ApiError::internal(format!(
                "Internal error occurred: failed calling webhook {:?}: {why}",
                hook.name
            ))),
        }
    }
}

/// Calls the mutating webhooks that match a create or update of `obj`
/// (storage version; `old` the stored object on update), applying their
/// patches; their warnings.
pub async fn mutate(
    state: &ApiState,
    req: &ApiRequest,
    obj: &mut Value,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    let snapshot = state.webhooks.snapshot();
    if snapshot.mutating.is_empty() {
        return Ok(Vec::new());
    }
    let Some(mut write) = Write::new(state, req, Some(obj), old) else {
        return Ok(Vec::new());
    };
    let mut warnings = Vec::new();
    // Each IfNeeded webhook called, with the object as it left it.
    let mut reinvocable: Vec<(&Arc<Hook>, Value)> = Vec::new();
    for hook in &snapshot.mutating {
        if mutate_once(&mut write, hook, obj, old, &mut warnings).await? && hook.reinvoke {
            reinvocable.push((hook, obj.clone()));
        }
    }
    for (hook, left) in reinvocable {
        if *obj != left {
            mutate_once(&mut write, hook, obj, old, &mut warnings).await?;
        }
    }
    Ok(warnings)
}

/// One mutating webhook; whether it was called.
async fn mutate_once(
    write: &mut Write<'_>,
    hook: &Hook,
    obj: &mut Value,
    old: Option<&Value>,
    warnings: &mut Vec<String>,
) -> ApiResult<bool> {
    let Some(matched) = write.applies(hook, Some(obj), old).await? else {
        return Ok(false);
    };
    let Some(answer) = write.call(hook, true, matched, Some(obj), old).await? else {
        return Ok(false);
    };
    if !answer.allowed {
        return Err(review::refusal(&hook.name, answer.status.as_ref()));
    }
    warnings.extend(answer.warnings);
    if let Some(patch) = answer.patch {
        *obj = apply_patch(matched, obj, &patch)
            .map_err(|why| ApiError::internal(format!("Internal error occurred: {why}")))?;
    }
    Ok(true)
}

/// `patch` applied to `obj` (storage version) as seen in version
/// `matched`; the result decoded as its kind again and in storage version.
pub fn apply_patch(
    matched: &'static bosun::resources::ResourceInfo,
    obj: &Value,
    patch: &json_patch::Patch,
) -> Result<Value, String> {
    let mut doc = from_storage_version(matched, obj.clone());
    json_patch::patch(&mut doc, patch).map_err(|e| e.to_string())?;
    let doc = bosun::validation::normalize(matched, doc)?;
    Ok(to_storage_version(matched, doc))
}

/// Calls the validating webhooks that match a write (`obj` None: a
/// delete of `old`), all at once; their warnings, or the first refusal
/// in configuration order.
pub async fn validate(
    state: &ApiState,
    req: &ApiRequest,
    obj: Option<&Value>,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    let snapshot = state.webhooks.snapshot();
    if snapshot.validating.is_empty() {
        return Ok(Vec::new());
    }
    let Some(mut write) = Write::new(state, req, obj, old) else {
        return Ok(Vec::new());
    };
    let mut calls = Vec::new();
    for hook in &snapshot.validating {
        if let Some(matched) = write.applies(hook, obj, old).await? {
            calls.push((hook, matched));
        }
    }
    let write = &write;
    let answers = futures::future::join_all(
        calls
            .iter()
            .map(|(hook, matched)| write.call(hook, false, matched, obj, old)),
    )
    .await;
    let mut warnings = Vec::new();
    for ((hook, _), answer) in calls.iter().zip(answers) {
        let Some(answer) = answer? else { continue };
        if !answer.allowed {
            return Err(review::refusal(&hook.name, answer.status.as_ref()));
        }
        warnings.extend(answer.warnings);
    }
    Ok(warnings)
}

/// A delete of `old`: the mutating webhooks are called too (their
/// patches have no object to apply to); the validating ones follow
/// ([`validate`], after the policies).
pub async fn mutate_on_delete(
    state: &ApiState,
    req: &ApiRequest,
    old: &Value,
) -> ApiResult<Vec<String>> {
    let snapshot = state.webhooks.snapshot();
    if snapshot.mutating.is_empty() {
        return Ok(Vec::new());
    }
    let mut warnings = Vec::new();
    if let Some(mut write) = Write::new(state, req, None, Some(old)) {
        for hook in &snapshot.mutating {
            let Some(matched) = write.applies(hook, None, Some(old)).await? else {
                continue;
            };
            if let Some(answer) = write.call(hook, true, matched, None, Some(old)).await? {
                if !answer.allowed {
                    return Err(review::refusal(&hook.name, answer.status.as_ref()));
                }
                warnings.extend(answer.warnings);
            }
        }
    }
    Ok(warnings)
}
