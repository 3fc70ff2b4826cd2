//! Events the agent records on pods, as the kubelet does
//! (`source.component: kubelet`): [`PodEvent`], what a pod worker or a
//! probe runner reports, and the [`Recorder`] that posts them. Repeats (a
//! failing probe, a back-off) are aggregated by the shared recorder into
//! one Event with a count.

use bosun::events::{EventRecorder, EventSource, EventType};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Client;

use crate::runtime::Role;

/// An event to record on the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEvent {
    pub type_: EventType,
    pub reason: &'static str,
    pub message: String,
    /// `spec.containers{name}`, as the kubelet sets it.
    pub field_path: Option<String>,
}

impl PodEvent {
    /// A `Normal` event about the pod as a whole.
    pub fn normal(reason: &'static str, message: impl Into<String>) -> PodEvent {
        PodEvent {
            type_: EventType::Normal,
            reason,
            message: message.into(),
            field_path: None,
        }
    }

    /// A `Warning` event about the pod as a whole.
    pub fn warning(reason: &'static str, message: impl Into<String>) -> PodEvent {
        PodEvent {
            type_: EventType::Warning,
            ..PodEvent::normal(reason, message)
        }
    }

    /// The same event, about container `name` of the pod.
    pub fn about(self, role: Role, name: &str) -> PodEvent {
        PodEvent {
            field_path: field_path(role, name),
            ..self
        }
    }
}

/// How an event names a container of the pod (`spec.containers{web}`);
/// the sandbox has no field path.
pub fn field_path(role: Role, name: &str) -> Option<String> {
    match role {
        Role::Init => Some(format!("spec.initContainers{{{name}}}")),
        Role::App => Some(format!("spec.containers{{{name}}}")),
        Role::Ephemeral => Some(format!("spec.ephemeralContainers{{{name}}}")),
        Role::Sandbox => None,
    }
}

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
            self.inner.record(&object, e.type_, e.reason, e.message);
        }
    }
}
