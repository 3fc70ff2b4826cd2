//! The binding cycle (upstream's `bindingCycle`): once the scheduling
//! cycle chose a node and assumed the pod there, the claims' selected
//! node and the `binding` subresource are written in a task of its own,
//! which reports back to the scheduling loop as a [`Binding`].

use std::sync::Arc;

use bosun::events::EventType;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;

use super::{
    needs_scheduling, pod_fingerprint, pod_ref, preemption, reference, volumes, Scheduler,
};
use crate::observe;
use crate::toolkit::key_of;

/// How one binding cycle ended, for the scheduling loop.
pub struct Binding {
    pod: Arc<Pod>,
    node: String,
    /// When the pod's scheduling attempt began.
    started: std::time::Instant,
    result: kube::Result<()>,
}

impl Binding {
    /// `scheduler_schedule_attempts_total`'s result; none for a pod that
    /// went or was bound by someone else meanwhile.
    fn result(&self) -> Option<&'static str> {
        match &self.result {
            Ok(()) => Some("scheduled"),
            Err(e) if gone_or_bound(e) => None,
            Err(_) => Some("error"),
        }
    }
}

/// A binding refused because the pod is gone (404) or is no longer the
/// pod the binding names, or already bound (409): nothing to do.
fn gone_or_bound(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 409)
}

impl Scheduler {
    /// Starts the binding of `pod`, assumed on `node`, once one of the
    /// [`super::BIND_CONCURRENCY`] slots is free (`started`: when its
    /// scheduling attempt began).
    pub(super) async fn start_binding(
        &self,
        pod: &Arc<Pod>,
        node: &str,
        pod_volumes: volumes::PodVolumes,
        started: std::time::Instant,
    ) {
        let Ok(slot) = self.binding_slots.clone().acquire_owned().await else {
            return; // The semaphore is never closed.
        };
        let (client, reports) = (self.client.clone(), self.bindings.clone());
        let (pod, chosen) = (pod.clone(), node.to_string());
        tokio::spawn(async move {
            let result = match select_node(&client, &pod_volumes, &chosen).await {
                Ok(()) => bind(&client, &pod, &chosen).await,
                Err(e) => {
                    tracing::warn!(pod = %key_of(pod.as_ref()), node = %chosen, error = %e, "selecting the node for its claims");
                    Err(e)
                }
            };
            drop(slot);
            let _ = reports.send(Binding {
                pod,
                node: chosen,
                started,
                result,
            });
        });
    }

    /// A binding task ended. Bound: the pod stays assumed until the pod
    /// cache shows it bound. Refused: the assumption is forgotten (upstream's
    /// `ForgetPod`), and the pod tried again soon unless it went or was
    /// bound meanwhile.
    pub(super) fn on_binding(&mut self, done: Binding) {
        observe::scheduling_attempt(done.result(), done.started);
        let pod = &done.pod;
        let node = &done.node;
        match &done.result {
            Ok(()) => self.recorder.record(
                &reference(pod),
                EventType::Normal,
                "Scheduled",
                format!("Successfully assigned {} to {node}", key_of(pod.as_ref())),
            ),
            Err(e) => {
                self.cache.forget(pod);
                let key = key_of(pod.as_ref());
                if gone_or_bound(e) {
                    tracing::debug!(pod = %key, error = %e, "not binding");
                    self.queue.forget(&key);
                    return;
                }
                tracing::warn!(pod = %key, %node, error = %e, "binding failed");
                self.recorder.record(
                    &reference(pod),
                    EventType::Warning,
                    "FailedScheduling",
                    format!("Binding rejected: {e}"),
                );
                // The pod as the cache holds it now, if it still needs a node.
                match self.pods.get(&pod_ref(&key)) {
                    Some(now) if needs_scheduling(&now) => self.queue.park_briefly(
                        &key,
                        &pod_fingerprint(&now),
                        preemption::priority(&now),
                    ),
                    _ => self.queue.forget(&key),
                }
            }
        }
    }
}

/// Tells the pod's WaitForFirstConsumer claims their node
/// (`volume.kubernetes.io/selected-node`), so their volumes are
/// provisioned there, before the pod is bound.
async fn select_node(
    client: &Client,
    volumes: &volumes::PodVolumes,
    node: &str,
) -> kube::Result<()> {
    use bosun::well_known::ANN_SELECTED_NODE;
    for (ns, name) in &volumes.to_select {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {ANN_SELECTED_NODE: node}}})),
        )
        .await?;
    }
    Ok(())
}

/// Binds `pod` to `node` through the `binding` subresource, naming the
/// pod's uid so that a pod made again under the name is not bound by it.
async fn bind(client: &Client, pod: &Pod, node: &str) -> kube::Result<()> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let binding = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": ns, "uid": pod.metadata.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    api.create_subresource::<_, serde_json::Value>(
        "binding",
        name,
        &PostParams::default(),
        &binding,
    )
    .await
    .map(|_| ())
}
