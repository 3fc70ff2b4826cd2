//! The status manager (the kubelet's `status_manager`): the one place
//! that writes a pod's status, and deletes the pod object once a deleted
//! pod's terminal status is written and its containers are gone. One per pod worker; it remembers what it
//! last wrote, so
//!
//! - a status equal to the last one written is not written again (an
//!   idle pod makes no request), and one that failed to be written is
//!   written on the next sync (the worker's retry is the manager's);
//! - the watch's copy of the pod, which may still be from before the last
//!   write, is seen with that write merged in ([`StatusManager::with_own_status`]).

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::Client;
use serde_json::{json, Value};

use super::to_json;
use crate::observe::PodStart;

/// What one pod's status writes remember.
pub struct StatusManager {
    client: Client,
    /// The status last written, and as JSON (the merge patch's `status`).
    written: Option<(PodStatus, Value)>,
    /// Pod start latency, observed from the statuses written.
    start: PodStart,
}

impl StatusManager {
    pub fn new(client: Client) -> Self {
        StatusManager {
            client,
            written: None,
            start: PodStart::default(),
        }
    }

    /// The pod as this agent last left it: the watch may still deliver
    /// the object from before our last status write, and a status
    /// computed from that one would forget what the write set (startTime,
    /// transition times) and write again. Only the agent writes a bound
    /// pod's status, so its own last write is never older than the
    /// watched copy.
    pub fn with_own_status(&self, pod: &Pod) -> Pod {
        with_own_status(pod, self.written.as_ref().map(|(_, json)| json))
    }

    /// Writes `status` as the status of `pod` (a merge patch of the status
    /// subresource), unless it is what was last written; true if it wrote
    /// it now. A failed write is logged and tried again with the next
    /// status.
    pub async fn set_pod_status(&mut self, pod: &Pod, status: PodStatus) -> bool {
        if self.written.as_ref().is_some_and(|(w, _)| *w == status) {
            return false;
        }
        let json = to_json(&status);
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace(pod));
        let patch = Patch::Merge(json!({ "status": json }));
        match api
            .patch_status(&name, &PatchParams::default(), &patch)
            .await
        {
            Ok(_) => {
                self.start.status_written(pod, &status);
                self.written = Some((status, json));
                true
            }
            Err(e) => {
                tracing::warn!(pod = %name, error = %e, "writing pod status");
                false
            }
        }
    }

    /// Whether `status` is the one last written.
    pub fn has_written(&self, status: &PodStatus) -> bool {
        self.written.as_ref().is_some_and(|(w, _)| w == status)
    }

    /// Whether a container of the pod waits with CreateContainerConfigError
    /// (a ConfigMap or Secret it reads is missing), as last written.
    pub fn waits_on_config(&self) -> bool {
        let Some((status, _)) = &self.written else {
            return false;
        };
        let containers = status.container_statuses.iter().flatten();
        containers
            .chain(status.init_container_statuses.iter().flatten())
            .any(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.waiting.as_ref())
                    .and_then(|w| w.reason.as_deref())
                    == Some("CreateContainerConfigError")
            })
    }

    /// Deletes the pod object once its containers are gone (grace period
    /// 0, only if it is still the same pod), as the kubelet's status
    /// manager does for a terminated pod being deleted.
    pub async fn finish_deletion(&self, pod: &Pod) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace(pod));
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api
            .delete(pod.metadata.name.as_deref().unwrap_or_default(), &params)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => tracing::warn!(error = %e, "deleting a terminated pod"),
        }
    }
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

/// `pod` with the fields of `written` (the last status written) over its
/// watched status.
fn with_own_status(pod: &Pod, written: Option<&Value>) -> Pod {
    let Some(Value::Object(written)) = written else {
        return pod.clone();
    };
    let mut status = serde_json::to_value(pod.status.clone().unwrap_or_default())
        .unwrap_or_else(|_| Value::Object(Default::default()));
    if let Value::Object(fields) = &mut status {
        for (k, v) in written {
            fields.insert(k.clone(), v.clone());
        }
    }
    let mut pod = pod.clone();
    pod.status = serde_json::from_value(status).ok().or(pod.status);
    pod
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_watched_pod_gets_the_agents_last_written_status() {
        let watched: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending", "qosClass": "BestEffort",
                       "conditions": [{"type": "PodScheduled", "status": "True"}]}
        }))
        .unwrap();
        let written = json!({"phase": "Running", "startTime": "2026-12-03T08:37:56Z"});
        let seen = with_own_status(&watched, Some(&written));
        let status = seen.status.unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(
            status.start_time.map(|t| t.0.to_string()).as_deref(),
            Some("2026-12-03T08:37:56Z")
        );
        // What the agent did not write stays as watched.
        assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
        // Before any write, the watched pod is used as it is.
        assert_eq!(with_own_status(&watched, None), watched);
    }
}
