//! Events the agent records on pods and its node, as the kubelet does
//! (`source.component: kubelet`). Repeats (a failing probe, a back-off)
//! are aggregated by the shared recorder into one Event with a count.

use bosun::events::{EventRecorder, EventSource, EventType};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Client;

use crate::worker::PodEvent;

#[derive(Clone)]
pub struct Recorder {
    inner: EventRecorder,
}

impl Recorder {
    pub fn new(client: Client, node: &str) -> Self {
        Recorder {
            inner: EventRecorder::new(
                client,
                EventSource {
                    component: "kubelet".into(),
                    host: Some(node.to_string()),
                },
            ),
        }
    }

    /// Queues the events; a lost event is logged, never an error for the pod.
    pub fn pod_events(&self, pod: &Pod, events: Vec<PodEvent>) {
        for e in events {
            let object = ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                namespace: Some(
                    pod.metadata
                        .namespace
                        .clone()
                        .unwrap_or_else(|| "default".into()),
                ),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
                field_path: e.field_path.clone(),
                ..Default::default()
            };
            let type_ = if e.type_ == "Warning" {
                EventType::Warning
            } else {
                EventType::Normal
            };
            self.inner.record(&object, type_, e.reason, e.message);
        }
    }
}
