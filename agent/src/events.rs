//! Events the agent records on pods and its node, as the kubelet does
//! (`source.component: kubelet`).

use chrono::{SecondsFormat, Utc};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, PostParams};
use kube::Client;
use serde_json::json;

use crate::worker::PodEvent;

#[derive(Clone)]
pub struct Recorder {
    client: Client,
    node: String,
}

impl Recorder {
    pub fn new(client: Client, node: &str) -> Self {
        Recorder {
            client,
            node: node.to_string(),
        }
    }

    /// Posts the events in the background; a lost event is logged, never
    /// an error for the pod.
    pub fn pod_events(&self, pod: &Pod, events: Vec<PodEvent>) {
        if events.is_empty() {
            return;
        }
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
        let node = self.node.clone();
        tokio::spawn(async move {
            for e in events {
                let now = Utc::now();
                let stamp = now.to_rfc3339_opts(SecondsFormat::Secs, true);
                let mut involved = json!({"kind": "Pod", "apiVersion": "v1", "namespace": ns,
                    "name": name, "uid": uid});
                if let Some(p) = &e.field_path {
                    involved["fieldPath"] = json!(p);
                }
                let event = json!({
                    "metadata": {"name": format!("{name}.{:x}", now.timestamp_nanos_opt().unwrap_or_default()),
                                 "namespace": ns},
                    "involvedObject": involved,
                    "reason": e.reason,
                    "message": e.message,
                    "type": e.type_,
                    "source": {"component": "kubelet", "host": node},
                    "reportingComponent": "kubelet",
                    "reportingInstance": node,
                    "firstTimestamp": stamp,
                    "lastTimestamp": stamp,
                    "count": 1,
                });
                let event: Event = match serde_json::from_value(event) {
                    Ok(e) => e,
                    Err(_) => continue,
                };
                if let Err(err) = api.create(&PostParams::default(), &event).await {
                    tracing::debug!(error = %err, reason = e.reason, "recording an event");
                }
            }
        });
    }
}
