//! Namespaces, as upstream's `ValidateNamespace`: a namespace is created
//! only with valid Pod Security labels (an update may keep bad labels it
//! already had, but not add new ones), and a change that makes `enforce`
//! stricter is answered with warnings naming the existing pods that would
//! violate it (pods of one controller counted together, at most 3000 pods
//! and one second looked at).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::labels_of;
use super::levels::{policy_to_evaluate, Level, LevelVersion};
use super::policy::{forbidden_reason, PodView};
use super::registry::evaluate;
use crate::api::error::{ApiError, ApiResult};
use crate::api::object::{self, meta_str};
use crate::api::{ApiRequest, ApiState};

const MAX_PODS_TO_CHECK: usize = 3000;
const POD_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

pub(super) async fn admit(
    state: &ApiState,
    req: &ApiRequest,
    obj: &Value,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    if req.target.subresource.is_some() {
        return Ok(Vec::new());
    }
    let name = meta_str(obj, "name").unwrap_or_default();
    let defaults = &state.options.pod_security;
    let (new_policy, new_errors) = policy_to_evaluate(&labels_of(obj), defaults);
    let invalid = || ApiError::invalid(req.target.res, name, &new_errors);
    let Some(old) = old else {
        if !new_errors.is_empty() {
            return Err(invalid());
        }
        return Ok(Vec::new());
    };
    let (old_policy, old_errors) = policy_to_evaluate(&labels_of(old), defaults);
    if !new_errors.is_empty() && (old_errors.is_empty() || new_errors != old_errors) {
        return Err(invalid());
    }
    let (new, old) = (new_policy.enforce, old_policy.enforce);
    if new == old
        || new.level == Level::Privileged
        || (new.version == old.version && new.level <= old.level)
    {
        return Ok(Vec::new());
    }
    Ok(check_existing_pods(state, name, new).await)
}

/// Upstream's `EvaluatePodsInNamespace`.
async fn check_existing_pods(state: &ApiState, ns: &str, enforce: LevelVersion) -> Vec<String> {
    let deadline = Instant::now() + POD_CHECK_TIMEOUT;
    let pods_res = bosun::resources::by_name("pods").expect("served");
    let prefix = format!("{}{ns}/", pods_res.storage_prefix());
    let pods: Vec<Value> = match state.store.list(&prefix).await {
        Ok((kvs, _)) => kvs
            .iter()
            .filter_map(|kv| object::from_store(kv).ok())
            .collect(),
        Err(e) => {
            tracing::warn!(namespace = ns, error = %e, "pod security: failed to list pods");
            return vec!["failed to list pods while checking new PodSecurity enforce level".into()];
        }
    };
    let pods = prioritize(pods);
    let total = pods.len();
    let mut checked = 0;
    // Each distinct reason list: the lexically first pod and how many.
    let mut first_seen: Vec<String> = Vec::new();
    let mut counts: HashMap<String, (String, usize)> = HashMap::new();
    for pod in pods.iter().take(MAX_PODS_TO_CHECK) {
        checked += 1;
        let name = meta_str(pod, "name").unwrap_or_default().to_string();
        if let Ok(view) = PodView::new(pod.get("metadata"), &pod["spec"]) {
            let r = evaluate(enforce, &view);
            if !r.is_empty() {
                let warning = forbidden_reason(&r);
                let entry = counts.entry(warning.clone()).or_insert_with(|| {
                    first_seen.push(warning);
                    (name.clone(), 0)
                });
                if name < entry.0 {
                    entry.0 = name;
                }
                entry.1 += 1;
            }
        }
        if Instant::now() > deadline {
            break;
        }
    }
    let mut warnings = Vec::new();
    if checked < total {
        warnings.push(format!(
            "new PodSecurity enforce level only checked against the first {checked} of {total} existing pods"
        ));
    }
    if !first_seen.is_empty() {
        warnings.push(format!(
            "existing pods in namespace {ns:?} violate the new PodSecurity enforce level \"{enforce}\""
        ));
    }
    let mut pod_warnings: Vec<String> = first_seen
        .into_iter()
        .map(|w| {
            let (pod, count) = &counts[&w];
            match count {
                1 => format!("{pod}: {w}"),
                2 => format!("{pod} (and 1 other pod): {w}"),
                n => format!("{pod} (and {} other pods): {w}", n - 1),
            }
        })
        .collect();
    pod_warnings.sort();
    warnings.extend(pod_warnings);
    warnings
}

/// The first pod of each controller first, then the others (upstream's
/// `prioritizePods`), so a few checked pods cover many controllers.
fn prioritize(pods: Vec<Value>) -> Vec<Value> {
    let mut seen_controllers = Vec::new();
    let (mut first, mut duplicates) = (Vec::new(), Vec::new());
    for pod in pods {
        let controller = pod
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|refs| refs.iter().find(|r| r["controller"] == true))
            .and_then(|r| r["uid"].as_str())
            .map(str::to_string);
        match controller {
            Some(uid) if seen_controllers.contains(&uid) => duplicates.push(pod),
            Some(uid) => {
                seen_controllers.push(uid);
                first.push(pod);
            }
            None => first.push(pod),
        }
    }
    first.extend(duplicates);
    first
}
