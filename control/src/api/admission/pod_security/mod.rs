//! Pod Security Admission, as upstream's `pod-security-admission`
//! (`admission/admission.go`): each namespace's labels
//! `pod-security.kubernetes.io/{enforce,audit,warn}[-version]`, over the
//! cluster default of `--pod-security-default`, name a level
//! (privileged, baseline, restricted) per mode.
//!
//! - Pods: `enforce` refuses a create (403, `violates PodSecurity
//!   "baseline:latest": ...`); an update is checked only if it changes
//!   what matters (containers, images, ephemeral containers); status and
//!   the other subresources are not pods and pass.
//! - Workloads with a pod template (Deployment, ReplicaSet, StatefulSet,
//!   DaemonSet, Job, CronJob): `warn` and `audit` only, never `enforce`
//!   (their pods meet `enforce` when the controller creates them).
//! - `warn` answers with `Warning:` headers (`would violate PodSecurity
//!   ...`), only when the request is not refused.
//! - `audit`: bosun keeps no audit log; where upstream adds the audit
//!   annotation `pod-security.kubernetes.io/audit-violations` to the
//!   request's audit event, bosun logs it (info, target
//!   `bosun_control::api::admission::pod_security`). Nothing is written
//!   on the object, as upstream.
//! - Namespaces ([`namespace`]): bad label values are refused (422), and
//!   a stricter `enforce` returns warnings naming the existing pods that
//!   would violate it.
//!
//! [`levels`] parses labels and the flag; [`registry`] picks the checks of
//! a level and version; [`baseline`] and [`restricted`] are the checks,
//! in the words of [`policy`].

#[cfg(test)]
mod admission_tests;
mod baseline;
pub mod levels;
mod namespace;
mod policy;
mod registry;
mod restricted;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use bosun::resources::ResourceInfo;
use bosun::validation::FieldError;
use serde_json::{json, Value};

pub use levels::{Level, LevelVersion, Policy, Version};
use policy::{forbidden_detail, Forbidden, PodView};

use crate::api::error::{ApiError, ApiResult};
use crate::api::object::meta_str;
use crate::api::request::{namespace_of, stored_core};
use crate::api::{ApiRequest, ApiState};

/// Pod subresources that do not change the pod's spec (upstream's
/// `ignoredPodSubresources`); any other one is checked as a pod.
const IGNORED_POD_SUBRESOURCES: &[&str] = &[
    "exec",
    "attach",
    "binding",
    "eviction",
    "log",
    "portforward",
    "proxy",
    "status",
];

/// Checks a create (`old` is `None`) or update of `obj` (defaulted and
/// validated) against the Pod Security policy of its namespace; the
/// warnings for the client, or the refusal.
pub async fn admit(
    state: &ApiState,
    req: &ApiRequest,
    obj: &Value,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    let res = req.target.res;
    if res.group.is_empty() && res.kind == "Namespace" {
        return namespace::admit(state, req, obj, old).await;
    }
    if res.group.is_empty() && res.kind == "Pod" {
        return admit_pod(state, req, obj, old).await;
    }
    if has_pod_template(res) {
        return admit_workload(state, req, obj).await;
    }
    Ok(Vec::new())
}

/// Kinds that embed a pod template (upstream's `defaultPodSpecResources`
/// besides pods).
fn has_pod_template(res: &ResourceInfo) -> bool {
    matches!(
        (res.group, res.kind),
        ("", "ReplicationController" | "PodTemplate")
            | (
                "apps",
                "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet"
            )
            | ("batch", "Job" | "CronJob")
    )
}

/// The pod template of a workload, if it has one.
fn pod_template<'a>(kind: &str, obj: &'a Value) -> Option<&'a Value> {
    let pointer = match kind {
        "CronJob" => "/spec/jobTemplate/spec/template",
        "PodTemplate" => "/template",
        _ => "/spec/template",
    };
    obj.pointer(pointer).filter(|t| !t.is_null())
}

/// A namespace's labels (string values only).
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The policy of the namespace `ns` (its labels over the cluster default),
/// or `None` if it is not there.
async fn namespace_policy(
    state: &ApiState,
    ns: &str,
) -> ApiResult<Option<(Policy, Vec<FieldError>)>> {
    let found = stored_core(state, "Namespace", "", ns).await?;
    Ok(found.map(|n| levels::policy_to_evaluate(&labels_of(&n), &state.options.pod_security)))
}

fn namespace_name(req: &ApiRequest, obj: &Value) -> String {
    meta_str(obj, "namespace")
        .or_else(|| namespace_of(req))
        .unwrap_or_default()
        .to_string()
}

async fn admit_pod(
    state: &ApiState,
    req: &ApiRequest,
    obj: &Value,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    if let Some(sub) = req.target.subresource.as_deref() {
        if IGNORED_POD_SUBRESOURCES.contains(&sub) {
            return Ok(Vec::new());
        }
    }
    if old.is_some_and(|old| !significant_pod_update(obj, old)) {
        return Ok(Vec::new());
    }
    let ns = namespace_name(req, obj);
    let (policy, errors) = namespace_policy(state, &ns)
        .await?
        .ok_or_else(|| ApiError::internal(format!("failed to lookup namespace {ns:?}")))?;
    if errors.is_empty() && policy.fully_privileged() {
        return Ok(Vec::new());
    }
    let view = PodView::new(obj.get("metadata"), &obj["spec"])
        .map_err(|e| ApiError::bad_request(format!("failed to decode pod: {e}")))?;
    let name = meta_str(obj, "name").unwrap_or_default();
    Evaluation::new(req.target.res, &ns, name, policy, &errors).run(&view, true)
}

/// Workloads are checked on every create and update, as upstream.
async fn admit_workload(state: &ApiState, req: &ApiRequest, obj: &Value) -> ApiResult<Vec<String>> {
    if req.target.subresource.is_some() {
        return Ok(Vec::new());
    }
    let ns = namespace_name(req, obj);
    // Never refuses: a failed lookup lets the workload through.
    let (policy, errors) = match namespace_policy(state, &ns).await {
        Ok(Some(p)) => p,
        Ok(None) => return Ok(Vec::new()),
        Err(e) => {
            tracing::warn!(namespace = %ns, error = %e.message, "pod security: failed to lookup namespace");
            return Ok(Vec::new());
        }
    };
    if errors.is_empty()
        && policy.warn.level == Level::Privileged
        && policy.audit.level == Level::Privileged
    {
        return Ok(Vec::new());
    }
    let Some(template) = pod_template(req.target.res.kind, obj) else {
        return Ok(Vec::new());
    };
    let view = match PodView::new(template.get("metadata"), &template["spec"]) {
        Ok(v) => v,
        Err(e) => {
            tracing::info!(namespace = %ns, error = %e, "pod security: failed to extract pod template");
            return Ok(Vec::new());
        }
    };
    let name = meta_str(obj, "name").unwrap_or_default();
    Evaluation::new(req.target.res, &ns, name, policy, &errors).run(&view, false)
}

/// One request's evaluation of a pod (or template) in each mode, each
/// level and version evaluated once.
struct Evaluation<'a> {
    res: &'static ResourceInfo,
    namespace: &'a str,
    name: &'a str,
    policy: Policy,
    cache: Vec<(LevelVersion, Vec<Forbidden>)>,
}

impl<'a> Evaluation<'a> {
    fn new(
        res: &'static ResourceInfo,
        namespace: &'a str,
        name: &'a str,
        policy: Policy,
        label_errors: &[FieldError],
    ) -> Self {
        if !label_errors.is_empty() {
            let errors: Vec<String> = label_errors.iter().map(FieldError::message).collect();
            tracing::debug!(namespace, errors = %errors.join("; "), "failed to parse PodSecurity namespace labels");
        }
        Evaluation {
            res,
            namespace,
            name,
            policy,
            cache: Vec::new(),
        }
    }

    fn results(&mut self, lv: LevelVersion, pod: &PodView) -> Vec<Forbidden> {
        if let Some((_, r)) = self.cache.iter().find(|(l, _)| *l == lv) {
            return r.clone();
        }
        let r = registry::evaluate(lv, pod);
        self.cache.push((lv, r.clone()));
        r
    }

    /// Upstream's `EvaluatePod`: enforce (if asked), audit, then warn
    /// unless refused.
    fn run(mut self, pod: &PodView, enforce: bool) -> ApiResult<Vec<String>> {
        let policy = self.policy;
        let mut refusal = None;
        if enforce {
            let r = self.results(policy.enforce, pod);
            if !r.is_empty() {
                refusal = Some(self.forbidden(&format!(
                    "violates PodSecurity \"{}\": {}",
                    policy.enforce,
                    forbidden_detail(&r)
                )));
            }
        }
        let audit = self.results(policy.audit, pod);
        if !audit.is_empty() {
            tracing::info!(
                namespace = self.namespace,
                name = self.name,
                resource = self.res.plural,
                audit_violations = %format!(
                    "would violate PodSecurity \"{}\": {}",
                    policy.audit,
                    forbidden_detail(&audit)
                ),
                "pod-security.kubernetes.io/audit-violations"
            );
        }
        if let Some(e) = refusal {
            return Err(e);
        }
        let warn = self.results(policy.warn, pod);
        if warn.is_empty() {
            return Ok(Vec::new());
        }
        Ok(vec![format!(
            "would violate PodSecurity \"{}\": {}",
            policy.warn,
            forbidden_detail(&warn)
        )])
    }

    /// Upstream's `NewForbidden`: `pods "x" is forbidden: ...`.
    fn forbidden(&self, why: &str) -> ApiError {
        let mut details = json!({"name": self.name, "kind": self.res.plural});
        if !self.res.group.is_empty() {
            details["group"] = json!(self.res.group);
        }
        ApiError {
            code: 403,
            reason: "Forbidden",
            message: format!(
                "{} \"{}\" is forbidden: {why}",
                self.res.plural_group(),
                self.name
            ),
            details: Some(details),
        }
    }
}

/// Whether a pod update changes what the checks look at (upstream's
/// `isSignificantPodUpdate`): the number of containers or init
/// containers, an image, or an ephemeral container added or changed.
fn significant_pod_update(pod: &Value, old: &Value) -> bool {
    fn list<'a>(o: &'a Value, field: &str) -> &'a [Value] {
        o.get("spec")
            .and_then(|s| s.get(field))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }
    for field in ["containers", "initContainers"] {
        let (new, old) = (list(pod, field), list(old, field));
        if new.len() != old.len() || new.iter().zip(old).any(|(n, o)| n["image"] != o["image"]) {
            return true;
        }
    }
    let old_ephemeral = list(old, "ephemeralContainers");
    list(pod, "ephemeralContainers").iter().any(|c| {
        match old_ephemeral.iter().find(|o| o["name"] == c["name"]) {
            None => true,
            Some(o) => o["image"] != c["image"],
        }
    })
}
