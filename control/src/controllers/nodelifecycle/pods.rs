//! The pods of a node that is not Ready are not Ready either (Kubernetes'
//! `MarkPodsNotReady`): their Ready condition turns False, so endpoints
//! and DNS stop sending to them while their agent cannot say otherwise.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use bosun::events::{reference_to, EventType};

use super::health::ready_status;
use super::Context;
use crate::toolkit::from_chrono;

/// Marks the pods bound to `node` not Ready, if the node is not Ready.
pub async fn mark_not_ready(ctx: &Context, node: &Node) {
    if ready_status(node) == "True" {
        return;
    }
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let now = from_chrono(ctx.clock.now());
    for pod in ctx.pods.on_node(name) {
        if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(name) {
            continue;
        }
        let Some(status) = pod.status.as_ref() else {
            continue;
        };
        if matches!(status.phase.as_deref(), Some("Succeeded") | Some("Failed")) {
            continue;
        }
        let mut conditions = status.conditions.clone().unwrap_or_default();
        let Some(ready) = conditions
            .iter_mut()
            .find(|c| c.type_ == "Ready" && c.status != "False")
        else {
            continue;
        };
        ready.status = "False".into();
        ready.last_transition_time = Some(now.clone());
        let (pod_name, ns) = (
            pod.metadata.name.clone().unwrap_or_default(),
            pod.metadata.namespace.clone().unwrap_or_default(),
        );
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
        let patch = json!({
            "metadata": {"resourceVersion": pod.metadata.resource_version},
            "status": {"conditions": conditions},
        });
        match pods
            .patch_status(&pod_name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => {
                tracing::info!(pod = %pod_name, namespace = %ns, node = %name,
                    "marked the pod not ready: its node is not ready");
                ctx.recorder.record(
                    &reference_to(pod.as_ref()),
                    EventType::Warning,
                    "NodeNotReady",
                    "Node is not ready",
                );
            }
            // A conflict or a pod gone: the next pass sees the new state.
            Err(e) => tracing::debug!(pod = %pod_name, error = %e, "marking the pod not ready"),
        }
    }
}
