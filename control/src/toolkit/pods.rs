//! Making pods for an owner (kube-controller-manager's `controller_utils`):
//! a pod from the owner's template, creation in slow-start batches, and
//! which pods still count as the owner's live replicas.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodCondition, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Resource, ResourceExt};

use bosun::events::{EventRecorder, EventType};
use bosun::owners::controller_ref;

use super::api_errors::{code_of, message_of};
use super::clock::to_chrono;
use super::Expectations;

/// A new pod from `template` for `owner` (`controller.GetPodFromTemplate`):
/// the template's labels, annotations and finalizers, the owner's
/// namespace, a name generated from `<owner>-`, and the owner as its
/// controller. Callers that name pods themselves (StatefulSets) set
/// `metadata.name` afterwards.
pub fn pod_from_template<O: Resource<DynamicType = ()>>(
    owner: &O,
    template: Option<&PodTemplateSpec>,
) -> Pod {
    let template = template.cloned().unwrap_or_default();
    let md = template.metadata.unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", owner.name_any())),
            namespace: owner.namespace(),
            labels: md.labels,
            annotations: md.annotations,
            finalizers: md.finalizers,
            owner_references: Some(vec![controller_ref(owner)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// The pod's phase ("" before the agent reported one).
pub fn phase_of(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// Whether a pod still counts as a replica: not being deleted and not
/// finished (`controller.IsPodActive`).
pub fn is_active(pod: &Pod) -> bool {
    let phase = phase_of(pod);
    pod.metadata.deletion_timestamp.is_none() && phase != "Succeeded" && phase != "Failed"
}

/// The pod's Ready condition, when it is True.
fn ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
}

/// Whether the pod's Ready condition is True (`podutil.IsPodReady`).
pub fn is_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some()
}

/// When the pod last became ready (None if not ready or not recorded).
pub fn ready_since(pod: &Pod) -> Option<DateTime<Utc>> {
    ready_condition(pod)?
        .last_transition_time
        .as_ref()
        .map(to_chrono)
}

/// Running, with its Ready condition True (`isRunningAndReady`).
pub fn running_and_ready(pod: &Pod) -> bool {
    phase_of(pod) == "Running" && is_ready(pod)
}

/// How long until a ready pod has been ready for `min_ready` (zero when
/// it has; None when it is not running and ready).
pub fn until_available(pod: &Pod, min_ready: i64, now: DateTime<Utc>) -> Option<Duration> {
    if !running_and_ready(pod) {
        return None;
    }
    if min_ready <= 0 {
        return Some(Duration::ZERO);
    }
    let since = ready_since(pod).unwrap_or(now);
    let due = since + chrono::Duration::seconds(min_ready);
    Some((due - now).to_std().unwrap_or(Duration::ZERO))
}

/// Runs `count` calls of `attempt` in batches of 1, 2, 4, ... (each batch
/// concurrently) and stops after the first batch in which one failed, so a
/// request the API will always refuse is sent once, not `count` times
/// (`slowStartBatch`). Returns the results of the attempts made.
pub async fn slow_start_batch<T, E, F, Fut>(count: usize, mut attempt: F) -> Vec<Result<T, E>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut results = Vec::with_capacity(count);
    let mut remaining = count;
    let mut batch = remaining.min(1);
    while batch > 0 {
        let outcomes = futures::future::join_all((0..batch).map(|_| attempt())).await;
        remaining -= batch;
        let failed = outcomes.iter().any(Result::is_err);
        results.extend(outcomes);
        if failed {
            break;
        }
        batch = remaining.min(2 * batch);
    }
    results
}

/// Why a pod is being deleted against its owner's wishes: a
/// `DisruptionTarget` condition (Kubernetes 1.26+) with this reason.
pub struct Disruption<'a> {
    pub reason: &'a str,
    pub message: &'a str,
    /// Also set the phase to Failed (pod GC's orphans, whose node cannot).
    pub fail: bool,
    /// The grace period to delete with; None: the pod's own.
    pub grace: Option<u32>,
}

/// Marks the pod with a `DisruptionTarget` condition, then deletes it,
/// both with its uid as a precondition; a pod already gone (or replaced
/// under the same name) is no error.
pub async fn disrupt_and_delete(
    client: &kube::Client,
    pod: &Pod,
    why: &Disruption<'_>,
    now: DateTime<Utc>,
) -> kube::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
    let name = pod.name_any();
    let gone = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 409);
    let mut conditions = serde_json::to_value(
        pod.status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default(),
    )
    .unwrap_or_default();
    if let Some(list) = conditions.as_array_mut() {
        list.retain(|c| c["type"] != "DisruptionTarget");
        list.push(serde_json::json!({
            "type": "DisruptionTarget",
            "status": "True",
            "reason": why.reason,
            "message": why.message,
            "lastTransitionTime": super::from_chrono(now),
        }));
    }
    let mut status = serde_json::json!({"conditions": conditions});
    if why.fail && !matches!(phase_of(pod), "Succeeded" | "Failed") {
        status["phase"] = "Failed".into();
    }
    let patch = serde_json::json!({"metadata": {"uid": pod.metadata.uid}, "status": status});
    match pods
        .patch_status(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(patch),
        )
        .await
    {
        Err(e) if gone(&e) => return Ok(()),
        other => other.map(|_| ())?,
    }
    delete_this_pod(client, pod, why.grace).await
}

/// Deletes this very pod (a uid precondition: not a new one of the same
/// name) with `grace` (None: the pod's own); a pod already gone or
/// replaced is not an error.
pub async fn delete_this_pod(
    client: &kube::Client,
    pod: &Pod,
    grace: Option<u32>,
) -> Result<(), kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
    let params = DeleteParams {
        grace_period_seconds: grace,
        preconditions: Some(kube::api::Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match pods.delete(&pod.name_any(), &params).await {
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        other => other.map(|_| ()),
    }
}

/// Creates and deletes one owner's pods, recording what it expects the
/// cache to see and the events kubectl shows (kube-controller-manager's
/// `PodControl`): `SuccessfulCreate` "Created pod: X", `FailedCreate`
/// "Error creating: ...", `SuccessfulDelete`, `FailedDelete`.
pub struct PodControl<'a> {
    pub api: Api<Pod>,
    pub recorder: &'a EventRecorder,
    /// The owner, as its events name it.
    pub owner: ObjectReference,
    pub expectations: &'a Expectations,
    /// The owner's key in `expectations`.
    pub key: String,
}

impl PodControl<'_> {
    /// Creates `pods` in slow-start batches; the first failure's message.
    pub async fn create(&self, pods: Vec<Pod>) -> Result<(), String> {
        let params = PostParams::default();
        let mut queue = pods.into_iter();
        let results = slow_start_batch(queue.len(), || {
            let pod = queue.next().expect("one pod per attempt");
            let (api, params) = (self.api.clone(), params.clone());
            async move { api.create(&params, &pod).await }
        })
        .await;
        let mut first_error = None;
        for result in results {
            match result {
                Ok(created) => {
                    let name = created.name_any();
                    self.expectations.expect_create(&self.key, &name);
                    self.event(
                        EventType::Normal,
                        "SuccessfulCreate",
                        format!("Created pod: {name}"),
                    );
                }
                Err(e) => {
                    let message = message_of(&e);
                    self.event(
                        EventType::Warning,
                        "FailedCreate",
                        format!("Error creating: {message}"),
                    );
                    first_error.get_or_insert(message);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Deletes `victims` at once; one already gone is no error. The first
    /// failure's message.
    pub async fn delete(&self, victims: &[&Pod]) -> Result<(), String> {
        for v in victims {
            self.expectations
                .expect_delete(&self.key, &v.uid().unwrap_or_default());
        }
        let params = DeleteParams::default();
        let results = futures::future::join_all(victims.iter().map(|v| {
            self.api
                .delete(v.metadata.name.as_deref().unwrap_or_default(), &params)
        }))
        .await;
        let mut first_error = None;
        for (victim, result) in victims.iter().zip(results) {
            let name = victim.name_any();
            match result {
                Ok(_) => self.event(
                    EventType::Normal,
                    "SuccessfulDelete",
                    format!("Deleted pod: {name}"),
                ),
                Err(e) if code_of(&e) == Some(404) => {}
                Err(e) => {
                    // Not deleted: the pod stays, and the owner's next
                    // sync (after its back-off) may try again at once.
                    self.expectations
                        .delete_failed(&self.key, &victim.uid().unwrap_or_default());
                    let message = message_of(&e);
                    self.event(
                        EventType::Warning,
                        "FailedDelete",
                        format!("Error deleting: {message}"),
                    );
                    first_error.get_or_insert(message);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn event(&self, type_: EventType, reason: &str, message: String) {
        self.recorder.record(&self.owner, type_, reason, message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn slow_start_batches_double_and_stop_at_the_first_failure() {
        // Every call fails: one attempt.
        let calls = AtomicUsize::new(0);
        let results = slow_start_batch(10, || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err::<(), _>("refused") }
        })
        .await;
        assert_eq!((calls.load(Ordering::SeqCst), results.len()), (1, 1));

        // The 4th call fails: batches of 1 and 2 succeed, the batch of 4 is
        // tried whole, then nothing more.
        let calls = AtomicUsize::new(0);
        let results = slow_start_batch(10, || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 3 {
                    Err("refused")
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 7);
        assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 6);

        // All succeed: 1 + 2 + 4 + 3 = 10 calls.
        let calls = AtomicUsize::new(0);
        let results = slow_start_batch(10, || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, ()>(()) }
        })
        .await;
        assert_eq!((calls.load(Ordering::SeqCst), results.len()), (10, 10));
        assert!(slow_start_batch(0, || async { Ok::<(), ()>(()) })
            .await
            .is_empty());
    }
}
